"""The linearised repair QP (paper eq. 5–8), in primal and dual form, solved with OSQP.

Rows of the constraint matrix are a_i = vec(c_i v_iᵀ) with c_i ∈ R^r and v_i ∈ R^{d_in};
the decision variable is β = vec(B), B ∈ R^{r×d_in} (row-major). The first ``n_fix`` rows
are must_fix constraints with a slack ξ_i ≥ 0 priced at λ; the rest are hard must_keep
constraints.

Primal:  min ρ/2‖β‖² + λ Σ ξ_i   s.t.  ⟨a_i, β⟩ + ξ_i ≥ h_i (fix),  ⟨a_p, β⟩ ≥ h_p (keep),  ξ ≥ 0
Dual:    min 1/(2ρ) zᵀGz − hᵀz   s.t.  0 ≤ z_i ≤ λ (fix),  z_p ≥ 0 (keep)
         with G = (C Cᵀ) ⊙ (V Vᵀ) and β = Kᵀz/ρ, i.e. B = Cᵀ diag(z) V / ρ.

The dual never forms K, and its size is the number of cases, not r·d_in (DESIGN.md §2).

Large must_keep sets (DESIGN.md §2, issue 6): ``solve`` adds hard rows lazily (cutting
planes). It solves with the soft rows and the hard rows within ``working_set_window`` of their
bound, checks every hard row in closed form at the solution
(O(n·r·d_in) with the low-rank factors, never n×n), adds the violated ones and re-solves until
none is. A relaxation whose optimum is feasible for the whole problem is the whole problem's
optimum (and β is unique: the objective is strictly convex in β), so the answer is the same.
"""

from __future__ import annotations

import enum
import io
import math
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field, replace

import numpy as np

from warp_check.qp import active_set, ipm
from warp_check.qp.settings import SolverSettings


class QPStatus(str, enum.Enum):
    """What the solve means for repair, independent of which form was solved."""

    SOLVED = "solved"
    SOLVED_INACCURATE = "solved_inaccurate"  # tolerances met only 10× looser: usable, flagged
    INFEASIBLE = "infeasible"  # the must_keep constraints cannot all hold
    INFEASIBLE_INACCURATE = "infeasible_inaccurate"
    MAX_ITER = "max_iter_reached"
    TIME_LIMIT = "time_limit_reached"
    STALLED = "stalled"  # the interior-point method stopped progressing short of its tolerance
    INTERRUPTED = "interrupted"
    ERROR = "solver_error"  # a status that cannot happen for this problem class

    @property
    def has_solution(self) -> bool:
        return self in (QPStatus.SOLVED, QPStatus.SOLVED_INACCURATE)


class QPForm(str, enum.Enum):
    PRIMAL = "primal"
    DUAL = "dual"


# OSQP 1.x status values (osqp.SolverStatus) → our meaning, per form. In the dual form the
# QP we hand OSQP is the Lagrange dual: its *dual* infeasibility (unbounded below) is what
# certifies that the repair problem itself is infeasible, and its primal can never be
# infeasible (z = 0 is always feasible).
_OSQP_STATUS: dict[QPForm, dict[int, QPStatus]] = {
    QPForm.PRIMAL: {
        1: QPStatus.SOLVED,
        2: QPStatus.SOLVED_INACCURATE,
        3: QPStatus.INFEASIBLE,
        4: QPStatus.INFEASIBLE_INACCURATE,
        5: QPStatus.ERROR,  # unbounded: impossible, the objective is bounded below by 0
        6: QPStatus.ERROR,
        7: QPStatus.MAX_ITER,
        8: QPStatus.TIME_LIMIT,
        9: QPStatus.ERROR,  # non-convex: impossible, P is PSD by construction
        10: QPStatus.INTERRUPTED,
        11: QPStatus.ERROR,
    },
    QPForm.DUAL: {
        1: QPStatus.SOLVED,
        2: QPStatus.SOLVED_INACCURATE,
        3: QPStatus.ERROR,  # impossible: z = 0 is feasible
        4: QPStatus.ERROR,
        5: QPStatus.INFEASIBLE,
        6: QPStatus.INFEASIBLE_INACCURATE,
        7: QPStatus.MAX_ITER,
        8: QPStatus.TIME_LIMIT,
        9: QPStatus.ERROR,
        10: QPStatus.INTERRUPTED,
        11: QPStatus.ERROR,
    },
}


# The largest dual the form choice picks past r·d_in rows: its dense Gram is 288 MB there.
DUAL_MAX_ROWS = 6_000


@dataclass(frozen=True)
class LinearisedProblem:
    """One QP of the repair loop, built only from cached representations.

    ``C`` (n, r): the per-case coefficients c_i = Uᵀ J_i (w_y − w_ĉ);
    ``V`` (n, d_in): the representations; ``rhs`` (n,): h_i = target_i − gap_i;
    rows [0, n_fix) are soft (must_fix; the loop also makes must_keep rows that are short
    now elastic, at a higher price), the rest hard. ``lam`` prices a unit of slack: one
    number for every soft row (the paper's λ) or one per soft row.

    With ``cases`` given, ``V`` holds one representation per *case* (n_cases, d_in) and row
    i is case ``cases[i]`` (several rows may share a case: one per competing class); ``VVt``,
    if given, is then over cases too. The loop uses this so that no (rows, d_in) copy of V is
    made: with 100k must_keep cases that copy alone would be 600 MB.
    """

    C: np.ndarray
    V: np.ndarray
    rhs: np.ndarray
    n_fix: int
    rho: float
    lam: float | np.ndarray
    VVt: np.ndarray | None = field(default=None, repr=False)  # cached V Vᵀ, constant in the loop
    # Which rows/columns of VVt belong to this problem's rows (None: all, in order), when V
    # is per row (``cases`` None). Kept for callers that index a Gram matrix of their own.
    VVt_rows: np.ndarray | None = field(default=None, repr=False)
    cases: np.ndarray | None = field(default=None, repr=False)  # row → row of V (and of VVt)

    def __post_init__(self) -> None:
        if self.cases is not None and self.VVt_rows is not None:
            raise ValueError("LinearisedProblem: give cases or VVt_rows, not both")
        rows = self.C.shape[0]
        index_rows = rows if self.cases is None else self.cases.shape[0]
        if self.V.ndim != 2 or self.rhs.shape != (rows,) or index_rows != rows:
            raise ValueError(
                f"LinearisedProblem shapes disagree: C {self.C.shape}, V {self.V.shape}, rhs {self.rhs.shape}"
            )
        if self.cases is None and self.V.shape[0] != rows:
            raise ValueError(f"LinearisedProblem: V has {self.V.shape[0]} rows for {rows} constraint rows")

    @property
    def n(self) -> int:
        return int(self.C.shape[0])

    @property
    def rank(self) -> int:
        return int(self.C.shape[1])

    @property
    def d_in(self) -> int:
        return int(self.V.shape[1])

    def prices(self) -> np.ndarray:
        """λ per soft row."""
        lam = np.asarray(self.lam, dtype=np.float64)
        return np.broadcast_to(lam, (self.n_fix,)) if lam.ndim == 0 else lam

    def row_representations(self) -> np.ndarray:
        """(n, d_in): v of every row (a copy when rows index cases; only the primal needs it)."""
        return self.V if self.cases is None else self.V[self.cases]

    def constraint_values(self, B: np.ndarray) -> np.ndarray:
        """⟨a_i, β⟩ = c_iᵀ B v_i for every row: O(n·r·d_in), through V Bᵀ (cases × r)."""
        VB = self.V @ B.T
        if self.cases is not None:
            VB = VB[self.cases]
        return np.einsum("ij,ij->i", self.C, VB)

    def weighted_sum(self, weights: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Kᵀw = Σ_i w_i c_i v_iᵀ over ``rows`` (every row when None), as an (r, d_in) matrix.

        Rows that share a case are summed first: one product per distinct case.
        """
        rows = np.arange(self.n) if rows is None else rows
        weighted = self.C[rows] * weights[:, None]
        if self.cases is None:
            return weighted.T @ self.V[rows]
        distinct, row_of = np.unique(self.cases[rows], return_inverse=True)
        per_case = np.zeros((distinct.size, self.rank))
        np.add.at(per_case, row_of, weighted)
        return per_case.T @ self.V[distinct]

    def primal_objective(self, B: np.ndarray) -> float:
        slack = np.maximum(self.rhs[: self.n_fix] - self.constraint_values(B)[: self.n_fix], 0.0)
        return 0.5 * self.rho * float(np.sum(B * B)) + float(self.prices() @ slack)

    def subset(self, rows: np.ndarray) -> LinearisedProblem:
        """The problem restricted to ``rows`` (sorted; must_fix rows first, as here)."""
        n_fix = int(np.count_nonzero(rows < self.n_fix))
        lam = self.lam if np.ndim(self.lam) == 0 else np.asarray(self.lam)[rows[:n_fix]]
        if self.cases is not None:  # V stays shared: only the row → case map is cut
            return LinearisedProblem(
                self.C[rows], self.V, self.rhs[rows], n_fix, self.rho, lam, self.VVt, cases=self.cases[rows]
            )
        VVt_rows = rows if self.VVt_rows is None else self.VVt_rows[rows]
        return LinearisedProblem(
            self.C[rows], self.V[rows], self.rhs[rows], n_fix, self.rho, lam, self.VVt, VVt_rows
        )

    def gram(self) -> np.ndarray:
        """(n, n): G = (C Cᵀ) ⊙ (V Vᵀ) over this problem's rows (call it on a working set)."""
        if self.cases is not None:
            if self.VVt is not None:
                VVt = self.VVt[np.ix_(self.cases, self.cases)]
            else:  # one product per distinct case, spread to the rows that share it
                distinct, row_of = np.unique(self.cases, return_inverse=True)
                Vd = self.V[distinct]
                VVt = (Vd @ Vd.T)[np.ix_(row_of, row_of)]
        elif self.VVt is None:
            VVt = self.V @ self.V.T
        elif self.VVt_rows is None:
            VVt = self.VVt
        else:
            VVt = self.VVt[np.ix_(self.VVt_rows, self.VVt_rows)]
        return (self.C @ self.C.T) * VVt

    def pick_form(self) -> QPForm:
        """Dual up to 4·r·d_in rows (at most DUAL_MAX_ROWS), else primal.

        The n² vs n·r·d_in count of non-zeros undersells the dual: OSQP needs ~100 ADMM
        iterations on it and thousands on the primal. Measured (d_in = 768, r = 2, 1,606 rows,
        a working set of 10k must_keep): dual 2.6 s, primal 45 s. Past 4·r·d_in rows, or when
        the Gram matrix would be large, the primal's size no longer grows as n².
        """
        rows = min(4 * self.rank * self.d_in, DUAL_MAX_ROWS)
        return QPForm.DUAL if self.n <= max(rows, self.rank * self.d_in) else QPForm.PRIMAL


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
    backend: str = "osqp"  # "osqp" | "ipm" | "active_set"
    handed_over_from: str | None = None  # the backend that could not decide and passed its rows to OSQP

    @property
    def working_set_size(self) -> int | None:
        return None if self.rows is None else int(self.rows.size)


# The whole problem is solved at once, when the working set does not settle, only up to this
# many rows: beyond it the dual's n×n Gram matrix (and the primal's n×r·d_in K) is the very
# memory the working set exists to avoid, so the solve fails with a status that says so.
FULL_SOLVE_MAX_ROWS = 5_000
WORKING_SET_UNSETTLED = "working set unsettled"


def solve(problem: LinearisedProblem, settings: SolverSettings | None = None) -> QPSolution:
    """Solve the linearised QP with the backend and in the form the settings ask for.

    With ``settings.working_set`` the hard rows are added lazily; every row of the full
    problem holds at the returned B (to the solver tolerance) either way.
    """
    settings = settings or SolverSettings()
    start = time.perf_counter()
    backend = pick_backend(problem, settings)
    if backend == "ipm":
        return _solve_ipm(problem, settings, start)
    if backend == "active_set":
        return _solve_active_set(problem, settings, start)
    if not settings.working_set or problem.n == problem.n_fix:
        solution = _solve_once(problem, settings)
        return replace(solution, seconds=time.perf_counter() - start)
    return _solve_working_set(problem, settings, _initial_working_set(problem, settings.working_set_window), start)


def _solve_working_set(
    problem: LinearisedProblem, settings: SolverSettings, rows: np.ndarray, start: float
) -> QPSolution:
    """OSQP on ``rows`` (sorted, every soft row among them), adding violated hard rows in rounds."""
    iterations = 0
    tolerance = _row_tolerance(problem, settings)
    rounds = 0
    for _ in range(settings.working_set_rounds):
        rounds += 1
        solution = _solve_once(problem.subset(rows), settings)
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
            return replace(failed, seconds=time.perf_counter() - start, rows=rows, rounds=rounds)
        solution = _solve_once(problem, settings)  # no fixed point in time: solve it whole
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


def pick_backend(problem: LinearisedProblem, settings: SolverSettings) -> str:
    if settings.backend != "auto":
        return settings.backend
    # A form named in the settings is OSQP's form: the IPM solves the primal only, the
    # active-set method the dual only, and neither is picked against the other's form.
    if problem.n - problem.n_fix < settings.ipm_min_rows or settings.form == "dual":
        return "osqp"
    if problem.rank * problem.d_in <= settings.ipm_max_unknowns:
        return "ipm"
    return "active_set" if settings.form == "auto" else "osqp"


# The interior-point method's outcomes → our meaning (explicit, as for OSQP's statuses).
_IPM_STATUS: dict[str, QPStatus] = {
    "solved": QPStatus.SOLVED,
    "solved inaccurate": QPStatus.SOLVED_INACCURATE,
    "infeasible": QPStatus.INFEASIBLE,
    "infeasible inaccurate": QPStatus.INFEASIBLE_INACCURATE,
    "iteration limit": QPStatus.MAX_ITER,
    "time limit": QPStatus.TIME_LIMIT,
    "stalled": QPStatus.STALLED,
}


def _solve_ipm(problem: LinearisedProblem, settings: SolverSettings, start: float) -> QPSolution:
    if settings.working_set:
        rows = _initial_working_set(problem, settings.working_set_window)
    else:
        rows = np.arange(problem.n)
    result = ipm.solve(
        problem,
        rows,
        tolerance=settings.ipm_tolerance,
        max_iter=settings.ipm_max_iter,
        time_limit_s=settings.time_limit_s,
    )
    return _answer(problem, settings, start, result, "ipm")


# Outcomes of the IPM and the active-set method that may hide an infeasible problem (see
# _osqp_on_rows_in_play).
_UNDECIDED = frozenset({QPStatus.STALLED, QPStatus.MAX_ITER, QPStatus.TIME_LIMIT})


def _osqp_on_rows_in_play(
    problem: LinearisedProblem,
    settings: SolverSettings,
    rows: np.ndarray,
    status: QPStatus,
    detail: str,
    start: float,
    backend: str,
) -> QPSolution | tuple[QPStatus, str]:
    """OSQP's working set, started from the rows an undecided backend had in play and the rows
    OSQP starts from itself: its answer, or (status, detail) to report.

    On an infeasible problem the iterates diverge and a backend may stall before its Farkas
    test fires, and on a rare feasible one (or, for the active-set method, one with rows in
    play that are nearly dependent) it stalls short of the tolerance. OSQP decides infeasibility,
    and its working set adds any row the answer on those rows violates.
    """
    if rows.size > FULL_SOLVE_MAX_ROWS:
        return status, detail
    if settings.working_set:  # and the rows OSQP would have started from itself
        rows = np.union1d(rows, _initial_working_set(problem, settings.working_set_window))
    else:
        rows = np.arange(problem.n)
    check = _solve_working_set(problem, replace(settings, backend="osqp"), rows, start)
    if check.status.has_solution or check.status in (QPStatus.INFEASIBLE, QPStatus.INFEASIBLE_INACCURATE):
        after = f"OSQP from the {rows.size} rows in play, after the {detail}"
        return replace(check, solver_status=f"{after}: {check.solver_status}", handed_over_from=backend)
    return status, detail


# The active-set method's outcomes → our meaning.
_ACTIVE_SET_STATUS: dict[str, QPStatus] = {
    "solved": QPStatus.SOLVED,
    "infeasible": QPStatus.INFEASIBLE,
    "infeasible inaccurate": QPStatus.INFEASIBLE_INACCURATE,
    "iteration limit": QPStatus.MAX_ITER,
    "time limit": QPStatus.TIME_LIMIT,
    "stalled": QPStatus.STALLED,
}


def _solve_active_set(problem: LinearisedProblem, settings: SolverSettings, start: float) -> QPSolution:
    result = active_set.solve(
        problem,
        tolerance=settings.active_set_tolerance,
        max_iter=settings.active_set_max_iter,
        time_limit_s=settings.time_limit_s,
        join_at_most=active_set.JOIN_AT_MOST if settings.working_set else None,
        stall_after=active_set.STALL_ITERATIONS,
    )
    return _answer(problem, settings, start, result, "active_set")


# What each backend besides OSQP reports as: its outcome table, its words, the form it solves.
_BACKENDS: dict[str, tuple[dict[str, QPStatus], str, QPForm]] = {
    "ipm": (_IPM_STATUS, "interior point", QPForm.PRIMAL),
    "active_set": (_ACTIVE_SET_STATUS, "active set", QPForm.DUAL),
}


def _answer(problem: LinearisedProblem, settings: SolverSettings, start: float, result, backend: str) -> QPSolution:
    """The QPSolution of a qp_ipm or qp_active_set result: its outcome through the backend's
    table; an undecided one goes to OSQP's working set, started from the rows it had in play."""
    table, words, form = _BACKENDS[backend]
    status = table[result.outcome.value]
    detail = f"{words}: {result.outcome.value} ({result.detail})"
    if status in _UNDECIDED:
        checked = _osqp_on_rows_in_play(problem, settings, result.rows, status, detail, start, backend)
        if isinstance(checked, QPSolution):
            return checked
        status, detail = checked
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


def _row_tolerance(problem: LinearisedProblem, settings: SolverSettings) -> float:
    """How far below its bound a row may sit at OSQP's answer and still count as held."""
    return 10 * settings.eps_abs * max(1.0, float(np.max(np.abs(problem.rhs))))


def _initial_working_set(problem: LinearisedProblem, window: float) -> np.ndarray:
    """Soft rows and the hard rows within ``window`` of violation at β = 0 (sorted).

    In the loop a must_keep row's bound is −(gap − γ_h − aim): the rows a step is most likely
    to break start in the set. (Starting from the rows that bound the previous iteration's
    QP as well was tried, with both backends: the binding set moves between iterations; with
    OSQP the sets grew by a quarter and the QPs took longer, with the interior-point method
    the second 10k QP took 25 iterations instead of 22.)
    """
    hard = problem.n_fix + np.flatnonzero(problem.rhs[problem.n_fix :] > -window)
    return np.concatenate([np.arange(problem.n_fix), hard])


def _solve_once(problem: LinearisedProblem, settings: SolverSettings) -> QPSolution:
    form = problem.pick_form() if settings.form == "auto" else QPForm(settings.form)
    if problem.n == 0:
        B = np.zeros((problem.rank, problem.d_in))
        return QPSolution(B, QPStatus.SOLVED, form, 0.0, 0, 0.0, "empty")
    fallback_from = None
    if form is QPForm.DUAL:
        B, result = _solve_dual(problem, settings)
        status = _OSQP_STATUS[form].get(int(result.info.status_val), QPStatus.ERROR)
        if status in _DUAL_UNDECIDED:
            # ADMM detects unboundedness of the dual (= infeasible repair) slowly and may run
            # out of iterations on it; the primal form decides feasibility directly.
            form, fallback_from = QPForm.PRIMAL, QPForm.DUAL
    if form is QPForm.PRIMAL:
        B, result = _solve_primal(problem, settings)
        status = _OSQP_STATUS[form].get(int(result.info.status_val), QPStatus.ERROR)
    if not status.has_solution or B is None or not np.all(np.isfinite(B)):
        if status.has_solution:
            status = QPStatus.ERROR
        B = None
        objective = math.nan
    else:
        objective = problem.primal_objective(B)
    return QPSolution(
        B, status, form, objective, int(result.info.iter), 0.0, str(result.info.status), fallback_from
    )


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


def _upper_csc(symmetric: np.ndarray):
    """The upper triangle of a dense symmetric matrix as CSC, built without a dense→sparse scan."""
    import scipy.sparse as sp

    n = symmetric.shape[0]
    # Column j of the upper triangle holds rows 0..j: that is row j of the lower triangle.
    cols, rows = np.tril_indices(n)
    indptr = np.concatenate([[0], np.cumsum(np.arange(1, n + 1))])
    return sp.csc_matrix((symmetric[cols, rows], rows, indptr), shape=(n, n))


def _solve_dual(problem: LinearisedProblem, settings: SolverSettings):
    import osqp
    import scipy.sparse as sp

    n, n_fix = problem.n, problem.n_fix
    P = _upper_csc(problem.gram() / problem.rho)
    upper = np.full(n, np.inf)
    upper[:n_fix] = problem.prices()
    solver = osqp.OSQP()
    solver.setup(
        P=P,
        q=-problem.rhs,
        A=sp.identity(n, format="csc"),
        l=np.zeros(n),
        u=upper,
        **settings.osqp_kwargs(),
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
    solver.setup(P=P, q=q, A=A, l=lower, u=np.full(n + n_fix, np.inf), **settings.osqp_kwargs())
    result = _run(solver)
    if result.x is None or not np.all(np.isfinite(result.x)):
        return None, result
    return result.x[: r * d].reshape(r, d), result
