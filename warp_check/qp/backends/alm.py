"""The augmented Lagrangian on a working set's dual: ``auto``'s backend from ``newton_min_rows``
rows past the interior point's reach, whatever β's size (the method: warp_check.qp.alm)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from warp_check.qp.registry import AutoPlace, limits_advice, register_backend
from warp_check.validation import require_fraction, require_integer

if TYPE_CHECKING:
    from warp_check.qp.problem import LinearisedProblem


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


def fits(problem: LinearisedProblem, own: AlmSettings) -> bool:
    return True  # its matrices are over the working set's rows, not β: any r·d_in


def advice(own: AlmSettings, hand_over: str) -> str:
    return limits_advice("alm", own, hand_over=hand_over, instead="ipm")


ALM = register_backend(
    name="alm",
    settings=AlmSettings,
    solve="warp_check.qp.alm:solve",
    advice=advice,
    forms=("dual",),
    auto=AutoPlace(rank=2, fits=fits),
)
