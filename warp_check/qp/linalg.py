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
    import scipy.linalg as sl

    if M.size == 0:
        return None
    top = float(np.max(np.diag(M)))
    for shift in CHOLESKY_SHIFTS:
        try:
            shifted = M + shift * top * np.eye(M.shape[0]) if shift else M
            return sl.cho_factor(shifted, lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            continue
    raise np.linalg.LinAlgError("the matrix is singular beyond every shift")


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


def upper_csc(symmetric: np.ndarray):
    """The upper triangle of a dense symmetric matrix as CSC, built without a dense→sparse scan."""
    import scipy.sparse as sp

    n = symmetric.shape[0]
    # Column j of the upper triangle holds rows 0..j: that is row j of the lower triangle.
    cols, rows = np.tril_indices(n)
    indptr = np.concatenate([[0], np.cumsum(np.arange(1, n + 1))])
    return sp.csc_matrix((symmetric[cols, rows], rows, indptr), shape=(n, n))
