"""OSQP: the dual of a lazy working set (or the primal), with every tolerance spelled out. The backend
``auto`` gives small QPs, and the decider: a run another backend cannot decide goes to its working set,
started from that run's rows (warp_check.qp.osqp_backend)."""

from __future__ import annotations

from dataclasses import dataclass

from warp_check.qp.registry import Decider, EntryPoint, register_backend
from warp_check.validation import require_fraction, require_integer


@dataclass(frozen=True, kw_only=True)
class OsqpSettings:
    """OSQP's own settings ([repair.solver.osqp]; flat: ``eps_abs``, ``max_iter``, ...). Its defaults,
    eps 1e-3, are far too loose here."""

    eps_abs: float = 1e-7
    eps_rel: float = 1e-7
    eps_infeasible: float = 1e-7  # both of OSQP's infeasibility tests
    max_iter: int = 20_000  # ADMM iterations a QP; also what a QP handed over to OSQP gets
    polishing: bool = True
    polish_refine_iter: int = 10
    scaling: int = 10
    sigma: float = 1e-6

    def __post_init__(self) -> None:
        for name, minimum in (("max_iter", 1), ("polish_refine_iter", 0), ("scaling", 0)):
            require_integer(name, getattr(self, name), minimum)
        for name in ("eps_abs", "eps_rel", "eps_infeasible", "sigma"):
            require_fraction(name, getattr(self, name))

    def osqp_kwargs(self, time_limit_s: float) -> dict[str, object]:
        return {
            "verbose": False,
            "eps_abs": self.eps_abs,
            "eps_rel": self.eps_rel,
            "eps_prim_inf": self.eps_infeasible,
            "eps_dual_inf": self.eps_infeasible,
            "max_iter": self.max_iter,
            "time_limit": time_limit_s,
            "polishing": self.polishing,
            "polish_refine_iter": self.polish_refine_iter,
            "scaling": self.scaling,
            "sigma": self.sigma,
            "warm_starting": False,
        }


def advice(own: OsqpSettings, hand_over: str) -> str:
    return f"raise solver max_iter (now {own.max_iter}) or loosen eps_abs/eps_rel"


def hand_over_advice(own: OsqpSettings) -> str:
    return f"max_iter (now {own.max_iter}; OSQP's, which takes over an undecided QP)"


OSQP = register_backend(
    name="osqp",
    settings=OsqpSettings,
    solve="warp_check.qp.osqp_backend:solve",
    advice=advice,
    forms=("primal", "dual"),
    decides=Decider(
        title="OSQP", solve_from=EntryPoint("warp_check.qp.osqp_backend:solve_from_rows"), advice=hand_over_advice
    ),
)
