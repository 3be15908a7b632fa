"""The ``warp-check`` section of the terminal summary, built from what the reports carried
back (so it reads the same under pytest-xdist as in a serial run)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from _pytest.junitxml import xml_key  # --junitxml's writer: pytest's own record_testsuite_property reads it so

from warp_check import REPORT_HTML, Kind, RunDetails, RunResult, RunStatus, Verdict
from warp_check.frontend import RunMode, run_verdict, tally

from .state import WarpSession


def _relative(path: str, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


def lines(state: WarpSession) -> list[str]:
    out: list[str] = []
    for suite_path, run in state.runs.items():
        out += _suite_lines(state.options.mode, run, state.cases.get(suite_path, []), state.config.rootpath)
    if state.report_path is not None:
        out.append(f"report: {state.report_path}")
        out.append(f"report page: {state.report_path.parent / REPORT_HTML}")
    if state.report_error is not None:
        out.append(f"report NOT written: {state.report_error}")
    return out


def _suite_lines(mode: RunMode, run: RunResult, verdicts: Sequence[Verdict], root: Path) -> list[str]:
    details = run.details
    out = [mode.header(run, _relative(run.suite, root)), *mode.model_lines(details)]
    for kind, row in tally(verdicts, (Kind.MUST_FIX, Kind.MUST_KEEP)).items():
        total = details.counts.get(kind, row.total)
        of = f" (of {total} in the suite)" if total != row.total else ""
        out.append(f"  {kind.value:<9}  {row}{of}")
    if details.counts.get(Kind.AUX):
        out.append(f"  aux        {details.counts[Kind.AUX]} case(s): GSN-FT data, not tests")
    out += mode.encoder_lines(details)
    out += [f"  warning: {warning}" for warning in run.warnings]
    out += [f"  {run.message}"] if run.status is RunStatus.ERROR else mode.summary_lines(run)
    computed_by = details.computed_by if isinstance(details, RunDetails) else None
    if computed_by not in (None, "main"):
        out.append(f"  computed once, by xdist worker {computed_by}")
    return out + [f"  {line}" for line in run_verdict(run, verdicts).lines()]


def junit_properties(state: WarpSession) -> list[tuple[str, str]]:
    """Each suite's verdict as JUnit properties of the test suite (``warp <suite> verdict``, ...)."""
    return [
        (f"warp {run.name} {name}", value)
        for suite_path, run in state.runs.items()
        for name, value in run_verdict(run, state.cases.get(suite_path, [])).properties()
    ]


def add_to_junit(config: pytest.Config, state: WarpSession) -> None:
    """Each suite's verdict as properties of the JUnit file's test suite, where --junitxml writes one."""
    xml = config.stash.get(xml_key, None)
    if xml is None or state.is_worker:
        return
    for name, value in junit_properties(state):
        xml.add_global_property(name, value)
