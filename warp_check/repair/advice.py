"""What may help: every suggestion warp-check makes when a repair or a setting fails, in one place.

Each function returns the words only; the caller says what failed and by how much. Standard
library only (suites use it while they load).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from warp_check.qp import registry
from warp_check.repair.settings import RepairSettings


def after_no_convergence(
    settings: RepairSettings, missed_kinds: Iterable[str], *, stalled: bool, room: str | None = None
) -> str:
    """What to try when the loop ended with cases short of their margin ('try ...'). ``room``: the
    half-precision dtype where every short case clears its margin in float64 and lacks only the room
    that dtype's rounding asks above it."""
    kinds = set(missed_kinds)
    if room is not None:
        return (
            f"a higher max_iter (now {settings.max_iter}), or repair a float32 copy of the model (every case "
            f"clears its margin in float64; what is missing is the room {room} needs above it, so that an audit "
            "that encodes v again on another device still certifies)"
        )
    helps = []
    if "must_keep" in kinds:
        helps.append(f"lower gamma_h (now {settings.gamma_h:g}) or drop must_keep cases that cannot keep it")
    if "must_fix" in kinds:
        helps.append(f"a higher max_rank (now {settings.rank_limit}) or lam (now {settings.lam:g})")
    if not stalled:
        helps.append(f"a higher max_iter (now {settings.max_iter})")
    return "; ".join(helps)


INFEASIBLE_KEEP = "lower gamma_h, raise rank or max_rank, or remove conflicting must_keep cases"
INFEASIBLE_EXACT = (
    "lower gamma_s or gamma_h, remove the must_keep cases nearest the must_fix ones (or those must_fix "
    "cases), or name a dense → activation → classifier head (layer = [repair_layer, activation, classifier])"
)


def after_unsettled_working_set(settings: RepairSettings) -> str:
    solver = settings.solver
    return (
        f"raise solver working_set_rounds (now {solver.working_set_rounds}) "
        f"or working_set_batch (now {solver.working_set_batch})"
    )


def after_solver_failure(settings: RepairSettings, backend: str) -> str:
    """What to try when a QP backend ended with no usable solution: the backend's own advice, told
    the decider's clause for the QPs it hands over."""
    failed, taker = registry.backend(backend), registry.decider()
    hand_over = taker.decides.advice(settings.solver.of(taker.settings))  # type: ignore[union-attr]
    return failed.advice(settings.solver.of(failed.settings), hand_over)


def for_failed_case(settings: RepairSettings, kind: str, status: str, flags: Mapping[str, str]) -> str:
    """'what may help: ...' for a case a failed repair left short; ``flags`` names each setting's
    command-line flag (pytest's or the CLI's) where there is one."""

    def setting(name: str, verb: str) -> str:
        how = f"{flags[name]} or [repair] {name}" if name in flags else f"[repair] {name} in warp.toml"
        return f"{verb} {name} (now {getattr(settings, name):g}; {how})"

    if status == "infeasible" or kind == "must_keep":
        parts = [setting("gamma_h", "lower"), setting("rank", "raise")]
        tail = ", or remove must_keep cases that conflict with the must_fix ones"
    elif status == "solver_failed":
        return "raise [repair.solver] max_iter or loosen eps_abs/eps_rel in warp.toml"
    else:
        parts = [setting("max_rank", "raise"), setting("lam", "raise"), setting("max_iter", "raise")]
        tail = f", or {setting('gamma_s', 'lower')}"
    return "what may help: " + ", ".join(parts) + tail


def margins_out_of_order(settings: RepairSettings) -> str:
    """Why gamma_h > gamma_s cannot work, and what to change."""
    return (
        f"gamma_h = {settings.gamma_h:g} > gamma_s = {settings.gamma_s:g}: a must_keep case would need a larger "
        "margin than a repaired must_fix case gets, so a case fixed now fails as must_keep on the next run; "
        "lower gamma_h or raise gamma_s"
    )
