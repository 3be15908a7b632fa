"""What a run of a suite gives: a verdict per case and the run's own outcome, as plain data.

A :class:`RunResult` round-trips through JSON, so pytest-xdist workers can share one repair
instead of each running their own.
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
from warp_check.suite.loader import Suite


class Mode(str, enum.Enum):
    CHECK = "check"
    REPAIR = "repair"
    AUDIT = "audit"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """Pass or fail for one case, the sentence that says why, and numbers for reports."""

    case_id: str
    kind: str
    passed: bool
    message: str
    properties: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.case_id,
            "kind": self.kind,
            "passed": self.passed,
            "message": self.message,
            "properties": jsonable(self.properties),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            case_id=data["id"],
            kind=data["kind"],
            passed=bool(data["passed"]),
            message=data["message"],
            properties=dict(data.get("properties") or {}),
        )


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """Everything a frontend shows about one suite run. ``ok`` is about the run as a whole
    (the repair converged, the certificate's hashes match); each case has its own verdict."""

    suite: str  # path of warp.toml
    name: str
    mode: Mode
    ok: bool
    status: str
    message: str
    verdicts: tuple[Verdict, ...]
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """What a CI gate asks: the run worked and every case passed."""
        return self.ok and all(v.passed for v in self.verdicts)

    def verdict(self, case_id: str) -> Verdict | None:
        return self._by_id.get(case_id)

    @functools.cached_property
    def _by_id(self) -> dict[str, Verdict]:  # one lookup per pytest item: keep it O(1)
        return {v.case_id: v for v in self.verdicts}

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for v in self.verdicts:
            row = out.setdefault(v.kind, {"passed": 0, "failed": 0})
            row["passed" if v.passed else "failed"] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "name": self.name,
            "mode": self.mode.value,
            "ok": self.ok,
            "status": self.status,
            "message": self.message,
            "details": jsonable(self.details),
            "cases": [v.to_dict() for v in self.verdicts],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        return cls(
            suite=data["suite"],
            name=data["name"],
            mode=Mode(data["mode"]),
            ok=bool(data["ok"]),
            status=data["status"],
            message=data["message"],
            details=dict(data.get("details") or {}),
            verdicts=tuple(Verdict.from_dict(v) for v in data.get("cases", ())),
        )

    def write_json(self, path: str | Path) -> Path:
        return write_json_atomic(path, self.to_dict())

    @classmethod
    def read_json(cls, path: str | Path) -> RunResult:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    @classmethod
    def failed(cls, suite: Suite, mode: Mode, message: str, *, status: str = "error") -> RunResult:
        """A run that could not produce verdicts: every case fails with ``message``."""
        verdicts = tuple(
            Verdict(case_id=c.id, kind=c.kind.value, passed=False, message=message)
            for c in suite.cases
            if c.kind is not Kind.AUX
        )
        return cls(
            suite=str(suite.toml),
            name=suite.name,
            mode=mode,
            ok=False,
            status=status,
            message=message,
            verdicts=verdicts,
            details=suite_details(suite),
        )


def suite_details(suite: Suite) -> dict[str, Any]:
    return {
        "model": str(suite.model_dir),
        "suite_sha256": suite.digest(),
        "counts": {k.value: suite.count(k) for k in Kind},
    }
