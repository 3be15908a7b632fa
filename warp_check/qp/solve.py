"""Solve a linearised repair QP: pick a backend, call it through the one signature they share.

Every backend is ``solve(problem, settings) -> QPSolution``; the registry below names them.
``auto`` picks by size, as measured on the same instances side by side (1 BLAS thread):

* OSQP (the dual of a lazy working set) below ``ipm_min_rows`` hard rows: fast and robust
  there, and it decides infeasibility;
* the β-space interior point from there while β has at most ``ipm_max_unknowns`` unknowns
  r·d_in: its normal matrix is r·d_in square (100k rows at rank 2: a QP in ~20 s where OSQP
  does not finish in 30 min);
* the dual active set past that: its matrix is over the rows in play (100k rows at rank 8:
  8 s a QP against OSQP's 344 s).

A run the interior point or the active set cannot decide goes to OSQP's working set, started
from its rows (:func:`warp_check.qp.osqp_backend.answer_or_hand_over`).
"""

from __future__ import annotations

from collections.abc import Callable

from warp_check.qp import active_set, ipm, osqp_backend
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.settings import SolverSettings
from warp_check.qp.solution import Backend, QPSolution

BACKENDS: dict[Backend, Callable[[LinearisedProblem, SolverSettings], QPSolution]] = {
    Backend.OSQP: osqp_backend.solve,
    Backend.IPM: ipm.solve,
    Backend.ACTIVE_SET: active_set.solve,
}


def pick_backend(problem: LinearisedProblem, settings: SolverSettings) -> Backend:
    """The backend the settings name, or ``auto``'s choice for this problem's size."""
    if settings.backend != "auto":
        return Backend(settings.backend)
    # A form named in the settings is OSQP's form: the interior point solves the primal only,
    # the active set the dual only, and neither is picked against the other's form.
    if problem.n - problem.n_fix < settings.ipm_min_rows or settings.form == "dual":
        return Backend.OSQP
    if problem.rank * problem.d_in <= settings.ipm_max_unknowns:
        return Backend.IPM
    return Backend.ACTIVE_SET if settings.form == "auto" else Backend.OSQP


def solve(problem: LinearisedProblem, settings: SolverSettings | None = None) -> QPSolution:
    """Solve the QP with the backend and in the form the settings ask for. Every row of the
    whole problem holds at the returned B (to the backend's tolerance) whichever one solved it."""
    settings = settings or SolverSettings()
    return BACKENDS[pick_backend(problem, settings)](problem, settings)
