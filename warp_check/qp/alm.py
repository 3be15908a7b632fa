"""The augmented-Lagrangian backend: the dual of a working set of rows, on its Gram matrix.

Over a working set W of rows (every soft row; hard rows join when the answer violates them,
as cutting planes), the dual of the repair QP (warp_check.qp.problem) is a box QP

    min ½ zᵀ(G/ρ)z − hᵀz   s.t.   0 ≤ z ≤ u   (u_i = λ_i on soft rows, ∞ on hard ones),

G = (CCᵀ) ⊙ (ṼṼᵀ) over W, formed once and extended as rows join. Every iteration below works
on G alone: no product with the d_in-wide rows until a round's answer is checked against every
row of the problem (O(n·r·d_in), closed form).

The box QP is solved by the augmented Lagrangian method on the primal, which is the proximal
point method on this dual: each subproblem min_β φ(β) = ρ/2‖β‖² + Σ_i e_i(a_iᵀβ − h_i − z_i/σ)
(e_i the Moreau envelope of row i's penalty) is convex, piecewise quadratic and C¹, and is
minimised by semismooth Newton with an exact line search. β is kept as Kᵀy/ρ, so that the Newton
system (ρ/σ I + G_AA) x = G_A r is over the rows A strictly inside their box, regularised by ρ/σ:
well posed however correlated the rows are — the active-set method's Hessian G_AA/ρ alone is
singular to working precision on real representations, and it stalls there. Once the
multipliers are close, the optimum's face is solved exactly (a primal-dual active-set step: rows
inside their box hold with equality, the others sit at their bound), which ends the method with
every row's optimality condition met to round-off.

Measured on the real SST-2 problems (MiniLM, 1 BLAS thread): 10k must_keep rows at rank 8,
0.14 s a QP against OSQP's 0.9 s; 52k rows at rank 8, 6–8 s against OSQP's 100–111 s.

A solve can start from an earlier one (:class:`WarmStart`). The loop's next linearisation starts
from the rows of the cases that held multipliers in the last QP, and from those multipliers
(real SST-2, tanh head: 5.0 s of QP a 10k repair against 7.2 s cold); a re-solve of the same
rows (the trust region's higher price, or moved bounds) keeps the Gram matrix too. A run it
cannot decide (limits; contradicting hard rows whose multipliers grow without a Farkas ray it
can certify) goes to OSQP's working set, started from its rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from warp_check.qp import alm_matrix_free
from warp_check.qp.alm_matrix_free import FaceHandOver, RowProducts, box_violation, exact_step, solve_box
from warp_check.qp.backends.alm import ALM, AlmSettings
from warp_check.qp.linalg import (
    FARKAS_INFEASIBLE,
    FARKAS_INFEASIBLE_INACCURATE,
    SubsetFactor,
    hard_rows_farkas_ratio,
)
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.settings import SolverSettings
from warp_check.qp.solution import UNDECIDED, BackendRun, Outcome, QPForm, QPSolution, WarmStart, answer_or_hand_over

# The penalty σ starts at this many times ρ / (median ‖a_i‖²) and grows ×SIGMA_GROWTH an outer
# iteration. A small σ keeps the first subproblems easy for Newton (few rows inside the box
# change); each outer iteration then cuts the distance to the optimum ~SIGMA_GROWTH-fold.
SIGMA_START = 10.0
SIGMA_GROWTH = 10.0
SIGMA_MAX = 1e14
# A subproblem is solved when ‖∇φ‖ ≤ this × 0.1^outer × max(1, ‖ρβ‖): loose at first (the
# multipliers are far anyway), tight as they settle.
INNER_TOLERANCE = 1e-2
INNER_MAX_ITER = 60
# The exact face solve is tried after each outer iteration from the second on, for at most
# FACE_TRIES active-set rounds; a round that does not lower the worst violation ends the try.
FACE_TRIES = 8
# Hard rows that join a round at most, the most violated first: a round's Gram block costs
# (joining × rows) products of length r + d_in.
JOIN_AT_MOST = 1000
# The working set never holds more than this many rows, from its first round on: its Gram matrix is
# rows² × 8 bytes (200 MB), and growing it and factoring its blocks take as much again each.
# Real suites' working sets stay under it (SST-2's 52k: ≤ 3,031 rows). A QP that needs more (a
# million must_keep cases near their margin, at rank 64: ~12,000 rows near their bound before the
# first round) goes on over every row without a Gram matrix (warp_check.qp.alm_matrix_free), from
# the working set's multipliers where it had a round; if that cannot settle it either, it is
# answered on the rows the working set holds (Outcome.WORKING_SET_FULL): the loop's step, checked on
# every case's true gap, judges it. A QP that starts over every row comes back to a working set where
# it reaches a face held by at most MAX_ROWS rows (real SST-2 at 300k: 13,500 soft rows, ~4,900
# holding multipliers: its first iteration's QPs, ranks 2 and 64, took 67 s that way; by CG alone the
# rank-64 one met its 600 s limit).
MAX_ROWS = 5_000


def solve(problem: LinearisedProblem, settings: SolverSettings, warm: WarmStart | None = None) -> QPSolution:
    """The backend: cutting-plane rounds over the hard rows, each a box QP on the working set's
    Gram matrix; an undecided run goes to OSQP's working set, started from its rows."""
    start = time.perf_counter()
    solver = _WorkingSet(problem, settings, warm, start)
    result = solver.run()
    solution = answer_or_hand_over(
        problem, settings, start, result, backend=ALM.name, words="augmented Lagrangian", form=QPForm.DUAL
    )
    if solution.backend == ALM.name and solution.status.has_solution:
        # gram None: the answer came without one, and so will a re-solve (_WorkingSet.matrix_free)
        warm = WarmStart(problem, solver.rows, solver.z_rows, solver.gram)
        return replace(solution, warm=warm, rounds=solver.rounds, rows=None if solver.without_gram else warm.rows)
    return solution


class _WorkingSet:
    """The rows in play, their Gram matrix, and the rounds that add violated hard rows."""

    def __init__(self, problem: LinearisedProblem, settings: SolverSettings, warm: WarmStart | None, start: float):
        self.problem, self.settings, self.start = problem, settings, start
        self.upper = np.full(problem.n, np.inf)
        self.upper[: problem.n_fix] = problem.prices()
        self.scale = 1.0 + float(np.max(np.abs(problem.rhs), initial=0.0))
        self.limit = settings.of(AlmSettings).tolerance * self.scale
        self.newton = 0
        self.rounds = 0
        self.handed_over: FaceHandOver | None = None  # where a matrix-free start handed its face to the set
        # An earlier solve that needed more rows than MAX_ROWS (no Gram matrix kept): this one goes
        # over every row at once, from its multipliers
        self.without_gram = warm is not None and warm.gram is None
        if self.without_gram:
            self.rows, self.gram = np.arange(problem.n), None
            self.z_rows = self._carried_multipliers(warm)
        elif warm is not None and warm.reusable_for(problem):
            self.rows, self.gram = warm.rows.copy(), warm.gram
            self.z_rows = np.clip(warm.z, 0.0, self.upper[self.rows])
        else:
            self.rows = self._first_rows(warm)
            if self.rows.size > MAX_ROWS:
                # the rows near their bound alone pass it (a million cases: 1.2 GB of Gram matrix, and
                # its face's factors as much again): every row at once from the start
                self.without_gram, self.rows = True, np.arange(problem.n)
            self.gram = None if self.without_gram else problem.cross_gram(self.rows, self.rows)
            self.z_rows = self._carried_multipliers(warm)

    def _first_rows(self, warm: WarmStart | None) -> np.ndarray:
        """Every soft row, the hard rows near their bound and, from an earlier solve, the rows of
        the cases that held multipliers there (a new linearisation of the same suite: the rows
        that bound it are mostly the ones that bound the last step)."""
        problem = self.problem
        rows = problem.rows_near_bound(self.settings.working_set_window) if self.settings.working_set else None
        if rows is None:
            return np.arange(problem.n)
        if warm is not None:
            held = np.unique(warm.source.cases[warm.rows[warm.z > 0]])
            rows = np.union1d(rows, np.flatnonzero(np.isin(problem.cases, held)))
        return rows

    def _carried_multipliers(self, warm: WarmStart | None) -> np.ndarray:
        """Multipliers of an earlier solve, by case (binary heads: a row per case), clipped to the
        new box; none where there was no earlier solve."""
        z = np.zeros(self.rows.size)
        if warm is None:
            return z
        by_case = np.zeros(int(max(warm.source.cases.max(initial=0), self.problem.cases.max(initial=0))) + 1)
        np.maximum.at(by_case, warm.source.cases[warm.rows], warm.z)
        z = by_case[self.problem.cases[self.rows]]
        return np.clip(z, 0.0, self.upper[self.rows])

    def run(self) -> BackendRun:
        return self.matrix_free(None) if self.without_gram else self.cutting_planes()

    def cutting_planes(self) -> BackendRun:
        """Rounds of the box QP on the set's Gram matrix, each joining the rows its answer violates."""
        problem, settings = self.problem, self.settings
        B = np.zeros((problem.rank, problem.d_in))
        for _ in range(settings.working_set_rounds):
            self.rounds += 1
            box = _BoxQP(self.gram, problem.rhs[self.rows], self.upper[self.rows], problem.rho, self.limit)
            outcome, detail = box.solve(self.z_rows, self._budget())
            self.z_rows, self.newton = box.z, self.newton + box.newton
            B = problem.weighted_sum(self.z_rows, self.rows) / problem.rho
            if outcome in UNDECIDED and self.handed_over is not None:
                return self.matrix_free(None)  # back over every row, from the face's multipliers
            if outcome is not Outcome.SOLVED:
                return self._result(B, self._infeasible_or(outcome, B, self.rows, self.z_rows), detail)
            violated = self._violated(B)
            if violated.size == 0:
                return self._result(B, Outcome.SOLVED, f"every row within {self.limit:.1e} ({self.rows.size} in play)")
            if self.rows.size + violated.size > MAX_ROWS:
                self._drop_slack_rows()
            room = MAX_ROWS - self.rows.size
            if room <= 0:
                worst = self._worst(B)
                detail = f"{self.rows.size} rows in play, {violated.size} or more others violated by up to {worst:.2g}"
                return self.matrix_free(_Partial(B, detail))
            self._join(np.sort(violated[:room]))
        if self.handed_over is not None:
            return self.matrix_free(None)
        return self._result(B, Outcome.MAX_ITER, f"{settings.working_set_rounds} rounds")

    def matrix_free(self, partial: _Partial | None) -> BackendRun:
        """Every row at once, without a Gram matrix, from the multipliers held: SOLVED when it settles
        the QP; else the working set's ``partial`` answer on the rows it holds (WORKING_SET_FULL: it
        holds every row in play, and the loop's true-gap check judges the rest), or the limit. Where
        it reaches a face that at most MAX_ROWS rows hold (once a solve, and not from a full working
        set), the working set takes those rows and settles the face on their Gram matrix; where that
        cannot decide it (limits), it goes back over every row from the set's multipliers."""
        problem = self.problem
        z = np.zeros(problem.n)
        z[self.rows] = self.z_rows
        self.gram = None  # its memory is what the rows' own C needs now
        limit = max(self.limit, alm_matrix_free.TOLERANCE * self.scale)
        hand_over_at = MAX_ROWS if partial is None and self.handed_over is None else None
        rows = RowProducts.of(problem)
        result = solve_box(rows, problem.rhs, self.upper, problem.rho, limit, z, self._budget(), hand_over_at)
        self.newton += result.newton
        if isinstance(result, FaceHandOver):
            self.handed_over = result
            self.without_gram, self.rows = False, np.flatnonzero(result.z > 0)
            self.z_rows, self.gram = result.z[self.rows], problem.cross_gram(self.rows, self.rows)
            return self.cutting_planes()
        if result.outcome is Outcome.SOLVED or partial is None:
            outcome = result.outcome
            if outcome is not Outcome.SOLVED:  # contradicting hard rows: their multipliers grow along a ray
                outcome = self._infeasible_or(outcome, result.B, np.arange(problem.n), result.z)
            # the warm start of the next solve: the rows that hold multipliers, and no Gram matrix
            self.without_gram = True
            self.rows = np.flatnonzero(result.z > 0)
            self.z_rows = result.z[self.rows]
            return BackendRun(B=result.B, outcome=outcome, iterations=self.newton, rows=np.arange(problem.n),
                              detail=f"{result.detail}; every row in play{self._from_face()}")  # fmt: skip
        detail = f"{partial.detail}; over every row: {result.detail}"
        return self._result(partial.B, Outcome.WORKING_SET_FULL, detail)

    def _from_face(self) -> str:
        """Words for a detail: where the solve started over every row and handed its face over."""
        return "" if self.handed_over is None else f"; first {self.handed_over.detail}"

    def _budget(self) -> alm_matrix_free.Budget:
        return alm_matrix_free.Budget(
            newton_left=self.settings.of(AlmSettings).max_iter - self.newton,
            deadline=self.start + self.settings.time_limit_s,
        )

    def _violated(self, B: np.ndarray) -> np.ndarray:
        """Rows out of the set that B violates, the most violated first (at most JOIN_AT_MOST)."""
        slack = self._slack(B)
        violated = np.flatnonzero(slack < -self.limit)
        return violated[np.argsort(slack[violated], kind="stable")[:JOIN_AT_MOST]]

    def _slack(self, B: np.ndarray) -> np.ndarray:
        """Per row out of the set, how far B keeps it inside its bound (rows in the set: ∞). Soft rows
        are all in it but after a matrix-free start, which hands over only those holding multipliers:
        one out of it that B violates wants a multiplier, as a hard row does."""
        problem = self.problem
        slack = problem.constraint_values(B) - problem.rhs
        slack[self.rows] = np.inf
        return slack

    def _worst(self, B: np.ndarray) -> float:
        return float(-np.min(self._slack(B), initial=0.0))

    def _join(self, new: np.ndarray) -> None:
        """Add rows to the set: the Gram matrix grows by their blocks only (theirs exactly symmetric)."""
        m, problem = self.rows.size, self.problem
        gram = np.empty((m + new.size, m + new.size))
        gram[:m, :m] = self.gram
        across = problem.cross_gram(new, self.rows)
        gram[m:, :m] = across
        gram[:m, m:] = across.T
        gram[m:, m:] = problem.cross_gram(new, new)
        self.rows, self.gram = np.concatenate([self.rows, new]), gram
        self.z_rows = np.concatenate([self.z_rows, np.zeros(new.size)])

    def _drop_slack_rows(self) -> None:
        """Rows without a multiplier leave the set: the rows a round joined that the next answer made
        slack. Only where the set would outgrow MAX_ROWS: a suite of a million must_keep cases near
        their margin has tens of thousands that some round's answer violates, and far fewer that bind
        at the optimum; a dropped row, soft or hard, joins again if violated."""
        keep = self.z_rows > 0
        if not keep.all():
            self.rows, self.z_rows, self.gram = self.rows[keep], self.z_rows[keep], self.gram[np.ix_(keep, keep)]

    def _infeasible_or(self, outcome: Outcome, B: np.ndarray, rows: np.ndarray, z: np.ndarray) -> Outcome:
        """INFEASIBLE(_INACCURATE) where the hard multipliers ``z`` of ``rows`` grew along a Farkas ray;
        else ``outcome``."""
        ratio = hard_rows_farkas_ratio(self.problem, rows, z, B)
        if ratio is not None and ratio <= FARKAS_INFEASIBLE:
            return Outcome.INFEASIBLE
        if ratio is not None and ratio <= FARKAS_INFEASIBLE_INACCURATE:
            return Outcome.INFEASIBLE_INACCURATE
        return outcome

    def _result(self, B: np.ndarray, outcome: Outcome, detail: str) -> BackendRun:
        rows = np.sort(self.rows)
        return BackendRun(B=B, outcome=outcome, iterations=self.newton, rows=rows, detail=detail + self._from_face())


@dataclass(frozen=True)
class _Partial:
    """The working set's answer on the rows it holds, and what it leaves violated."""

    B: np.ndarray
    detail: str


class _BoxQP:
    """min ½ zᵀ(G/ρ)z − hᵀz on 0 ≤ z ≤ u: the augmented Lagrangian in y-space (β = Kᵀy/ρ) with
    semismooth Newton subproblems, and the exact face solve once the multipliers are close."""

    def __init__(self, G: np.ndarray, h: np.ndarray, upper: np.ndarray, rho: float, limit: float) -> None:
        self.G, self.h, self.u, self.rho, self.limit = G, h, upper, rho, limit
        diagonal = np.diag(G)
        positive = diagonal[diagonal > 0]
        self.typical = float(np.median(positive)) if positive.size else 1.0  # ‖a_i‖², a typical row
        self.z = np.zeros(h.size)
        self.newton = 0

    def violation(self, z: np.ndarray, s: np.ndarray) -> float:
        """The worst optimality condition (alm_matrix_free.box_violation) on this box."""
        return box_violation(z, s, self.u)

    def slack(self, z: np.ndarray) -> np.ndarray:
        return self.G @ z / self.rho - self.h

    def solve(self, z0: np.ndarray, budget: alm_matrix_free.Budget) -> tuple[Outcome, str]:
        rho, h, u, G = self.rho, self.h, self.u, self.G
        z = np.clip(z0, 0.0, u)
        if z.any():
            done = self.face(z, budget)
            if done is not None:
                return done
        sigma = SIGMA_START * rho / self.typical
        y = z.copy()
        Gy = G @ y
        for outer in range(200):
            tolerance = INNER_TOLERANCE * 0.1**outer
            factor = None  # ρ/σ I + G_AA, reused while A changes by a few rows (σ is fixed within)
            for inner in range(INNER_MAX_ITER):
                if self.newton >= budget.newton_left or time.perf_counter() > budget.deadline:
                    self.z = z
                    limit = Outcome.MAX_ITER if self.newton >= budget.newton_left else Outcome.TIME_LIMIT
                    return limit, f"{self.newton} Newton steps"
                s = Gy / rho - h
                w = z - sigma * s
                r = y - np.clip(w, 0.0, u)  # ∇φ = Kᵀr
                Gr = G @ r
                if np.sqrt(max(float(r @ Gr), 0.0)) <= tolerance * max(1.0, np.sqrt(max(float(y @ Gy), 0.0))):
                    break
                inside_mask = (w > 0) & (w < u)
                if inner == 0 and outer > 0:
                    inside_mask |= (z > 0) & (z < u)
                inside = np.flatnonzero(inside_mask)
                factor, x, _ = SubsetFactor.solve_reusing(factor, G, inside, Gr[inside], rho / sigma)
                delta = -r
                delta[inside] += x
                G_delta = -Gr + x @ G[inside]  # G symmetric: rows gather faster than columns
                self.newton += 1
                t = exact_step(w, sigma, u, G_delta / rho, float(y @ G_delta) / rho, float(delta @ G_delta) / rho)
                y += t * delta
                Gy += t * G_delta
            s = Gy / rho - h
            z = np.clip(z - sigma * s, 0.0, u)
            worst = self.violation(z, s)
            if worst <= self.limit:
                self.z = z
                return Outcome.SOLVED, f"augmented Lagrangian, {outer + 1} outer iterations"
            if outer >= 1:
                done = self.face(z, budget)
                if done is not None:
                    return done
            sigma = min(sigma * SIGMA_GROWTH, SIGMA_MAX)
        self.z = z
        return Outcome.STALLED, f"worst row {worst:.1e} from optimal"

    def face(self, z: np.ndarray, budget: alm_matrix_free.Budget) -> tuple[Outcome, str] | None:
        """Primal-dual active-set rounds from z: rows inside their box hold with equality, the
        rest sit at their bound; solved when every row's condition holds (then ``self.z``)."""
        rho, h, u, G = self.rho, self.h, self.u, self.G
        c = rho / self.typical
        s = self.slack(z)
        best, seen, factor = np.inf, None, None
        for _ in range(FACE_TRIES):
            if time.perf_counter() > budget.deadline:
                return None
            w = z - c * s
            free, top = np.flatnonzero((w > 0) & (w < u)), np.flatnonzero(w >= u)
            key = (free.tobytes(), top.tobytes())
            if key == seen:
                return None
            seen = key
            rhs = rho * h[free] - (G[np.ix_(free, top)] @ u[top] if top.size else 0.0)
            try:
                factor, z_free, reused = SubsetFactor.solve_reusing(factor, G, free, rhs)
                z, s, worst = self._at(free, top, z_free)
                if reused and worst > self.limit and worst >= best:
                    # G_FF can be singular to working precision, and a Schur solve on its
                    # neighbour's factor then loses its digits: once more from its own factor
                    factor = SubsetFactor(G, free)
                    z, s, worst = self._at(free, top, factor.solve(free, rhs))
            except np.linalg.LinAlgError:
                return None
            if worst <= self.limit:
                self.z = z
                return Outcome.SOLVED, f"the optimum's face ({free.size} rows inside their box)"
            if worst >= best:
                return None
            best = worst
        return None

    def _at(self, free: np.ndarray, top: np.ndarray, z_free: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """The multipliers of a face round (``z_free`` inside, λ at the top, 0 elsewhere), their
        slacks, and the worst optimality condition there (a multiplier out of its box counts too)."""
        z = np.zeros(self.h.size)
        z[top], z[free] = self.u[top], z_free
        self.newton += 1
        s = self.slack(z)
        worst = max(self.violation(z, s), float(np.max(-z, initial=0.0)), float(np.max(z - self.u, initial=0.0)))
        return z, s, worst
