"""The OSQP backend: one QP in the dual or the primal form, with every tolerance and limit
spelled out (OSQP's own defaults, eps 1e-3, are far too loose here) and its statuses mapped by
name. Hard rows join lazily (cutting planes): solve with the soft rows and the hard rows near
their bound, check every hard row in closed form at the answer, add the violated ones, repeat.
A relaxation whose optimum satisfies every row is the whole problem's optimum, and β is unique
(the objective is strictly convex in β), so the answer is the same as with every row.

OSQP also decides what the other backends cannot (:func:`solve_from_rows`, the decider's entry in
warp_check.qp.backends.osqp): it decides infeasibility directly, and its working set adds any row
their last iterate's rows miss."""

from __future__ import annotations

import io
import math
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import replace

import numpy as np

from warp_check.qp.backends.osqp import OSQP, OsqpSettings
from warp_check.qp.linalg import upper_csc
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.settings import SolverSettings
from warp_check.qp.solution import QPForm, QPSolution, QPStatus, WarmStart

# osqp.SolverStatus by name → our meaning, per form. In the dual form the QP handed to OSQP is
# the Lagrange dual: its *dual* infeasibility (unbounded below) is what certifies that the
# repair problem is infeasible, and its primal can never be infeasible (z = 0 is feasible).
OSQP_STATUS: dict[QPForm, dict[str, QPStatus]] = {
    QPForm.PRIMAL: {
        "OSQP_SOLVED": QPStatus.SOLVED,
        "OSQP_SOLVED_INACCURATE": QPStatus.SOLVED_INACCURATE,
        "OSQP_PRIMAL_INFEASIBLE": QPStatus.INFEASIBLE,
        "OSQP_PRIMAL_INFEASIBLE_INACCURATE": QPStatus.INFEASIBLE_INACCURATE,
        "OSQP_DUAL_INFEASIBLE": QPStatus.ERROR,  # unbounded: impossible, the objective is ≥ 0
        "OSQP_DUAL_INFEASIBLE_INACCURATE": QPStatus.ERROR,
        "OSQP_MAX_ITER_REACHED": QPStatus.MAX_ITER,
        "OSQP_TIME_LIMIT_REACHED": QPStatus.TIME_LIMIT,
        "OSQP_NON_CVX": QPStatus.ERROR,  # impossible: P is PSD by construction
        "OSQP_SIGINT": QPStatus.INTERRUPTED,
        "OSQP_UNSOLVED": QPStatus.ERROR,
    },
    QPForm.DUAL: {
        "OSQP_SOLVED": QPStatus.SOLVED,
        "OSQP_SOLVED_INACCURATE": QPStatus.SOLVED_INACCURATE,
        "OSQP_PRIMAL_INFEASIBLE": QPStatus.ERROR,  # impossible: z = 0 is feasible
        "OSQP_PRIMAL_INFEASIBLE_INACCURATE": QPStatus.ERROR,
        "OSQP_DUAL_INFEASIBLE": QPStatus.INFEASIBLE,
        "OSQP_DUAL_INFEASIBLE_INACCURATE": QPStatus.INFEASIBLE_INACCURATE,
        "OSQP_MAX_ITER_REACHED": QPStatus.MAX_ITER,
        "OSQP_TIME_LIMIT_REACHED": QPStatus.TIME_LIMIT,
        "OSQP_NON_CVX": QPStatus.ERROR,
        "OSQP_SIGINT": QPStatus.INTERRUPTED,
        "OSQP_UNSOLVED": QPStatus.ERROR,
    },
}


def _status(form: QPForm, result) -> QPStatus:
    """Our status for OSQP's result, looked up by the status's name (an unknown one: ERROR)."""
    import osqp

    try:
        name = osqp.SolverStatus(int(result.info.status_val)).name
    except ValueError:
        return QPStatus.ERROR
    return OSQP_STATUS[form].get(name, QPStatus.ERROR)


# The whole problem is solved at once, when the working set does not settle, only up to this
# many rows: beyond it the dual's n×n Gram matrix (and the primal's n×r·d_in K) is the very
# memory the working set exists to avoid, so the solve fails with a status that says so.
FULL_SOLVE_MAX_ROWS = 5_000
WORKING_SET_UNSETTLED = "working set unsettled"


def solve(problem: LinearisedProblem, settings: SolverSettings, warm: WarmStart | None = None) -> QPSolution:
    """OSQP on the problem; with ``settings.working_set`` the hard rows join lazily. Every row
    of the whole problem holds at the returned B (to the solver tolerance) either way."""
    start = time.perf_counter()
    if not settings.working_set or problem.n == problem.n_fix:
        solution = solve_once(problem, settings)
        return replace(solution, seconds=time.perf_counter() - start)
    return solve_working_set(problem, settings, problem.rows_near_bound(settings.working_set_window), start)


def solve_working_set(
    problem: LinearisedProblem, settings: SolverSettings, rows: np.ndarray, start: float
) -> QPSolution:
    """OSQP on ``rows`` (sorted, every soft row among them), adding violated hard rows in rounds."""
    iterations = 0
    tolerance = row_tolerance(problem, settings)
    rounds = 0
    for _ in range(settings.working_set_rounds):
        rounds += 1
        solution = solve_once(problem.subset(rows), settings)
        iterations += solution.iterations
        if not solution.status.has_solution:
            break  # infeasible on a subset of the rows is infeasible on all of them
        # Every hard row, in closed form: O(n·r·d_in). Soft rows are all in the set already.
        slack = problem.constraint_values(solution.B)[problem.n_fix :] - problem.rhs[problem.n_fix :]
        slack[rows[rows >= problem.n_fix] - problem.n_fix] = np.inf  # in the set: held by the QP
        violated = np.flatnonzero(slack < -tolerance)
        if violated.size == 0:
            break
        worst = violated[np.argsort(slack[violated], kind="stable")[: settings.working_set_batch]]
        rows = np.union1d(rows, problem.n_fix + worst)
    else:
        if problem.n > FULL_SOLVE_MAX_ROWS:
            why = f"{WORKING_SET_UNSETTLED} after {settings.working_set_rounds} rounds ({rows.size} rows)"
            failed = QPSolution(None, QPStatus.MAX_ITER, solution.form, math.nan, iterations, 0.0, why)
            return replace(failed, seconds=time.perf_counter() - start, rows=rows, rounds=rounds, unsettled=True)
        solution = solve_once(problem, settings)  # no fixed point in time: solve it whole
        iterations += solution.iterations
        rows, rounds = None, rounds + 1
    objective = problem.primal_objective(solution.B) if solution.status.has_solution else math.nan
    return replace(
        solution,
        objective=objective,
        iterations=iterations,
        seconds=time.perf_counter() - start,
        rows=rows,
        rounds=rounds,
    )


def row_tolerance(problem: LinearisedProblem, settings: SolverSettings) -> float:
    """How far below its bound a row may sit at OSQP's answer and still count as held."""
    return 10 * settings.of(OsqpSettings).eps_abs * max(1.0, float(np.max(np.abs(problem.rhs))))


def solve_from_rows(
    problem: LinearisedProblem, settings: SolverSettings, rows: np.ndarray, start: float, detail: str
) -> QPSolution | None:
    """OSQP's working set, started from the rows an undecided backend had in play and the rows OSQP
    starts from itself: its answer, or None where it does not decide the QP either.

    On an infeasible problem the iterates diverge and a backend may stall before its Farkas
    test fires, and on a rare feasible one (or, for the active-set method, one with rows in
    play that are nearly dependent) it stalls short of the tolerance. OSQP decides infeasibility,
    and its working set adds any row the answer on those rows violates.
    """
    if rows.size > FULL_SOLVE_MAX_ROWS:
        return None
    if settings.working_set:  # and the rows OSQP would have started from itself
        rows = np.union1d(rows, problem.rows_near_bound(settings.working_set_window))
    else:
        rows = np.arange(problem.n)
    check = solve_working_set(problem, replace(settings, backend=OSQP.name), rows, start)
    if check.status.has_solution or check.status.infeasible:
        after = f"OSQP from the {rows.size} rows in play, after the {detail}"
        return replace(check, solver_status=f"{after}: {check.solver_status}")
    return None


def solve_once(problem: LinearisedProblem, settings: SolverSettings) -> QPSolution:
    form = problem.pick_form() if settings.form == "auto" else QPForm(settings.form)
    if problem.n == 0:
        B = np.zeros((problem.rank, problem.d_in))
        return QPSolution(B, QPStatus.SOLVED, form, 0.0, 0, 0.0, "empty")
    fallback_from = None
    if form is QPForm.DUAL:
        B, result = _solve_dual(problem, settings)
        status = _status(form, result)
        if status in _DUAL_UNDECIDED:
            # ADMM detects unboundedness of the dual (= infeasible repair) slowly and may run
            # out of iterations on it; the primal form decides feasibility directly.
            form, fallback_from = QPForm.PRIMAL, QPForm.DUAL
    if form is QPForm.PRIMAL:
        B, result = _solve_primal(problem, settings)
        status = _status(form, result)
    if not status.has_solution or B is None or not np.all(np.isfinite(B)):
        if status.has_solution:
            status = QPStatus.ERROR
        B = None
        objective = math.nan
    else:
        objective = problem.primal_objective(B)
    return QPSolution(B, status, form, objective, int(result.info.iter), 0.0, str(result.info.status), fallback_from)


# Dual outcomes that can mean "the repair problem is infeasible" without OSQP saying so.
# Not TIME_LIMIT: the primal is the bigger form, and the time limit is a backstop, not a budget to double.
_DUAL_UNDECIDED = frozenset({QPStatus.MAX_ITER, QPStatus.INFEASIBLE_INACCURATE})


_OSQP_CHATTER = "Polishing not needed"
_STDOUT_LOCK = threading.Lock()


@contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Drop OSQP's "Polishing not needed ..." line, which verbose=False does not silence.

    The binding prints it through Python's sys.stdout, so that is what is swapped (under a
    lock: the swap is process-wide); any other text is passed on unchanged.
    """
    if sys.stdout is None:
        yield
        return
    with _STDOUT_LOCK:
        buffer = io.StringIO()
        with redirect_stdout(buffer):
            yield
        kept = [line for line in buffer.getvalue().splitlines(keepends=True) if _OSQP_CHATTER not in line]
        if kept:
            sys.stdout.write("".join(kept))


def _run(solver):
    with _quiet_stdout():
        return solver.solve(raise_error=False)


def _solve_dual(problem: LinearisedProblem, settings: SolverSettings):
    import osqp
    import scipy.sparse as sp

    n, n_fix = problem.n, problem.n_fix
    P = upper_csc(problem.gram() / problem.rho)
    upper = np.full(n, np.inf)
    upper[:n_fix] = problem.prices()
    solver = osqp.OSQP()
    solver.setup(
        P=P,
        q=-problem.rhs,
        A=sp.identity(n, format="csc"),
        l=np.zeros(n),
        u=upper,
        **settings.of(OsqpSettings).osqp_kwargs(settings.time_limit_s),
    )
    result = _run(solver)
    if result.x is None or result.x.shape != (n,) or not np.all(np.isfinite(result.x)):
        return None, result
    z = np.clip(result.x, 0.0, upper)  # ADMM iterates may sit a hair outside the box
    return problem.weighted_sum(z) / problem.rho, result  # B = Σ_i z_i c_i v_iᵀ / ρ


def _solve_primal(problem: LinearisedProblem, settings: SolverSettings):
    import osqp
    import scipy.sparse as sp

    n, n_fix, r, d = problem.n, problem.n_fix, problem.rank, problem.d_in
    K = np.einsum("ij,ik->ijk", problem.C, problem.row_representations()).reshape(n, r * d)
    slack_cols = sp.vstack([sp.identity(n_fix, format="csc"), sp.csc_matrix((n - n_fix, n_fix))])
    A = sp.bmat([[sp.csc_matrix(K), slack_cols], [None, sp.identity(n_fix, format="csc")]], format="csc")
    P = sp.diags(np.concatenate([np.full(r * d, problem.rho), np.zeros(n_fix)]), format="csc")
    q = np.concatenate([np.zeros(r * d), problem.prices()])
    lower = np.concatenate([problem.rhs, np.zeros(n_fix)])
    solver = osqp.OSQP()
    solver.setup(
        P=P,
        q=q,
        A=A,
        l=lower,
        u=np.full(n + n_fix, np.inf),
        **settings.of(OsqpSettings).osqp_kwargs(settings.time_limit_s),
    )
    result = _run(solver)
    if result.x is None or not np.all(np.isfinite(result.x)):
        return None, result
    return result.x[: r * d].reshape(r, d), result
