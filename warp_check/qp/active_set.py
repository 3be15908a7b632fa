"""The active-set backend of the repair QP: Newton's method on the dual, rows joining as it goes.

The dual of the repair QP (warp_check.qp), over every row i:

    min f(z) = ρ/2‖B(z)‖² − hᵀz   s.t.   0 ≤ z_i ≤ λ_i (soft rows),   z_i ≥ 0 (hard rows),
    B(z) = Σ_i z_i c_i v_iᵀ / ρ.

Its gradient is every row's slack at B, g_i = c_iᵀ B v_i − h_i: O(n·r·d_in) for all rows in
closed form, no Gram matrix. Only the rows inside their box and the rows at a bound whose
gradient points inside (a hard row violated at 0: they join, the most violated first) are *in
play*; an iteration forms the Hessian Q = G/ρ, G = (CCᵀ) ⊙ (VVᵀ), over them alone, factors it
(dense Cholesky, LAPACK) and aims for the minimiser of f on their face. A row whose Newton
target leaves the box is clamped at the bound it crosses and the others re-solved (a Schur
complement on the one factor), until the target is in the box; f is then minimised exactly on
the segment to it (f is quadratic along a segment: closed form). Where that segment is no
descent, Newton's direction over the rows that can move, cut at the box, is (Lawson and
Hanson's step). When the face is the optimum's, the step lands on the optimum, so the method
ends with every row's optimality condition met to round-off.

Why a backend of its own: OSQP factors a working set's dense dual with a sparse LDLᵀ that uses
no BLAS, three times a round (set-up, ρ update, polish), and its working set grows by a batch
of rows a round. At 100k must_keep rows and rank 8 (p = r·d_in = 6,144, too many unknowns for
the β-space interior point) its first QP takes 344 s; this method 8 s.

Where it cannot settle: Q over the rows in play is singular when more rows are in play than β
has unknowns, or rows repeat; the factorisation is then shifted and the step approximate, and
the method may stall; so it does on rows as correlated as real representations (reported;
OSQP's working set then starts from the rows holding multipliers). Contradicting hard rows make
the dual unbounded below: their multipliers grow along a Farkas ray (linalg.farkas_ratio).
"""

from __future__ import annotations

import time

import numpy as np

from warp_check.qp.backends.active_set import ACTIVE_SET, ActiveSetSettings
from warp_check.qp.linalg import (
    FARKAS_INFEASIBLE,
    FARKAS_INFEASIBLE_INACCURATE,
    cholesky_solve,
    hard_rows_farkas_ratio,
    shifted_cholesky,
)
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.settings import SolverSettings
from warp_check.qp.solution import BackendRun, Outcome, QPForm, QPSolution, WarmStart, answer_or_hand_over

# Rows that join per iteration at most, the most violated first. At 100k must_keep the first
# iterations find tens of thousands violated, most of which the next step satisfies anyway,
# and an iteration costs (rows in play)³/3 (first 100k rank-8 QP: the rows holding
# multipliers grew by ~800 an iteration, to 3,515 at the optimum, in 9 iterations).
JOIN_AT_MOST = 1000
# Stalled: the worst row's violation has not halved in this many iterations. Where the rows in
# play are (nearly) dependent — more of them than β has unknowns, or representations as
# correlated as real ones (SST-2 45k at rank 8: the first QP's worst row went from 4.3 to 5.6
# in 12 iterations, Q's condition number past 1e16) — the Newton targets are round-off and the
# method wanders; OSQP's working set, started from its rows, does better there. On the
# synthetic 100k problem it halves every iteration or two.
STALL_ITERATIONS = 10
# A direction counts as descent when its slope is below −this × ‖g‖‖direction‖: a clamped
# target can sit at a slope of round-off (−1e-14) and take steps of nothing forever.
DESCENT_ANGLE = 1e-10
# Clamped rows are handled by a Schur complement on one factor of the rows in play up to this
# fraction (1/SCHUR_AT_MOST) of them; past it a factor of the free rows is the cheaper (a solve
# per clamped row costs 2m², a factorisation m³/3).
SCHUR_AT_MOST = 6


def solve(problem: LinearisedProblem, settings: SolverSettings, warm: WarmStart | None = None) -> QPSolution:
    """The backend: the method from z = 0, at most JOIN_AT_MOST rows joining an iteration (all
    of them without a working set); an undecided run goes to OSQP's working set, started from
    the rows holding multipliers — not the rows that just joined: after a stall those are the
    ones the method could not place (real SST-2 45k: from them OSQP took 65 s, from the rows
    holding multipliers 15 s)."""
    start = time.perf_counter()
    own = settings.of(ActiveSetSettings)
    result = run(
        problem,
        tolerance=own.tolerance,
        max_iter=own.max_iter,
        time_limit_s=settings.time_limit_s,
        join_at_most=JOIN_AT_MOST if settings.working_set else None,
        stall_after=STALL_ITERATIONS,
    )
    return answer_or_hand_over(
        problem, settings, start, result, backend=ACTIVE_SET.name, words="active set", form=QPForm.DUAL
    )


def run(
    problem,
    *,
    tolerance: float,
    max_iter: int,
    time_limit_s: float,
    join_at_most: int | None = JOIN_AT_MOST,
    stall_after: int = STALL_ITERATIONS,
    trace=None,
) -> BackendRun:
    """The active-set method on ``problem`` from z = 0.

    Solved when every row meets its optimality condition to ``tolerance``·(1 + max |h|): a row
    at 0 holds (g ≥ −tol), a row inside its box is tight (|g| ≤ tol), a soft row at its price
    is short (g ≤ tol). ``join_at_most`` None lets every violated row join at once; with a
    small cap the worst violation falls slowly, and ``stall_after`` should be raised with it.
    ``trace``, if given, is called with a line per iteration.
    """
    start = time.perf_counter()
    n, rho = problem.n, float(problem.rho)
    upper = np.full(n, np.inf)
    upper[: problem.n_fix] = problem.prices()
    h = np.asarray(problem.rhs, dtype=np.float64)
    limit = tolerance * (1.0 + float(np.max(np.abs(h), initial=0.0)))
    z = np.zeros(n)
    B = np.zeros((problem.rank, problem.d_in))
    in_play = np.zeros(0, dtype=np.int64)
    best, best_at = np.inf, 0

    def result(outcome: Outcome, iterations: int, detail: str) -> BackendRun:
        rows = np.union1d(np.arange(problem.n_fix), np.flatnonzero(z > 0))
        return BackendRun(B=B, outcome=outcome, iterations=iterations, rows=rows, detail=detail)

    for iteration in range(max_iter + 1):
        g = problem.constraint_values(B) - h
        at_zero, at_price = z <= 0, z >= upper
        violation = np.where(at_zero, -g, np.where(at_price, g, np.abs(g)))
        worst = float(np.max(violation, initial=0.0))
        if trace is not None:
            support = np.count_nonzero(z)
            trace(f"{iteration:3d}  worst {worst:.3e}  multipliers > 0: {support}  rows in play {in_play.size}")
        if worst <= limit:
            return result(Outcome.SOLVED, iteration, f"every row within {limit:.1e}")
        ray = hard_rows_farkas_ratio(problem, np.arange(n), z, B)
        if ray is not None and ray <= FARKAS_INFEASIBLE:
            return result(Outcome.INFEASIBLE, iteration, f"Farkas ray ratio {ray:.1e}")
        if iteration == max_iter or time.perf_counter() - start > time_limit_s:
            outcome = Outcome.MAX_ITER if iteration == max_iter else Outcome.TIME_LIMIT
            return _undecided(result, outcome, iteration, worst, ray)
        if worst <= best / 2:
            best, best_at = worst, iteration
        elif iteration - best_at >= stall_after:
            return _undecided(result, Outcome.STALLED, iteration, worst, ray)

        joining = np.flatnonzero((at_zero & (g < -limit)) | (at_price & (g > limit)))
        if join_at_most is not None and joining.size > join_at_most:
            joining = joining[np.argsort(-np.abs(g[joining]), kind="stable")[:join_at_most]]
        in_play = np.union1d(np.flatnonzero(~at_zero & ~at_price), joining)
        Q = problem.subset(in_play).gram() / rho
        step = _step(problem, in_play, Q, g[in_play], z[in_play], upper[in_play])
        if step is None:
            return _undecided(result, Outcome.STALLED, iteration, worst, ray)
        dz, dB = step
        z[in_play] = np.clip(z[in_play] + dz, 0.0, upper[in_play])  # round-off only: the step stays in the box
        B = B + dB
    raise AssertionError("unreachable: the loop returns at max_iter")


def _undecided(result, outcome: Outcome, iteration: int, worst: float, ray: float | None) -> BackendRun:
    if ray is not None and ray <= FARKAS_INFEASIBLE_INACCURATE:
        return result(Outcome.INFEASIBLE_INACCURATE, iteration, f"Farkas ray ratio {ray:.1e}")
    return result(outcome, iteration, f"worst row {worst:.1e} from optimal")


def _step(problem, rows, Q, g, z, upper) -> tuple[np.ndarray, np.ndarray] | None:
    """The change of z on ``rows`` and of B: the exact minimum of f on the segment to the
    clamped Newton target or, where that is no descent (rows nearly parallel can make its
    slope 0), on the Newton direction over the rows that can move, cut at the box."""
    for make in (lambda: _clamped_newton_target(Q, g, z, upper) - z, lambda: _newton_inward(Q, g, z, upper)):
        direction = make()  # the second only where the first is no descent: it costs factorisations
        slope = float(g @ direction)  # f'(0) along the direction
        if slope >= -DESCENT_ANGLE * float(np.linalg.norm(g) * np.linalg.norm(direction)):
            continue
        dB = problem.weighted_sum(direction, rows) / problem.rho
        curvature = problem.rho * float(np.sum(dB * dB))  # f''(0): ρ‖ΔB‖²
        alpha = 1.0 if curvature <= 0 else min(1.0, -slope / curvature)
        return alpha * direction, alpha * dB
    return None


def _clamped_newton_target(Q, g, z, upper) -> np.ndarray:
    """The minimiser of f on the face where the clamped rows sit at their bounds. A row whose
    target leaves the box is clamped at the bound it crosses; each round clamps one or more.

    One Cholesky factor of Q serves every round while few rows are clamped: with E the
    clamped rows' columns of I and t their moves, the face's Newton step is
    d = −Q⁻¹(g + Eμ) with (EᵀQ⁻¹E) μ = −(t + EᵀQ⁻¹g), which costs a solve per clamped row
    instead of a factorisation per round (2.9 factorisations an iteration at 100k otherwise).
    """
    m = z.size
    factor = shifted_cholesky(Q)
    Qinv_g = cholesky_solve(factor, g)
    target = z.copy()
    clamped = np.zeros(0, dtype=np.int64)
    Qinv_E = np.zeros((m, 0))
    while True:
        d = -Qinv_g
        if clamped.size:
            moves = target[clamped] - z[clamped]
            mu = np.linalg.solve(Qinv_E[clamped], -(moves + Qinv_g[clamped]))
            d = d - Qinv_E @ mu
            d[clamped] = moves  # exact where the solve leaves round-off
        moved = z + d
        crossing = (moved < 0) | (moved > upper)
        crossing[clamped] = False
        target = np.clip(moved, 0.0, upper)
        if not crossing.any():
            return target
        new = np.flatnonzero(crossing)
        clamped = np.concatenate([clamped, new])
        if clamped.size > m // SCHUR_AT_MOST:  # many clamped: a factor of the free rows is cheaper
            return _clamped_by_refactoring(Q, g, z, upper, clamped, target)
        E = np.zeros((m, new.size))
        E[new, np.arange(new.size)] = 1.0
        Qinv_E = np.hstack([Qinv_E, cholesky_solve(factor, E)])


def _clamped_by_refactoring(Q, g, z, upper, clamped, target) -> np.ndarray:
    """The same target as _clamped_newton_target, a factorisation of the free rows a round."""
    free = np.ones(z.size, dtype=bool)
    free[clamped] = False
    while True:
        inside, fixed = np.flatnonzero(free), np.flatnonzero(~free)
        rhs = -g[inside] - Q[np.ix_(inside, fixed)] @ (target[fixed] - z[fixed])
        moved = z[inside] + cholesky_solve(shifted_cholesky(Q[np.ix_(inside, inside)]), rhs)
        below, above = moved < 0, moved > upper[inside]
        target[inside] = np.clip(moved, 0.0, upper[inside])
        if not (below.any() or above.any()):
            return target
        free[inside[below | above]] = False


def _newton_inward(Q, g, z, upper) -> np.ndarray:
    """Newton's direction over the rows in play, a row at a bound that it would push out held
    there (and the rest re-solved), cut at the box: a descent direction unless g is 0 on the
    rows that can move (Lawson and Hanson's step)."""
    free = np.ones(z.size, dtype=bool)
    while True:
        inside = np.flatnonzero(free)
        d = np.zeros(z.size)
        d[inside] = cholesky_solve(shifted_cholesky(Q[np.ix_(inside, inside)]), -g[inside])
        outward = free & (((z <= 0) & (d < 0)) | ((z >= upper) & (d > 0)))
        if not outward.any():
            return _cut_at_box(d, z, upper)
        free &= ~outward


def _cut_at_box(direction: np.ndarray, z: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """``direction`` shortened to its longest step (≤ 1) inside the box."""
    with np.errstate(divide="ignore", invalid="ignore"):
        to_bound = np.where(direction < 0, -z / direction, np.where(direction > 0, (upper - z) / direction, np.inf))
    return direction * min(1.0, float(np.min(to_bound, initial=np.inf)))
