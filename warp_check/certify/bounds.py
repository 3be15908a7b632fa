"""Certified radii in the space of v: the paper's ε* = gap / 2L and the tighter local-slope radius.

Both are recomputed from the weights in float64; neither depends on anything a solver said.
"""

from __future__ import annotations

import math

import numpy as np

from warp_check.certify.certificate import Lipschitz
from warp_check.model.head import DenseHead
from warp_check.model.normed_head import NormedHead

RADIUS_SAFETY = 1e-6  # relative shrink of the local radius; see local_radius


def lipschitz(head: DenseHead) -> Lipschitz:
    """L = ‖W̃‖₂ ‖W_c‖₂ L_σ of ``head`` (paper eq. 14); for the FFN-output form, :func:`normed_lipschitz`."""
    if isinstance(head, NormedHead):
        return normed_lipschitz(head)
    norm_W = float(np.linalg.norm(head.W, 2))
    norm_Wc = float(np.linalg.norm(head.Wc, 2))
    L_sigma = head.activation.lipschitz
    return Lipschitz(L=norm_W * norm_Wc * L_sigma, norm_W=norm_W, norm_Wc=norm_Wc, L_sigma=L_sigma)


def normed_lipschitz(head: NormedHead) -> Lipschitz:
    """A global Lipschitz constant of the FFN-output form's logits in a row (v, r):
    L = ‖[W I]‖₂ ‖W_c diag γ‖₂ / sqrt(ε).

    u = W v + b + r moves by at most ‖[W I]‖₂ = sqrt(‖W‖₂² + 1) times the row's move. The LayerNorm's
    Jacobian is diag(γ) P / s with P = I − 11ᵀ/d − n nᵀ/d an orthogonal projection (n ⊥ 1 and
    ‖n‖² = d var/(var + ε) < d), so ‖W_c J‖₂ ≤ ‖W_c diag γ‖₂ / s ≤ ‖W_c diag γ‖₂ / sqrt(ε) everywhere
    (s = sqrt(var u + ε) ≥ sqrt(ε)). Valid for every u, hence loose (ε is 1e-12 in BERT): the
    local radius (:func:`normed_local_radius`) bounds s over the ball instead. Recorded as
    norm_W = ‖[W I]‖₂, norm_Wc = ‖W_c diag γ‖₂, L_sigma = 1/sqrt(ε)."""
    norm_W = math.sqrt(float(np.linalg.norm(head.W, 2)) ** 2 + 1.0)
    norm_Wc = float(np.linalg.norm(head.Wc * head.norm.gamma, 2))
    L_sigma = 1.0 / math.sqrt(head.norm.eps)
    return Lipschitz(L=norm_W * norm_Wc * L_sigma, norm_W=norm_W, norm_Wc=norm_Wc, L_sigma=L_sigma)


def eps_star(gaps: np.ndarray, L: float) -> np.ndarray:
    """The paper's radius gap / (2L) (Thm 3); 0 where the gap is not positive."""
    return np.where(gaps > 0, gaps / (2.0 * L), 0.0)


def local_radius(head: DenseHead, V: np.ndarray, labels: np.ndarray, *, bisection_steps: int = 60) -> np.ndarray:
    """Largest ε (by bisection) for which the local-slope bound proves no label change.

    For ‖δ‖ ≤ ε each pre-activation moves by at most ε‖W̃_k‖; with s̄ = σ'(z) and
    r_k(ε) = sup |σ'(z_k + u) − σ'(z_k)| over |u| ≤ ε‖W̃_k‖, the gap against class c falls
    by at most ε(‖W̃ᵀ(Δw ⊙ s̄)‖ + Σ_k |Δw_k| r_k(ε) ‖W̃_k‖), Δw = w_y − w_c.
    The bound grows with ε, so bisection finds the radius; the returned value is one where
    the bound holds (the lower end), hence sound. Where the bound is exact (a ReLU head with
    no unit crossing zero is linear in the ball) the gap at that radius is ~1e-16, so the
    radius is shrunk by ``RADIUS_SAFETY`` to keep float64 rounding off the boundary.
    """
    if isinstance(head, NormedHead):
        return normed_local_radius(head, V, labels, bisection_steps=bisection_steps)
    V = np.asarray(V, dtype=np.float64)
    Z = head.pre_activation(V)
    slope = head.activation.slope(Z)
    logits = head.activation.fn(Z) @ head.Wc.T + head.bc
    row_norms = np.linalg.norm(head.W, axis=1)
    # Per constraint c of the answer (single label: the label against class c): its gap gap_c, its
    # first-order coefficient A_c and |Δw_c|, Δw_c = w_plus − w_minus; inactive ones do not count.
    constraints = head.decision.constraints(logits, labels)
    gap_c = constraints.gap  # (n, K)
    delta_w = head.towards(constraints.plus, constraints.minus)  # (n, K, d_out)
    A = np.linalg.norm(np.einsum("ncd,de->nce", delta_w * slope[:, None, :], head.W), axis=2)  # (n, K)
    abs_dw_norm = np.abs(delta_w) * row_norms  # (n, K, d_out)
    is_other = constraints.active

    def holds(eps: np.ndarray) -> np.ndarray:
        r = head.activation.slope_change_bound(Z, eps[:, None] * row_norms)  # (n, d_out)
        remainder = np.einsum("ncd,nd->nc", abs_dw_norm, r)
        ok = gap_c - eps[:, None] * (A + remainder) > 0
        return np.all(ok | ~is_other, axis=1)

    positive = np.all((gap_c > 0) | ~is_other, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        upper = np.where(is_other & (A > 0), gap_c / A, np.inf).min(axis=1)
    upper = np.where(np.isfinite(upper), upper, _fallback_upper(head, gap_c, is_other))
    return _bisect(holds, positive, upper, bisection_steps)


def normed_local_radius(
    head: NormedHead, V: np.ndarray, labels: np.ndarray, *, bisection_steps: int = 60
) -> np.ndarray:
    """Largest ε (by bisection) for which no move of the row (v, r) of norm ≤ ε changes the answer of
    the FFN-output form.

    Within the ball u moves by at most δ = ε ‖[W I]‖₂. Centring is an orthogonal projection and
    sqrt(d)·std(u) = ‖u − mean u‖, so std(u') ≥ std(u) − δ/sqrt(d) on the whole ball, and the LayerNorm's
    scale there is at least s_min(ε) = sqrt(max(std(u) − δ/sqrt(d), 0)² + ε_LN). The gradient of the gap
    against class c with respect to u is P (γ ⊙ Δw_c) / s (P a projection), of norm at most
    ‖γ ⊙ Δw_c‖₂ / s_min(ε) anywhere on the segment from the centre, so the gap falls by at most
    δ ‖γ ⊙ Δw_c‖₂ / s_min(ε). The bound grows with ε: bisection keeps its lower end, where it holds
    (shrunk by ``RADIUS_SAFETY``)."""
    V = np.asarray(V, dtype=np.float64)
    Z = head.pre_activation(V)
    constraints = head.decision.constraints(head.logits_from_pre_activation(Z), labels)
    gap_c, is_other = constraints.gap, constraints.active  # (n, K)
    reach = np.linalg.norm(head.towards(constraints.plus, constraints.minus) * head.norm.gamma, axis=2)  # (n, K)
    row_norm = normed_lipschitz(head).norm_W
    centred = Z - Z.mean(axis=1, keepdims=True)
    std = np.sqrt(np.mean(centred * centred, axis=1))
    root_d = math.sqrt(head.d_out)

    def holds(eps: np.ndarray) -> np.ndarray:
        delta = eps * row_norm
        s_min = np.sqrt(np.maximum(std - delta / root_d, 0.0) ** 2 + head.norm.eps)
        ok = gap_c - (delta / s_min)[:, None] * reach > 0
        return np.all(ok | ~is_other, axis=1)

    positive = np.all((gap_c > 0) | ~is_other, axis=1)
    scale = np.sqrt(std**2 + head.norm.eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        # at this ε the bound fails even with the centre's scale s ≥ s_min(ε)
        upper = np.where(is_other & (reach > 0), gap_c * scale[:, None] / (row_norm * reach), np.inf).min(axis=1)
    # no competitor reachable: the bound cannot fail before u's spread is spent
    upper = np.where(np.isfinite(upper), upper, 2.0 * std * root_d / row_norm + 1.0)
    return _bisect(holds, positive, upper, bisection_steps)


def _bisect(holds, positive: np.ndarray, upper: np.ndarray, steps: int) -> np.ndarray:
    """Per row, the lower end of a bisection of [0, upper] on the monotone test ``holds`` (0 where the
    row is not ``positive``), shrunk by ``RADIUS_SAFETY``."""
    lo = np.zeros(positive.size)
    hi = np.where(positive, upper, 0.0)
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        ok = holds(mid)
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    return np.where(positive, lo * (1.0 - RADIUS_SAFETY), 0.0)


def _fallback_upper(head: DenseHead, gap_c: np.ndarray, is_other: np.ndarray) -> np.ndarray:
    # A == 0 (e.g. every ReLU unit off at the centre): the Lipschitz radius bounds from above.
    L = lipschitz(head).L * math.sqrt(2.0)
    return np.where(is_other, gap_c, np.inf).min(axis=1) / max(L, 1e-300)
