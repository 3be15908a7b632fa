"""Taking a QP step on the true gaps (judged by :class:`~warp_check.repair.controls.Merit`): backtracking
when the linear model overshoots (ReLU units switch, tanh saturates), and the extra aim of cases that creep."""

from __future__ import annotations

import numpy as np

from warp_check.repair.linearise import gaps_after_step
from warp_check.repair.settings import RepairSettings
from warp_check.repair.state import LoopState, Stacked, Trial

# raise_prices: a must_fix case's slack price grows an iteration it is left short, to PRICE_MAX·λ.
PRICE_MAX = 1e4


def linear_check(predicted: np.ndarray, gap_full: np.ndarray, stacked: Stacked) -> dict[str, float | int]:
    """The IterationRecord fields that set the QP's promise against the true full step (over the
    suite's cases: a row that stands for several counts for each)."""
    fix, targets = slice(0, stacked.n_fix), stacked.targets
    keep_rows = np.arange(len(targets)) >= stacked.n_fix
    return {
        "promised_fix_shortfall": stacked.total_shortfall(predicted[fix], fix),
        "full_step_fix_shortfall": stacked.total_shortfall(gap_full[fix], fix),
        "promised_keep_missed": stacked.count(keep_rows & (predicted < targets)),
        "full_step_keep_missed": stacked.count(keep_rows & (gap_full < targets)),
    }


def step_fractions(settings: RepairSettings) -> tuple[float, ...]:
    """Fractions of the QP step tried in order: the full step, then halvings."""
    return tuple(0.5**k for k in range(settings.backtracking + 1))


def backtrack(*, stacked: Stacked, state: LoopState, trial: Trial) -> tuple[float, np.ndarray, dict[str, float | int]]:
    """The fraction of ``trial``'s QP step to take from the loop's W, the true gaps there, and the
    promise-against-full-step record.

    The first fraction (full step, then halvings) that lowers the merit wins; where none does,
    the full step is taken anyway (as in the paper) and patience ends a loop that goes nowhere.
    ΔW = f·U B changes Z by f·(V Bᵀ) Uᵀ: rank r, ~d_out/r times cheaper than V Wᵀ.
    """
    head, Z, VB, U, labels = stacked.head, state.Z, trial.VB, trial.U, stacked.labels
    merit, merit_now, predicted, gap_full = state.merit, state.merit_now, trial.predicted, trial.full
    settings = stacked.settings
    tries = []
    check: dict[str, float | int] = {}
    for fraction in step_fractions(settings):
        # The full step's true gaps (``gap_full``) were already taken for the trust region's ratio.
        gap_try = gap_full if fraction == 1.0 else gaps_after_step(head, Z, VB, U, fraction, labels)
        if fraction == 1.0:
            check = linear_check(predicted, gap_try, stacked)
        tries.append((fraction, merit(gap_try), gap_try))
        if tries[-1][1] < merit_now:
            break
    fraction, value, gap = tries[-1]
    return (fraction, gap, check) if value < merit_now else (1.0, gap_full, check)


def update_extra_aim(
    extra_aim: np.ndarray,
    gap: np.ndarray,
    gap_next: np.ndarray,
    predicted: np.ndarray,
    fraction: float,
    targets: np.ndarray,
    n_fix: int,
) -> None:
    """In place: a must_fix case that the step moved by less than half of what the linear model
    promised (it sits on a kink of σ) asks for its shortfall again on top next time, instead of
    creeping up on its margin geometrically; a case that made its margin asks for nothing extra."""
    short = np.maximum(targets[:n_fix] - gap_next[:n_fix], 0.0)
    promised = fraction * (predicted[:n_fix] - gap[:n_fix])
    creeping = (short > 0) & (gap_next[:n_fix] - gap[:n_fix] < 0.5 * promised)
    extra_aim[:n_fix] = np.where(
        short > 0,
        np.where(creeping, np.minimum(extra_aim[:n_fix] + short, targets[:n_fix]), extra_aim[:n_fix]),
        0.0,
    )


def raise_prices(
    price: np.ndarray, predicted: np.ndarray, targets: np.ndarray, n_fix: int, settings: RepairSettings
) -> None:
    """In place: a must_fix case the QP's own answer left short of its margin (paying λ for its slack
    rather than the step's price of lifting it) costs ``price_growth``× more next time, up to PRICE_MAX·λ.
    Without it a case whose lift is expensive in the step's metric (a small gradient: tanh's
    shoulder) climbs by the same few hundredths every iteration: the loop needs its margin met,
    so its slack is not an answer, only the QP's way to stay feasible."""
    fix = slice(0, n_fix)
    short = predicted[fix] < targets[fix]
    grown = np.minimum(price[fix] * settings.price_growth, PRICE_MAX * settings.lam)
    price[fix] = np.where(short, np.maximum(grown, price[fix]), price[fix])
