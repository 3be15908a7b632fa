"""Solve a linearised repair QP: pick a backend, call it through the one signature they share.

Every backend is ``solve(problem, settings, warm) -> QPSolution``; each registers itself
(warp_check.qp.registry; the built-in ones: warp_check.qp.backends). ``auto``'s rule is here
(:func:`pick`): it picks by size, as measured on the same instances side by side (1 BLAS thread):

* OSQP (the dual of a lazy working set) below ``newton_min_rows`` rows: small problems, and
  it decides infeasibility;
* the β-space interior point from there while β has at most ``ipm.max_unknowns`` unknowns
  r·d_in: its normal matrix is r·d_in square (real SST-2, rank 2: a QP in 0.5 s at 10k rows,
  1.1–1.7 s at 52k);
* the augmented Lagrangian past that: its matrices are over the working set's rows, and a
  re-solve starts from the last answer (real SST-2, rank 8: 0.3 s at 10k rows where the
  interior point takes 9 s; 52k rows at rank 32, ~1 s a QP through a whole repair).

The dual active set is there to be named: on real representations it stalls (the rows in play
are singular to working precision) and hands its QPs to OSQP. A run a backend cannot decide
goes to OSQP's working set, started from its rows (:func:`warp_check.qp.solution.answer_or_hand_over`:
OSQP registered as the decider). The other way round, a QP ``auto`` gave OSQP that its ADMM
cannot decide in ``max_iter`` (ill-conditioned: the exact final-layer problem of two must_fix
cases 0.5 % apart needs a step ×100 the layer's norm) goes to the backend ``auto`` picks past
``newton_min_rows``, whose Newton steps do not slow with the conditioning, and where that one
stalls too, to the augmented Lagrangian (:func:`after_decider`); a QP the interior point leaves
undecided, and OSQP's working set from its rows too, goes on to the augmented Lagrangian likewise.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from warp_check.qp import registry
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.registry import Backend, QPBackend
from warp_check.qp.settings import SolverSettings
from warp_check.qp.solution import QPSolution, WarmStart


def pick_backend(problem: LinearisedProblem, settings: SolverSettings) -> Backend:
    """The name of :func:`pick`'s backend."""
    return pick(problem, settings).name


def pick(problem: LinearisedProblem, settings: SolverSettings) -> QPBackend:
    """The backend the settings name, or ``auto``'s choice for this problem's size."""
    if settings.backend != "auto":
        return registry.backend(settings.backend)
    # A form named in the settings is the decider's form: the interior point solves the primal only,
    # the active set the dual only, and neither is picked against the other's form.
    # Every row counts, the soft ones too: OSQP's dual holds every must_fix row from the start, and a
    # neighbourhood brings a thousand (the example's 1,188 must_fix and 188 must_keep: 21 s of
    # OSQP against 0.5 s of interior point and augmented Lagrangian, the same iterates).
    if problem.n < settings.newton_min_rows or settings.form == "dual":
        return registry.decider()
    return next(_fitting(problem, settings), registry.decider())


def after_decider(problem: LinearisedProblem, settings: SolverSettings) -> tuple[QPBackend, ...]:
    """Where a QP ``auto`` gave the decider goes when it cannot decide it: every backend that fits,
    in rank order. On an ill-conditioned exact problem which of them settles it turns on the last
    bits of v (tiny MPNet's final layer, ×141 its norm: the interior point converged on one CPU's
    kernels and stalled at residual 18 on another's, where the augmented Lagrangian settles it in
    71 iterations), so a repair must not end on the first one's stall."""
    return tuple(_fitting(problem, settings))


def _after(picked: QPBackend, problem: LinearisedProblem, settings: SolverSettings) -> tuple[QPBackend, ...]:
    """The backends that fit, ranked after ``picked`` in auto's rule (a million must_keep cases: the
    interior point's first QP of a later round stalled at residual 1e3, which the augmented Lagrangian
    settles)."""
    return tuple(b for b in _fitting(problem, settings) if b.auto.rank > picked.auto.rank)  # type: ignore[union-attr]


def _fitting(problem: LinearisedProblem, settings: SolverSettings) -> Iterator[QPBackend]:
    """The backends with a place in ``auto``'s rule that solve the form asked for and fit the problem,
    in rank order (each one's fit asked when it is reached)."""
    form = settings.form
    placed = [b for b in registry.registered() if b.auto is not None and (form == "auto" or form in b.forms)]
    ranked = sorted(placed, key=lambda b: b.auto.rank)  # type: ignore[union-attr]
    return (b for b in ranked if b.auto.fits(problem, settings.of(b.settings)))  # type: ignore[union-attr]


def solve(
    problem: LinearisedProblem, settings: SolverSettings | None = None, warm: WarmStart | None = None
) -> QPSolution:
    """Solve the QP with the backend and in the form the settings ask for. Every row of the
    whole problem holds at the returned B (to the backend's tolerance) whichever one solved it.
    ``warm``: an earlier solution's :attr:`QPSolution.warm`, where the backend can start from it."""
    settings = settings or SolverSettings()
    picked = pick(problem, settings)
    solution = picked.solve(problem, settings, warm)
    decided = solution.status.has_solution or solution.status.infeasible
    if decided or settings.backend != "auto" or settings.form != "auto":
        return solution
    if picked.decides is not None:
        tried, following = [f"{picked.decides.title}'s '{solution.solver_status}'"], after_decider(problem, settings)
    else:  # neither it nor OSQP's working set from its rows settled it: the backends auto ranks after it
        tried, following = [f"the {picked.name}'s '{solution.solver_status}'"], _after(picked, problem, settings)
    seconds = solution.seconds
    for second in following:
        again = second.solve(problem, settings, warm)
        seconds += again.seconds
        if again.status.has_solution or again.status.infeasible:
            return replace(
                again,
                solver_status=f"after {', then '.join(tried)}: {again.solver_status}",
                seconds=seconds,
                handed_over_from=picked.name,
            )
        tried.append(f"the {again.backend}'s '{again.solver_status}'")
    return solution
