"""What a QP solve gives back, whichever backend ran: a status with one meaning, and B.

Each backend speaks its own words: OSQP's named statuses, the interior-point and active-set
methods' :class:`Outcome`. Each is mapped through a named table to :class:`QPStatus`, the one
the repair loop reads.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from warp_check.qp import registry
from warp_check.qp.problem import LinearisedProblem, Named, QPForm
from warp_check.qp.registry import Backend

if TYPE_CHECKING:
    from warp_check.qp.settings import SolverSettings


class QPStatus(Named):
    """What the solve means for repair, independent of which form or backend solved it."""

    SOLVED = "solved"
    SOLVED_INACCURATE = "solved_inaccurate"  # tolerances met only 10× looser: usable, flagged
    # Solved on the rows a working set of bounded memory holds: rows outside it may be violated, and
    # the loop's step, checked on the true gaps, judges what that costs (usable, flagged)
    SOLVED_PARTIAL = "solved_partial"
    INFEASIBLE = "infeasible"  # the must_keep constraints cannot all hold
    INFEASIBLE_INACCURATE = "infeasible_inaccurate"
    MAX_ITER = "max_iter_reached"
    TIME_LIMIT = "time_limit_reached"
    STALLED = "stalled"  # an iterative method stopped progressing short of its tolerance
    INTERRUPTED = "interrupted"
    ERROR = "solver_error"  # a status that cannot happen for this problem class

    @property
    def has_solution(self) -> bool:
        return self in (QPStatus.SOLVED, QPStatus.SOLVED_INACCURATE, QPStatus.SOLVED_PARTIAL)

    @property
    def infeasible(self) -> bool:
        return self in (QPStatus.INFEASIBLE, QPStatus.INFEASIBLE_INACCURATE)


class Outcome(Named):
    """How the interior-point and the active-set methods end."""

    SOLVED = "solved"
    SOLVED_INACCURATE = "solved inaccurate"  # the best iterate's residuals within 10× the tolerance
    INFEASIBLE = "infeasible"  # a Farkas ray on the hard rows (warp_check.qp.linalg.farkas_ratio)
    INFEASIBLE_INACCURATE = "infeasible inaccurate"
    MAX_ITER = "iteration limit"
    WORKING_SET_FULL = "working set full"  # solved on the rows it holds; others the answer violates
    TIME_LIMIT = "time limit"
    STALLED = "stalled"  # no progress short of the tolerance


OUTCOME_STATUS: dict[Outcome, QPStatus] = {
    Outcome.SOLVED: QPStatus.SOLVED,
    Outcome.SOLVED_INACCURATE: QPStatus.SOLVED_INACCURATE,
    Outcome.INFEASIBLE: QPStatus.INFEASIBLE,
    Outcome.INFEASIBLE_INACCURATE: QPStatus.INFEASIBLE_INACCURATE,
    Outcome.MAX_ITER: QPStatus.MAX_ITER,
    Outcome.TIME_LIMIT: QPStatus.TIME_LIMIT,
    Outcome.STALLED: QPStatus.STALLED,
    Outcome.WORKING_SET_FULL: QPStatus.SOLVED_PARTIAL,
}

# Outcomes that may hide an infeasible problem, or a feasible one the method could not settle:
# the decider decides them (answer_or_hand_over).
UNDECIDED = frozenset({Outcome.STALLED, Outcome.MAX_ITER, Outcome.TIME_LIMIT})


@dataclass(frozen=True, kw_only=True)
class BackendRun:
    """What the interior-point or the active-set method ended with, before it becomes a QPSolution."""

    B: np.ndarray  # (r, d_in): the answer when solved; the best (or last) iterate otherwise
    outcome: Outcome
    iterations: int
    rows: np.ndarray  # rows of the problem in play at the end (sorted): where a hand-over starts
    detail: str


@dataclass(frozen=True)
class WarmStart:
    """Where a solve may start: the working set, its multipliers and Gram matrix of an earlier
    solve. The Gram matrix is reused when the new problem has the same rows (C, V and cases:
    only the bounds, the prices or ρ moved); otherwise the rows and multipliers of the cases
    carry over."""

    source: LinearisedProblem = field(repr=False)
    rows: np.ndarray
    z: np.ndarray
    gram: np.ndarray | None = field(repr=False)  # None: the solve went without one (qp.alm_matrix_free)

    def reusable_for(self, problem: LinearisedProblem) -> bool:
        s = self.source
        return problem.C is s.C and problem.V is s.V and problem.cases is s.cases and problem.n_fix == s.n_fix

    def over(self, V: np.ndarray) -> WarmStart:
        """The same rows and multipliers, their cases now rows of ``V``: the cases' representations
        with more cases appended (the loop's cases joining between steps), so that the earlier
        array is not kept alive by the warm start alone."""
        return replace(self, source=replace(self.source, V=V, VVt=None))


@dataclass(frozen=True)
class QPSolution:
    B: np.ndarray | None  # (r, d_in); None unless status.has_solution
    status: QPStatus
    form: QPForm
    objective: float
    iterations: int
    seconds: float
    solver_status: str  # the solver's own words for how it ended
    fallback_from: QPForm | None = None  # the dual was undecided and the primal answered
    # The rows of the last QP solved (the final working set), as indices into the problem's
    # rows; None when every row was in it.
    rows: np.ndarray | None = field(default=None, repr=False)
    rounds: int = 1  # QPs solved: 1 + working-set rounds that added rows
    backend: Backend = Backend("osqp")
    handed_over_from: Backend | None = None  # the backend that could not decide and passed the QP on (qp.solve)
    unsettled: bool = False  # OSQP's working set found no fixed point in its rounds (a limit, not infeasibility)
    # Where a re-solve of this problem with moved bounds may start (warp_check.qp.alm.WarmStart);
    # None from the backends that start cold every time.
    warm: WarmStart | None = field(default=None, repr=False)

    @property
    def working_set_size(self) -> int | None:
        return None if self.rows is None else int(self.rows.size)


def answer_or_hand_over(
    problem: LinearisedProblem,
    settings: SolverSettings,
    start: float,
    result: BackendRun,
    *,
    backend: Backend,
    words: str,
    form: QPForm,
) -> QPSolution:
    """The QPSolution of a backend's run: its outcome through OUTCOME_STATUS; an undecided one goes to
    the decider (warp_check.qp.registry.decider), started from the rows the run had in play."""
    status = OUTCOME_STATUS[result.outcome]
    detail = f"{words}: {result.outcome.value} ({result.detail})"
    if result.outcome in UNDECIDED:
        answer = registry.decider().decides.solve_from(problem, settings, result.rows, start, detail)  # type: ignore[union-attr]
        if answer is not None:
            return replace(answer, handed_over_from=backend)
    B = result.B if status.has_solution else None
    return QPSolution(
        B,
        status,
        form,
        problem.primal_objective(B) if B is not None else math.nan,
        result.iterations,
        time.perf_counter() - start,
        detail,
        rows=result.rows if result.rows.size < problem.n else None,
        backend=backend,
    )
