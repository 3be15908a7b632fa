"""The step's metric: ½ tr(ΔW M ΔWᵀ) with M = ρI + μS, S the must_keep cases' mean v vᵀ.

μ S prices how far a step moves the repair layer's output on the kept cases (DESIGN §7, minimal
change in function space). Every QP backend keeps its ρ/2‖B‖² form on whitened representations
ṽ = L⁻¹v (M = L Lᵀ): with B̃ = B L, ‖B̃‖² = tr(B M Bᵀ) and B̃ ṽ = B v, so B = B̃ L⁻¹. The trust
region scales the whole metric by κ: the QP's ρ is κ (ρ itself lives in M).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular


@dataclass(frozen=True)
class StepMetric:
    """M = L Lᵀ (L lower triangular), or ρI where μ = 0 (``L`` None: nothing is whitened)."""

    rho: float
    L: np.ndarray | None

    @classmethod
    def of(cls, rho: float, mu: float, keep_V: np.ndarray) -> StepMetric:
        if mu == 0 or keep_V.shape[0] == 0:
            return cls(rho, None)
        return cls.of_moment(rho, mu, keep_V.T @ keep_V / keep_V.shape[0])

    @classmethod
    def of_moment(cls, rho: float, mu: float, S: np.ndarray | None) -> StepMetric:
        """The metric of S, the must_keep cases' mean v vᵀ (None: no case)."""
        if mu == 0 or S is None:
            return cls(rho, None)
        return cls(rho, np.linalg.cholesky(rho * np.eye(S.shape[0]) + mu * S))

    def whiten(self, V: np.ndarray) -> np.ndarray:
        """ṽ = L⁻¹ v for every row of V (V itself where nothing is whitened)."""
        if self.L is None:
            return V
        return np.ascontiguousarray(solve_triangular(self.L, V.T, lower=True).T)

    def qp_rho(self, kappa: float) -> float:
        """The QP's ρ on the whitened rows, the metric scaled by κ."""
        return kappa * (self.rho if self.L is None else 1.0)

    def step(self, B_whitened: np.ndarray) -> np.ndarray:
        """B = B̃ L⁻¹: the QP's solution in the repair layer's own coordinates."""
        if self.L is None:
            return B_whitened
        return solve_triangular(self.L, B_whitened.T, lower=True, trans="T").T
