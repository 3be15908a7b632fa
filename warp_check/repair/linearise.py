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


def linearised_problem(head, Z, U, V, VVt, labels, targets, extra_aim, n_fix, settings, rho, price, exact=False):
    """One row per (case, competing class within reach); soft rows first.

    The paper linearises against the strongest competitor only; with more than two
    classes a step can then lift another class above the label, and the loop oscillates.
    Constraining every class near the margin removes that (binary heads: one row a case).

    Soft rows: every must_fix row and every must_keep row that misses its margin now (elastic),
    each at its case's ``price`` (the loop's: λ for must_fix, KEEP_WEIGHT·λ for must_keep, raised
    for cases the steps keep leaving short: step.raise_prices). A must_keep row that holds now stays hard, so B = 0
    is always feasible: a must_keep case whose gradient vanishes (dead ReLU units, saturated
    tanh) cannot make the whole step infeasible, it is lifted as far as the price allows.
    ``exact`` (σ the identity: the linearised gaps are the true gaps): every competing class gets a
    row, and every row is hard, must_fix and short must_keep ones too, so one QP meets every margin
    or proves none can (a priced slack would only trade a margin the loop needs for a shorter step,
    and the loop would then take more QPs to the same answer).
    """
    n, C_classes = V.shape[0], head.num_classes
    # Per block of cases, one pass of σ: the logits (for each row's margin) and σ' (for its c_i).
    case_idx, class_idx, margins, coefficients = [], [], [], []
    for rows in blocks(n):
        hidden, slope = head.activation.value_and_slope(Z[rows])
        logits = hidden @ head.Wc.T + head.bc
        y = labels[rows]
        competitor = gaps_from_logits(logits, y)[1]
        local = np.arange(logits.shape[0])
        per_class = logits[local, y][:, None] - logits  # (block, C)
        near = per_class < (np.inf if exact else (targets[rows] + settings.aim_above + COMPETITOR_WINDOW)[:, None])
        near[local, competitor] = True
        near[local, y] = False
        at, cls = np.nonzero(near)
        block_c = np.empty((at.size, U.shape[1]))
        for label in range(C_classes):  # c_i = Uᵀ J_i (w_y − w_c): one product per (label, class) pair
            for other in range(C_classes):
                pair = np.flatnonzero((y[at] == label) & (cls == other))
                if pair.size:
                    direction = (head.Wc[label] - head.Wc[other])[:, None] * U
                    block_c[pair] = slope[at[pair]] @ direction
        case_idx.append(rows.start + at)
        class_idx.append(cls)
        margins.append(per_class[at, cls])
        coefficients.append(block_c)
    case_idx, class_idx = np.concatenate(case_idx), np.concatenate(class_idx)
    margin, C = np.concatenate(margins), np.concatenate(coefficients)
    rhs = targets[case_idx] + settings.aim_above + extra_aim[case_idx] - margin
    soft = np.zeros(case_idx.size, dtype=bool) if exact else (case_idx < n_fix) | (rhs > 0)
    order = np.concatenate([np.flatnonzero(soft), np.flatnonzero(~soft)])
    case_idx, rhs, C, margin = case_idx[order], rhs[order], C[order], margin[order]
    prices = price[case_idx[: int(soft.sum())]]
    # Rows index the cases' V (and V Vᵀ): no (rows × d_in) copy of the representations.
    problem = LinearisedProblem(C, V, rhs, int(soft.sum()), rho, prices, VVt, cases=case_idx)
    return problem, case_idx, margin
