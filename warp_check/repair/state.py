"""The repair loop's data: what it never changes (:class:`Stacked`), what it changes step by step
(:class:`LoopState`), one QP step set against the truth (:class:`Trial`), and how it ended (:class:`Ending`).

The loop's functions (:mod:`warp_check.repair.iterations`, :mod:`~warp_check.repair.linearise`,
:mod:`~warp_check.repair.step`) take these by keyword; :mod:`~warp_check.repair.iterations` builds them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from warp_check.model.blocks import blocks
from warp_check.model.head import UNIT_ROUNDOFF, DenseHead
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.solution import QPSolution
from warp_check.repair.controls import Merit, RankSchedule, TrustRegion
from warp_check.repair.metric import StepMetric
from warp_check.repair.records import IterationRecord, Miss, RepairStatus
from warp_check.repair.settings import RepairSettings


@dataclass(frozen=True, kw_only=True, eq=False)
class Stacked:
    """The must_fix and the kept must_keep cases stacked (must_fix first), the margin each needs and how
    a step is priced: fixed for the whole loop."""

    head: DenseHead  # the head repaired (after GSN-FT): its bias, σ, classifier and storage dtype stay
    settings: RepairSettings
    ids: tuple[str, ...]
    n_fix: int
    V: np.ndarray  # float32 where the cases came so (exact; every product casts it to float64)
    labels: np.ndarray
    targets: np.ndarray  # γ_s per must_fix case, its bar per must_keep case (γ_h, or its own: keep_margin)
    metric: StepMetric
    V_qp: np.ndarray  # the representations the QP sees (whitened by the metric)
    VVt: np.ndarray | None  # V_qp V_qpᵀ, cached for small sets; larger ones get each working set's
    # σ the identity (the final-linear form): the linearised gaps are the true gaps, so every row is hard
    # and the rank is the layer's whole smaller side (within max_rank): one QP either meets every margin
    # or proves that no change of the layer can.
    linear: bool
    copies: np.ndarray  # per row, the suite's cases it stands for (identical cases are one row): what counts count
    # must_keep cases held outside the loop (repair.screen): they met γ_h + screen_margin when last
    # checked, and the iteration records count them as met
    held_outside: int = 0

    def count(self, rows: np.ndarray) -> int:
        """The suite's cases behind the rows where ``rows`` (a mask over every row) holds."""
        return int(np.sum(self.copies[rows]))

    def total_shortfall(self, gap: np.ndarray, rows: slice) -> float:
        """Σ max(target − gap, 0) over the suite's cases behind ``rows``."""
        return float(np.sum(self.copies[rows] * np.maximum(self.targets[rows] - gap, 0.0)))

    def held(self, W: np.ndarray, gap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per case at W: the gap the stopping rule measures and the room it needs (:func:`held_gaps`)."""
        return held_gaps(self.head.with_weight(W), self.V, self.labels, gap)

    def kind(self, i: int) -> str:
        return "must_fix" if i < self.n_fix else "must_keep"


def held_gaps(head: DenseHead, V: np.ndarray, labels: np.ndarray, gap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row at ``head``: the gap the stopping rule measures (the lower of the float64 ``gap`` and the
    gap in the saved arithmetic) and the room a half-precision model needs above its margin; a block
    of rows at a time (the saved arithmetic's pre-activations and σ are as large as Z)."""
    held, room = np.empty_like(gap), np.zeros_like(gap)
    for rows in blocks(gap.size):
        held[rows] = np.minimum(gap[rows], head.gaps_as_stored(V[rows], labels[rows]))
        if head.unit_roundoff > UNIT_ROUNDOFF["float32"]:
            room[rows] = head.gap_rounding_reach(V[rows], labels[rows])
    return held, room


@dataclass(frozen=True, kw_only=True, eq=False)
class Best:
    """The best iterate so far: a failed run reports it, not its last."""

    W: np.ndarray
    gap: np.ndarray
    iteration: int


@dataclass(kw_only=True, eq=False)
class LoopState:
    """What the loop changes, iteration by iteration: W as stored, its pre-activations and true gaps, and
    the aims, prices, rank and trust region the additions to the paper's loop adjust.

    Mutable on purpose: Z (cases × d_out) moves in place a block at a time, and the aims and prices
    are updated in place; a frozen record would copy them every step and change the arithmetic."""

    W: np.ndarray  # as stored (rounded to the model's dtype)
    gap: np.ndarray  # the true gaps at W
    Z: np.ndarray  # V Wᵀ + b: exact for W, or carried forward from step to step (``exact``)
    exact: bool = True  # Z and the gaps computed from the stored W itself (not carried forward)
    merit: Merit
    merit_now: float = math.inf  # the merit of ``gap`` (measured once the loop starts)
    # Per case: the price of its slack in the QP (λ, KEEP_WEIGHT·λ), raised for must_fix cases the QP
    # keeps leaving short (step.raise_prices).
    price: np.ndarray
    # Per case: extra aim of must_fix cases that creep toward their margin (step.update_extra_aim), and
    # of any short case after a step the dtype rounded away (iterations.aim_past_rounding).
    extra_aim: np.ndarray
    # Per case: how far above its margin the saved model's own arithmetic needs it (holds_as_stored).
    stored_aim: np.ndarray
    trust: TrustRegion
    ranks: RankSchedule
    carried: object | None = None  # the last QP's rows and multipliers, where the next one may start
    rows_last: int = 0  # rows of the last QP solved
    rounded_away: bool = False  # the last step lost most of itself to the dtype's rounding
    best: Best | None = None
    records: list[IterationRecord] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, eq=False)
class Trial:
    """One QP step of an iteration set against the truth: the problem solved (linearised at U, one row
    per case and competing class, ``row_case`` / ``row_margin``), its answer, V Bᵀ, and per case the gap
    the linear model promised and the true gap at the full step."""

    U: np.ndarray
    row_case: np.ndarray
    row_margin: np.ndarray
    problem: LinearisedProblem | None = None
    solution: QPSolution | None = None
    VB: np.ndarray | None = None
    predicted: np.ndarray | None = None
    full: np.ndarray | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class Ending:
    """How the loop ended: the weights it reports (the best iterate where it failed), and why."""

    status: RepairStatus
    message: str
    W: np.ndarray
    misses: tuple[Miss, ...] = ()
