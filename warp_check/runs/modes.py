"""Which job a run of a suite did (:class:`Mode`) and how it ended (:class:`RunStatus`)."""

from __future__ import annotations

import enum


class Mode(str, enum.Enum):
    CHECK = "check"
    REPAIR = "repair"
    AUDIT = "audit"

    def __str__(self) -> str:
        return self.value


class RunStatus(str, enum.Enum):
    """How a run ended. A repair run ends with its repair's status (:meth:`of_repair`)."""

    CHECKED = "checked"  # check: every selected case has a verdict
    VERIFIED = "verified"  # audit: every check of the certificate held
    FAILED = "failed"  # audit: some check of the certificate failed
    ERROR = "error"  # no verdicts: the run could not get that far (every case fails with its message)
    CONVERGED = "converged"
    NOTHING_TO_REPAIR = "nothing_to_repair"
    NOT_CONVERGED = "not_converged"
    INFEASIBLE = "infeasible"
    SOLVER_FAILED = "solver_failed"
    INVALID_INPUT = "invalid_input"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of_repair(cls, status: enum.Enum) -> RunStatus:
        """The run status of a repair that ended with ``status`` (a RepairStatus: same value)."""
        return cls(status.value)

    @property
    def settled(self) -> bool:
        """A repair run that leaves a model to check: repaired, or nothing needed repair."""
        return self in (RunStatus.CONVERGED, RunStatus.NOTHING_TO_REPAIR)
