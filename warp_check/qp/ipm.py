"""The interior-point backend of the repair QP: β space, for must_keep sets of tens of thousands.

OSQP solves the working set's dense dual with a sparse LDLᵀ (no BLAS) and hundreds of ADMM
iterations; with 100k must_keep rows the optimum is pinned by ~r·d_in rows, the working set
grows to thousands and the first QP alone ran past 30 minutes (benchmarks/RESULTS.md). This
solver works on β = vec(B) ∈ R^p, p = r·d_in, with every row's slack explicit:

    min ρ/2‖β‖² + λᵀξ   s.t.   Kβ + Eξ − s = h,   s ≥ 0,  ξ ≥ 0      (E: the soft rows)

Mehrotra's predictor–corrector. A Newton step solves with the normal matrix ρI + K_Qᵀ D_Q K_Q
(p × p, dense Cholesky) over the rows Q whose weight d_i‖a_i‖² matters: a row far from its
bound weighs ~0 and is left out (constraint reduction), so a step costs O(|Q|·p²) however
many rows are in play. Hard rows join lazily: the iterate is checked against every row in
closed form (O(n·r·d_in)) and violated rows join *while the iterations run*, so the central
path accounts for them before it converges — adding them in rounds after convergence, as the
OSQP path does, needed more than 24 rounds on the first 100k QP.

The answer is accepted only when the residuals on the rows in play meet the tolerance and a
final check of every row finds none violated; that check is what makes the lazy answer the
whole problem's optimum (a relaxation whose optimum is feasible is optimal).
"""

from __future__ import annotations

import enum
import math
import time
from dataclasses import dataclass

import numpy as np

# Mehrotra's step back from the boundary.
STEP_TO_BOUNDARY = 0.995
# Constraint reduction: rows are left out of the normal matrix, lightest first, while the
# weight left out totals at most this fraction of ρ (the step stays a Newton step up to
# that relative error in the matrix); at least p rows stay in it when there are p.
DROPPED_WEIGHT = 0.1
# ... but never more than this many times p rows, even when the weight left out is then
# larger (degenerate optima with more than 3p heavy rows): the heaviest carry the step's
# direction, and a larger matrix costs more than the extra iterations save (10k first QP, with an earlier
# join rule: 11.0 s uncapped, 9.8 s at 3p, 8.8 s at 2p but 3 more iterations, 12.9 s and twice
# the iterations at 1.5p; 3p is kept for the margin on harder problems).
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
# Regularisations tried, relative to the largest diagonal entry, when Cholesky fails:
# late iterations make d_i reach 1e12+ and the matrix numerically semidefinite.
CHOLESKY_SHIFTS = (0.0, 1e-12, 1e-10, 1e-8, 1e-6)
# Infeasibility (see _farkas_ray): every β with Kβ ≥ h on the hard rows would be longer than
# 1/this × max(1, ‖B‖) — 1e6 for "infeasible", 1e4 for "infeasible inaccurate". Either way no
# step the repair could take.
FARKAS_INFEASIBLE = 1e-6
FARKAS_INFEASIBLE_INACCURATE = 1e-4


class IPMOutcome(str, enum.Enum):
    SOLVED = "solved"
    SOLVED_INACCURATE = "solved inaccurate"  # the best iterate's residuals within 10× the tolerance
    INFEASIBLE = "infeasible"  # a Farkas ray on the hard rows (see FARKAS_INFEASIBLE)
    INFEASIBLE_INACCURATE = "infeasible inaccurate"
    MAX_ITER = "iteration limit"
    TIME_LIMIT = "time limit"
    # No progress short of the tolerance: near the optimum the weights d_i reach 1e12+ and
    # the normal equations lose the digits the residuals need (or Cholesky fails outright).
    STALLED = "stalled"


@dataclass(frozen=True)
class IPMResult:
    B: np.ndarray  # (r, d_in): the answer when solved (the best iterate when solved inaccurate)
    outcome: IPMOutcome
    iterations: int
    rows: np.ndarray  # rows of the problem in play at the end (sorted)
    detail: str


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
        self.factor = _cholesky(self.rows.normal_matrix(Q, weight[Q], self.rho))
        return self.factor is not None


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


def solve(
    problem,
    start_rows: np.ndarray,
    *,
    tolerance: float,
    max_iter: int,
    time_limit_s: float,
    trace=None,
) -> IPMResult:
    """Solve ``problem`` (a ``qp.LinearisedProblem``) from the rows ``start_rows`` in play.

    ``start_rows`` must hold every soft row (they come first in a problem). Rows join when
    the iterate violates them; ``tolerance`` is relative: residuals over 1 + the largest
    bound, 1 + ρ‖B‖∞ and 1 + the objective, and a row outside the set counts as violated
    past ``tolerance``·(1 + max |h|). ``trace``, if given, is called with a line per iteration.
    """
    start = time.perf_counter()
    n_fix, rho, p = problem.n_fix, float(problem.rho), problem.rank * problem.d_in
    lam = np.asarray(problem.prices(), dtype=np.float64)
    start_rows = np.unique(np.asarray(start_rows, dtype=np.int64))
    if start_rows.size and (start_rows[0] < 0 or start_rows[-1] >= problem.n):
        raise ValueError(f"qp_ipm.solve: start_rows must be rows of the problem (0 to {problem.n - 1})")
    scale = 1.0 + float(np.max(np.abs(problem.rhs), initial=0.0))
    limit = tolerance * scale
    if start_rows.size == 0:  # no soft rows and no hard row near its bound: start from the violated
        start_rows = np.flatnonzero(problem.rhs > limit)[: int(JOIN_AT_MOST_P * p)]
        if start_rows.size == 0:  # β = 0 satisfies every row and is the smallest β
            B = np.zeros((problem.rank, problem.d_in))
            empty = np.zeros(0, dtype=np.int64)
            return IPMResult(B, IPMOutcome.SOLVED, 0, empty, "β = 0 satisfies every row")
    rows = _RowsInPlay(problem, start_rows)
    in_play = np.zeros(problem.n, dtype=bool)
    in_play[rows.index] = True
    if not np.all(in_play[:n_fix]):
        raise ValueError("qp_ipm.solve: start_rows must include every soft row")

    it = _fresh_start(np.zeros((problem.rank, problem.d_in)), rows, lam)

    def join_violated(strength: float | None = RECENTRE_ON_JOIN) -> int:
        """Put the most violated hard rows outside the set into it; how many joined.

        ``strength`` None: start afresh from the current B instead of re-centring."""
        nonlocal it
        values = problem.constraint_values(it.B)
        outside = ~in_play
        outside[:n_fix] = False
        new = np.flatnonzero(outside & (values - problem.rhs < -limit))
        cap = int(JOIN_AT_MOST_P * p)
        if new.size > cap:
            new = np.sort(new[np.argsort(values[new] - problem.rhs[new], kind="stable")[:cap]])
        if new.size == 0:
            return 0
        rows.add(new)
        in_play[new] = True
        if strength is None:
            it = _fresh_start(it.B, rows, lam)
        else:
            target = _recentre(it, float(np.max(problem.rhs[new] - values[new])), strength)
            entering = math.sqrt(target)
            it.Kb = np.concatenate([it.Kb, values[new]])
            it.s = np.concatenate([it.s, np.full(new.size, entering)])
            it.z = np.concatenate([it.z, np.full(new.size, entering)])
        return int(new.size)

    outcome, detail, iterations, residuals = IPMOutcome.MAX_ITER, "", 0, math.inf
    best, best_at, recentred = math.inf, 0, False
    kept = _Kept.none()  # the iterate with the smallest residuals since rows last joined
    for iteration in range(max_iter + 1):
        if iteration and iteration % CHECK_EVERY == 0 and join_violated():
            best, best_at, kept = math.inf, iteration, _Kept.none()
        system = _NewtonSystem(rows, it, lam, rho)
        mu = it.mu()
        objective = 0.5 * rho * float(np.sum(it.B * it.B)) + float(lam @ it.xi)
        parts = (
            float(np.max(np.abs(system.r_primal))) / scale,
            float(np.max(np.abs(system.r_dual))) / (1.0 + rho * float(np.max(np.abs(it.B)))),
            mu * (rows.m + n_fix) / (1.0 + abs(objective)),
            float(np.max(np.abs(system.r_price), initial=0.0)) / (1.0 + float(np.max(lam, initial=0.0))),
        )
        residuals = max(parts)
        if trace is not None:
            trace(
                f"iteration {iteration}: {rows.m} rows, mu {mu:.2e}, residuals primal {parts[0]:.2e} "
                f"dual {parts[1]:.2e} gap {parts[2]:.2e}, objective {objective:.9g}"
            )
        if residuals < kept.residuals:
            kept = _Kept(it.B.copy(), residuals)
        if residuals <= tolerance:
            # Rows joining now meet an iterate whose pairs are all near 0 or ∞: re-centring
            # cannot undo that (the rows-join-only-at-convergence probe stalled 21 of 36
            # feasible problems), a fresh start from this B does.
            if join_violated(None) == 0:
                outcome = IPMOutcome.SOLVED
                break
            best, best_at, kept = math.inf, iteration, _Kept.none()
            continue  # the joined rows change the residuals: recompute them first
        ray = _farkas_ray(rows, it, n_fix)
        if ray is not None:
            outcome = IPMOutcome.INFEASIBLE if ray <= FARKAS_INFEASIBLE else IPMOutcome.INFEASIBLE_INACCURATE
            detail = (
                f"the must_keep multipliers point along a Farkas ray: every β that keeps those rows "
                f"is ≥ {1 / ray:.3g} × max(1, ‖B‖) long"
            )
            break
        if residuals < 0.5 * best:
            best, best_at = residuals, iteration
        elif kept.residuals <= 10 * tolerance and iteration - best_at >= 2:
            # Within reach of the tolerance and no longer improving: the weights d_i are
            # ~1e12 and the normal equations have no digits left. The best iterate is kept.
            outcome, detail = IPMOutcome.STALLED, f"best residual {kept.residuals:.2g}, now {residuals:.2g}"
            break
        elif iteration - best_at >= STALL_ITERATIONS and not recentred:
            # Once: lift every pair as a row violated by the worst primal residual would.
            _recentre(it, float(np.max(np.abs(system.r_primal))), RECENTRE_ON_STALL)
            recentred, best, best_at = True, math.inf, iteration
            continue
        elif iteration - best_at >= STALL_ITERATIONS:
            outcome, detail = IPMOutcome.STALLED, f"residual {residuals:.2g} for {STALL_ITERATIONS} iterations"
            break
        if time.perf_counter() - start > time_limit_s:
            outcome, detail = IPMOutcome.TIME_LIMIT, f"{time_limit_s:g} s"
            break
        if iteration == max_iter:
            break

        if not system.factorise():
            outcome, detail = IPMOutcome.STALLED, f"iteration {iteration}: Cholesky failed after every shift"
            break

        affine = system.direction(it.s * it.z, it.xi * it.w)  # predictor
        alpha = min(1.0, it.longest_step(affine))
        mu_affine = it.moved(affine, alpha).mu()
        sigma = (mu_affine / mu) ** 3 if mu > 0 else 0.0
        step = system.direction(  # corrector, centred
            it.s * it.z + affine.s * affine.z - sigma * mu, it.xi * it.w + affine.xi * affine.w - sigma * mu
        )
        alpha = _centred_step(it, step, min(1.0, STEP_TO_BOUNDARY * it.longest_step(step)))
        it = it.moved(step, alpha)
        iterations = iteration + 1
        if not (np.all(np.isfinite(it.B)) and np.all(np.isfinite(it.z))):
            outcome, detail = IPMOutcome.STALLED, f"iteration {iterations}: a non-finite iterate"
            break
    answer = _Kept(it.B, residuals)
    stopped_short = (IPMOutcome.MAX_ITER, IPMOutcome.STALLED, IPMOutcome.TIME_LIMIT)
    if outcome in stopped_short and kept.residuals <= 10 * tolerance:
        # Near the end a shorter stop is still an answer, if every row holds to 10× the tolerance.
        values = problem.constraint_values(kept.B)
        if np.all(values[n_fix:] - problem.rhs[n_fix:] >= -10 * limit):
            detail = f"{outcome.value}: {detail or 'out of iterations'}; kept the residual {kept.residuals:.2g}"
            outcome, answer = IPMOutcome.SOLVED_INACCURATE, kept
    detail = detail or f"{iterations} iterations, {rows.m} rows in play"
    return IPMResult(answer.B, outcome, iterations, np.sort(rows.index), detail)


def _cholesky(M: np.ndarray):
    import scipy.linalg as sl

    diagonal = M.diagonal().copy()
    for shift in CHOLESKY_SHIFTS:
        if shift:
            M[np.diag_indices_from(M)] = diagonal + shift * float(diagonal.max())
        try:
            return sl.cho_factor(M, lower=True, overwrite_a=False, check_finite=False)
        except np.linalg.LinAlgError:
            continue
    return None


def _farkas_ray(rows: _RowsInPlay, it: _Iterate, n_fix: int) -> float | None:
    """How short a β the hard multipliers rule out, if they point along a Farkas ray.

    With y = z_hard / max z_hard: any β with Kβ ≥ h on the hard rows has hᵀy ≤ ‖Kᵀy‖·‖β‖, so
    ‖β‖ ≥ hᵀy / ‖Kᵀy‖. Returns ‖Kᵀy‖·max(1, ‖B‖) / hᵀy when that is at most
    FARKAS_INFEASIBLE_INACCURATE (every such β is ≥ its inverse × max(1, ‖B‖) long), else None.
    """
    hard = it.z[n_fix:]
    if hard.size == 0:
        return None
    y = np.zeros(rows.m)
    y[n_fix:] = hard / float(np.max(hard))
    pull = float(rows.h[n_fix:] @ y[n_fix:])
    if pull <= 0:
        return None
    ratio = float(np.linalg.norm(rows.KT(y))) * max(1.0, float(np.linalg.norm(it.B))) / pull
    return ratio if ratio <= FARKAS_INFEASIBLE_INACCURATE else None
