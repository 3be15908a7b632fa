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
17,875 rows a round moves up to a few thousand in and out), so a build serves the rounds after it
(:meth:`LowRankPlusDiagonal.serving`): the same pivots' Nyström approximation on the face's rows, those the
build held kept as they are, those that came given their rows of F by replaying the build's steps on
their columns of G, and the Woodbury core downdated by the rows that departed and updated by those that came.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

Columns = Callable[[np.ndarray], np.ndarray]  # S → G[rows, S], the rows' columns of G at S
Preconditioner = Callable[[np.ndarray], np.ndarray]  # r → M⁻¹r

# The factor's rank at most (and at most half the rows): memory rows × RANK × 8 bytes (a face of
# 17,875 rows: 286 MB); the build costs rows · RANK · (r + d_in + RANK/2) flops, a few CG steps' worth.
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


class Step(NamedTuple):
    """One block of the partial Cholesky factor: its columns are G[:, pivots] · weights − F_before · coupling."""

    pivots: np.ndarray
    weights: np.ndarray
    coupling: np.ndarray


class LowRankPlusDiagonal:
    """M⁻¹ for M = F Fᵀ + D built from ``diagonal`` (G's) and ``columns(S)`` (G[:, S])."""

    def __init__(self, diagonal: np.ndarray, columns: Columns, rank: int = RANK) -> None:
        n = diagonal.size
        rank = max(0, min(rank, n // 2))
        factor, remaining, self.steps = _partial_cholesky(diagonal, columns, rank)
        self.floor = max(FLOOR * float(np.mean(remaining)), FLOOR_OF_DIAGONAL * float(np.mean(diagonal)), 1e-300)
        self.D = np.maximum(remaining, self.floor)
        # D⁻¹F in F's own memory, the only n × ℓ matrix kept (a face of 17,875 rows: 286 MB), and
        # I + FᵀD⁻¹F from D^-½F on the way, without a second; that ℓ × ℓ matrix is kept beside its
        # Cholesky factor (32 MB each at ℓ = 2,000) for the faces the build serves later
        root = np.sqrt(self.D)[:, None]
        factor /= root
        self.inner = np.eye(factor.shape[1]) + factor.T @ factor
        factor /= root
        self.scaled = factor
        self.core = np.linalg.cholesky(self.inner) if self.inner.size else self.inner
        self.rank = factor.shape[1]

    def __call__(self, r: np.ndarray) -> np.ndarray:
        """M⁻¹r = D⁻¹r − D⁻¹F (I + FᵀD⁻¹F)⁻¹ FᵀD⁻¹r."""
        if self.rank == 0:
            return r / self.D
        import scipy.linalg as sl

        solved = sl.cho_solve((self.core, True), self.scaled.T @ r, check_finite=False)
        return r / self.D - self.scaled @ solved

    def factor_rows(self, columns: Columns) -> np.ndarray:
        """F's rows for other rows of the same G, from ``columns(S)`` (their G[·, S], S this build's
        pivots): the build's steps replayed on them, so F = G[·, pivots] T as for the rows it was built on."""
        factor, k = None, 0
        for step in self.steps:
            block = columns(step.pivots) @ step.weights
            if factor is None:
                factor = np.empty((block.shape[0], self.rank))
            block -= factor[:, :k] @ step.coupling
            factor[:, k : k + block.shape[1]] = block
            k += block.shape[1]
        return factor if factor is not None else np.zeros((0, self.rank))

    def serving(self, at: np.ndarray, diagonal: np.ndarray, columns: Columns) -> ServedFace:
        """M⁻¹ for another set of rows of the same G, the same pivots' approximation there: row i is this
        build's row ``at[i]`` (:func:`positions`), or (``at[i]`` < 0) a row it did not hold, whose row of F
        comes from ``columns(S)`` (G[those rows, S]) and whose D from its ``diagonal`` (G's)."""
        held, came = np.flatnonzero(at >= 0), np.flatnonzero(at < 0)
        departed = np.ones(self.D.size, dtype=bool)
        departed[at[held]] = False
        scaled_came = self.factor_rows(columns) if came.size and self.rank else np.zeros((came.size, self.rank))
        D_came = np.maximum(diagonal[came] - np.einsum("ij,ij->i", scaled_came, scaled_came), self.floor)
        # I + F_faceᵀD⁻¹F_face: the build's, less the rows that departed, plus those that came (each ⪰ 0,
        # and what remains ⪰ I: the downdate cancels nothing it needs); each through D^-½F in one copy
        root = np.sqrt(D_came)[:, None]
        scaled_came /= root
        gone = self.scaled[departed]
        gone *= np.sqrt(self.D[departed])[:, None]
        inner = self.inner - gone.T @ gone + scaled_came.T @ scaled_came
        del gone
        scaled_came /= root  # D⁻¹F of the rows that came, in F's memory
        core = np.linalg.cholesky(inner) if self.rank else inner
        return ServedFace(build=self, core=core, held=held, at=at[held], came=came, D_came=D_came,
                          scaled_came=scaled_came)  # fmt: skip


@dataclass(frozen=True, kw_only=True, eq=False)
class ServedFace:
    """M⁻¹ on a face a build serves: rows it held (``held``, its rows ``at``) keep their D and D⁻¹F, rows
    that came (``came``) have their own; M⁻¹r = D⁻¹r − D⁻¹F (I + FᵀD⁻¹F)⁻¹ FᵀD⁻¹r over the face's rows."""

    build: LowRankPlusDiagonal
    core: np.ndarray  # the Cholesky factor of I + F_faceᵀD_face⁻¹F_face
    held: np.ndarray
    at: np.ndarray
    came: np.ndarray
    D_came: np.ndarray
    scaled_came: np.ndarray

    def __call__(self, r: np.ndarray) -> np.ndarray:
        build = self.build
        out = np.empty_like(r)
        out[self.came] = r[self.came] / self.D_came
        padded = np.zeros(build.D.size)  # zero on the rows that departed: F_heldᵀD⁻¹r = (D⁻¹F)ᵀ padded
        padded[self.at] = r[self.held]
        out[self.held] = padded[self.at] / build.D[self.at]
        if build.rank == 0:
            return out
        import scipy.linalg as sl

        projected = build.scaled.T @ padded + self.scaled_came.T @ r[self.came]
        solved = sl.cho_solve((self.core, True), projected, check_finite=False)
        out[self.held] -= (build.scaled @ solved)[self.at]
        out[self.came] -= self.scaled_came @ solved
        return out


def positions(built: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each of ``rows``' position in ``built`` (both sorted, distinct), −1 where it is not there."""
    at = np.searchsorted(built, rows)
    found = at < built.size
    found[found] = built[at[found]] == rows[found]
    return np.where(found, at, -1)


def _partial_cholesky(diagonal: np.ndarray, columns: Columns, rank: int) -> tuple[np.ndarray, np.ndarray, list[Step]]:
    """F (n × ≤ rank) with F Fᵀ ≈ G from pivots drawn by what is left of the diagonal, what it leaves,
    and its steps."""
    n = diagonal.size
    rng = np.random.default_rng(SEED)
    factor = np.zeros((n, rank))
    left = np.maximum(diagonal.astype(np.float64), 0.0)
    k, whole = 0, float(left.sum())
    steps: list[Step] = []
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
        steps.append(Step(pivots=pivots, weights=weights, coupling=factor[pivots, :k].T @ weights))
        factor[:, k : k + m] = new
        k += m
        left = np.maximum(left - np.einsum("ij,ij->i", new, new), 0.0)
        left[pivots] = 0.0
    return (factor if k == rank else factor[:, :k].copy()), left, steps
