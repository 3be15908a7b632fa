"""How the loop ends where it does not converge: the cases short of their margin, and a message that
says why and what may help."""

from __future__ import annotations

import numpy as np

from warp_check.qp.solution import QPSolution
from warp_check.repair import advice
from warp_check.repair.controls import RankSchedule
from warp_check.repair.records import Miss, RepairStatus
from warp_check.repair.settings import RepairSettings
from warp_check.repair.state import Ending, LoopState, Stacked


def misses(*, stacked: Stacked, gap: np.ndarray) -> list[Miss]:
    """The cases whose ``gap`` is below their margin."""
    return [
        Miss(stacked.ids[i], stacked.kind(i), float(gap[i]), float(stacked.targets[i]))
        for i in np.flatnonzero(gap < stacked.targets)
    ]


def room_misses(*, stacked: Stacked, W: np.ndarray, gap: np.ndarray) -> list[Miss]:
    """The cases at W that clear their margin in float64 but not in the saved arithmetic or not by the
    room a half-precision model needs: the rest of what the stopping rule still waits for."""
    held, room = stacked.held(W, gap)
    dtype = stacked.head.storage_dtype
    return [
        Miss(
            stacked.ids[i],
            stacked.kind(i),
            float(held[i]),
            float(stacked.targets[i]),
            room=float(room[i]),
            dtype=dtype if room[i] > 0 else None,
        )
        for i in np.flatnonzero((gap >= stacked.targets) & (held < stacked.targets + room))
    ]


def not_converged(*, stacked: Stacked, state: LoopState, stalled: str) -> Ending:
    """The loop stalled or ran out of iterations: its best iterate, the cases it misses and what may help."""
    best = state.best
    missed = misses(stacked=stacked, gap=best.gap) + room_misses(stacked=stacked, W=best.W, gap=best.gap)
    why = f"stalled ({stalled})" if stalled else "not converged"
    done = state.records[-1].iteration if state.records else 0  # numbered on across rounds (repair.screen)
    head = f"{why} after {done} iteration(s): at the best iterate ({best.iteration}), "
    if not missed:  # cannot happen while the stopping rule and these two agree; never a traceback
        return Ending(status=RepairStatus.NOT_CONVERGED, message=head + "no case is short", W=best.W)
    worst = max(missed, key=lambda m: m.short_by)
    message = (
        f"{head}{len(missed)} case(s) miss their margin, worst '{worst.id}' ({worst.kind}) has gap "
        f"{worst.gap:.4g} < {worst.needs}; try "
        + advice.after_no_convergence(
            stacked.settings, (m.kind for m in missed), stalled=bool(stalled), room=_room_dtype(missed)
        )
    )
    return Ending(status=RepairStatus.NOT_CONVERGED, message=message, W=best.W, misses=tuple(missed))


def solver_failure(
    *, t: int, solution: QPSolution, settings: RepairSettings, linear: RankSchedule | None
) -> tuple[RepairStatus, str]:
    """``linear``: the final-linear form's ranks (None: the dense form). At full rank the QP was the
    whole problem and its infeasibility a proof; below it, every row was hard within too few directions."""
    if solution.status.infeasible and linear is not None and not linear.full:
        return RepairStatus.INFEASIBLE, (
            f"iteration {t}: no change of the final layer of rank {linear.rank} meets every margin (solver: "
            f"{solution.solver_status}); the layer has {linear.smallest_side} classes, so a change of full rank may: "
            f"raise max_rank (now {settings.max_rank}) to {linear.smallest_side}"
        )
    if solution.status.infeasible and linear is not None:
        return RepairStatus.INFEASIBLE, (
            f"iteration {t}: no change of the final layer meets every must_fix margin while every must_keep "
            f"case keeps its own (solver: {solution.solver_status}); the layer is linear, so this is a proof, "
            f"not a search that gave up; {advice.INFEASIBLE_EXACT}"
        )
    if solution.status.infeasible:
        return RepairStatus.INFEASIBLE, (
            f"iteration {t}: the must_keep constraints cannot all hold together "
            f"(solver: {solution.solver_status}); {advice.INFEASIBLE_KEEP}"
        )
    if solution.unsettled:
        return RepairStatus.SOLVER_FAILED, (
            f"iteration {t}: {solution.solver_status}; {advice.after_unsettled_working_set(settings)}"
        )
    return RepairStatus.SOLVER_FAILED, (
        f"iteration {t}: the QP solver ({solution.backend}) ended with '{solution.solver_status}' "
        f"and no usable solution; {advice.after_solver_failure(settings, solution.backend)}"
    )


def named(missed: list[Miss], shown: int = 5) -> str:
    """The first ``shown`` ids of ``missed`` and how many there are."""
    names = ", ".join(repr(m.id) for m in missed[:shown])
    return f"{names} ({len(missed)} case{'s' if len(missed) != 1 else ''})" if missed else "none"


def _room_dtype(missed: list[Miss]) -> str | None:
    """The half-precision dtype whose room every miss lacks (None: some case misses its margin itself)."""
    dtypes = {m.dtype for m in missed}
    return dtypes.pop() if len(dtypes) == 1 and None not in dtypes else None
