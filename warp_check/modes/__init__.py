"""The run modes — check, repair, audit, baseline gating — each one object in its own module.

:data:`MODES` is the one table the pytest plugin and the ``warp-check`` command find them in. The
first mode whose pytest option (``selected_by``) is given runs; the mode without one runs when none
is. Adding a mode: a module with a :class:`RunMode` subclass, and its line here.
"""

from __future__ import annotations

from warp_check.modes.audit import AUDIT, AuditMode
from warp_check.modes.base import RunJob, RunMode
from warp_check.modes.baseline import BASELINE, BaselineMode
from warp_check.modes.check import CHECK, CheckMode
from warp_check.modes.repair import REPAIR, RepairMode

MODES: tuple[RunMode, ...] = (CHECK, REPAIR, AUDIT, BASELINE)


def mode_named(name: str) -> RunMode:
    """The mode of the table called ``name``."""
    for mode in MODES:
        if mode.name == name:
            return mode
    raise KeyError(f"no run mode {name!r}: {', '.join(mode.name for mode in MODES)}")


__all__ = [
    "AUDIT",
    "BASELINE",
    "CHECK",
    "MODES",
    "REPAIR",
    "AuditMode",
    "BaselineMode",
    "CheckMode",
    "RepairMode",
    "RunJob",
    "RunMode",
    "mode_named",
]
