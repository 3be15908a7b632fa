"""What a run of a suite gives: a verdict per case and the run's own outcome, as plain data.

A :class:`RunResult` round-trips through JSON, so pytest-xdist workers can share one repair
instead of each running their own, and a report.json can be rendered again.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warp_check.cases import Kind
from warp_check.files import jsonable, write_json_atomic
from warp_check.runs.details import Details, RunDetails, read_details
from warp_check.runs.modes import Mode, RunStatus
from warp_check.suite.loader import Suite


class Outcome(str, enum.Enum):
    """What pytest reported for a case's item."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    XFAILED = "xfailed"  # an expected failure (regression-only gating: the baseline fails it too)


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """Pass or fail for one case, the sentence that says why, and numbers for reports."""

    case_id: str
    kind: Kind
    passed: bool
    message: str
    properties: dict[str, Any] = field(default_factory=dict)  # JUnit properties and report columns, by name
    suite: str | None = None  # the suite's warp.toml, where the verdict travels without its run
    outcome: Outcome | None = None  # pytest's, where pytest reported the case
    # A failure that is expected, and why (regression-only gating: the baseline fails the case too).
    expected_failure: str | None = None

    @property
    def reported(self) -> Outcome:
        """pytest's outcome, or the verdict's own where pytest did not report it."""
        if self.outcome is not None:
            return self.outcome
        return Outcome.PASSED if self.passed else Outcome.FAILED

    def to_dict(self) -> dict[str, Any]:
        out = {
            "id": self.case_id,
            "kind": self.kind.value,
            "passed": self.passed,
            "message": self.message,
            "properties": jsonable(self.properties),
        }
        if self.suite is not None:
            out["suite"] = self.suite
        if self.outcome is not None:
            out["outcome"] = self.outcome.value
        if self.expected_failure is not None:
            out["expected_failure"] = self.expected_failure
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            case_id=data["id"],
            kind=Kind(data["kind"]),
            passed=bool(data["passed"]),
            message=data["message"],
            properties=dict(data.get("properties") or {}),
            suite=data.get("suite"),
            outcome=Outcome(data["outcome"]) if data.get("outcome") else None,
            expected_failure=data.get("expected_failure"),
        )


@dataclass(frozen=True, kw_only=True)
class Tally:
    passed: int = 0
    failed: int = 0


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """Everything a frontend shows about one suite run. ``ok`` is about the run as a whole
    (the repair converged, the certificate's hashes match); each case has its own verdict."""

    suite: str  # path of warp.toml
    name: str
    mode: Mode
    ok: bool
    status: RunStatus
    message: str
    verdicts: tuple[Verdict, ...]
    details: Details
    warnings: tuple[str, ...] = ()  # what went wrong that the run survived (a cache it could not write)

    @property
    def passed(self) -> bool:
        """What a CI gate asks: the run worked and every case passed (or was expected to fail)."""
        return self.ok and all(v.passed or v.expected_failure is not None for v in self.verdicts)

    def verdict(self, case_id: str) -> Verdict | None:
        return self._by_id.get(case_id)

    @functools.cached_property
    def _by_id(self) -> dict[str, Verdict]:  # one lookup per pytest item: keep it O(1)
        return {v.case_id: v for v in self.verdicts}

    def counts(self) -> dict[Kind, Tally]:
        """Verdicts passed and failed per kind, kinds in the order of their first case."""
        out: dict[Kind, Tally] = {}
        for v in self.verdicts:
            row = out.get(v.kind, Tally())
            out[v.kind] = Tally(passed=row.passed + v.passed, failed=row.failed + (not v.passed))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "name": self.name,
            "mode": self.mode.value,
            "ok": self.ok,
            "status": self.status.value,
            "message": self.message,
            "details": self.details.to_dict(),
            "cases": [v.to_dict() for v in self.verdicts],
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        mode, status = Mode(data["mode"]), RunStatus(data["status"])
        return cls(
            suite=data["suite"],
            name=data["name"],
            mode=mode,
            ok=bool(data["ok"]),
            status=status,
            message=data["message"],
            details=read_details(mode, status, data["details"]),
            verdicts=tuple(Verdict.from_dict(v) for v in data.get("cases", ())),
            warnings=tuple(data.get("warnings", ())),
        )

    def write_json(self, path: str | Path) -> Path:
        return write_json_atomic(path, self.to_dict())

    @classmethod
    def read_json(cls, path: str | Path) -> RunResult:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    @classmethod
    def failed(cls, suite: Suite, mode: Mode, message: str) -> RunResult:
        """A run that could not produce verdicts: every case fails with ``message``."""
        verdicts = tuple(
            Verdict(case_id=c.id, kind=c.kind, passed=False, message=message)
            for c in suite.cases
            if c.kind is not Kind.AUX
        )
        return cls(
            suite=str(suite.toml),
            name=suite.name,
            mode=mode,
            ok=False,
            status=RunStatus.ERROR,
            message=message,
            verdicts=verdicts,
            details=RunDetails.of(suite),
        )
