"""The interior-point backend of the repair QP: β space, for must_keep sets of tens of thousands.

OSQP solves a working set's dense dual with a sparse LDLᵀ (no BLAS) and hundreds of ADMM
iterations; with 100k must_keep rows the optimum is pinned by ~r·d_in rows and OSQP's working
set grows to thousands. This method works on β = vec(B) ∈ R^p, p = r·d_in, with every row's
slack explicit:

    min ρ/2‖β‖² + λᵀξ   s.t.   Kβ + Eξ − s = h,   s ≥ 0,  ξ ≥ 0      (E: the soft rows)

Mehrotra's predictor–corrector. A Newton step solves with the normal matrix ρI + K_Qᵀ D_Q K_Q
(p × p, dense Cholesky) over the rows Q whose weight d_i‖a_i‖² matters: a row far from its
bound weighs ~0 and is left out (constraint reduction), so a step costs O(|Q|·p²) however
many rows are in play. Hard rows join lazily: the iterate is checked against every row in
closed form (O(n·r·d_in)) and violated rows join *while the iterations run*, so the central
path accounts for them before it converges (joining in rounds after convergence, as OSQP's
working set does, needs dozens of rounds at 100k rows).

The answer is accepted only when the residuals on the rows in play meet the tolerance and a
final check of every row finds none violated; that check is what makes the lazy answer the
whole problem's optimum (a relaxation whose optimum is feasible is optimal).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from warp_check.qp.backends.ipm import IPM, IpmSettings
from warp_check.qp.linalg import FARKAS_INFEASIBLE, farkas_ratio, shifted_cholesky
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.settings import SolverSettings
from warp_check.qp.solution import BackendRun, Outcome, QPForm, QPSolution, WarmStart, answer_or_hand_over

# Mehrotra's step back from the boundary.
STEP_TO_BOUNDARY = 0.995
# Constraint reduction: rows are left out of the normal matrix, lightest first, while the
# weight left out totals at most this fraction of ρ (the step stays a Newton step up to
# that relative error in the matrix); at least p rows stay in it when there are p.
DROPPED_WEIGHT = 0.1
# ... but never more than this many times p rows, even when the weight left out is then
# larger (degenerate optima with more than 3p heavy rows): the heaviest carry the step's
# direction, and a larger matrix costs more than the extra iterations save (10k first QP:
# 9.8 s at 3p against 11.0 s uncapped; 2p and 1.5p cost iterations).
MAX_REDUCED_ROWS = 3
# Hard rows are checked for violation every this many iterations (and at convergence); at
# most p of them, the most violated, join at a check: at 100k must_keep the first checks find
# tens of thousands violated, most of which the next iterates satisfy anyway (first 100k QP:
# 34k rows in play and 40 s without the cap, 9k rows and 21–25 s with it).
CHECK_EVERY = 2
JOIN_AT_MOST_P = 1  # × p rows per check
# A step is cut back until no complementarity product falls below this fraction of their
# mean: a pair driven to ~0 early (a row joining late, a must_fix row at its price bound)
# otherwise blocks every later step.
CENTRALITY = 1e-3
# Re-centring when rows join (see _recentre): pairs are lifted to μ ≥ this × the worst
# violation × the mean multiplier. Small, because rows join often and early (10k first QP:
# 19 iterations at 0.01, 29 at 0.1, 46 at 1); a stall re-centres again at full strength.
RECENTRE_ON_JOIN = 0.01
RECENTRE_ON_STALL = 1.0
# Stalled: the residual has not halved in this many iterations (and no row joined).
STALL_ITERATIONS = 6


class _RowsInPlay:
    """The rows the iterations see: C, a gathered copy of V, bounds; soft rows first."""

    def __init__(self, problem, rows: np.ndarray) -> None:
        self.problem = problem
        self.index = np.asarray(rows, dtype=np.int64)
        self.C = np.ascontiguousarray(problem.C[self.index])
        cases = self.index if problem.cases is None else problem.cases[self.index]
        self.V = np.ascontiguousarray(problem.V[cases])
        self.h = problem.rhs[self.index].astype(np.float64)
        self.norm2 = np.sum(self.C**2, axis=1) * np.sum(self.V**2, axis=1)  # ‖a_i‖²

    def add(self, rows: np.ndarray) -> None:
        more = _RowsInPlay(self.problem, rows)
        self.index = np.concatenate([self.index, more.index])
        self.C = np.vstack([self.C, more.C])
        self.V = np.vstack([self.V, more.V])
        self.h = np.concatenate([self.h, more.h])
        self.norm2 = np.concatenate([self.norm2, more.norm2])

    @property
    def m(self) -> int:
        return int(self.h.size)

    def K(self, B: np.ndarray) -> np.ndarray:
        """⟨a_i, β⟩ for the rows in play."""
        return np.einsum("ij,ij->i", self.C, self.V @ B.T)

    def KT(self, y: np.ndarray) -> np.ndarray:
        """Σ_i y_i a_i as an (r, d_in) matrix."""
        return (self.C * y[:, None]).T @ self.V

    def normal_matrix(self, rows: np.ndarray, weights: np.ndarray, rho: float) -> np.ndarray:
        """ρI + K_Qᵀ diag(weights) K_Q, lower triangle (p × p).

        Always float64: formed in float32 early on (half the time), the first 100k QP stalled
        at residual 0.16 — the weights span too many orders of magnitude for 7 digits.
        """
        from scipy.linalg.blas import dsyrk

        scaled = self.C[rows] * np.sqrt(weights)[:, None]
        KQ = (scaled[:, :, None] * self.V[rows][:, None, :]).reshape(rows.size, -1)
        M = dsyrk(1.0, KQ, trans=1, lower=1)
        M[np.diag_indices_from(M)] += rho
        return M


def _reduced_rows(weight: np.ndarray, rho: float, keep_at_least: int, keep_at_most: int) -> np.ndarray:
    """The heaviest rows such that the weight left out is ≤ DROPPED_WEIGHT·ρ (sorted)."""
    m = weight.size
    if m <= keep_at_least:
        return np.arange(m)
    order = np.argsort(weight)
    dropped = int(np.searchsorted(np.cumsum(weight[order]), DROPPED_WEIGHT * rho, side="right"))
    kept = min(max(m - dropped, keep_at_least), keep_at_most, m)
    return np.sort(order[m - kept :])


def _max_step(x: np.ndarray, dx: np.ndarray) -> float:
    falling = dx < 0
    return float(np.min(-x[falling] / dx[falling], initial=np.inf))


@dataclass
class _Iterate:
    """B and, per row in play, Kβ, the slack s and multiplier z; per soft row ξ and its multiplier w."""

    B: np.ndarray
    Kb: np.ndarray
    s: np.ndarray
    z: np.ndarray
    xi: np.ndarray
    w: np.ndarray

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        return np.concatenate([self.s, self.xi]), np.concatenate([self.z, self.w])

    def mu(self) -> float:
        x, y = self.pairs()
        return float(x @ y) / x.size

    def moved(self, step: _Iterate, alpha: float) -> _Iterate:
        return _Iterate(*(a + alpha * b for a, b in zip(self.astuple(), step.astuple(), strict=True)))

    def astuple(self) -> tuple[np.ndarray, ...]:
        return (self.B, self.Kb, self.s, self.z, self.xi, self.w)

    def longest_step(self, step: _Iterate) -> float:
        return min(_max_step(x, dx) for x, dx in zip(self.astuple()[2:], step.astuple()[2:], strict=True))


class _NewtonSystem:
    """One iteration's linearised KKT system, reduced to β by eliminating s, z, ξ and w.

    (ρI + Kᵀ D K) Δβ = Kᵀg − r_d with D = z/s on hard rows and 1/(s/z + ξ/w) on soft ones;
    the matrix is factored once (over the reduced rows) for the predictor and the corrector.
    """

    def __init__(self, rows: _RowsInPlay, it: _Iterate, lam: np.ndarray, rho: float) -> None:
        self.rows, self.it, self.rho = rows, it, rho
        self.factor, self.weight = None, None  # set by factorise()
        n_fix = it.xi.size
        self.soft = slice(0, n_fix)
        self.r_dual = rho * it.B - rows.KT(it.z)
        self.r_primal = it.Kb - it.s - rows.h
        self.r_primal[self.soft] += it.xi
        self.r_price = lam - it.z[self.soft] - it.w  # ≈ 0; kept so that w cannot drift from λ − z

    def direction(self, r_s: np.ndarray, r_x: np.ndarray) -> _Iterate:
        """The step that solves the linearised KKT system with z∘Δs + s∘Δz = −r_s and
        w∘Δξ + ξ∘Δw = −r_x (predictor: r_s = s∘z; corrector: Mehrotra's, centred)."""
        import scipy.linalg as sl

        it, soft, rows = self.it, self.soft, self.rows
        r_x = r_x + it.xi * self.r_price
        g = (-r_s - it.z * self.r_primal) / it.s
        g[soft] = (-r_s[soft] / it.z[soft] - self.r_primal[soft] + r_x / it.w) / (
            it.s[soft] / it.z[soft] + it.xi / it.w
        )
        rhs = (rows.KT(g) - self.r_dual).ravel()
        dB = sl.cho_solve(self.factor, rhs, check_finite=False).reshape(it.B.shape)
        KdB = rows.K(dB)
        dz = g - self.weight * KdB
        dxi = (-r_x + it.xi * dz[soft]) / it.w
        ds = KdB + self.r_primal
        ds[soft] += dxi
        return _Iterate(dB, KdB, ds, dz, dxi, self.r_price - dz[soft])

    def factorise(self) -> bool:
        """Form and factor the reduced normal matrix; False when Cholesky fails at every shift."""
        it, n_fix = self.it, self.it.xi.size
        weight = it.z / it.s
        weight[:n_fix] = 1.0 / (it.s[:n_fix] / it.z[:n_fix] + it.xi / it.w)
        p = it.B.size
        Q = _reduced_rows(weight * self.rows.norm2, self.rho, min(self.rows.m, p), int(MAX_REDUCED_ROWS * p))
        self.weight = weight
        try:
            self.factor = shifted_cholesky(self.rows.normal_matrix(Q, weight[Q], self.rho))
        except np.linalg.LinAlgError:
            return False
        return True


@dataclass(frozen=True)
class _Kept:
    B: np.ndarray | None
    residuals: float

    @staticmethod
    def none() -> _Kept:
        return _Kept(None, math.inf)


def _fresh_start(B: np.ndarray, rows: _RowsInPlay, lam: np.ndarray) -> _Iterate:
    """Slacks at the rows' distance from their bounds at B (at least 1), multipliers 1 (λ/2 on
    soft rows, and for ξ's own multiplier w: recomputing it as λ − z would lose its digits)."""
    n_fix = lam.size
    Kb = rows.K(B)
    return _Iterate(
        B=B.copy(),
        Kb=Kb,
        s=np.maximum(Kb - rows.h, 0.0) + 1.0,
        z=np.concatenate([0.5 * lam, np.ones(rows.m - n_fix)]),
        xi=np.maximum(rows.h[:n_fix] - Kb[:n_fix], 0.0) + 1.0,
        w=0.5 * lam,
    )


def _recentre(it: _Iterate, violation: float, strength: float) -> float:
    """Lift every complementarity pair to a product ≥ μ_t by raising its smaller member; return μ_t.

    A row violated by v needs other slacks to move by ~v, and a Newton step moves a slack by
    at most ~μ/(its multiplier): μ_t = strength·v·(mean multiplier), at least the current μ.
    Only the member near 0 moves: scaling both (keeping the ratio) turned a must_fix slack of
    ~3 with a multiplier of ~1e-7 into one of thousands, and the 100k QP never recovered.
    """
    target = max(it.mu(), strength * violation * float(np.mean(np.concatenate([it.z, it.w]))), 1e-12)
    for x, y in ((it.s, it.z), (it.xi, it.w)):
        low = x * y < target
        x_smaller = low & (x <= y)
        y_smaller = low & (x > y)
        x[x_smaller] = target / y[x_smaller]
        y[y_smaller] = target / x[y_smaller]
    return target


def _centred_step(it: _Iterate, step: _Iterate, alpha: float) -> float:
    """Cut ``alpha`` back until every complementarity product is ≥ CENTRALITY × their mean."""
    for _ in range(30):
        x, y = it.moved(step, alpha).pairs()
        products = x * y
        if float(np.min(products)) >= CENTRALITY * float(np.mean(products)):
            return alpha
        alpha *= 0.7
    return 0.0  # no step keeps the pairs central: stand still, the stall logic takes over


def solve(problem: LinearisedProblem, settings: SolverSettings, warm: WarmStart | None = None) -> QPSolution:
    """The backend: the method from the rows near their bound (every row without a working set);
    an undecided run goes to OSQP's working set, started from its rows."""
    start = time.perf_counter()
    rows = problem.rows_near_bound(settings.working_set_window) if settings.working_set else np.arange(problem.n)
    own = settings.of(IpmSettings)
    result = run(
        problem,
        rows,
        tolerance=own.tolerance,
        max_iter=own.max_iter,
        time_limit_s=settings.time_limit_s,
    )
    return answer_or_hand_over(
        problem, settings, start, result, backend=IPM.name, words="interior point", form=QPForm.PRIMAL
    )


def run(
    problem: LinearisedProblem,
    start_rows: np.ndarray,
    *,
    tolerance: float,
    max_iter: int,
    time_limit_s: float,
    trace=None,
) -> BackendRun:
    """The interior-point method on ``problem`` from the rows ``start_rows`` in play.

    ``start_rows`` must hold every soft row (they come first in a problem). Rows join when
    the iterate violates them; ``tolerance`` is relative: residuals over 1 + the largest
    bound, 1 + ρ‖B‖∞ and 1 + the objective, and a row outside the set counts as violated
    past ``tolerance``·(1 + max |h|). ``trace``, if given, is called with a line per iteration.
    """
    return _InteriorPoint(problem, start_rows, tolerance, max_iter, time_limit_s, trace).run()


class _InteriorPoint:
    """One run of the method: the rows in play, the iterate, and the steps that move them."""

    def __init__(self, problem, start_rows, tolerance, max_iter, time_limit_s, trace) -> None:
        self.start = time.perf_counter()
        self.problem, self.tolerance, self.max_iter = problem, tolerance, max_iter
        self.time_limit_s, self.trace = time_limit_s, trace
        self.n_fix, self.rho, self.p = problem.n_fix, float(problem.rho), problem.rank * problem.d_in
        self.lam = np.asarray(problem.prices(), dtype=np.float64)
        self.scale = 1.0 + float(np.max(np.abs(problem.rhs), initial=0.0))
        self.limit = tolerance * self.scale
        start_rows = np.unique(np.asarray(start_rows, dtype=np.int64))
        if start_rows.size and (start_rows[0] < 0 or start_rows[-1] >= problem.n):
            raise ValueError(f"qp.ipm.run: start_rows must be rows of the problem (0 to {problem.n - 1})")
        if start_rows.size == 0:  # no soft rows and no hard row near its bound: start from the violated
            start_rows = np.flatnonzero(problem.rhs > self.limit)[: int(JOIN_AT_MOST_P * self.p)]
        self.rows = self.in_play = self.it = None
        if start_rows.size:
            self.rows = _RowsInPlay(problem, start_rows)
            self.in_play = np.zeros(problem.n, dtype=bool)
            self.in_play[self.rows.index] = True
            if not np.all(self.in_play[: self.n_fix]):
                raise ValueError("qp.ipm.run: start_rows must include every soft row")
            self.it = _fresh_start(np.zeros((problem.rank, problem.d_in)), self.rows, self.lam)

    def run(self) -> BackendRun:
        if self.rows is None:  # β = 0 satisfies every row and is the smallest β
            B = np.zeros((self.problem.rank, self.problem.d_in))
            none = np.zeros(0, dtype=np.int64)
            return BackendRun(B=B, outcome=Outcome.SOLVED, iterations=0, rows=none, detail="β = 0 satisfies every row")
        outcome, detail, iterations, residuals = Outcome.MAX_ITER, "", 0, math.inf
        best, best_at, recentred = math.inf, 0, False
        kept = _Kept.none()  # the iterate with the smallest residuals since rows last joined
        for iteration in range(self.max_iter + 1):
            if iteration and iteration % CHECK_EVERY == 0 and self.join_violated():
                best, best_at, kept = math.inf, iteration, _Kept.none()
            system = _NewtonSystem(self.rows, self.it, self.lam, self.rho)
            residuals, primal = self.residuals(system, iteration)
            if residuals < kept.residuals:
                kept = _Kept(self.it.B.copy(), residuals)
            if residuals <= self.tolerance:
                # Rows joining now meet an iterate whose pairs are all near 0 or ∞: re-centring
                # cannot undo that, a fresh start from this B does.
                if self.join_violated(None) == 0:
                    outcome = Outcome.SOLVED
                    break
                best, best_at, kept = math.inf, iteration, _Kept.none()
                continue  # the joined rows change the residuals: recompute them first
            ray = self.farkas()
            if ray is not None:
                outcome = Outcome.INFEASIBLE if ray <= FARKAS_INFEASIBLE else Outcome.INFEASIBLE_INACCURATE
                detail = (
                    f"the must_keep multipliers point along a Farkas ray: every β that keeps those rows "
                    f"is ≥ {1 / ray:.3g} × max(1, ‖B‖) long"
                )
                break
            if residuals < 0.5 * best:
                best, best_at = residuals, iteration
            elif kept.residuals <= 10 * self.tolerance and iteration - best_at >= 2:
                # Within reach of the tolerance and no longer improving: the weights d_i are
                # ~1e12 and the normal equations have no digits left. The best iterate is kept.
                outcome, detail = Outcome.STALLED, f"best residual {kept.residuals:.2g}, now {residuals:.2g}"
                break
            elif iteration - best_at >= STALL_ITERATIONS and not recentred:
                # Once: lift every pair as a row violated by the worst primal residual would.
                _recentre(self.it, primal, RECENTRE_ON_STALL)
                recentred, best, best_at = True, math.inf, iteration
                continue
            elif iteration - best_at >= STALL_ITERATIONS:
                outcome, detail = Outcome.STALLED, f"residual {residuals:.2g} for {STALL_ITERATIONS} iterations"
                break
            if time.perf_counter() - self.start > self.time_limit_s:
                outcome, detail = Outcome.TIME_LIMIT, f"{self.time_limit_s:g} s"
                break
            if iteration == self.max_iter:
                break
            if not system.factorise():
                outcome, detail = Outcome.STALLED, f"iteration {iteration}: Cholesky failed after every shift"
                break
            self.it = _predictor_corrector(self.it, system)
            iterations = iteration + 1
            if not (np.all(np.isfinite(self.it.B)) and np.all(np.isfinite(self.it.z))):
                outcome, detail = Outcome.STALLED, f"iteration {iterations}: a non-finite iterate"
                break
        return self.result(outcome, detail, iterations, _Kept(self.it.B, residuals), kept)

    def residuals(self, system: _NewtonSystem, iteration: int) -> tuple[float, float]:
        """(the largest relative residual, the worst primal residual) of the current iterate."""
        it, rows, rho, lam = self.it, self.rows, self.rho, self.lam
        mu = it.mu()
        objective = 0.5 * rho * float(np.sum(it.B * it.B)) + float(lam @ it.xi)
        parts = (
            float(np.max(np.abs(system.r_primal))) / self.scale,
            float(np.max(np.abs(system.r_dual))) / (1.0 + rho * float(np.max(np.abs(it.B)))),
            mu * (rows.m + self.n_fix) / (1.0 + abs(objective)),
            float(np.max(np.abs(system.r_price), initial=0.0)) / (1.0 + float(np.max(lam, initial=0.0))),
        )
        if self.trace is not None:
            self.trace(
                f"iteration {iteration}: {rows.m} rows, mu {mu:.2e}, residuals primal {parts[0]:.2e} "
                f"dual {parts[1]:.2e} gap {parts[2]:.2e}, objective {objective:.9g}"
            )
        return max(parts), float(np.max(np.abs(system.r_primal)))

    def join_violated(self, strength: float | None = RECENTRE_ON_JOIN) -> int:
        """Put the most violated hard rows outside the set into it; how many joined.

        ``strength`` None: start afresh from the current B instead of re-centring."""
        problem, it = self.problem, self.it
        values = problem.constraint_values(it.B)
        outside = ~self.in_play
        outside[: self.n_fix] = False
        new = np.flatnonzero(outside & (values - problem.rhs < -self.limit))
        cap = int(JOIN_AT_MOST_P * self.p)
        if new.size > cap:
            new = np.sort(new[np.argsort(values[new] - problem.rhs[new], kind="stable")[:cap]])
        if new.size == 0:
            return 0
        self.rows.add(new)
        self.in_play[new] = True
        if strength is None:
            self.it = _fresh_start(it.B, self.rows, self.lam)
        else:
            target = _recentre(it, float(np.max(problem.rhs[new] - values[new])), strength)
            entering = math.sqrt(target)
            it.Kb = np.concatenate([it.Kb, values[new]])
            it.s = np.concatenate([it.s, np.full(new.size, entering)])
            it.z = np.concatenate([it.z, np.full(new.size, entering)])
        return int(new.size)

    def farkas(self) -> float | None:
        """The Farkas ratio of the hard multipliers (linalg.farkas_ratio), or None."""
        hard = self.it.z[self.n_fix :]
        if hard.size == 0:
            return None
        y = np.zeros(self.rows.m)
        y[self.n_fix :] = hard / float(np.max(hard))
        return farkas_ratio(y[self.n_fix :], self.rows.h[self.n_fix :], lambda _: self.rows.KT(y), self.it.B)

    def result(self, outcome: Outcome, detail: str, iterations: int, last: _Kept, kept: _Kept) -> BackendRun:
        answer, short = last, outcome in (Outcome.MAX_ITER, Outcome.STALLED, Outcome.TIME_LIMIT)
        if short and kept.residuals <= 10 * self.tolerance:
            # Near the end a shorter stop is still an answer, if every row holds to 10× the tolerance.
            values, n_fix = self.problem.constraint_values(kept.B), self.n_fix
            if np.all(values[n_fix:] - self.problem.rhs[n_fix:] >= -10 * self.limit):
                detail = f"{outcome.value}: {detail or 'out of iterations'}; kept the residual {kept.residuals:.2g}"
                outcome, answer = Outcome.SOLVED_INACCURATE, kept
        detail = detail or f"{iterations} iterations, {self.rows.m} rows in play"
        rows = np.sort(self.rows.index)
        return BackendRun(B=answer.B, outcome=outcome, iterations=iterations, rows=rows, detail=detail)


def _predictor_corrector(it: _Iterate, system: _NewtonSystem) -> _Iterate:
    """Mehrotra's step: the affine predictor, then the centred corrector, kept central."""
    affine = system.direction(it.s * it.z, it.xi * it.w)
    alpha = min(1.0, it.longest_step(affine))
    mu = it.mu()
    mu_affine = it.moved(affine, alpha).mu()
    sigma = (mu_affine / mu) ** 3 if mu > 0 else 0.0
    step = system.direction(
        it.s * it.z + affine.s * affine.z - sigma * mu, it.xi * it.w + affine.xi * affine.w - sigma * mu
    )
    alpha = _centred_step(it, step, min(1.0, STEP_TO_BOUNDARY * it.longest_step(step)))
    return it.moved(step, alpha)
