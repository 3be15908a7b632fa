"""The dual active set: there to be named (on real representations it stalls and hands its QPs to
the decider), never ``auto``'s choice (the method: warp_check.qp.active_set)."""

from __future__ import annotations

from dataclasses import dataclass

from warp_check.qp.registry import register_backend
from warp_check.validation import require_fraction, require_integer


@dataclass(frozen=True, kw_only=True)
class ActiveSetSettings:
    """The active set's settings ([repair.solver.active_set]; flat: ``active_set_tolerance``, ...)."""

    # Every row's optimality condition to this, relative to 1 + max |h|. It ends exactly on the
    # optimum's face, so round-off (~1e-15) is what it reaches; 1e-9 leaves room for ill-conditioned
    # rows in play.
    tolerance: float = 1e-9
    max_iter: int = 100

    def __post_init__(self) -> None:
        require_integer("max_iter", self.max_iter, 1)
        require_fraction("tolerance", self.tolerance)


def advice(own: ActiveSetSettings, hand_over: str) -> str:
    return f"raise solver active_set_max_iter (now {own.max_iter}), or set solver backend 'osqp'"


ACTIVE_SET = register_backend(
    name="active_set",
    settings=ActiveSetSettings,
    solve="warp_check.qp.active_set:solve",
    advice=advice,
    forms=("dual",),
)
