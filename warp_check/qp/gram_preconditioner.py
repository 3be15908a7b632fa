"""A preconditioner for conjugate gradients on a Gram matrix that is never formed: low rank plus diagonal.

The matrix-free QP settles the optimum's face by CG on G_FF = K_F K_Fᵀ (warp_check.qp.alm_matrix_free),
each product through the rows' structure. Preconditioned by its diagonal alone (Jacobi), CG needs as
many steps as G_FF's spread of eigenvalues, and real representations spread them far: their rows share
a few dominant directions (MiniLM's sentences, and a sentence's perturbations all the more). Measured on
the face of real SST-2 and every perturbation (9,823 rows, rank 64): 1,000 Jacobi steps left a relative
residual of 5e-4; this preconditioner (rank 2,000) reached 1e-8 in 334 steps, and on the next round's
face (8,336 rows) in 110, its build taking 3–4 s (1 BLAS thread).

The approximation is a partial Cholesky factor by random pivots (randomly pivoted Cholesky, Chen,
Epperly, Tropp and Webber 2023): a block of rows drawn in proportion to what the factor so far leaves
of their diagonal, their columns of G (each O(rows · (r + d_in)) through the structure), and the
factor grows by their Nyström block. Then

    G ≈ M = F Fᵀ + D,   D = the diagonal F leaves (floored),   M⁻¹ by Woodbury (an ℓ × ℓ Cholesky),

so a face dominated by a few directions is preconditioned as the directions it is, and the rest by
its remaining diagonal, as Jacobi would. M is positive definite however F came out, so CG stays CG:
the answer is G's, only the step count depends on F.

A face's active-set rounds solve on much the same rows again and again (G is one matrix throughout; of
18,000 rows a round moves up to a few thousand in and out), so a build serves the rounds after it
(:meth:`LowRankPlusDiagonal.on`): the same pivots' Nyström approximation on the face's rows, those the
build held kept as they are, those that came given their rows of F by replaying the build's steps on
their columns of G, and the Woodbury core downdated by the rows that left and updated by those that came.
"""

from __future__ import annotations

import numpy as np

# The factor's rank at most (and at most half the rows): memory rows × RANK × 8 bytes (a face of
# 18,000 rows: 288 MB); the build costs rows · RANK · (r + d_in + RANK/2) flops, a few CG steps' worth.
RANK = 2000
BLOCK = 100  # pivots drawn at a time: their columns of G are one matrix product
# Eigenvalues of a block's own (residual) Gram matrix below this × its pivots' largest diagonal entry
# of G are dropped (dependent pivots: a sentence and its perturbations drawn together), so no direction
# is divided by round-off.
BLOCK_CUTOFF = 1e-10
HELD = 1e-12  # the draws stop where what F leaves of G's trace is below this share: round-off
# D's floor, relative to the mean of what F leaves: rows F holds exactly would otherwise be divided
# by ~0. Measured on the faces above (rank 2,000): 0.1, 1 and 3 took 132, 110 and 421 steps to 1e-8.
FLOOR = 1.0
# ... and at least this × the mean of G's diagonal, where F holds G whole (M stays invertible to
# working precision: its Woodbury inverse keeps ~10 digits)
FLOOR_OF_DIAGONAL = 1e-6
SEED = 0  # the pivots are drawn from a fixed seed: the same preconditioner on every run


class LowRankPlusDiagonal:
    """M⁻¹ for M = F Fᵀ + D built from ``diagonal`` (G's) and ``columns(S)`` (G[:, S])."""

    def __init__(self, diagonal: np.ndarray, columns, rank: int = RANK) -> None:
        n = diagonal.size
        rank = max(0, min(rank, n // 2))
        factor, left, self.steps = _partial_cholesky(diagonal, columns, rank)
        self.floor = max(FLOOR * float(np.mean(left)), FLOOR_OF_DIAGONAL * float(np.mean(diagonal)), 1e-300)
        self.D = np.maximum(left, self.floor)
        # D⁻¹F in F's own memory, the only n × ℓ matrix kept (a face of 18,000 rows: 288 MB), and
        # I + FᵀD⁻¹F from D^-½F on the way, without a second
        root = np.sqrt(self.D)[:, None]
        factor /= root
        self.inner = np.eye(factor.shape[1]) + factor.T @ factor  # kept for the faces it serves later
        factor /= root
        self.scaled = factor
        self.core = np.linalg.cholesky(self.inner) if self.inner.size else self.inner
        self.rank = factor.shape[1]

    def __call__(self, r: np.ndarray) -> np.ndarray:
        """M⁻¹r = D⁻¹r − D⁻¹F (I + FᵀD⁻¹F)⁻¹ FᵀD⁻¹r."""
        if self.rank == 0:
            return r / self.D
        import scipy.linalg as sl

        inner = sl.cho_solve((self.core, True), self.scaled.T @ r, check_finite=False)
        return r / self.D - self.scaled @ inner

    def factor_rows(self, columns) -> np.ndarray:
        """F's rows for other rows of the same G, from ``columns(S)`` (their G[·, S], S this build's
        pivots): the build's steps replayed on them, so F = G[·, pivots] T as for the rows it was built on."""
        factor, k = None, 0
        for pivots, weights, coupling in self.steps:
            block = columns(pivots) @ weights
            if factor is None:
                factor = np.empty((block.shape[0], self.rank))
            block -= factor[:, :k] @ coupling
            factor[:, k : k + block.shape[1]] = block
            k += block.shape[1]
        return factor if factor is not None else np.zeros((0, self.rank))

    def on(self, at: np.ndarray, diagonal: np.ndarray, columns) -> PrincipalPart:
        """M for another set of rows of the same G, the same pivots' approximation: row i is this build's
        row ``at[i]``, or (``at[i]`` < 0) a row it did not hold, whose row of F comes from ``columns(S)``
        (G[those rows, S]) and whose ``diagonal`` (G's) gives its D."""
        held, came = np.flatnonzero(at >= 0), np.flatnonzero(at < 0)
        left = np.ones(self.D.size, dtype=bool)
        left[at[held]] = False
        scaled_came = self.factor_rows(columns) if came.size and self.rank else np.zeros((came.size, self.rank))
        D_came = np.maximum(diagonal[came] - np.einsum("ij,ij->i", scaled_came, scaled_came), self.floor)
        # I + F_faceᵀD⁻¹F_face: the build's, less the rows that left, plus those that came (each ⪰ 0, and
        # what remains ⪰ I: the downdate cancels nothing it needs); D⁻¹F of those that came in F's memory
        root = np.sqrt(D_came)[:, None]
        scaled_came /= root
        gone = self.scaled[left]
        inner = self.inner - gone.T @ (gone * self.D[left][:, None]) + scaled_came.T @ scaled_came
        scaled_came /= root
        core = np.linalg.cholesky(inner) if self.rank else inner
        return PrincipalPart(whole=self, core=core, held=held, at=at[held], came=came, D_came=D_came,
                             scaled_came=scaled_came)  # fmt: skip


class PrincipalPart:
    """M⁻¹ on a face a build serves: rows it held (``held``, its rows ``at``) keep their D and D⁻¹F, rows
    that came (``came``) have their own; M⁻¹r = D⁻¹r − D⁻¹F (I + FᵀD⁻¹F)⁻¹ FᵀD⁻¹r over the face's rows."""

    def __init__(self, *, whole: LowRankPlusDiagonal, core: np.ndarray, held: np.ndarray, at: np.ndarray,
                 came: np.ndarray, D_came: np.ndarray, scaled_came: np.ndarray) -> None:  # fmt: skip
        self.whole, self.core, self.held, self.at = whole, core, held, at
        self.came, self.D_came, self.scaled_came = came, D_came, scaled_came

    def __call__(self, r: np.ndarray) -> np.ndarray:
        whole = self.whole
        out = np.empty_like(r)
        out[self.came] = r[self.came] / self.D_came
        padded = np.zeros(whole.D.size)  # zero on the rows that left: F_heldᵀD⁻¹r = (D⁻¹F)ᵀ padded
        padded[self.at] = r[self.held]
        out[self.held] = padded[self.at] / whole.D[self.at]
        if whole.rank == 0:
            return out
        import scipy.linalg as sl

        projected = whole.scaled.T @ padded + self.scaled_came.T @ r[self.came]
        inner = sl.cho_solve((self.core, True), projected, check_finite=False)
        out[self.held] -= (whole.scaled @ inner)[self.at]
        out[self.came] -= self.scaled_came @ inner
        return out


def _partial_cholesky(diagonal: np.ndarray, columns, rank: int) -> tuple[np.ndarray, np.ndarray, list]:
    """F (n × ≤ rank) with F Fᵀ ≈ G from pivots drawn by what is left of the diagonal, what it leaves,
    and its steps (pivots, weights W, coupling X): F's columns of a step are G[:, pivots] W − F_before X."""
    n = diagonal.size
    rng = np.random.default_rng(SEED)
    factor = np.zeros((n, rank))
    left = np.maximum(diagonal.astype(np.float64), 0.0)
    k, whole = 0, float(left.sum())
    steps: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    while k < rank:
        total = float(left.sum())
        if not total > HELD * whole:  # what is left is round-off: F holds G
            break
        pivots = np.unique(rng.choice(n, size=min(BLOCK, rank - k), p=left / total))
        block = columns(pivots) - factor[:, :k] @ factor[pivots, :k].T
        own = 0.5 * (block[pivots] + block[pivots].T)
        values, vectors = np.linalg.eigh(own)
        kept = values > BLOCK_CUTOFF * float(np.max(diagonal[pivots]))
        if not kept.any():
            break
        m = min(int(np.count_nonzero(kept)), rank - k)
        weights = (vectors[:, kept] / np.sqrt(values[kept]))[:, :m]
        new = block @ weights
        steps.append((pivots, weights, factor[pivots, :k].T @ weights))
        factor[:, k : k + m] = new
        k += m
        left = np.maximum(left - np.einsum("ij,ij->i", new, new), 0.0)
        left[pivots] = 0.0
    return (factor if k == rank else factor[:, :k].copy()), left, steps
