"""One iteration's linearised problem, and the true gaps it is checked against, a block at a time."""

from __future__ import annotations

import numpy as np

from warp_check.model.blocks import blocks
from warp_check.model.head import DenseHead
from warp_check.model.normed_head import NormedHead
from warp_check.qp.problem import LinearisedProblem
from warp_check.repair.state import LoopState, Stacked

# Merit price of a must_keep shortfall, in units of λ: must_keep rows are hard in the QP, so
# a step that breaks one must cost more than the must_fix progress it buys.
KEEP_WEIGHT = 10.0


# Cases up to which V Vᵀ is cached for the whole loop (32 MB); beyond, no n×n matrix is made.
VVT_CACHE_MAX_CASES = 2048


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


# Activations whose dead units a must_fix row may wake (wake_dead_units): σ(z) ≥ z everywhere with
# σ' = 1 above 0, so z itself is a lower bound on a unit's output that a step can raise.
WAKING = frozenset({"relu"})
# A must_fix row is dead when its active units carry less than this share of ‖w_y − w_c‖²: the
# linearisation then sees (almost) no way to lift it.
DEAD_SHARE = 0.01


def wake_dead_units(
    slope: np.ndarray, Z: np.ndarray, towards: np.ndarray, wanted: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For ReLU rows whose active units cannot lift the gap (a must_fix case whose pre-activations
    are all or nearly all below 0): the slopes with some dead units counted as active, and how far
    that lowers each row's margin.

    A ReLU unit k with z_k < 0 and (w_y − w_c)_k > 0 adds (w_y − w_c)_k · max(0, z_k + Δz_k) ≥
    (w_y − w_c)_k · (z_k + Δz_k) to the gap, so counting it with slope 1 and its margin lowered by
    (w_y − w_c)_k · |z_k| keeps the row's linear model below the true gap: a step that meets it
    meets the true margin too (as far as the other units keep their side of 0, the caveat of every
    linearisation here). Plain linearisation gives such a row a zero gradient: the QP prices its
    slack and takes no step for it, the loop stalls (a zero step), and whether a step taken for other
    cases happens to wake one of its units decides the outcome (tiny DistilBERTs: must_fix cases
    with 0 or 1 of 32 units active). The units are taken cheapest first, |z_k| / (w_y − w_c)_k,
    while they lower the least squared step the row needs, (wanted + Σ (w_y − w_c)_k |z_k|)² /
    Σ (w_y − w_c)_k²: a unit far below 0 costs more than it adds. ``wanted``: how far each row must
    rise (0: a row that must not be woken, a must_keep case's)."""
    slope = slope.copy()
    lowered = np.zeros(slope.shape[0])
    reach = np.sum(towards**2)
    for i in np.flatnonzero(wanted > 0):
        active = float(np.sum((slope[i] * towards) ** 2))
        if active > DEAD_SHARE * reach:
            continue
        dead = np.flatnonzero((slope[i] == 0) & (towards > 0) & (Z[i] < 0))
        need, room, woken = float(wanted[i]), active, []
        for k in dead[np.argsort(-Z[i, dead] / towards[dead], kind="stable")]:
            more, wider = need - towards[k] * Z[i, k], room + towards[k] ** 2
            if room > 0 and more**2 / wider >= need**2 / room:
                break
            need, room = more, wider
            woken.append(k)
        slope[i, woken] = 1.0
        lowered[i] = float(towards[woken] @ Z[i, woken])
    return slope, lowered


# A competing class enters the QP when its gap is within this much of the target: the
# strongest competitor always does; others could overtake it within one step.
COMPETITOR_WINDOW = 1.0


def linearised_problem(
    *, stacked: Stacked, state: LoopState, U: np.ndarray, exact: bool
) -> tuple[LinearisedProblem, np.ndarray, np.ndarray]:
    """The QP at the loop's Z and U: one row per (case, competing class within reach), soft rows first;
    with each row's case and its margin now.

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
    head, Z, V, labels, targets = stacked.head, state.Z, stacked.V_qp, stacked.labels, stacked.targets
    n_fix, settings, price = stacked.n_fix, stacked.settings, state.price
    extra_aim = state.extra_aim + state.stored_aim
    rho = stacked.metric.qp_rho(state.trust.kappa)
    n = V.shape[0]
    aim = targets + settings.aim_above + extra_aim  # per case: the gap its rows ask for
    # Per block of cases, one pass of σ: the logits (for each row's margin) and σ' (for its c_i).
    case_idx, margins, coefficients = [], [], []
    row_wise = isinstance(head, NormedHead)  # a LayerNorm after W: each row's slope is a dense Jacobian
    for rows in blocks(n):
        if row_wise:
            logits, slope = head.logits_from_pre_activation(Z[rows]), None
        else:
            hidden, slope = head.activation.value_and_slope(Z[rows])
            logits = hidden @ head.Wc.T + head.bc
        constraints = head.decision.constraints(logits, labels[rows])  # (block, K)
        local = np.arange(logits.shape[0])
        near = constraints.gap < (
            np.inf if exact else (targets[rows] + settings.aim_above + COMPETITOR_WINDOW)[:, None]
        )
        near[local, constraints.binding] = True
        near &= constraints.active
        at, which = np.nonzero(near)
        plus, minus = constraints.plus[at, which], constraints.minus[at, which]
        block_c = np.empty((at.size, U.shape[1]))
        block_margin = constraints.gap[at, which]
        wakes = head.activation.name in WAKING and not exact and not row_wise
        # c_i = Uᵀ J_i (w_plus − w_minus): one product per (plus, minus) pair of classes
        for held, rival in np.unique(np.stack([plus, minus], axis=1), axis=0):
            pair = np.flatnonzero((plus == held) & (minus == rival))
            towards = head.towards(held, rival)
            if row_wise:  # c_i = Uᵀ J(u_i)ᵀ (w_plus − w_minus)
                block_c[pair] = head.pullback(Z[rows][at[pair]], towards) @ U
                continue
            row_slope = slope[at[pair]]
            cases = rows.start + at[pair]
            if wakes and np.any(cases < n_fix):
                wanted = aim[cases] - block_margin[pair]
                row_slope, lowered = wake_dead_units(
                    row_slope, Z[rows][at[pair]], towards, np.where(cases < n_fix, wanted, 0.0)
                )
                block_margin[pair] += lowered
            block_c[pair] = row_slope @ (towards[:, None] * U)
        case_idx.append(rows.start + at)
        margins.append(block_margin)
        coefficients.append(block_c)
    case_idx = np.concatenate(case_idx)
    margin, C = np.concatenate(margins), np.concatenate(coefficients)
    rhs = aim[case_idx] - margin
    soft = np.zeros(case_idx.size, dtype=bool) if exact else (case_idx < n_fix) | (rhs > 0)
    order = np.concatenate([np.flatnonzero(soft), np.flatnonzero(~soft)])
    case_idx, rhs, C, margin = case_idx[order], rhs[order], C[order], margin[order]
    prices = price[case_idx[: int(soft.sum())]]
    # Rows index the cases' V (and V Vᵀ): no (rows × d_in) copy of the representations.
    problem = LinearisedProblem(C, V, rhs, int(soft.sum()), rho, prices, stacked.VVt, cases=case_idx)
    return problem, case_idx, margin
