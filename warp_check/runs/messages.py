"""The words of verdicts and advice, in one place, so a case reads the same everywhere."""

from __future__ import annotations

import math
from collections.abc import Mapping

from warp_check.repair.settings import RepairSettings
from warp_check.suite.loader import Suite


def num(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.4g}"


def labelled(suite: Suite, label: int) -> str:
    return repr(suite.label_name(int(label)))


def advice(settings: RepairSettings, kind: str, status: str, flags: Mapping[str, str]) -> str:
    def setting(name: str, verb: str) -> str:
        how = f"{flags[name]} or [repair] {name}" if name in flags else f"[repair] {name} in warp.toml"
        return f"{verb} {name} (now {getattr(settings, name):g}; {how})"

    if status == "infeasible" or kind == "must_keep":
        parts = [setting("gamma_h", "lower"), setting("rank", "raise")]
        tail = ", or remove must_keep cases that conflict with the must_fix ones"
    elif status == "solver_failed":
        return "raise [repair.solver] max_iter or loosen eps_abs/eps_rel in warp.toml"
    else:
        parts = [setting("rank", "raise"), setting("lam", "raise"), setting("max_iter", "raise")]
        tail = f", or {setting('gamma_s', 'lower')}"
    return "what may help: " + ", ".join(parts) + tail
