"""What a run of a suite gives: a verdict per case and the run's own outcome, as plain data.

A :class:`RunResult` round-trips through JSON (:mod:`warp_check.serial`), so pytest-xdist
workers can share one repair instead of each running their own, and a report.json can be
rendered again. Numbers JSON cannot hold are written as null.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from warp_check.cases import Case, Kind
from warp_check.decisions.base import DecisionKind
from warp_check.files import write_json_atomic
from warp_check.json_bounded import read_json
from warp_check.runs.details import CheckDetails, Details, RunDetails, read_details
from warp_check.runs.modes import Mode, RunStatus
from warp_check.serial import Reader, Record, on_disk, read, to_json
from warp_check.suite.loader import Suite


class Outcome(str, enum.Enum):
    """What pytest reported for a case's item."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    XFAILED = "xfailed"  # an expected failure (regression-only gating: the baseline fails it too)


@dataclass(frozen=True, kw_only=True)
class PartVerdict(Record):
    """One part of a case's answer where its kind decides several things at once (a label of a
    multi-label case): what the case asks of it, and its gap now (a check) or after repair, and
    before repair where the run knows it; a gap is positive where the part is answered right."""

    word: str  # what a part is called (the kind's part_word: "label")
    name: str  # the part's name, as the suite names it
    asks: str  # what the case asks of it ("on", "off")
    gap: float | None
    gap_before: float | None = field(default=None, metadata=on_disk(omit_none=True))

    @property
    def right(self) -> bool | None:
        return None if self.gap is None or math.isnan(self.gap) else self.gap > 0

    @property
    def right_before(self) -> bool | None:
        return None if self.gap_before is None or math.isnan(self.gap_before) else self.gap_before > 0

    def junit(self) -> tuple[str, str]:
        """The part's JUnit property: ``label:anger`` = ``on, right, gap 1.23[, gap_before -0.5]``."""
        said = {True: "right", False: "wrong", None: "unknown"}
        value = f"{self.asks}, {said[self.right]}, gap {_figure(self.gap)}"
        if self.gap_before is not None:
            value += f", gap_before {_figure(self.gap_before)}"
        return f"{self.word}:{self.name}", value


def _figure(value: float | None) -> str:
    return "nan" if value is None else f"{value:.6g}"


def part_verdicts(
    kind: DecisionKind,
    answer: Any,
    logits: Sequence[float],
    name: Callable[[int], str],
    *,
    before: Sequence[float] | None = None,
) -> tuple[PartVerdict, ...]:
    """The parts of a case's ``answer`` on a row of ``logits`` (and on ``before``'s, where given), as
    its kind decides them; () where the kind's answer is one decision."""
    if kind.part_word is None:
        return ()
    was = {p.part: p.gap for p in kind.part_answers(before, answer)} if before is not None else {}
    return tuple(
        PartVerdict(word=kind.part_word, name=name(p.part), asks=p.asks, gap=p.gap, gap_before=was.get(p.part))
        for p in kind.part_answers(logits, answer)
    )


@dataclass(frozen=True, kw_only=True)
class Answered(Record):
    """What the model answered a case before a repair and after it, in the kind's words (a word's tag:
    ``B-LOC``); ``after`` None where the repair left no model to answer (it failed)."""

    before: str
    after: str | None = field(default=None, metadata=on_disk(omit_none=True))


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """Pass or fail for one case, the sentence that says why, and numbers for reports."""

    case_id: str = field(metadata=on_disk(key="id"))
    kind: Kind
    passed: bool
    message: str
    # The case's input, so that a report shows what was tested, not only its id; None where the run
    # that wrote the verdict did not record it (files written before verdicts carried it).
    text: str | None = field(default=None, metadata=on_disk(omit_none=True))
    text_pair: str | None = field(default=None, metadata=on_disk(omit_none=True))
    # JUnit properties and report columns, by name.
    properties: dict[str, Any] = field(default_factory=dict, metadata=on_disk(since=True))
    # The suite's warp.toml, where the verdict travels without its run.
    suite: str | None = field(default=None, metadata=on_disk(omit_none=True))
    # pytest's, where pytest reported the case.
    outcome: Outcome | None = field(default=None, metadata=on_disk(omit_none=True))
    # A failure that is expected, and why (regression-only gating: the baseline fails the case too).
    expected_failure: str | None = field(default=None, metadata=on_disk(omit_none=True))
    # Where the case's kind decides several things at once, each part's answer (JUnit: a property each).
    parts: tuple[PartVerdict, ...] = field(default=(), metadata=on_disk(omit_default=True))
    # A repair's: what the model answered the case before it and after it (a check says it in properties).
    answered: Answered | None = field(default=None, metadata=on_disk(omit_none=True))

    @classmethod
    def of(
        cls,
        case: Case,
        *,
        passed: bool,
        message: str,
        properties: dict[str, Any] | None = None,
        parts: tuple[PartVerdict, ...] = (),
    ) -> Verdict:
        """``case``'s verdict, carrying its id, kind and input."""
        return cls(
            case_id=case.id,
            kind=case.kind,
            passed=passed,
            message=message,
            text=case.text,
            text_pair=case.text_pair,
            properties=properties or {},
            parts=parts,
        )

    @property
    def reported(self) -> Outcome:
        """pytest's outcome, or where pytest did not report it, the one it would report: an expected
        failure is xfailed (``pytest.xfail``), so the command and pytest count alike."""
        if self.outcome is not None:
            return self.outcome
        if self.expected_failure is not None:
            return Outcome.XFAILED
        return Outcome.PASSED if self.passed else Outcome.FAILED

    def to_dict(self) -> dict[str, Any]:
        return to_json(self, null_nonfinite=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return read(cls, data)


# The name of a suite's traffic item: Cert 4's verdict (warp_check.certificates.traffic.changes).
TRAFFIC = "traffic"


@dataclass(frozen=True, kw_only=True)
class TrafficVerdict:
    """Cert 4's verdict on a run: the repair's changes on the traffic within its budget (or measured,
    where there is none), the sentence that says so, and its figures for reports and JUnit."""

    passed: bool
    message: str
    properties: dict[str, Any] = field(default_factory=dict)
    outcome: Outcome | None = field(default=None, metadata=on_disk(omit_none=True))

    @property
    def reported(self) -> Outcome:
        """pytest's outcome, or the verdict's own where pytest did not report it."""
        if self.outcome is not None:
            return self.outcome
        return Outcome.PASSED if self.passed else Outcome.FAILED

    def to_dict(self) -> dict[str, Any]:
        return to_json(self, null_nonfinite=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrafficVerdict:
        return read(cls, data)


@dataclass(frozen=True, kw_only=True)
class Tally:
    """One kind's cases by pytest's outcome: what pytest's summary, the command's result and the report
    count (:func:`tally`), so ``warp-check diff`` and ``pytest --warp-baseline`` give the same numbers."""

    passed: int = 0
    failed: int = 0
    xfailed: int = 0  # failing on the baseline too (regression-only gating)
    skipped: int = 0

    @classmethod
    def of(cls, verdicts: Iterable[Verdict]) -> Tally:
        outcomes = [v.reported for v in verdicts]
        return cls(
            passed=outcomes.count(Outcome.PASSED),
            failed=outcomes.count(Outcome.FAILED),
            xfailed=outcomes.count(Outcome.XFAILED),
            skipped=outcomes.count(Outcome.SKIPPED),
        )

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.xfailed + self.skipped

    def __str__(self) -> str:
        words = f"{self.passed} passed, {self.failed} failed"
        if self.xfailed:
            words += f", {self.xfailed} xfailed (wrong on the baseline too)"
        if self.skipped:
            words += f", {self.skipped} skipped"
        return words


def tally(verdicts: Iterable[Verdict], kinds: Iterable[Kind] | None = None) -> dict[Kind, Tally]:
    """The verdicts by kind and pytest's outcome (:class:`Tally`): ``kinds`` in that order (each one,
    even with no case), or else every kind met, in the order of its first case."""
    verdicts = tuple(verdicts)
    order = tuple(kinds) if kinds is not None else tuple(dict.fromkeys(v.kind for v in verdicts))
    return {kind: Tally.of(v for v in verdicts if v.kind is kind) for kind in order}


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
    # None in a run's summary (what a pytest report carries once per suite).
    verdicts: tuple[Verdict, ...] = field(default=(), metadata=on_disk(key="cases", since=True))
    details: Details
    # What went wrong that the run survived (a cache it could not write).
    warnings: tuple[str, ...] = field(default=(), metadata=on_disk(since=True))
    # Cert 4's verdict, where the run measured traffic (the suite's ``traffic`` item).
    traffic: TrafficVerdict | None = field(default=None, metadata=on_disk(omit_none=True))

    JSON_FIELDS: ClassVar[tuple[str, ...]] = (
        "suite", "name", "mode", "ok", "status", "message", "details", "verdicts", "traffic", "warnings",
    )  # fmt: skip

    @property
    def passed(self) -> bool:
        """What a CI gate asks: the run worked, every case passed (or was expected to fail), the
        repair (or release) kept within its traffic budget and, against a baseline, the paired test's gate held."""
        cases = all(v.passed or v.expected_failure is not None for v in self.verdicts)
        paired = self.details.paired_test if isinstance(self.details, CheckDetails) else None
        return self.ok and cases and (self.traffic is None or self.traffic.passed) and (paired is None or paired.passed)

    def verdict(self, case_id: str) -> Verdict | None:
        return self._by_id.get(case_id)

    @functools.cached_property
    def _by_id(self) -> dict[str, Verdict]:  # one lookup per pytest item: keep it O(1)
        return {v.case_id: v for v in self.verdicts}

    def counts(self) -> dict[Kind, Tally]:
        """Verdicts per kind by pytest's outcome (:func:`tally`), kinds in the order of their first case."""
        return tally(self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return to_json(self, null_nonfinite=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str | Path | None = None) -> RunResult:
        # The details' record follows from the run's mode and status.
        reader = Reader(data, "", path, ValueError)
        values = reader.values(cls, skip=("details",))
        return cls(**values, details=read_details(values["mode"], values["status"], reader.object("details")))

    def write_json(self, path: str | Path) -> Path:
        return write_json_atomic(path, self.to_dict())

    @classmethod
    def read_json(cls, path: str | Path) -> RunResult:
        return cls.from_dict(read_json(path, error=ValueError, what="run result"), path=path)

    @classmethod
    def failed(cls, suite: Suite, mode: Mode, message: str) -> RunResult:
        """A run that could not produce verdicts: every case fails with ``message``."""
        verdicts = tuple(
            Verdict(case_id=c.id, kind=c.kind, passed=False, message=message, text=c.text, text_pair=c.text_pair)
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
