"""The augmented Lagrangian on a working set's dual: ``auto``'s backend from ``newton_min_rows``
rows past the interior point's reach, whatever β's size (the method: warp_check.qp.alm)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from warp_check.qp.registry import AutoPlace, limits_advice, register_backend
from warp_check.validation import require_fraction, require_integer

if TYPE_CHECKING:
    from warp_check.qp.problem import LinearisedProblem
    from warp_check.qp.settings import SolverSettings
    from warp_check.qp.solution import QPSolution, WarmStart


@dataclass(frozen=True, kw_only=True)
class AlmSettings:
    """The augmented Lagrangian's settings ([repair.solver.alm]; flat: ``alm_tolerance``, ...)."""

    # Every row's optimality condition to this, relative to 1 + max |h| (it ends on the optimum's
    # face: round-off is what it reaches).
    tolerance: float = 1e-9
    max_iter: int = 2000  # Newton steps (face solves included) over all rounds of one QP

    def __post_init__(self) -> None:
        require_integer("max_iter", self.max_iter, 1)
        require_fraction("tolerance", self.tolerance)


def solve(problem: LinearisedProblem, settings: SolverSettings, warm: WarmStart | None = None) -> QPSolution:
    from warp_check.qp import alm  # numpy: loaded when a QP is solved

    return alm.solve(problem, settings, warm)


def fits(problem: LinearisedProblem, own: AlmSettings) -> bool:
    return True  # its matrices are over the working set's rows, not β: any r·d_in


def advice(own: AlmSettings, solver: SolverSettings) -> str:
    return limits_advice("alm", own, solver, instead="ipm")


ALM = register_backend(
    name="alm", settings=AlmSettings, solve=solve, advice=advice, forms=("dual",), auto=AutoPlace(rank=2, fits=fits)
)
