"""Taking a QP step on the true gaps: the merit it is judged by, backtracking when the linear
model overshoots (ReLU units switch, tanh saturates), and the extra aim of cases that creep."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from warp_check.repair.linearise import gaps_after_step
from warp_check.repair.settings import RepairSettings

if TYPE_CHECKING:  # pragma: no cover - state.py builds on this module: for the annotations only
    from warp_check.repair.state import LoopState, Stacked, Trial

# raise_prices: a must_fix case's slack price grows an iteration it is left short, to PRICE_MAX·λ.
PRICE_MAX = 1e4


def linear_check(predicted, gap_full, targets, n_fix) -> dict[str, float | int]:
    """The IterationRecord fields that set the QP's promise against the true full step."""
    return {
        "promised_fix_shortfall": shortfall(predicted[:n_fix], targets[:n_fix]),
        "full_step_fix_shortfall": shortfall(gap_full[:n_fix], targets[:n_fix]),
        "promised_keep_missed": int(np.sum(predicted[n_fix:] < targets[n_fix:])),
        "full_step_keep_missed": int(np.sum(gap_full[n_fix:] < targets[n_fix:])),
    }


def shortfall(gaps: np.ndarray, targets: np.ndarray) -> float:
    return float(np.sum(np.maximum(targets - gaps, 0.0)))


def step_fractions(settings: RepairSettings) -> tuple[float, ...]:
    """Fractions of the QP step tried in order: the full step, then halvings."""
    return tuple(0.5**k for k in range(settings.backtracking + 1))


class Merit:
    """λ × the total shortfall below the targets, must_fix and must_keep alike: what a step is judged
    by. A kept case a step breaks is lifted back by the next QP, where its row is elastic at
    KEEP_WEIGHT·λ; weighing it that much here too rejected full steps that broke a few kept cases by
    hundredths while lifting the must_fix cases by tenths (real SST-2: 13 iterations against 16 at
    10k with the tanh head, 29 against 32 at all 52k)."""

    def __init__(self, targets: np.ndarray, lam: float) -> None:
        self.targets, self.lam = targets, lam

    def __call__(self, gaps: np.ndarray) -> float:
        return self.lam * shortfall(gaps, self.targets)


def backtrack(*, stacked: Stacked, state: LoopState, trial: Trial) -> tuple[float, np.ndarray, dict[str, float | int]]:
    """The fraction of ``trial``'s QP step to take from the loop's W, the true gaps there, and the
    promise-against-full-step record.

    The first fraction (full step, then halvings) that lowers the merit wins; where none does,
    the full step is taken anyway (as in the paper) and patience ends a loop that goes nowhere.
    ΔW = f·U B changes Z by f·(V Bᵀ) Uᵀ: rank r, ~d_out/r times cheaper than V Wᵀ.
    """
    head, Z, VB, U, labels = stacked.head, state.Z, trial.VB, trial.U, stacked.labels
    merit, merit_now, predicted, gap_full = state.merit, state.merit_now, trial.predicted, trial.full
    n_fix, settings = stacked.n_fix, stacked.settings
    tries = []
    check: dict[str, float | int] = {}
    for fraction in step_fractions(settings):
        # The full step's true gaps (``gap_full``) were already taken for the trust region's ratio.
        gap_try = gap_full if fraction == 1.0 else gaps_after_step(head, Z, VB, U, fraction, labels)
        if fraction == 1.0:
            check = linear_check(predicted, gap_try, merit.targets, n_fix)
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


class TrustRegion:
    """κ, the scale of the step's metric, set by how well the linear model predicted the last step.

    ratio = (true merit decrease) / (promised merit decrease) at the full step. Below ACCEPT the
    step is re-solved with κ × SHRINK (a shorter step the linearisation can keep), at most TRIES
    solves an iteration; after it, κ halves where the model was good and doubles where it was poor.
    Off (``settings.trust_region`` false): κ stays 1 and every first step is taken.
    """

    ACCEPT = 1e-4
    SHRINK = 4.0
    GOOD, POOR = 0.75, 0.25
    TRIES = 6
    KAPPA_MIN, KAPPA_MAX = 1e-3, 1e6

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.kappa = 1.0

    @staticmethod
    def ratio(merit_now: float, merit_promised: float, merit_true: float) -> float:
        promised = merit_now - merit_promised
        true = merit_now - merit_true
        if promised <= 1e-12:
            return 1.0 if true >= 0 else -1.0
        return true / promised

    def retry(self, ratio: float, attempt: int) -> bool:
        """Whether to re-solve with a tighter metric (and tighten it)."""
        if not self.enabled or ratio >= self.ACCEPT or attempt + 1 >= self.TRIES:
            return False
        self.kappa = min(self.kappa * self.SHRINK, self.KAPPA_MAX)
        return True

    def adapt(self, ratio: float) -> None:
        if not self.enabled:
            return
        if ratio > self.GOOD:
            self.kappa = max(self.kappa / 2.0, self.KAPPA_MIN)
        elif ratio < self.POOR:
            self.kappa = min(self.kappa * 2.0, self.KAPPA_MAX)


class RankSchedule:
    """The rank of the step: starts at settings.rank, grows ×GROWTH (to settings.rank_limit and the
    layer's smaller side) after an iteration that lowered the total shortfall by less than STALL,
    and at once where the QP's own promise leaves more than PROMISE_SHORT of the must_fix
    shortfall unmet: the linear model itself says the rank has no room for the fix. Where it
    leaves more than PROMISE_FAR unmet, the rank goes to its limit at once: a QP at each rank
    between costs as much as the one that will be kept (real SST-2, tanh head: the rank-8 QP
    the loop then left took 438 Newton steps, the rank-32 one 60)."""

    GROWTH = 4
    STALL = 0.1
    PROMISE_SHORT = 0.1
    PROMISE_FAR = 0.5

    def __init__(self, settings: RepairSettings, smallest_side: int, start_at_limit: bool = False) -> None:
        self.smallest_side = smallest_side
        self.limit = min(settings.rank_limit, smallest_side)
        self.rank = self.limit if start_at_limit else min(settings.rank, self.limit)

    @property
    def full(self) -> bool:
        """The rank is the layer's whole smaller side: U spans every change of W."""
        return self.rank == self.smallest_side

    def grow_for_promise(self, promised_fix_shortfall: float, fix_shortfall_now: float) -> bool:
        """Grow the rank if the step's promise leaves the must_fix cases short; True if it grew."""
        if self.rank >= self.limit or promised_fix_shortfall <= self.PROMISE_SHORT * fix_shortfall_now:
            return False
        self._grow(all_the_way=promised_fix_shortfall > self.PROMISE_FAR * fix_shortfall_now)
        return True

    def after(self, shortfall_before: float, shortfall_after: float) -> bool:
        """Grow the rank if this iteration stalled; True if it grew."""
        if self.rank >= self.limit or shortfall_after <= (1 - self.STALL) * shortfall_before:
            return False
        self._grow()
        return True

    def _grow(self, all_the_way: bool = False) -> None:
        self.rank = self.limit if all_the_way else min(self.rank * self.GROWTH, self.limit)
