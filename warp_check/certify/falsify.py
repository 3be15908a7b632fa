"""Attacks in v-space that try to break a certificate: PGD inside the certified ball, the
smallest flipping radius a minimum-norm attack finds, and the paper's Monte Carlo stress test.

A certified radius is sound when PGD finds no flip inside it; the flip radius over the
certified one says how tight it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from warp_check.model.head import DenseHead
from warp_check.validation import require_integer


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
    logits = head.torch_logits_fn()

    def gap(X, y):
        return head.decision.torch_margin(logits(X), y)

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
            gaps, _ = head.gaps(points, np.repeat(labels[i : i + 1], samples, axis=0))
            if np.any(gaps < 0):
                out[i] = k
                break
    return out
