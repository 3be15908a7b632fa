"""What the loop adjusts between iterations beside W: the merit a step is judged by, the trust
region's scale of the step's price, and the rank of the step."""

from __future__ import annotations

import numpy as np

from warp_check.repair.settings import RepairSettings


def shortfall(gaps: np.ndarray, targets: np.ndarray) -> float:
    return float(np.sum(np.maximum(targets - gaps, 0.0)))


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

    def __init__(
        self, settings: RepairSettings, smallest_side: int, start_at_limit: bool = False, start_at: int | None = None
    ) -> None:
        self.smallest_side = smallest_side
        self.limit = min(settings.rank_limit, smallest_side)
        self.rank = self.limit if start_at_limit else min(max(settings.rank, start_at or 0), self.limit)

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
