"""``warp-check``: the progress rule on stderr, and verify / compare reading the representation cache
by default as check does (``--no-cache`` / ``--cache none`` opt out)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from warp_check.cli import main

SHOW_ENCODING = ("--progress", "lines", "--progress-after", "0")  # a line on stderr for any encoding


def encoded(argv: list[str], capsys: pytest.CaptureFixture[str], code: int = 0) -> int:
    """Run the command; how many cases it sent through the encoder, as its progress lines say."""
    capsys.readouterr()
    assert main([*argv, *SHOW_ENCODING]) == code
    return sum(int(n) for n in re.findall(r"warp: encoding cases: (\d+) of \d+ cases", capsys.readouterr().err))


def test_a_log_gets_one_line_per_step_and_json_none(tiny_suite, tiny_split, capsys):
    n = sum(map(len, tiny_split))
    assert main(["check", str(tiny_suite), "--cache", "none", "--progress-after", "0"]) == 1
    err = capsys.readouterr().err
    assert "\r" not in err and err.count("warp: encoding cases: ") == 1
    assert f"warp: encoding cases: {n} of {n} cases in " in err
    assert main(["check", str(tiny_suite), "--cache", "none", "--progress-after", "0", "--json"]) == 1
    assert "warp:" not in capsys.readouterr().err  # JSON is for programs: no progress unless asked
    assert main(["check", str(tiny_suite), "--no-cache", "--progress", "bar", "--progress-after", "0"]) == 1
    err = capsys.readouterr().err
    assert "\rwarp: encoding cases:" in err and f"{n}/{n}" in err


def test_a_bad_progress_value_is_a_usage_error(tiny_suite, capsys):
    assert main(["check", str(tiny_suite), "--progress", "loud"]) == 2
    assert "--progress: 'loud': must be one of auto, bar, lines, off" in capsys.readouterr().err


@pytest.fixture
def repaired(tiny_suite: Path) -> Path:
    """The tiny suite repaired into its default folder (<suite>/.warp/repaired), its cache filled."""
    assert main(["repair", str(tiny_suite), "-q"]) == 0
    return tiny_suite / ".warp" / "repaired"


def test_verify_reads_the_suites_cache_and_a_second_verify_encodes_nothing(tiny_suite, repaired, capsys):
    # The repair filled the suite's cache: its default output's verify encodes nothing at all.
    assert encoded(["verify", str(repaired)], capsys) == 0
    assert encoded(["verify", str(repaired), "--suite", str(tiny_suite)], capsys) == 0
    # Opting out encodes every case again (an audit that trusts no cache).
    assert encoded(["verify", str(repaired), "--no-cache"], capsys) > 0
    assert main(["verify", str(repaired), "--no-cache"]) == 0
    assert "certificate holds" in capsys.readouterr().out


def test_a_model_outside_any_suite_is_cached_in_the_users_cache(tiny_suite, repaired, tmp_path, monkeypatch, capsys):
    from warp_check.runs import workdir

    # internal: conftest points the user's cache at the session's folder, shared; this test needs one empty
    monkeypatch.setattr(workdir, "user_cache_dir", lambda: tmp_path / "user-cache")
    moved = tmp_path / "releases" / "r1"
    moved.parent.mkdir()
    repaired.rename(moved)
    first = encoded(["verify", str(moved)], capsys)
    assert first > 0  # the user's cache is empty: encoded once
    assert encoded(["verify", str(moved)], capsys) == 0  # the second verify encodes 0 cases
    assert encoded(["verify", str(moved), "--cache", "none"], capsys) == first
    assert any((tmp_path / "user-cache").iterdir())


def test_compare_reads_the_suites_cache(tiny_suite, capsys):
    assert main(["check", str(tiny_suite)]) == 1  # fills <suite>/.warp/cache
    assert encoded(["compare", str(tiny_suite), "--methods", "original,warp", "-q"], capsys) == 0
    argv = ["compare", str(tiny_suite), "--methods", "original,warp", "-q", "--no-cache", "--progress-after", "0"]
    assert main(argv) == 0
    err = capsys.readouterr().err  # -q: the encoding as one line, not a bar
    assert err.count("warp: encoding cases: ") == 1 and "\r" not in err
    assert int(re.search(r"warp: encoding cases: (\d+) of", err)[1]) > 0


def test_report_and_promote_show_their_encoding_by_the_same_rule(tiny_suite, tiny_split, tmp_path, capsys):
    n = sum(map(len, tiny_split))
    report = ["report", str(tiny_suite), "--out", str(tmp_path / "report"), "--cache", "none"]
    assert main([*report, "--progress-after", "0"]) == 0
    assert f"warp: encoding cases: {n} of {n} cases in " in capsys.readouterr().err
    repaired = tmp_path / "repaired"
    assert main(["repair", str(tiny_suite), "--out", str(repaired), "--cache", "none", "-q"]) == 0
    capsys.readouterr()
    fixed = len(tiny_split[0])
    promote = ["promote", str(tiny_suite), "--from", str(repaired), "--dry-run", "--cache", "none"]
    assert main([*promote, "--progress-after", "0"]) == 0
    assert f"warp: encoding cases: {fixed} of {fixed} cases in " in capsys.readouterr().err
    assert main([*promote, "--progress", "off"]) == 0
    assert "warp:" not in capsys.readouterr().err
