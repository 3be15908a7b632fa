"""Collection nodes: a ``warp.toml`` is a SuiteFile; each must_fix / must_keep case an item, or, where
the model decides per word, each sentence (its rows grouped as the kind groups them: ``group``); each
case of its deferred file an item too, a known failure (``DeferredItem``).

aux cases (GSN-FT training data) are not tests, so they yield no item; the terminal summary
counts them. A suite mistake is a collection error with the SuiteError's file:line: field
message and no traceback; so is any other error loading a suite raises (named with its warp.toml).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from warp_check import (
    TRAFFIC,
    Case,
    Kind,
    RunResult,
    SettingsError,
    SuiteError,
    TrafficVerdict,
    Verdict,
    WarpError,
    first_line,
    reraise_interrupt,
)
from warp_check.frontend import flag_error

from .state import STATE, RunRefused

if TYPE_CHECKING:  # pragma: no cover
    from warp_check import Location

VERDICT = pytest.StashKey[Verdict]()
ROW_VERDICTS = pytest.StashKey[tuple[Verdict, ...]]()  # a sentence item's: every row's verdict
TRAFFIC_VERDICT = pytest.StashKey[TrafficVerdict]()
REFUSED = pytest.StashKey[str]()  # the core's refusal of the suite, on the one item that reports it
RESULT = pytest.StashKey[RunResult]()  # the suite's run, as this item's setup got it
PAIRED_TEST = "paired_test"  # the item of the paired test against a baseline, where --warp-worse-p gates it


def shown_path(config: pytest.Config, path: Path) -> Path:
    """``path`` relative to where pytest was started, when it is below it (as pytest shows paths)."""
    here = Path(config.invocation_params.dir)
    return path.relative_to(here) if path.is_absolute() and path.is_relative_to(here) else path


class CaseFailure(Exception):
    """A case that does not pass; carries the sentence that says why."""


class SuiteFile(pytest.File):
    @functools.cached_property
    def suite_key(self) -> Path:
        """The suite's key in the session state; resolved once, not once per case."""
        return self.path.resolve()

    def collect(self):
        try:
            suite = self.config.stash[STATE].load(self.path)
        except SuiteError as exc:
            shown = shown_path(self.config, Path(exc.path)) if exc.path else None
            raise self.CollectError(str(SuiteError(exc.message, path=shown, line=exc.line, field=exc.field))) from None
        except SettingsError as exc:  # a flag's value: the flag names it (a model given by --warp-model)
            raise self.CollectError(flag_error(exc, cli=False) or f"{type(exc).__name__}: {exc}") from None
        except WarpError as exc:
            raise self.CollectError(f"{type(exc).__name__}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 — whatever loading a suite raises: one collection error
            reraise_interrupt(exc)
            raise self.CollectError(self._load_failure(exc)) from None
        groups: dict[str, list[Case]] = {}
        for case in suite.cases:
            if case.kind is not Kind.AUX:
                groups.setdefault(suite.decision.group(case.id), []).append(case)
        for name, rows in groups.items():
            location = suite.locations[rows[0].id]
            if len(rows) == 1 and rows[0].id == name:
                yield CaseItem.from_parent(self, name=name, case=rows[0], location=location)
            else:
                words = (suite.decision.word_of(rows[0].text) or ((rows[0].text,), 0))[0]
                yield SentenceItem.from_parent(
                    self, name=name, case=rows[0], location=location, rows=tuple(rows), words=words
                )
        for deferred in suite.deferred:  # known failures, run and shown: never silently gone
            yield DeferredItem.from_parent(
                self, name=deferred.case.id, case=deferred.case, location=deferred.at, reason=deferred.reason
            )
        if self.config.stash[STATE].has_traffic(suite):
            yield TrafficItem.from_parent(self, name=TRAFFIC, line=suite.key_lines.get("traffic.path"))
        if getattr(self.config.stash[STATE].options.mode, "worse_p", None) is not None:
            yield PairedTestItem.from_parent(self, name=PAIRED_TEST)

    def _load_failure(self, exc: Exception) -> str:
        """The collection error of a suite whose loading raised ``exc`` (not a WarpError): the file
        and the error's words, no traceback; an unexpected type says it is warp-check's bug."""
        shown = shown_path(self.config, self.path)
        if isinstance(exc, OSError):  # the environment: a folder where a file belongs, a permission
            where = f" ({exc.filename})" if exc.filename else ""
            return f"{shown}: cannot load the suite: {exc.strerror or exc}{where}"
        if isinstance(exc, Warning):  # a warning the run's filterwarnings turned into an error
            return f"{shown}: loading the suite warned: {type(exc).__name__}: {first_line(exc)}"
        return f"{shown}: internal error: {type(exc).__name__}: {first_line(exc)}"


class SuiteItem(pytest.Item):
    """An item whose verdict comes from its suite's run (computed once, by the first item to run)."""

    def setup(self) -> None:
        # The suite's run happens in setup, so that a run the core refuses (an input it cannot use: exit 2
        # from the command) is pytest's error (E) on the one item that met it, not a failure (F) of every
        # case; the suite's other items are skipped and the session's exit code is a usage error
        # (pytest_sessionfinish). Reports carry the refusal, so this holds under xdist, where a
        # pytest.exit() in a worker reads as a crashed worker and a failed test.
        suite_file = self.parent
        try:
            self.stash[RESULT] = self.config.stash[STATE].result_for(
                suite_file.suite_key,
                lambda: [
                    row
                    for item in self.session.items
                    if item.parent is suite_file and isinstance(item, CaseItem)
                    for row in item.case_ids
                ],
            )
            return
        except RunRefused as refused:
            first, message = refused.first, refused.message
        if not first:
            pytest.skip(f"warp-check refused the run (the error is reported once): {message}")
        self.stash[REFUSED] = message
        pytest.fail(f"warp-check refused the run: {message}", pytrace=False)


class CaseItem(SuiteItem):
    def __init__(self, *, case: Case, location: Location, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.case_location = location
        self.add_marker(case.kind.value)  # -m must_fix / -m must_keep
        if case.source:
            self.extra_keyword_matches.add(case.source)  # -k deepwordbug

    @property
    def case_ids(self) -> tuple[str, ...]:
        """The ids of the cases whose verdicts this item reports."""
        return (self.case.id,)

    def runtest(self) -> None:
        result = self.stash[RESULT]
        verdict = result.verdict(self.case.id)
        if verdict is None:
            raise CaseFailure(f"no verdict for this case: {result.message}")
        self.stash[VERDICT] = dataclasses.replace(verdict, suite=result.suite)
        state = self.config.stash[STATE]
        self.user_properties += state.options.mode.junit({"kind": verdict.kind.value} | verdict.properties)
        self.user_properties += [part.junit() for part in verdict.parts]  # a property per label, where several
        if verdict.expected_failure is not None:
            pytest.xfail(verdict.expected_failure)
        if not verdict.passed:
            raise CaseFailure(verdict.message)

    described = "case"  # what the item is, in its failure's words

    def shown_input(self) -> str:
        """The item's input, as its failure shows it."""
        pair = f"\n  text_pair: {self.case.text_pair!r}" if self.case.text_pair is not None else ""
        return f"text: {self.case.text!r}{pair}"

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, (CaseFailure, WarpError)):
            shown = shown_path(self.config, self.case_location.path)
            return (
                f"{excinfo.value}\n"
                f"  {self.case.kind.value} {self.described} {self.name!r} at {shown}:{self.case_location.line}\n"
                f"  {self.shown_input()}"
            )
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.case_location.path, self.case_location.line - 1, f"{self.case.kind.value} {self.name}"


class SentenceItem(CaseItem):
    """A sentence of a token classifier's suite: it passes where every constrained word (a row) does,
    and its failure names each wrong word, its tag expected and predicted (the rows' verdicts)."""

    described = "sentence"

    def __init__(self, *, rows: tuple[Case, ...], words: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows = rows
        self.words = words

    @property
    def case_ids(self) -> tuple[str, ...]:
        return tuple(row.id for row in self.rows)

    def runtest(self) -> None:
        result = self.stash[RESULT]
        verdicts = [result.verdict(row.id) for row in self.rows]
        if any(v is None for v in verdicts):
            raise CaseFailure(f"no verdict for this sentence's words: {result.message}")
        rows = tuple(dataclasses.replace(v, suite=result.suite) for v in verdicts if v is not None)
        self.stash[ROW_VERDICTS] = rows
        wrong = [v for v in rows if not v.passed]
        self.stash[VERDICT] = wrong[0] if wrong else rows[0]
        state = self.config.stash[STATE]
        props = {"kind": self.case.kind.value, "words": len(rows), "wrong words": len(wrong)}
        self.user_properties += state.options.mode.junit(props)
        self.user_properties += [(f"word:{v.case_id}", v.message) for v in rows]
        if wrong and all(v.expected_failure is not None for v in wrong):
            pytest.xfail("; ".join(dict.fromkeys(v.expected_failure or "" for v in wrong)))
        if wrong:
            words = "\n    ".join(v.message for v in wrong if v.expected_failure is None)
            raise CaseFailure(f"{len(wrong)} of {len(rows)} constrained word(s) wrong:\n    {words}")

    def shown_input(self) -> str:
        return f"words: {' '.join(self.words)!r}"


class DeferredItem(CaseItem):
    """A case of the suite's deferred file: an expected failure with why it was deferred (a pass where the
    model now gets it right: its message says it can be put back). A run that does not check deferred
    cases (a repair never repairs them; an audit checks a certificate's claims) shows it as deferred too."""

    def __init__(self, *, reason: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reason = reason

    def runtest(self) -> None:
        result = self.stash[RESULT]
        if result.verdict(self.case.id) is None:
            why = f"deferred: {self.reason} (not checked by a {result.mode.value} run)"
            verdict = Verdict.of(self.case, passed=False, message=why)
            self.stash[VERDICT] = dataclasses.replace(verdict, suite=result.suite, expected_failure=why)
            pytest.xfail(why)
        super().runtest()


class TrafficItem(SuiteItem):
    """The suite's ``traffic`` item: Cert 4, the share of predictions the repair changes on the traffic,
    held to ``max_change`` where the suite or ``--warp-max-change`` sets one."""

    def __init__(self, *, line: int | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.traffic_line = line

    def runtest(self) -> None:
        result = self.stash[RESULT]
        verdict = result.traffic
        if verdict is None:
            raise CaseFailure(f"Cert 4 was not measured: {result.message}")
        self.stash[TRAFFIC_VERDICT] = verdict
        self.user_properties += [(name, value) for name, value in verdict.properties.items() if value is not None]
        if not verdict.passed:
            raise CaseFailure(verdict.message)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, (CaseFailure, WarpError)):
            shown = shown_path(self.config, self.path)
            return f"{excinfo.value}\n  traffic of the suite at {shown}" + (
                f":{self.traffic_line}" if self.traffic_line else " (--warp-traffic)"
            )
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, (self.traffic_line or 1) - 1, TRAFFIC


class PairedTestItem(SuiteItem):
    """The suite's ``paired_test`` item against a baseline (--warp-worse-p): the exact McNemar test's
    figures, failing where its one-sided p that the model is worse falls below the gate."""

    def runtest(self) -> None:
        result = self.stash[RESULT]
        paired = getattr(result.details, "paired_test", None)
        if paired is None:
            raise CaseFailure(f"the paired test was not computed: {result.message}")
        self.user_properties += list(paired.properties().items())
        if not paired.passed:
            raise CaseFailure(str(paired))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, (CaseFailure, WarpError)):
            return (
                f"{excinfo.value}\n  paired test of the suite at {shown_path(self.config, self.path)} (--warp-worse-p)"
            )
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, 0, PAIRED_TEST
