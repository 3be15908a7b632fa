"""Solve a linearised repair QP: pick a backend, call it through the one signature they share.

Every backend is ``solve(problem, settings, warm) -> QPSolution``; the registry below names them.
``auto`` picks by size, as measured on the same instances side by side (1 BLAS thread):

* OSQP (the dual of a lazy working set) below ``ipm_min_rows`` rows: small problems, and
  it decides infeasibility;
* the β-space interior point from there while β has at most ``ipm_max_unknowns`` unknowns
  r·d_in: its normal matrix is r·d_in square (real SST-2, rank 2: a QP in 0.5 s at 10k rows,
  1.1–1.7 s at 52k);
* the augmented Lagrangian past that: its matrices are over the working set's rows, and a
  re-solve starts from the last answer (real SST-2, rank 8: 0.3 s at 10k rows where the
  interior point takes 9 s; 52k rows at rank 32, ~1 s a QP through a whole repair).

The dual active set is there to be named: on real representations it stalls (the rows in play
are singular to working precision) and hands its QPs to OSQP. A run a backend cannot decide
goes to OSQP's working set, started from its rows
(:func:`warp_check.qp.osqp_backend.answer_or_hand_over`). The other way round, a QP ``auto`` gave
OSQP that its ADMM cannot decide in ``max_iter`` (ill-conditioned: the exact final-layer problem
of two must_fix cases 0.5 % apart needs a step ×100 the layer's norm) goes to the backend ``auto``
picks past ``ipm_min_rows``, whose Newton steps do not slow with the conditioning, and where
that one stalls too, to the augmented Lagrangian (:func:`_after_osqp`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from warp_check.qp import active_set, alm, ipm, osqp_backend
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.settings import SolverSettings
from warp_check.qp.solution import Backend, QPSolution, WarmStart

BACKENDS: dict[Backend, Callable[[LinearisedProblem, SolverSettings, WarmStart | None], QPSolution]] = {
    Backend.OSQP: osqp_backend.solve,
    Backend.IPM: ipm.solve,
    Backend.ACTIVE_SET: active_set.solve,
    Backend.ALM: alm.solve,
}


def pick_backend(problem: LinearisedProblem, settings: SolverSettings) -> Backend:
    """The backend the settings name, or ``auto``'s choice for this problem's size."""
    if settings.backend != "auto":
        return Backend(settings.backend)
    # A form named in the settings is OSQP's form: the interior point solves the primal only,
    # the active set the dual only, and neither is picked against the other's form.
    # Every row counts, the soft ones too: OSQP's dual holds every must_fix row from the start, and a
    # neighbourhood brings a thousand (the example's 1,188 must_fix and 188 must_keep: 21 s of
    # OSQP against 0.5 s of interior point and augmented Lagrangian, the same iterates).
    if problem.n < settings.ipm_min_rows or settings.form == "dual":
        return Backend.OSQP
    if settings.form != "auto":
        return Backend.IPM if problem.rank * problem.d_in <= settings.ipm_max_unknowns else Backend.OSQP
    return _newton_backend(problem, settings)


def _newton_backend(problem: LinearisedProblem, settings: SolverSettings) -> Backend:
    """The interior point while β is small (its normal matrix is r·d_in square), else the augmented Lagrangian."""
    return Backend.IPM if problem.rank * problem.d_in <= settings.ipm_max_unknowns else Backend.ALM


def solve(
    problem: LinearisedProblem, settings: SolverSettings | None = None, warm: WarmStart | None = None
) -> QPSolution:
    """Solve the QP with the backend and in the form the settings ask for. Every row of the
    whole problem holds at the returned B (to the backend's tolerance) whichever one solved it.
    ``warm``: an earlier solution's :attr:`QPSolution.warm`, where the backend can start from it."""
    settings = settings or SolverSettings()
    backend = pick_backend(problem, settings)
    solution = BACKENDS[backend](problem, settings, warm)
    decided = solution.status.has_solution or solution.status.infeasible
    if decided or backend is not Backend.OSQP or settings.backend != "auto" or settings.form != "auto":
        return solution
    tried, seconds = [f"OSQP's '{solution.solver_status}'"], solution.seconds
    for second in _after_osqp(problem, settings):
        again = BACKENDS[second](problem, settings, warm)
        seconds += again.seconds
        if again.status.has_solution or again.status.infeasible:
            return replace(
                again,
                solver_status=f"after {', then '.join(tried)}: {again.solver_status}",
                seconds=seconds,
                handed_over_from=Backend.OSQP,
            )
        tried.append(f"the {again.backend}'s '{again.solver_status}'")
    return solution


def _after_osqp(problem: LinearisedProblem, settings: SolverSettings) -> tuple[Backend, ...]:
    """Where a QP ``auto`` gave OSQP goes when OSQP cannot decide it: the Newton backend for its size,
    then the augmented Lagrangian. On an ill-conditioned exact problem which of them settles it turns
    on the last bits of v (tiny MPNet's final layer, ×141 its norm: the interior point converged
    on one CPU's kernels and stalled at residual 18 on another's, where the augmented Lagrangian
    settles it in 71 iterations), so a repair must not end on the first one's stall."""
    first = _newton_backend(problem, settings)
    return (first,) if first is Backend.ALM else (first, Backend.ALM)
