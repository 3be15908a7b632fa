"""The linearised repair QP (paper eq. 5–8), in primal and dual form, solved with OSQP.

Rows of the constraint matrix are a_i = vec(c_i v_iᵀ) with c_i ∈ R^r and v_i ∈ R^{d_in};
the decision variable is β = vec(B), B ∈ R^{r×d_in} (row-major). The first ``n_fix`` rows
are must_fix constraints with a slack ξ_i ≥ 0 priced at λ; the rest are hard must_keep
constraints.

Primal:  min ρ/2‖β‖² + λ Σ ξ_i   s.t.  ⟨a_i, β⟩ + ξ_i ≥ h_i (fix),  ⟨a_p, β⟩ ≥ h_p (keep),  ξ ≥ 0
Dual:    min 1/(2ρ) zᵀGz − hᵀz   s.t.  0 ≤ z_i ≤ λ (fix),  z_p ≥ 0 (keep)
         with G = (C Cᵀ) ⊙ (V Vᵀ) and β = Kᵀz/ρ, i.e. B = Cᵀ diag(z) V / ρ.

The dual never forms K, and its size is the number of cases, not r·d_in (DESIGN.md §2).
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

from .errors import SettingsError


class QPStatus(str, enum.Enum):
    """What the solve means for repair, independent of which form was solved."""

    SOLVED = "solved"
    SOLVED_INACCURATE = "solved_inaccurate"  # tolerances met only 10× looser: usable, flagged
    INFEASIBLE = "infeasible"  # the must_keep constraints cannot all hold
    INFEASIBLE_INACCURATE = "infeasible_inaccurate"
    MAX_ITER = "max_iter_reached"
    TIME_LIMIT = "time_limit_reached"
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


@dataclass(frozen=True, kw_only=True)
class SolverSettings:
    """OSQP settings, all spelled out: OSQP's defaults (eps 1e-3) are far too loose here."""

    form: str = "auto"  # "auto" | "primal" | "dual"
    eps_abs: float = 1e-7
    eps_rel: float = 1e-7
    eps_infeasible: float = 1e-7
    max_iter: int = 20_000
    time_limit_s: float = 600.0  # per solve; a backstop, not a tuning knob
    polishing: bool = True
    polish_refine_iter: int = 10
    scaling: int = 10
    sigma: float = 1e-6
    # Lazy must_keep constraints (cutting planes): solve with the must_fix rows and the
    # must_keep rows that are violated now, add every row the solution violates, repeat.
    # The final answer is the optimum of the full problem; most must_keep rows never enter.
    working_set: bool = True
    working_set_rounds: int = 50

    def __post_init__(self) -> None:
        if self.form not in ("auto", "primal", "dual"):
            raise SettingsError("form", self.form, "must be 'auto', 'primal' or 'dual'")
        for name in ("eps_abs", "eps_rel", "eps_infeasible", "sigma"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 < value < 1):
                raise SettingsError(name, value, "must be a number in (0, 1)")
        if not (isinstance(self.max_iter, int) and self.max_iter >= 1):
            raise SettingsError("max_iter", self.max_iter, "must be an integer >= 1")
        if not (math.isfinite(self.time_limit_s) and self.time_limit_s > 0):
            raise SettingsError("time_limit_s", self.time_limit_s, "must be a positive number")
        if not (isinstance(self.polish_refine_iter, int) and self.polish_refine_iter >= 0):
            raise SettingsError("polish_refine_iter", self.polish_refine_iter, "must be >= 0")
        if not (isinstance(self.scaling, int) and self.scaling >= 0):
            raise SettingsError("scaling", self.scaling, "must be an integer >= 0")
        if not (isinstance(self.working_set_rounds, int) and self.working_set_rounds >= 1):
            raise SettingsError("working_set_rounds", self.working_set_rounds, "must be >= 1")

    def osqp_kwargs(self) -> dict[str, object]:
        return {
            "verbose": False,
            "eps_abs": self.eps_abs,
            "eps_rel": self.eps_rel,
            "eps_prim_inf": self.eps_infeasible,
            "eps_dual_inf": self.eps_infeasible,
            "max_iter": self.max_iter,
            "time_limit": self.time_limit_s,
            "polishing": self.polishing,
            "polish_refine_iter": self.polish_refine_iter,
            "scaling": self.scaling,
            "sigma": self.sigma,
            "warm_starting": False,
        }


@dataclass(frozen=True)
class LinearisedProblem:
    """One QP of the repair loop, built only from cached representations.

    ``C`` (n, r): the per-case coefficients c_i = Uᵀ J_i (w_y − w_ĉ);
    ``V`` (n, d_in): the representations; ``rhs`` (n,): h_i = target_i − gap_i;
    rows [0, n_fix) are soft (must_fix; the loop also makes must_keep rows that are short
    now elastic, at a higher price), the rest hard. ``lam`` prices a unit of slack: one
    number for every soft row (the paper's λ) or one per soft row.
    """

    C: np.ndarray
    V: np.ndarray
    rhs: np.ndarray
    n_fix: int
    rho: float
    lam: float | np.ndarray
    VVt: np.ndarray | None = field(default=None, repr=False)  # cached V Vᵀ, constant in the loop
    # Which rows/columns of VVt belong to this problem's rows (None: all, in order). The
    # loop's V Vᵀ is over cases; rows are (case, class) pairs, subsets of them lazily drawn.
    VVt_rows: np.ndarray | None = field(default=None, repr=False)

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

    def constraint_values(self, B: np.ndarray) -> np.ndarray:
        """⟨a_i, β⟩ = c_iᵀ B v_i for every row."""
        return np.einsum("ij,ij->i", self.C, self.V @ B.T)

    def primal_objective(self, B: np.ndarray) -> float:
        slack = np.maximum(self.rhs[: self.n_fix] - self.constraint_values(B)[: self.n_fix], 0.0)
        return 0.5 * self.rho * float(np.sum(B * B)) + float(self.prices() @ slack)

    def subset(self, rows: np.ndarray) -> LinearisedProblem:
        """The problem restricted to ``rows`` (sorted; must_fix rows first, as here)."""
        n_fix = int(np.count_nonzero(rows < self.n_fix))
        lam = self.lam if np.ndim(self.lam) == 0 else np.asarray(self.lam)[rows[:n_fix]]
        VVt_rows = rows if self.VVt_rows is None else self.VVt_rows[rows]
        return LinearisedProblem(
            self.C[rows], self.V[rows], self.rhs[rows], n_fix, self.rho, lam, self.VVt, VVt_rows
        )

    def gram(self) -> np.ndarray:
        if self.VVt is None:
            VVt = self.V @ self.V.T
        elif self.VVt_rows is None:
            VVt = self.VVt
        else:
            VVt = self.VVt[np.ix_(self.VVt_rows, self.VVt_rows)]
        return (self.C @ self.C.T) * VVt

    def pick_form(self) -> QPForm:
        """Dual when its n² Gram entries are fewer than the primal's n·r·d_in."""
        return QPForm.DUAL if self.n <= self.rank * self.d_in else QPForm.PRIMAL


@dataclass(frozen=True)
class QPSolution:
    B: np.ndarray | None  # (r, d_in); None unless status.has_solution
    status: QPStatus
    form: QPForm
    objective: float
    iterations: int
    seconds: float
    osqp_status: str
    fallback_from: QPForm | None = None  # the dual was undecided and the primal answered


def solve(problem: LinearisedProblem, settings: SolverSettings | None = None) -> QPSolution:
    """Solve the linearised QP in the form the settings ask for (or the cheaper one).

    With ``settings.working_set`` the must_keep rows are added lazily; every row of the full
    problem holds at the returned B (to the solver tolerance) either way.
    """
    settings = settings or SolverSettings()
    start = time.perf_counter()
    if not settings.working_set or problem.n == problem.n_fix:
        solution = _solve_once(problem, settings)
        return replace(solution, seconds=time.perf_counter() - start)
    rows = np.concatenate([np.arange(problem.n_fix), problem.n_fix + np.flatnonzero(problem.rhs[problem.n_fix :] > 0)])
    iterations = 0
    tolerance = 10 * settings.eps_abs * max(1.0, float(np.max(np.abs(problem.rhs))))
    for _ in range(settings.working_set_rounds):
        solution = _solve_once(problem.subset(rows), settings)
        iterations += solution.iterations
        if not solution.status.has_solution:
            break
        slack = problem.constraint_values(solution.B) - problem.rhs
        slack[: problem.n_fix] = 0.0  # must_fix rows are soft: their slack is priced, not required
        violated = np.flatnonzero(slack < -tolerance)
        new = np.setdiff1d(violated, rows, assume_unique=False)
        if new.size == 0:
            break
        rows = np.union1d(rows, new)
    else:
        solution = _solve_once(problem, settings)  # no fixed point in time: solve it whole
        iterations += solution.iterations
    objective = problem.primal_objective(solution.B) if solution.status.has_solution else math.nan
    return replace(solution, objective=objective, iterations=iterations, seconds=time.perf_counter() - start)


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
    B = (problem.C * z[:, None]).T @ problem.V / problem.rho
    return B, result


def _solve_primal(problem: LinearisedProblem, settings: SolverSettings):
    import osqp
    import scipy.sparse as sp

    n, n_fix, r, d = problem.n, problem.n_fix, problem.rank, problem.d_in
    K = np.einsum("ij,ik->ijk", problem.C, problem.V).reshape(n, r * d)
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
