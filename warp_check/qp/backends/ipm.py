"""The β-space interior point: ``auto``'s backend from ``newton_min_rows`` rows while β is small
(its normal matrix is r·d_in square; the method: warp_check.qp.ipm)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from warp_check.qp.registry import AutoPlace, limits_advice, register_backend
from warp_check.validation import require_fraction, require_integer

if TYPE_CHECKING:
    from warp_check.qp.problem import LinearisedProblem


@dataclass(frozen=True, kw_only=True)
class IpmSettings:
    """The interior point's settings ([repair.solver.ipm]; flat: ``ipm_max_unknowns``, ...)."""

    # Only while β has at most this many unknowns (p = r·d_in): its normal matrix is p×p. Past it
    # the augmented Lagrangian, whose matrices are over the working set's rows. Measured, one QP
    # (1 BLAS thread): real SST-2 at rank 2 (p 768), 0.5 s at 10k rows and 1.1–1.7 s at 52k; at
    # rank 8 (p 3,072), 10k: 9.1 s, the augmented Lagrangian 0.3 s.
    max_unknowns: int = 2048
    # Relative residuals. Not OSQP's 1e-7: the reduced normal equations run out of digits for the
    # dual residual near 1e-7 (the 100k first QP bottoms out at 1.5e-7); the objective is then within
    # ~1e-10 of its optimum and every row holds to 1e-6·(1 + max |h|), far inside the loop's aim_above.
    tolerance: float = 1e-6
    max_iter: int = 200

    def __post_init__(self) -> None:
        require_integer("max_unknowns", self.max_unknowns, 1)
        require_integer("max_iter", self.max_iter, 1)
        require_fraction("tolerance", self.tolerance)


def fits(problem: LinearisedProblem, own: IpmSettings) -> bool:
    return problem.rank * problem.d_in <= own.max_unknowns


def advice(own: IpmSettings, hand_over: str) -> str:
    return limits_advice("ipm", own, hand_over=hand_over, instead="osqp")


IPM = register_backend(
    name="ipm",
    settings=IpmSettings,
    solve="warp_check.qp.ipm:solve",
    advice=advice,
    forms=("primal",),
    auto=AutoPlace(rank=1, fits=fits),
)
