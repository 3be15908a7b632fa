"""The linear algebra the QP backends share: a shifted Cholesky factor, the Farkas-ray test of
infeasibility, and a dense symmetric matrix as OSQP's sparse upper triangle."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# Regularisations tried, relative to the largest diagonal entry, when Cholesky fails: near an
# optimum the interior-point weights reach 1e12+, and rows in play can be (nearly) dependent,
# so the matrices are numerically semidefinite.
CHOLESKY_SHIFTS = (0.0, 1e-12, 1e-10, 1e-8, 1e-6)

# Infeasibility: every β with Kβ ≥ h on the hard rows would be longer than 1/this × max(1, ‖B‖)
# — 1e6 for "infeasible", 1e4 for "infeasible inaccurate". Either way no step the repair could take.
FARKAS_INFEASIBLE = 1e-6
FARKAS_INFEASIBLE_INACCURATE = 1e-4


def shifted_cholesky(M: np.ndarray):
    """Lower Cholesky factor (scipy's ``cho_factor`` form) of a symmetric PSD ``M``, its diagonal
    shifted by the first of CHOLESKY_SHIFTS that works; None for an empty matrix.

    Raises ``numpy.linalg.LinAlgError`` when no shift makes it positive definite.
    """
    return _cholesky_and_shift(M)[0]


def _cholesky_and_shift(M: np.ndarray):
    """:func:`shifted_cholesky`'s factor and the shift its diagonal took."""
    import scipy.linalg as sl

    if M.size == 0:
        return None, 0.0
    top = float(np.max(np.diag(M)))
    for shift in CHOLESKY_SHIFTS:
        try:
            shifted = M + shift * top * np.eye(M.shape[0]) if shift else M
            return sl.cho_factor(shifted, lower=True, check_finite=False), shift * top
        except np.linalg.LinAlgError:
            continue
    raise np.linalg.LinAlgError("the matrix is singular beyond every shift")


class SubsetFactor:
    """A Cholesky factor of G_SS + δI over a set S of rows of a symmetric G, reused for sets near S.

    On a set S' with rows R = S∖S' removed and E = S'∖S added, the removed rows are held at 0 by
    multipliers and the added ones bordered on, through one Schur complement of size |R| + |E|
    on the same factor: |R| + |E| + 1 triangular solve pairs instead of a new factorisation. An
    active-set method's consecutive systems differ by a few rows (the augmented Lagrangian's
    Newton steps, the face solve's rounds): real SST-2 at 52k rows, |S| ~ 1,200, the Schur way
    solves in ~5 ms where a factorisation takes ~20 ms. Exact, not an approximation: the solve
    is the one on S' (to round-off); past ``|S| / REUSE_AT_MOST`` changed rows it declines.
    """

    REUSE_AT_MOST = 6

    def __init__(self, G: np.ndarray, rows: np.ndarray, shift: float = 0.0) -> None:
        self.G, self.rows = G, rows
        M = G[np.ix_(rows, rows)]
        M[np.diag_indices_from(M)] += shift
        self.factor, extra = _cholesky_and_shift(M)
        self.shift = shift + extra  # what the diagonal of every row took, added rows' too

    @classmethod
    def solve_reusing(
        cls, factor: SubsetFactor | None, G: np.ndarray, rows: np.ndarray, rhs: np.ndarray, shift: float = 0.0
    ) -> tuple[SubsetFactor, np.ndarray, bool]:
        """(G + δI)_{SS}⁻¹ rhs over ``rows`` = S on ``factor`` where it can serve S, else on a new
        factor of S: (the factor used, the solution, whether ``factor`` was reused)."""
        x = factor.solve(rows, rhs) if factor is not None else None
        if x is not None:
            return factor, x, True
        factor = cls(G, rows, shift)
        return factor, factor.solve(rows, rhs), False

    def solve(self, rows: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
        """(G + δI)_{S'S'}⁻¹ rhs over ``rows`` = S' (sorted, like the factor's); None where S' is
        too far from the factored set for the Schur way to pay (factor S' instead)."""
        base = self.rows
        if rows.size == base.size and np.array_equal(rows, base):
            return cholesky_solve(self.factor, rhs)
        kept_in_base = np.isin(base, rows, assume_unique=True)
        added = rows[~np.isin(rows, base, assume_unique=True)]
        removed_at = np.flatnonzero(~kept_in_base)
        k = added.size + removed_at.size
        if self.factor is None or k > max(8, base.size // self.REUSE_AT_MOST):
            return None
        where_new = np.searchsorted(rows, base[kept_in_base])  # kept rows' places in S'
        b0 = np.zeros(base.size)
        b0[kept_in_base] = rhs[where_new]
        border = np.zeros((base.size, k))
        border[:, : added.size] = self.G[np.ix_(base, added)]
        border[removed_at, added.size + np.arange(removed_at.size)] = 1.0
        solved = cholesky_solve(self.factor, np.column_stack([b0, border]))
        x0, Y = solved[:, 0], solved[:, 1:]
        # [Bᵀ; Pᵀ](x0 − Y ζ) + D ζ = [b_E; 0], D = diag(G_EE + δI, 0): a k × k system
        lhs = np.zeros((k, k))
        lhs[: added.size, : added.size] = self.G[np.ix_(added, added)] + self.shift * np.eye(added.size)
        B_E = border[:, : added.size]
        lhs -= np.vstack([B_E.T @ Y, Y[removed_at]])
        small = np.concatenate([rhs[np.searchsorted(rows, added)] - B_E.T @ x0, -x0[removed_at]])
        try:
            zeta = np.linalg.solve(lhs, small)
        except np.linalg.LinAlgError:
            return None
        x_base = x0 - Y @ zeta
        x = np.empty(rows.size)
        x[where_new] = x_base[kept_in_base]
        x[np.searchsorted(rows, added)] = zeta[: added.size]
        return x


def cholesky_solve(factor, rhs: np.ndarray) -> np.ndarray:
    """``M⁻¹ rhs`` from :func:`shifted_cholesky`'s factor (an empty M: ``rhs`` itself)."""
    import scipy.linalg as sl

    return rhs.copy() if factor is None else sl.cho_solve(factor, rhs, check_finite=False)


def farkas_ratio(y: np.ndarray, h: np.ndarray, KT: Callable[[np.ndarray], np.ndarray], B: np.ndarray) -> float | None:
    """How short a β the hard multipliers ``y`` (scaled to a largest of 1) rule out.

    Any β with Kβ ≥ h on the hard rows has hᵀy ≤ ‖Kᵀy‖·‖β‖, so ‖β‖ ≥ hᵀy / ‖Kᵀy‖. Returns
    ‖Kᵀy‖·max(1, ‖B‖) / hᵀy when that is at most FARKAS_INFEASIBLE_INACCURATE (every such β is
    at least its inverse × max(1, ‖B‖) long: the multipliers grow along a Farkas ray), else None.
    ``KT(y)`` is Kᵀy as an (r, d_in) matrix.
    """
    pull = float(h @ y)
    if pull <= 0:
        return None
    ratio = float(np.linalg.norm(KT(y))) * max(1.0, float(np.linalg.norm(B))) / pull
    return ratio if ratio <= FARKAS_INFEASIBLE_INACCURATE else None


def hard_rows_farkas_ratio(problem, rows: np.ndarray, z: np.ndarray, B: np.ndarray) -> float | None:
    """:func:`farkas_ratio` of the multipliers ``z`` of ``rows`` (rows of a LinearisedProblem) on
    its hard rows that hold one, scaled to a largest of 1; None where none does."""
    held = (rows >= problem.n_fix) & (z > 0)
    if not held.any():
        return None
    hard, y = rows[held], z[held] / float(np.max(z[held]))
    return farkas_ratio(y, problem.rhs[hard], lambda weights: problem.weighted_sum(weights, hard), B)


def upper_csc(symmetric: np.ndarray):
    """The upper triangle of a dense symmetric matrix as CSC, built without a dense→sparse scan."""
    import scipy.sparse as sp

    n = symmetric.shape[0]
    # Column j of the upper triangle holds rows 0..j: that is row j of the lower triangle.
    cols, rows = np.tril_indices(n)
    indptr = np.concatenate([[0], np.cumsum(np.arange(1, n + 1))])
    return sp.csc_matrix((symmetric[cols, rows], rows, indptr), shape=(n, n))
