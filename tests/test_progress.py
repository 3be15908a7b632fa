"""One progress rule (warp_check.progress): a bar on a terminal, one line per step elsewhere or when
quiet, nothing for a step shorter than the threshold; the steps that show it (encoding, the repair
loop) report what they did."""

from __future__ import annotations

import io

import numpy as np
import pytest

from warp_check import Kind, Progress, ProgressStyle, SettingsError
from warp_check.model.encode import encode_cases
from warp_check.progress import as_progress
from warp_check.releases.load import load_adapter
from warp_check.repair.loop import repair_head
from warp_check.repair.records import CaseSet
from warp_check.suite.loader import load_suite


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def run_step(progress: Progress, units: int = 3) -> None:
    with progress.step("encoding cases", total=units) as step:
        for _ in range(units):
            step.advance(1, note="2 case(s) short")


def test_a_terminal_gets_a_bar_redrawn_in_place():
    stream = Terminal()
    run_step(Progress(stream=stream, after_s=0))
    text = stream.getvalue()
    assert "\r" in text and "warp: encoding cases" in text and "3/3" in text and "2 case(s) short" in text
    assert text.endswith("\n") and text.count("\n") == 1  # the finished bar stays, as one line


def test_a_stream_that_is_not_a_terminal_gets_one_line_per_step():
    stream = io.StringIO()
    progress = Progress(stream=stream, after_s=0)
    run_step(progress)
    run_step(progress, units=1)
    lines = stream.getvalue().splitlines(keepends=True)
    assert "\r" not in stream.getvalue()
    assert len(lines) == 2
    assert lines[0].startswith("warp: encoding cases: 3 of 3 cases in ") and lines[0].endswith(" s; 2 case(s) short\n")
    assert lines[1].startswith("warp: encoding cases: 1 of 1 case")


def test_quiet_turns_the_bar_into_lines_and_an_explicit_style_wins():
    stream = Terminal()
    run_step(Progress.chosen(quiet=True, after_s=0, stream=stream))
    assert "\r" not in stream.getvalue() and stream.getvalue().count("\n") == 1
    stream = Terminal()
    run_step(Progress.chosen("bar", quiet=True, after_s=0, stream=stream))
    assert "\r" in stream.getvalue()
    plain = io.StringIO()
    run_step(Progress.chosen("bar", after_s=0, stream=plain))  # a bar asked for, on a log: still a bar
    assert "\r" in plain.getvalue()


@pytest.mark.parametrize("stream", [Terminal(), io.StringIO()], ids=["terminal", "log"])
def test_a_step_shorter_than_the_threshold_shows_nothing(stream):
    run_step(Progress(stream=stream, after_s=3600))
    assert stream.getvalue() == ""


@pytest.mark.parametrize("stream", [Terminal(), io.StringIO()], ids=["terminal", "log"])
def test_off_shows_nothing(stream):
    run_step(Progress(style=ProgressStyle.OFF, stream=stream, after_s=0))
    run_step(as_progress(False))
    assert stream.getvalue() == ""


def test_a_step_stopped_by_an_error_says_so():
    stream = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        with Progress(stream=stream, after_s=0).step("attacking with X", total=5) as step:
            step.advance(2)
            raise KeyboardInterrupt
    assert stream.getvalue().startswith("warp: attacking with X: 2 of 5 cases in ")
    assert stream.getvalue().endswith("(stopped)\n")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"style": "loud"}, "style"), ({"after_s": -1.0}, "after_s"), ({"after_s": float("nan")}, "after_s")],
)
def test_bad_settings_name_the_field(kwargs, field):
    with pytest.raises(SettingsError) as caught:
        Progress.chosen(**kwargs)
    assert caught.value.field == field
    with pytest.raises(SettingsError, match="stream"):
        Progress(stream=object())


def test_true_is_the_default_on_stderr():
    assert as_progress(True) == Progress() and as_progress(None).style is ProgressStyle.OFF
    assert Progress.chosen(" Lines ").style is ProgressStyle.LINES


def test_encoding_shows_one_line_with_the_cases_it_encoded(tiny_suite, tmp_path):
    suite = load_suite(tiny_suite)
    adapter = load_adapter(suite)
    stream = io.StringIO()
    progress = Progress(stream=stream, after_s=0)
    encoded = encode_cases(adapter, suite.cases, cache_dir=tmp_path / "cache", progress=progress)
    n = len(suite.cases)
    assert encoded.encoded == n
    assert stream.getvalue().startswith(f"warp: encoding cases: {n} of {n} cases in ")
    assert stream.getvalue().count("\n") == 1
    again = encode_cases(adapter, suite.cases, cache_dir=tmp_path / "cache", progress=progress)
    assert again.encoded == 0 and stream.getvalue().count("\n") == 1  # from the cache: no step at all


def test_the_repair_loop_counts_its_iterations(tiny_suite):
    suite = load_suite(tiny_suite)
    adapter = load_adapter(suite)
    encoded = encode_cases(adapter, suite.cases, progress=False)
    labels = np.array([c.label for c in suite.cases])
    fix_rows = [i for i, c in enumerate(suite.cases) if c.kind is Kind.MUST_FIX]
    keep_rows = [i for i, c in enumerate(suite.cases) if c.kind is Kind.MUST_KEEP]

    def case_set(rows: list[int]) -> CaseSet:
        return CaseSet(ids=tuple(suite.cases[i].id for i in rows), V=encoded.V[rows], labels=labels[rows])

    stream = io.StringIO()
    result = repair_head(
        adapter.head(), case_set(fix_rows), case_set(keep_rows), progress=Progress(stream=stream, after_s=0)
    )
    iterations = len(result.iterations)
    assert iterations >= 1
    unit = "iteration" if iterations == 1 else "iterations"
    line = stream.getvalue()
    assert line.startswith(f"warp: repair: {iterations} {unit} in ") and line.count("\n") == 1
    assert "case(s) short of their margin" in line
