"""Certificates 1–3, the local-slope radius, and attacks that try to falsify them.

All of it is recomputed from the repaired weights in float64 and the cached v, independent
of anything the solver reported. Radii live in the space of v (the repair layer's input),
not in the space of texts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .head import DenseHead
from .settings import require_integer

RADIUS_SAFETY = 1e-6  # relative shrink of the local radius; see local_radius


@dataclass(frozen=True)
class Lipschitz:
    """L = ‖W̃‖₂ ‖W_c‖₂ L_σ (paper eq. 14)."""

    L: float
    norm_W: float
    norm_Wc: float
    L_sigma: float


def lipschitz(head: DenseHead) -> Lipschitz:
    norm_W = float(np.linalg.norm(head.W, 2))
    norm_Wc = float(np.linalg.norm(head.Wc, 2))
    L_sigma = head.activation.lipschitz
    return Lipschitz(norm_W * norm_Wc * L_sigma, norm_W, norm_Wc, L_sigma)


def eps_star(gaps: np.ndarray, L: float) -> np.ndarray:
    """The paper's radius gap / (2L) (Thm 3); 0 where the gap is not positive."""
    return np.where(gaps > 0, gaps / (2.0 * L), 0.0)


def local_radius(head: DenseHead, V: np.ndarray, labels: np.ndarray, *, bisection_steps: int = 60) -> np.ndarray:
    """Largest ε (by bisection) for which the local-slope bound proves no label change.

    For ‖δ‖ ≤ ε each pre-activation moves by at most ε‖W̃_k‖; with s̄ = σ'(z) and
    r_k(ε) = sup |σ'(z_k + u) − σ'(z_k)| over |u| ≤ ε‖W̃_k‖, the gap against class c falls
    by at most ε(‖W̃ᵀ(Δw ⊙ s̄)‖ + Σ_k |Δw_k| r_k(ε) ‖W̃_k‖), Δw = w_y − w_c (DESIGN.md §3).
    The bound grows with ε, so bisection finds the radius; the returned value is one where
    the bound holds (the lower end), hence sound. Where the bound is exact (a ReLU head with
    no unit crossing zero is linear in the ball) the gap at that radius is ~1e-16, so the
    radius is shrunk by ``RADIUS_SAFETY`` to keep float64 rounding off the boundary.
    """
    V = np.asarray(V, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    n = V.shape[0]
    Z = head.pre_activation(V)
    slope = head.activation.slope(Z)
    logits = head.activation.fn(Z) @ head.Wc.T + head.bc
    row_norms = np.linalg.norm(head.W, axis=1)
    # Per class c: gap_c, first-order coefficient A_c and |Δw_c| (zero rows where c == y).
    gap_c = logits[np.arange(n), labels][:, None] - logits  # (n, C)
    delta_w = head.Wc[labels][:, None, :] - head.Wc[None, :, :]  # (n, C, d_out)
    A = np.linalg.norm(np.einsum("ncd,de->nce", delta_w * slope[:, None, :], head.W), axis=2)  # (n, C)
    abs_dw_norm = np.abs(delta_w) * row_norms  # (n, C, d_out)
    is_other = np.ones((n, head.num_classes), dtype=bool)
    is_other[np.arange(n), labels] = False

    def holds(eps: np.ndarray) -> np.ndarray:
        r = head.activation.slope_change_bound(Z, eps[:, None] * row_norms)  # (n, d_out)
        remainder = np.einsum("ncd,nd->nc", abs_dw_norm, r)
        ok = gap_c - eps[:, None] * (A + remainder) > 0
        return np.all(ok | ~is_other, axis=1)

    positive = np.all((gap_c > 0) | ~is_other, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        upper = np.where(is_other & (A > 0), gap_c / A, np.inf).min(axis=1)
    upper = np.where(np.isfinite(upper), upper, _fallback_upper(head, gap_c, is_other))
    lo = np.zeros(n)
    hi = np.where(positive, upper, 0.0)
    for _ in range(bisection_steps):
        mid = 0.5 * (lo + hi)
        ok = holds(mid)
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    return np.where(positive, lo * (1.0 - RADIUS_SAFETY), 0.0)


def _fallback_upper(head: DenseHead, gap_c: np.ndarray, is_other: np.ndarray) -> np.ndarray:
    # A == 0 (e.g. every ReLU unit off at the centre): the Lipschitz radius bounds from above.
    L = lipschitz(head).L * math.sqrt(2.0)
    return np.where(is_other, gap_c, np.inf).min(axis=1) / max(L, 1e-300)


# -- attacks in v-space ----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AttackSettings:
    """Projected-gradient attack inside a ball, and the minimum-norm flip search."""

    pgd_steps: int = 40
    pgd_restarts: int = 2  # random starts besides the centre
    flip_steps: int = 50
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("pgd_steps", "flip_steps"):
            require_integer(name, getattr(self, name), 1)
        require_integer("pgd_restarts", self.pgd_restarts, 0)


def _torch_gap(head: DenseHead):
    import torch

    from .repair import _torch_activation

    W, b, Wc, bc = (torch.tensor(a, dtype=torch.float64) for a in (head.W, head.b, head.Wc, head.bc))
    act = _torch_activation(head.activation.torch_name)

    def gap(X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = act(X @ W.T + b) @ Wc.T + bc
        own = logits.gather(1, y[:, None])[:, 0]
        masked = logits.scatter(1, y[:, None], float("-inf"))
        return own - masked.max(dim=1).values

    return gap


def pgd_worst_gap(
    head: DenseHead, V: np.ndarray, labels: np.ndarray, radius: np.ndarray, settings: AttackSettings | None = None
) -> np.ndarray:
    """The smallest gap a projected-gradient attack finds within ‖δ‖ ≤ radius, per case.

    A value ≤ 0 is a label flip inside the ball; for a sound certified radius there is none.
    """
    import torch

    settings = settings or AttackSettings()
    gap = _torch_gap(head)
    X = torch.tensor(np.asarray(V, dtype=np.float64))
    y = torch.tensor(np.asarray(labels, dtype=np.int64))
    eps = torch.tensor(np.asarray(radius, dtype=np.float64))[:, None]
    generator = torch.Generator().manual_seed(settings.seed)
    with torch.no_grad():
        worst = gap(X, y)
    for restart in range(settings.pgd_restarts + 1):
        if restart == 0:
            delta = torch.zeros_like(X)
        else:
            direction = torch.randn(X.shape, generator=generator, dtype=torch.float64)
            delta = (
                direction
                / direction.norm(dim=1, keepdim=True)
                * eps
                * torch.rand((X.shape[0], 1), generator=generator, dtype=torch.float64)
            )
        step = 2.5 * eps / settings.pgd_steps
        for _ in range(settings.pgd_steps):
            delta.requires_grad_(True)
            value = gap(X + delta, y)
            (grad,) = torch.autograd.grad(value.sum(), delta)
            with torch.no_grad():
                worst = torch.minimum(worst, value.detach())
                norm = grad.norm(dim=1, keepdim=True).clamp_min(1e-300)
                delta = delta.detach() - step * grad / norm
                scale = (eps / delta.norm(dim=1, keepdim=True).clamp_min(1e-300)).clamp(max=1.0)
                delta = delta * scale
        with torch.no_grad():
            worst = torch.minimum(worst, gap(X + delta, y))
    return worst.numpy()


def flip_radius(
    head: DenseHead, V: np.ndarray, labels: np.ndarray, settings: AttackSettings | None = None
) -> np.ndarray:
    """The smallest ‖δ‖ at which a minimum-norm attack finds a label flip (∞ if none).

    DeepFool-style steps to the linearised boundary, then a bisection along the found
    direction for the first flipping point. An upper bound on the true smallest flip
    radius: divided by a certified radius, it measures how tight that radius is.
    """
    import torch

    settings = settings or AttackSettings()
    gap = _torch_gap(head)
    X = torch.tensor(np.asarray(V, dtype=np.float64))
    y = torch.tensor(np.asarray(labels, dtype=np.int64))
    delta = torch.zeros_like(X)
    flipped = torch.zeros(X.shape[0], dtype=torch.bool)
    for _ in range(settings.flip_steps):
        delta.requires_grad_(True)
        value = gap(X + delta, y)
        (grad,) = torch.autograd.grad(value.sum(), delta)
        with torch.no_grad():
            flipped = flipped | (value.detach() < 0)
            if bool(flipped.all()):
                break
            sq = (grad * grad).sum(dim=1, keepdim=True).clamp_min(1e-300)
            step = (value.detach()[:, None] + 1e-4) / sq * grad * 1.05
            delta = torch.where(flipped[:, None], delta.detach(), delta.detach() - step)
    with torch.no_grad():
        final = gap(X + delta, y)
        flipped = final < 0
        lo = torch.zeros(X.shape[0], dtype=torch.float64)
        hi = torch.ones(X.shape[0], dtype=torch.float64)
        for _ in range(40):  # first flipping point along the found direction
            mid = 0.5 * (lo + hi)
            bad = gap(X + mid[:, None] * delta, y) < 0
            hi = torch.where(bad, mid, hi)
            lo = torch.where(bad, lo, mid)
        radius = hi * delta.norm(dim=1)
    return np.where(flipped.numpy(), radius.numpy(), np.inf)


def monte_carlo_flip_multiplier(
    head: DenseHead,
    V: np.ndarray,
    labels: np.ndarray,
    radius: np.ndarray,
    *,
    multipliers: tuple[float, ...] = (1, 2, 5, 10, 15, 20, 25, 30, 35, 40, 50, 75, 100, 150, 250, 400, 600, 700, 1000),
    samples: int = 1000,
    seed: int = 0,
) -> np.ndarray:
    """The paper's stress test (Appendix D): the smallest k such that one of ``samples``
    points drawn uniformly from the ball of radius k·radius flips the label (∞ if none)."""
    rng = np.random.default_rng(seed)
    V = np.asarray(V, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    out = np.full(V.shape[0], np.inf)
    d = V.shape[1]
    for i in range(V.shape[0]):
        for k in multipliers:
            direction = rng.standard_normal((samples, d))
            direction /= np.linalg.norm(direction, axis=1, keepdims=True)
            lengths = k * radius[i] * rng.random(samples) ** (1.0 / d)
            points = V[i] + direction * lengths[:, None]
            gaps, _ = head.gaps(points, np.full(samples, labels[i]))
            if np.any(gaps < 0):
                out[i] = k
                break
    return out


# -- the three certificates --------------------------------------------------------------


@dataclass(frozen=True)
class CaseCertificate:
    id: str
    kind: str
    label: int
    gap_before: float
    gap_after: float
    cert1: bool | None = None  # must_fix: gap ≥ γ_s
    cert2: bool | None = None  # must_keep: gap ≥ γ_h and label unchanged
    cert3: bool | None = None  # must_fix: ε* > 0 and no flip found inside the certified ball
    eps_star: float | None = None
    eps_local: float | None = None
    attack_min_gap: float | None = None  # smallest gap PGD found inside the certified ball
    flip_radius: float | None = None  # smallest flipping radius the min-norm attack found
    excluded: bool = False  # must_keep case the original model got wrong: not constrained

    @property
    def certified_radius(self) -> float | None:
        if self.eps_star is None:
            return None
        return max(self.eps_star, self.eps_local or 0.0)


def certify_cases(
    head: DenseHead,
    *,
    ids: tuple[str, ...],
    kinds: tuple[str, ...],
    V: np.ndarray,
    labels: np.ndarray,
    gaps_before: np.ndarray,
    gamma_s: float,
    gamma_h: float,
    excluded: frozenset[str] = frozenset(),
    attack: AttackSettings | None = None,
) -> tuple[list[CaseCertificate], Lipschitz]:
    """Cert 1–3 for every case from ``head`` (the repaired weights) in float64."""
    V = np.asarray(V, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    gaps, _ = head.gaps(V, labels)
    lip = lipschitz(head)
    fix = np.array([k == "must_fix" for k in kinds], dtype=bool)
    eps_s = eps_star(gaps, lip.L)
    eps_l = np.zeros_like(gaps)
    worst = np.full_like(gaps, np.nan)
    flips = np.full_like(gaps, np.nan)
    if fix.any():
        eps_l[fix] = local_radius(head, V[fix], labels[fix])
        radius = np.maximum(eps_s[fix], eps_l[fix])
        worst[fix] = pgd_worst_gap(head, V[fix], labels[fix], radius, attack)
        flips[fix] = flip_radius(head, V[fix], labels[fix], attack)
    out = []
    for i, case_id in enumerate(ids):
        kind = kinds[i]
        common = dict(
            id=case_id, kind=kind, label=int(labels[i]), gap_before=float(gaps_before[i]), gap_after=float(gaps[i])
        )
        if kind == "must_fix":
            ok3 = bool(eps_s[i] > 0 and worst[i] > 0)
            out.append(
                CaseCertificate(
                    **common,
                    cert1=bool(gaps[i] >= gamma_s),
                    cert3=ok3,
                    eps_star=float(eps_s[i]),
                    eps_local=float(eps_l[i]),
                    attack_min_gap=float(worst[i]),
                    flip_radius=float(flips[i]),
                )
            )
        elif kind == "must_keep":
            if case_id in excluded:
                out.append(CaseCertificate(**common, excluded=True))
            else:
                kept = bool(gaps[i] >= gamma_h and gaps_before[i] > 0)
                out.append(CaseCertificate(**common, cert2=kept))
        else:
            out.append(CaseCertificate(**common))
    return out, lip


def summarise(records: list[CaseCertificate]) -> dict[str, str]:
    def count(name: str) -> str:
        values = [getattr(r, name) for r in records if getattr(r, name) is not None]
        return f"{sum(values)}/{len(values)}"

    return {"cert1": count("cert1"), "cert2": count("cert2"), "cert3": count("cert3")}
