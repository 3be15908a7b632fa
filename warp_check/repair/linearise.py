"""One iteration's linearised problem, and the true gaps it is checked against, a block at a time."""

from __future__ import annotations

import numpy as np

from warp_check.model.head import DenseHead, gaps_from_logits
from warp_check.qp.problem import LinearisedProblem

# Merit price of a must_keep shortfall, in units of λ: must_keep rows are hard in the QP, so
# a step that breaks one must cost more than the must_fix progress it buys.
KEEP_WEIGHT = 10.0


# Cases up to which V Vᵀ is cached for the whole loop (32 MB); beyond, no n×n matrix is made.
VVT_CACHE_MAX_CASES = 2048


# Rows per block wherever a (cases × d_out) array would otherwise be built: the loop's
# temporaries stay O(block·d_out) however many must_keep cases there are.
BLOCK_ROWS = 4096


def blocks(n: int):
    return (slice(lo, min(lo + BLOCK_ROWS, n)) for lo in range(0, n, BLOCK_ROWS))


def gaps(head: DenseHead, V: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """head.gaps(V, labels)[0], a block of rows at a time."""
    gap = np.empty(V.shape[0])
    for rows in blocks(V.shape[0]):
        gap[rows] = head.gaps(V[rows], labels[rows])[0]
    return gap


def gaps_from_pre_activation(head: DenseHead, Z: np.ndarray, labels: np.ndarray) -> np.ndarray:
    gap = np.empty(Z.shape[0])
    for rows in blocks(Z.shape[0]):
        gap[rows] = head.gaps_from_pre_activation(Z[rows], labels[rows])
    return gap


def gaps_after_step(head, Z, VB, U, fraction, labels) -> np.ndarray:
    """Gaps at Z + fraction·(V Bᵀ) Uᵀ, a block at a time (never the full n×d_out update)."""
    gap = np.empty(Z.shape[0])
    for rows in blocks(Z.shape[0]):
        gap[rows] = head.gaps_from_pre_activation(Z[rows] + fraction * (VB[rows] @ U.T), labels[rows])
    return gap


# A competing class enters the QP when its gap is within this much of the target: the
# strongest competitor always does; others could overtake it within one step.
COMPETITOR_WINDOW = 1.0


def linearised_problem(head, Z, U, V, VVt, labels, targets, extra_aim, n_fix, settings, rho):
    """One row per (case, competing class within reach); soft rows first.

    The paper linearises against the strongest competitor only; with more than two
    classes a step can then lift another class above the label, and the loop oscillates.
    Constraining every class near the margin removes that (binary heads: one row a case).

    Soft rows: every must_fix row (price λ) and every must_keep row that misses its margin
    now (elastic, price KEEP_WEIGHT·λ). A must_keep row that holds now stays hard, so B = 0
    is always feasible: a must_keep case whose gradient vanishes (dead ReLU units, saturated
    tanh) cannot make the whole step infeasible, it is lifted as far as the price allows.
    """
    n = V.shape[0]
    logits = np.empty((n, head.num_classes))
    for rows in blocks(n):
        logits[rows] = head.activation.fn(Z[rows]) @ head.Wc.T + head.bc
    gap, competitor = gaps_from_logits(logits, labels)
    per_class = logits[np.arange(n), labels][:, None] - logits  # (n, C)
    near = per_class < (targets + settings.aim_above + COMPETITOR_WINDOW)[:, None]
    near[np.arange(n), competitor] = True
    near[np.arange(n), labels] = False
    case_idx, class_idx = np.nonzero(near)
    rhs = targets[case_idx] + settings.aim_above + extra_aim[case_idx] - per_class[case_idx, class_idx]
    soft = (case_idx < n_fix) | (rhs > 0)
    order = np.concatenate([np.flatnonzero(soft), np.flatnonzero(~soft)])
    case_idx, class_idx, rhs = case_idx[order], class_idx[order], rhs[order]
    prices = np.where(case_idx[: int(soft.sum())] < n_fix, settings.lam, KEEP_WEIGHT * settings.lam)
    C = np.empty((case_idx.size, U.shape[1]))
    for rows in blocks(case_idx.size):
        cases = case_idx[rows]
        slope = head.activation.slope(Z[cases])
        C[rows] = (slope * (head.Wc[labels[cases]] - head.Wc[class_idx[rows]])) @ U
    # Rows index the cases' V (and V Vᵀ): no (rows × d_in) copy of the representations.
    problem = LinearisedProblem(C, V, rhs, int(soft.sum()), rho, prices, VVt, cases=case_idx)
    return problem, case_idx, per_class[case_idx, class_idx]
