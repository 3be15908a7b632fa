"""Taking a QP step on the true gaps: the merit it is judged by, backtracking when the linear
model overshoots (ReLU units switch, tanh saturates), and the extra aim of cases that creep."""

from __future__ import annotations

import numpy as np

from warp_check.model.head import DenseHead
from warp_check.repair.linearise import KEEP_WEIGHT, gaps_after_step
from warp_check.repair.settings import RepairSettings


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
    """λ-weighted shortfall below the targets: must_fix at λ, must_keep at KEEP_WEIGHT·λ, so a step
    that breaks a kept case costs more than the must_fix progress it buys."""

    def __init__(self, n_fix: int, n_keep: int, targets: np.ndarray, settings: RepairSettings) -> None:
        self.weights = np.concatenate([np.full(n_fix, settings.lam), np.full(n_keep, KEEP_WEIGHT * settings.lam)])
        self.targets = targets

    def __call__(self, gaps: np.ndarray) -> float:
        return float(self.weights @ np.maximum(self.targets - gaps, 0.0))


def backtrack(
    head: DenseHead,
    Z: np.ndarray,
    VB: np.ndarray,
    U: np.ndarray,
    labels: np.ndarray,
    merit: Merit,
    merit_now: float,
    predicted: np.ndarray,
    gap_full: np.ndarray,
    n_fix: int,
    settings: RepairSettings,
) -> tuple[float, dict[str, float | int]]:
    """The fraction of the QP step to take, and the promise-against-full-step record.

    The first fraction (full step, then halvings) that lowers the merit wins; where none does,
    the full step is taken anyway (as in the paper) and patience ends a loop that goes nowhere.
    ΔW = f·U B changes Z by f·(V Bᵀ) Uᵀ: rank r, ~d_out/r times cheaper than V Wᵀ.
    """
    tries = []
    check: dict[str, float | int] = {}
    for fraction in step_fractions(settings):
        # The full step's true gaps (``gap_full``) were already taken for the trust region's ratio.
        gap_try = gap_full if fraction == 1.0 else gaps_after_step(head, Z, VB, U, fraction, labels)
        if fraction == 1.0:
            check = linear_check(predicted, gap_try, merit.targets, n_fix)
        tries.append((fraction, merit(gap_try)))
        if tries[-1][1] < merit_now:
            break
    fraction = tries[-1][0] if tries[-1][1] < merit_now else 1.0
    return fraction, check


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
    layer's smaller side) after an iteration that lowered the total shortfall by less than STALL."""

    GROWTH = 4
    STALL = 0.1

    def __init__(self, settings: RepairSettings, smallest_side: int) -> None:
        self.rank = settings.rank
        self.limit = min(settings.rank_limit, smallest_side)

    def after(self, shortfall_before: float, shortfall_after: float) -> bool:
        """Grow the rank if this iteration stalled; True if it grew."""
        if self.rank >= self.limit or shortfall_after <= (1 - self.STALL) * shortfall_before:
            return False
        self.rank = min(self.rank * self.GROWTH, self.limit)
        return True
