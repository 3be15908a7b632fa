"""``warp-check``: the progress rule on stderr, and verify / compare reading the representation cache
by default as check does (``--no-cache`` / ``--cache none`` opt out)."""

from __future__ import annotations

from pathlib import Path

import pytest

from warp_check.cli import main


def record_encoded(monkeypatch) -> list[int]:
    """From now on, how many cases each encode_cases call (verify's, or a check's) sent through the encoder."""
    from warp_check.certify import verify
    from warp_check.model import encode
    from warp_check.runs import evaluation

    seen: list[int] = []

    def encode_cases(*args, **kwargs):
        encoded = encode.encode_cases(*args, **kwargs)
        seen.append(encoded.encoded)
        return encoded

    for module in (verify, evaluation):
        monkeypatch.setattr(module, "encode_cases", encode_cases)
    return seen


def encoded_cases(seen: list[int], since: int = 0) -> int:
    return sum(seen[since:])


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


def test_verify_reads_the_suites_cache_and_a_second_verify_encodes_nothing(tiny_suite, repaired, monkeypatch, capsys):
    seen = record_encoded(monkeypatch)
    # The repair filled the suite's cache: its default output's verify encodes nothing at all.
    assert main(["verify", str(repaired)]) == 0
    assert seen and encoded_cases(seen) == 0
    assert main(["verify", str(repaired), "--suite", str(tiny_suite)]) == 0
    assert encoded_cases(seen) == 0
    # Opting out encodes every case again (an audit that trusts no cache).
    assert main(["verify", str(repaired), "--no-cache"]) == 0
    assert encoded_cases(seen) > 0
    assert "certificate holds" in capsys.readouterr().out


def test_a_model_outside_any_suite_is_cached_in_the_users_cache(tiny_suite, repaired, tmp_path, monkeypatch):
    from warp_check.runs import workdir

    monkeypatch.setattr(workdir, "user_cache_dir", lambda: tmp_path / "user-cache")  # this test's alone
    moved = tmp_path / "releases" / "r1"
    moved.parent.mkdir()
    repaired.rename(moved)
    seen = record_encoded(monkeypatch)
    assert main(["verify", str(moved)]) == 0
    first = encoded_cases(seen)
    assert first > 0  # the user's cache is empty: encoded once
    mark = len(seen)
    assert main(["verify", str(moved)]) == 0
    assert encoded_cases(seen, mark) == 0  # the second verify encodes 0 cases
    mark = len(seen)
    assert main(["verify", str(moved), "--cache", "none"]) == 0
    assert encoded_cases(seen, mark) == first
    assert any((tmp_path / "user-cache").iterdir())


def test_compare_reads_the_suites_cache(tiny_suite, monkeypatch, capsys):
    assert main(["check", str(tiny_suite)]) == 1  # fills <suite>/.warp/cache
    seen = record_encoded(monkeypatch)
    assert main(["compare", str(tiny_suite), "--methods", "original,warp", "-q"]) == 0
    assert encoded_cases(seen) == 0
    capsys.readouterr()
    argv = ["compare", str(tiny_suite), "--methods", "original,warp", "-q", "--no-cache", "--progress-after", "0"]
    assert main(argv) == 0
    assert encoded_cases(seen) > 0
    err = capsys.readouterr().err  # -q: the encoding as one line, not a bar
    assert err.count("warp: encoding cases: ") == 1 and "\r" not in err


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
