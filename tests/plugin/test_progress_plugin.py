"""Progress under pytest: on the terminal reporter's stream, outside the capture; a bar on a terminal,
one line per step on a log or with -q; --warp-progress and --warp-progress-after as promised."""

from __future__ import annotations

from pathlib import Path

import pytest
from testkit.suite_builder import write_suite

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest")

# pytester's output is no terminal: this conftest makes the inner pytest's terminal reporter say it is one.
TERMINAL = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    config.pluginmanager.get_plugin("terminalreporter").isatty = lambda: True
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, distilbert_dir: Path, tiny_split) -> Path:
    wrong, right = tiny_split
    return write_suite(pytester.path / "suite", model=distilbert_dir, fix=wrong, keep=right)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*INNER, *args)


def encoding_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "warp: encoding cases" in line]


def test_a_log_gets_one_line_per_step_and_the_results_are_unchanged(pytester, suite, tiny_split):
    wrong, right = tiny_split
    n = len(wrong) + len(right)
    result = run(pytester, "--warp-progress-after=0")
    result.assert_outcomes(passed=len(right), failed=len(wrong))
    assert "%|" not in result.stdout.str()
    lines = encoding_lines(result)
    assert len(lines) == 1 and lines[0].startswith(f"warp: encoding cases: {n} of {n} cases in ")
    # Not captured: the line is not in any failing case's captured output, it is on the terminal.
    assert "Captured stderr" not in result.stdout.str() and "Captured stdout" not in result.stdout.str()


def test_a_repair_shows_its_iterations(pytester, suite, tiny_split):
    result = run(pytester, "--warp-repair", "--warp-progress-after=0", "--warp-cache=none")
    assert result.ret == 0
    assert len(encoding_lines(result)) == 1
    assert any(line.startswith("warp: repair: ") and "short of their margin" in line for line in result.outlines)


@pytest.mark.parametrize("capture", [(), ("-s",)], ids=["captured", "-s"])
def test_a_terminal_gets_a_bar_and_quiet_gets_lines(pytester, suite, tiny_split, capture):
    wrong, right = tiny_split
    pytester.makeconftest(TERMINAL)
    result = run(pytester, "--warp-progress-after=0", "--warp-cache=none", *capture)
    result.assert_outcomes(passed=len(right), failed=len(wrong))
    n = len(wrong) + len(right)
    bars = [line for line in encoding_lines(result) if "%|" in line]  # a redraw is a line here (split at "\r")
    assert bars and all(bar.startswith("warp: encoding cases: ") for bar in bars)
    assert "100%|" in bars[-1] and f"| {n}/{n} [" in bars[-1]
    quiet = run(pytester, "--warp-progress-after=0", "--warp-cache=none", "-q", *capture)
    quiet.assert_outcomes(passed=len(right), failed=len(wrong))
    assert "%|" not in quiet.stdout.str() and len(encoding_lines(quiet)) == 1


def test_off_and_a_step_under_the_threshold_show_nothing(pytester, suite):
    pytester.makeconftest(TERMINAL)
    off = run(pytester, "--warp-progress=off", "--warp-progress-after=0", "--warp-cache=none")
    assert encoding_lines(off) == [] and "%|" not in off.stdout.str()
    later = run(pytester, "--warp-progress-after=3600", "--warp-cache=none")
    assert encoding_lines(later) == [] and "%|" not in later.stdout.str()


@pytest.mark.parametrize(
    ("flag", "shown"),
    [
        ("--warp-progress=loud", "--warp-progress: 'loud': must be one of auto, bar, lines, off"),
        ("--warp-progress-after=-1", "--warp-progress-after: -1.0: must be a finite number of seconds >= 0"),
    ],
)
def test_a_bad_progress_option_is_a_usage_error(pytester, suite, flag, shown):
    result = run(pytester, flag)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{shown}*"])
