"""The augmented Lagrangian over every row, without a Gram matrix: semismooth Newton-CG in β.

The working set's method (warp_check.qp.alm) keeps G = (CCᵀ) ⊙ (VVᵀ) over its rows: rows² × 8 bytes.
A million isotropic must_keep cases at rank 64 (β of 24,576 unknowns) hold 17,875 rows inside
their box at the optimum: 2.6 GB of Gram matrix for those alone, and β's own normal matrix would be
4.8 GB. This method needs neither: every product goes through a row's structure a_i = c_i ⊗ v_i,

    Kβ = rowwise ⟨c_i, B v_i⟩  and  Kᵀy = Σ_i y_i c_i v_iᵀ,   O(rows · r · d_in) each,

so its memory is the rows' own C (rows × r) beside the loop's v, read where it lies.

It is the same method as the working set's (the proximal point method on the dual): each
subproblem min_β φ(β) = ρ/2‖β‖² + (1/σ) Σ_i Ψ_i(z_i + σ(h_i − a_iᵀβ)), Ψ_i' = clip(·, 0, u_i), is
minimised by semismooth Newton, whose system (ρI + σ K_Aᵀ K_A) Δ = −∇φ over the rows A strictly
inside their box is solved by conjugate gradients to a relative residual that tightens with ‖∇φ‖
(inexact Newton), preconditioned by the Kronecker product of the rows' second moments (exact in
expectation where c and v vary independently); then an exact line search, z moves to
clip(z + σ(h − Kβ), 0, u) and σ grows. From the second outer iteration on, the optimum's face is
tried as the working set's method ends (primal-dual active-set rounds), each round's linear system
G_FF z_F = ρh_F − G_FT λ_T by CG on G_FF = K_F K_Fᵀ. It ends when every row's optimality condition
holds at (z, β = Kᵀz/ρ) to TOLERANCE. Measured (that million, 65,644 rows in the loop, 1 BLAS
thread): the first rank-64 QP in 57 s, 2 outer iterations and a face of 17,875 rows in 7 rounds.

A face by CG is only as good as G_FF's conditioning, and real representations leave it far worse
than isotropic ones: they share a few dominant directions. Preconditioned by its diagonal, on 300k
real SST-2 sentences and their perturbations (65,439 rows, rank 64) face rounds of 1,000 CG steps
each missed again and again, and the QP met its 600 s limit. CG on the face is therefore
preconditioned by a partial Cholesky factor of G_FF plus what it leaves of the diagonal
(warp_check.qp.gram_preconditioner): on every perturbation of SST-2 (65,703 rows, 8,274 on the face)
its 10 rounds take 8–180 steps each, and the QP settles in 81 s. One build serves a face's later
rounds while its rows move little (FACE_REBUILD_SHARE), and a round's CG stops as loose as the next
round can use (FACE_CG_SHARE). Where few rows hold multipliers (at most
``hand_over_at``), the solve stops at the face instead (:class:`FaceHandOver`) for a method that
factors their Gram matrix (warp_check.qp.alm's working set), to its tighter tolerance.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from warp_check.qp.gram_preconditioner import LowRankPlusDiagonal, Preconditioner, positions
from warp_check.qp.solution import Outcome

# σ starts at this many times ρ / (median ‖a_i‖²) and grows ×SIGMA_GROWTH an outer iteration, as in
# the working set's method, to at most SIGMA_MAX times it; an outer iteration whose subproblem did not
# settle and whose z would be worse backs σ off instead (CG's error is amplified by σ into z).
SIGMA_START = 10.0
SIGMA_GROWTH = 10.0
SIGMA_MAX = 1e10
OUTER_MAX = 60
# Stalled: σ at its cap, and the worst optimality condition has not halved in this many outer iterations.
STALL_RATIO = 0.5
STALL_OUTER = 3
# A subproblem is solved when ‖∇φ‖ ≤ this × 0.1^outer × max(1, ‖ρβ‖) (loose while z is far).
INNER_TOLERANCE = 1e-2
INNER_TOLERANCE_FLOOR = 1e-12  # below it ‖∇φ‖ is round-off
INNER_MAX_ITER = 60
# Every row's optimality condition to this, relative to 1 + max |h|: not the working set's 1e-9,
# which ends on an exact face solve; CG's inexact Newton steps run out of digits near 1e-8 (a
# 230-row problem stalls at 1.5e-8). Every row then holds to 1e-6·(1 + max |h|), far inside the
# loop's aim_above (1e-3), as the interior point's tolerance does.
TOLERANCE = 1e-6
# The exact face (warp_check.qp.alm's ending, by CG): tried after each outer iteration from this one
# on, for at most FACE_TRIES active-set rounds, each a CG on G_FF to FACE_CG_TOLERANCE (relative).
# A round while it improves costs a preconditioner and tens of CG steps, an outer iteration tens of
# Newton steps: real SST-2 and every perturbation (8,274 rows inside) took 10 rounds from 0.29 to 6e-8;
# eight left it at 6e-4 for another outer iteration (70 s of Newton).
FACE_FROM_OUTER = 1
FACE_TRIES = 16
FACE_PATIENCE = 2
FACE_CG_TOLERANCE = 1e-11
# A round's CG stops at ρ × FACE_CG_SHARE × the last round's worst row (each row's slack error is
# ≤ ‖residual‖/ρ): a face far from settled needs only the signs of its rows' w right, not their digits.
# Measured on the first QP of a million cases with a measured spectrum (17,449 rows on the face): 0.01
# and 1e-4 took 541 CG steps in 8 rounds, 0.1 and 1e-2 took 365 in the same 8 (isotropic, 17,875
# rows: 385 in 6, 296 in 7).
FACE_CG_SHARE = 0.1
FACE_CG_LOOSEST = 1e-2
FACE_CG_MAX_ITER = 1000
# A face's preconditioner is built again only where the rows moved in and out since its build pass this
# share of the face; else the build's pivots serve it (LowRankPlusDiagonal.serving). The first QP of a
# million isotropic cases: a face of 17,875 rows, a 4.8 s build a round, the later rounds' rows 3,300 from
# the first's; of a million with a measured spectrum (17,449 rows) 4,800 after the first, 3,100–3,300 after.
FACE_REBUILD_SHARE = 0.25
NULL_CURVATURE = 1e-14  # dᵀG_FF d below this × max diag(G_FF) × ‖d‖²: round-off, no curvature
# CG stops at ‖residual‖ ≤ η‖∇φ‖, η = min(CG_FORCING, √(‖∇φ‖ / scale)): superlinear near the end.
CG_FORCING = 0.1
CG_MAX_ITER = 500
MOMENT_BLOCK = 8192  # rows gathered at a time for the preconditioner's Σ v vᵀ


@dataclass(frozen=True)
class Budget:
    """What a solve may still spend: Newton steps and a deadline (time.perf_counter())."""

    newton_left: int
    deadline: float


class RowProducts:
    """K and Kᵀ over a set of rows, from each row's c and its case's v: row i's v is ``V[cases[i]]``
    (``cases`` None: ``V[i]``). The loop's V is read where it lies, never gathered whole: at 131k
    cases of d = 384 a gathered copy is 400 MB, as much again as the QP's own work."""

    def __init__(self, C: np.ndarray, V: np.ndarray, cases: np.ndarray | None = None, distinct: bool = False) -> None:
        self.C = np.ascontiguousarray(C, dtype=np.float64)
        self.V = np.ascontiguousarray(V, dtype=np.float64)
        self.cases = None if cases is None else np.asarray(cases, dtype=np.intp)
        # no two rows share a case (``distinct``: known so, as a subset of rows that share none)
        self.distinct = distinct or self.cases is None or np.unique(self.cases).size == self.cases.size

    @classmethod
    def of(cls, problem) -> RowProducts:
        """Every row of ``problem``, over its V itself."""
        own = problem.V.shape[0] == problem.n and np.array_equal(problem.cases, np.arange(problem.n))
        return cls(problem.C, problem.V, None if own else problem.cases)

    def subset(self, rows: np.ndarray) -> RowProducts:
        """The rows at ``rows``: their v gathered where they are at most half of V's (each product then
        costs their own rows), else read where they lie."""
        cases = rows if self.cases is None else self.cases[rows]
        if 2 * rows.size > self.V.shape[0]:
            return RowProducts(self.C[rows], self.V, cases, distinct=self.distinct)
        return RowProducts(self.C[rows], self.V[cases])

    @property
    def n(self) -> int:
        return int(self.C.shape[0])

    def K(self, B: np.ndarray) -> np.ndarray:
        """⟨a_i, β⟩ = c_iᵀ B v_i for every row."""
        VB = self.V @ B.T
        return np.einsum("ij,ij->i", self.C, VB if self.cases is None else VB[self.cases])

    def KT(self, y: np.ndarray) -> np.ndarray:
        """Σ_i y_i c_i v_iᵀ as an (r, d_in) matrix."""
        weighted = self.C * y[:, None]
        if self.cases is None:
            return weighted.T @ self.V
        by_case = np.zeros((self.V.shape[0], self.C.shape[1]))
        if self.distinct:
            by_case[self.cases] = weighted
        else:
            np.add.at(by_case, self.cases, weighted)
        return by_case.T @ self.V

    def columns(self, S: np.ndarray) -> np.ndarray:
        """G[:, S] = (C C_Sᵀ) ⊙ (V V_Sᵀ) over every row: O(rows · |S| · (r + d_in))."""
        cases = S if self.cases is None else self.cases[S]
        VVs = self.V @ self.V[cases].T
        return (self.C @ self.C[S].T) * (VVs if self.cases is None else VVs[self.cases])

    def block(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """G[a, b] = (C_a C_bᵀ) ⊙ (V_a V_bᵀ) for rows ``a`` and ``b``."""
        cases_a, cases_b = (a, b) if self.cases is None else (self.cases[a], self.cases[b])
        return (self.C[a] @ self.C[b].T) * (self.V[cases_a] @ self.V[cases_b].T)

    def norms2(self) -> np.ndarray:
        """‖a_i‖² = ‖c_i‖²‖v_i‖²."""
        v2 = np.einsum("ij,ij->i", self.V, self.V)
        return np.einsum("ij,ij->i", self.C, self.C) * (v2 if self.cases is None else v2[self.cases])

    def v_moment(self) -> np.ndarray:
        """Σ_i v_i v_iᵀ over the rows, a block of rows at a time where they are read in place."""
        if self.cases is None:
            return self.V.T @ self.V
        S = np.zeros((self.V.shape[1], self.V.shape[1]))
        for lo in range(0, self.cases.size, MOMENT_BLOCK):
            block = self.V[self.cases[lo : lo + MOMENT_BLOCK]]
            S += block.T @ block
        return S


@dataclass(frozen=True, kw_only=True, eq=False)
class FaceBuild:
    """A face's rows at its preconditioner's build, and that build: it serves the face's later rounds."""

    rows: np.ndarray
    preconditioner: LowRankPlusDiagonal


@dataclass(frozen=True)
class BoxResult:
    """How a solve ended, its multipliers and their B, and the work it took."""

    outcome: Outcome
    z: np.ndarray  # per row, in [0, u]
    B: np.ndarray  # Kᵀz / ρ
    newton: int
    cg: int
    detail: str


@dataclass(frozen=True)
class FaceHandOver:
    """Where a solve stopped, at a face few enough rows hold multipliers on to factor their Gram
    matrix: its multipliers (positive on at most ``hand_over_at`` rows) and the work so far."""

    z: np.ndarray
    newton: int
    cg: int
    detail: str


def solve_box(
    rows: RowProducts,
    h: np.ndarray,
    upper: np.ndarray,
    rho: float,
    limit: float,
    z0: np.ndarray,
    budget: Budget,
    hand_over_at: int | None = None,
) -> BoxResult | FaceHandOver:
    """min ½ zᵀ(KKᵀ/ρ)z − hᵀz on 0 ≤ z ≤ u, from ``z0``: SOLVED when every row's optimality
    condition holds to ``limit`` at (z, Kᵀz/ρ); else the limit that stopped it, with its last z.
    ``hand_over_at``: where the optimum's face would be tried with at most this many rows holding
    multipliers, stop there instead (:class:`FaceHandOver`)."""
    return _Method(rows, h, upper, rho, limit, budget, hand_over_at).run(np.clip(z0, 0.0, upper))


class _Method:
    def __init__(
        self, rows: RowProducts, h, upper, rho: float, limit: float, budget: Budget, hand_over_at: int | None
    ) -> None:
        self.rows, self.h, self.u, self.rho, self.limit, self.budget = rows, h, upper, rho, limit, budget
        self.hand_over_at = hand_over_at
        norms = rows.norms2()
        positive = norms[norms > 0]
        self.typical = float(np.median(positive)) if positive.size else 1.0
        self.newton = self.cg = 0
        self.built: FaceBuild | None = None

    def optimality(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        """The worst optimality condition at (z, Kᵀz/ρ), and that B: a row at 0 must hold, one
        inside its box be tight, one at its price be short."""
        B = self.rows.KT(z) / self.rho
        return box_violation(z, self.rows.K(B) - self.h, self.u), B

    def run(self, z: np.ndarray) -> BoxResult | FaceHandOver:
        rho, h, u, rows = self.rho, self.h, self.u, self.rows
        worst, B_z = self.optimality(z)
        if worst <= self.limit:
            return BoxResult(Outcome.SOLVED, z, B_z, 0, 0, "the starting multipliers")
        sigma = SIGMA_START * rho / self.typical
        B, Kb = B_z.copy(), rows.K(B_z)
        best, best_at = worst, 0
        cap = SIGMA_MAX * rho / self.typical
        for outer in range(OUTER_MAX):
            tolerance = max(INNER_TOLERANCE * 0.1**outer, INNER_TOLERANCE_FLOOR)
            stopped, settled = self.subproblem(B, Kb, z, sigma, tolerance)
            if stopped is not None:
                return BoxResult(stopped, z, self.optimality(z)[1], self.newton, self.cg, self.words(stopped))
            moved = np.clip(z + sigma * (h - Kb), 0.0, u)
            now, B_moved = self.optimality(moved)
            if not settled and now > worst:
                # An unsettled subproblem at a large σ amplifies its error into z: keep z, and go on
                # from its own β at a smaller σ
                sigma = max(sigma / SIGMA_GROWTH, SIGMA_START * rho / self.typical)
                B[...], Kb[...] = B_z, rows.K(B_z)
                continue
            z, worst, B_z = moved, now, B_moved
            if worst <= self.limit:
                detail = f"matrix-free, {outer + 1} outer iterations over {rows.n} rows, {self.cg} CG steps"
                return BoxResult(Outcome.SOLVED, z, B_z, self.newton, self.cg, detail)
            if outer >= FACE_FROM_OUTER:
                holding = np.count_nonzero(z)
                if self.hand_over_at is not None and 0 < holding <= self.hand_over_at:
                    detail = f"matrix-free, {outer + 1} outer iterations over {rows.n} rows, then {holding} rows' face"
                    return FaceHandOver(z=z, newton=self.newton, cg=self.cg, detail=detail)
                done = self.face(z, outer)
                if done is not None:
                    return done
            if worst < STALL_RATIO * best or (settled and sigma < cap):
                best, best_at = min(best, worst), outer
            elif outer - best_at >= STALL_OUTER:  # the inexact Newton steps have no digits left
                break
            sigma = min(sigma * SIGMA_GROWTH, cap) if settled else sigma
        return BoxResult(Outcome.STALLED, z, B_z, self.newton, self.cg, f"worst row {worst:.1e} from optimal")

    def face(self, z: np.ndarray, outer: int) -> BoxResult | None:
        """Primal-dual active-set rounds from z, as the working set's method ends: rows inside their box
        hold with equality (G_FF z_F = ρh_F − G_FT λ_T, by CG on G_FF = K_F K_Fᵀ), the others sit at a
        bound. SOLVED when every row's condition holds; None after FACE_PATIENCE rounds in a row that do
        not improve on the best (the rounds are not monotone: a face that lets a row's multiplier go
        negative is mended by the next)."""
        try:
            return self.face_rounds(z, outer)
        finally:
            self.built = None  # rows × RANK × 8 bytes: not kept through the Newton steps that follow

    def face_rounds(self, z: np.ndarray, outer: int) -> BoxResult | None:
        rho, h, u, rows = self.rho, self.h, self.u, self.rows
        c = rho / self.typical
        best, misses = np.inf, 0
        for _ in range(FACE_TRIES):
            if time.perf_counter() > self.budget.deadline:
                return None
            s = rows.K(rows.KT(z) / rho) - h
            w = z - c * s
            free, top = np.flatnonzero((w > 0) & (w < u)), np.flatnonzero(w >= u)
            if free.size == 0 or free.size > rows.C.shape[1] * rows.V.shape[1]:
                return None  # more rows inside than β has unknowns: not the optimum's face yet
            # The same face again is no fixed point here, as it is for an exact solve: the last round's
            # CG stopped at its tolerance, and this one tightens it (from the last round's z)
            on_face = rows.subset(free)
            rhs = rho * h[free]
            if top.size:
                rhs = rhs - on_face.K(rows.subset(top).KT(u[top]))
            # A face far from settled needs no more digits than its next round keeps (FACE_CG_SHARE), and
            # the last no more than a tenth of the limit; the first round at FACE_CG_LOOSEST
            goal = rho * max(FACE_CG_SHARE * best, 0.1 * self.limit) / max(float(np.linalg.norm(rhs)), 1e-300)
            tolerance = min(max(goal, FACE_CG_TOLERANCE), FACE_CG_LOOSEST)
            precondition = self.preconditioner(free, on_face, on_face.norms2())
            solved = self.gram_solve(on_face, rhs, np.clip(z[free], 0.0, None), tolerance, precondition)
            del precondition  # a served face's rows: not beside the next round's
            z = np.zeros_like(z)
            z[top], z[free] = u[top], solved
            worst, B = self.optimality(z)
            worst = max(worst, float(np.max(-z, initial=0.0)), float(np.max(z - u, initial=0.0)))
            if worst <= self.limit:
                detail = (f"matrix-free, {outer + 1} outer iterations over {rows.n} rows, then the optimum's face "
                          f"({free.size} rows inside their box), {self.cg} CG steps")  # fmt: skip
                return BoxResult(Outcome.SOLVED, np.clip(z, 0.0, u), B, self.newton, self.cg, detail)
            if worst < best:
                best, misses = worst, 0
            else:
                misses += 1
                if misses >= FACE_PATIENCE:
                    return None
        return None

    def preconditioner(self, free: np.ndarray, on_face: RowProducts, diagonal: np.ndarray) -> Preconditioner:
        """A low-rank-plus-diagonal approximation of K_F K_Fᵀ (``diagonal`` its diagonal): built for these
        rows, or where the face moved little since the last build (FACE_REBUILD_SHARE), that build's
        pivots on these rows."""
        served = None if self.built is None else self.served(self.built, free, diagonal)
        if served is not None:
            return served
        self.built = None  # its memory before the next build's (no other reference holds it)
        build = LowRankPlusDiagonal(diagonal, on_face.columns)
        self.built = FaceBuild(rows=free, preconditioner=build)
        return build

    def served(self, built: FaceBuild, free: np.ndarray, diagonal: np.ndarray) -> Preconditioner | None:
        """The build's pivots on the face ``free``; None where it moved too far since (FACE_REBUILD_SHARE)."""
        at = positions(built.rows, free)
        held = int(np.count_nonzero(at >= 0))
        if (free.size - held) + (built.rows.size - held) > FACE_REBUILD_SHARE * free.size:
            return None
        came = free[at < 0]
        return built.preconditioner.serving(at, diagonal, lambda S: self.rows.block(came, built.rows[S]))

    def gram_solve(
        self, on_face: RowProducts, rhs: np.ndarray, start: np.ndarray, tolerance: float, precondition: Preconditioner
    ) -> np.ndarray:
        """K_F K_Fᵀ x = rhs by CG from ``start``, preconditioned by ``precondition`` (M⁻¹ for an SPD M
        close to K_F K_Fᵀ); consistent where the face is the optimum's, however dependent its rows."""
        flat = NULL_CURVATURE * float(np.max(on_face.norms2(), initial=0.0))
        x = start.copy()
        residual = rhs - on_face.K(on_face.KT(x))
        goal = tolerance * float(np.linalg.norm(rhs))
        preconditioned = precondition(residual)
        direction = preconditioned.copy()
        product = float(residual @ preconditioned)
        for _ in range(FACE_CG_MAX_ITER):
            if float(np.linalg.norm(residual)) <= goal:
                break
            self.cg += 1
            Ad = on_face.K(on_face.KT(direction))
            curvature = float(direction @ Ad)
            if not curvature > flat * float(direction @ direction):
                # a direction G_FF does not see: the face's system has no solution (contradicting rows,
                # whose multipliers grow along a ray), and a step along it would only grow x
                break
            alpha = product / curvature
            x += alpha * direction
            residual -= alpha * Ad
            preconditioned = precondition(residual)
            following = float(residual @ preconditioned)
            direction = preconditioned + (following / product) * direction
            product = following
        return x

    def words(self, outcome: Outcome) -> str:
        return f"{self.newton} Newton steps, {self.cg} CG steps ({outcome.value})"

    def subproblem(self, B: np.ndarray, Kb: np.ndarray, z: np.ndarray, sigma: float, tolerance: float):
        """Minimise φ from B (B and Kb updated in place): (an Outcome where a limit stopped it, whether
        ‖∇φ‖ met ``tolerance``)."""
        rho, h, u, rows = self.rho, self.h, self.u, self.rows
        for _ in range(INNER_MAX_ITER):
            if self.newton >= self.budget.newton_left:
                return Outcome.MAX_ITER, False
            if time.perf_counter() > self.budget.deadline:
                return Outcome.TIME_LIMIT, False
            w = z + sigma * (h - Kb)
            gradient = rho * B - rows.KT(np.clip(w, 0.0, u))
            size, scale = float(np.linalg.norm(gradient)), max(1.0, rho * float(np.linalg.norm(B)))
            if size <= tolerance * scale:
                return None, True
            inside = rows.subset(np.flatnonzero((w > 0) & (w < u)))
            forcing = min(CG_FORCING, np.sqrt(size / scale))
            step = self.newton_direction(inside, sigma, -gradient, forcing)
            self.newton += 1
            q = rows.K(step)
            t = exact_step(w, sigma, u, q, rho * float(np.sum(B * step)), rho * float(np.sum(step * step)))
            B += t * step
            Kb += t * q
        return None, False  # out of inner iterations: z may move on from here (run decides)

    def newton_direction(self, inside: RowProducts, sigma: float, rhs: np.ndarray, forcing: float) -> np.ndarray:
        """(ρI + σ K_Aᵀ K_A) x = rhs by preconditioned CG, to ‖residual‖ ≤ forcing·‖rhs‖."""
        rho = self.rho
        precondition = kronecker(inside, rho, sigma)

        def apply(x: np.ndarray) -> np.ndarray:
            return rho * x + sigma * inside.KT(inside.K(x))

        x = np.zeros_like(rhs)
        residual = rhs.copy()
        goal = forcing * float(np.linalg.norm(rhs))
        preconditioned = precondition(residual)
        direction = preconditioned.copy()
        product = float(np.sum(residual * preconditioned))
        for _ in range(CG_MAX_ITER):
            if float(np.linalg.norm(residual)) <= goal:
                break
            self.cg += 1
            Ad = apply(direction)
            alpha = product / float(np.sum(direction * Ad))
            x += alpha * direction
            residual -= alpha * Ad
            preconditioned = precondition(residual)
            following = float(np.sum(residual * preconditioned))
            direction = preconditioned + (following / product) * direction
            product = following
        return x


def kronecker(inside: RowProducts, rho: float, sigma: float):
    """(ρI + σ S_c ⊗ S_v)⁻¹ with S_c = C_AᵀC_A / |A|, S_v = V_AᵀV_A: Σ_A (c cᵀ) ⊗ (v vᵀ) when c and v
    vary independently across rows, its expectation otherwise; inverted through both eigenbases."""
    if inside.n == 0:
        return lambda x: x / rho
    lc, Qc = np.linalg.eigh(inside.C.T @ inside.C / inside.n)
    lv, Qv = np.linalg.eigh(inside.v_moment())
    scale = 1.0 / (rho + sigma * np.outer(np.maximum(lc, 0.0), np.maximum(lv, 0.0)))
    return lambda x: Qc @ ((Qc.T @ x @ Qv) * scale) @ Qv.T


def box_violation(z: np.ndarray, s: np.ndarray, u: np.ndarray) -> float:
    """The worst optimality condition of the box QP at multipliers z with slacks s: a row at 0 must
    hold (s ≥ 0), one inside its box be tight (s = 0), one at its price be short (s ≤ 0)."""
    return float(np.max(np.where(z <= 0, -s, np.where(z >= u, s, np.abs(s))), initial=0.0))


def exact_step(w: np.ndarray, sigma: float, u: np.ndarray, q: np.ndarray, bd: float, dd: float) -> float:
    """The minimiser t ∈ (0, 1] of φ along a Newton direction, φ'(t) = bd + t·dd − π(t)ᵀq with
    π(t) = clip(w − σ t q, 0, u): φ' is increasing (φ convex), so bisection finds its root."""

    def slope(t: float) -> float:
        return bd + t * dd - float(np.clip(w - sigma * t * q, 0.0, u) @ q)

    if slope(1.0) <= 0:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        if slope(mid) < 0:
            lo = mid
        else:
            hi = mid
    return hi
