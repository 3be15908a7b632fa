"""report.json and the xdist run files are read within the bounds of every JSON warp-check reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from warp_check.errors import WarpError
from warp_check.reports.folder import read_report
from warp_check.runs.result import RunResult


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("[" * 200_000 + "]" * 200_000, "nested more than"),
        ('{"runs": [' + "9" * 5000 + "]}", "digits"),
        ('{"runs": NaN}', "NaN"),
        ('{"no_runs": []}', "not a warp-check report.json"),
        ('{"runs": [{"suite": 1}]}', "not a warp-check report.json"),
    ],
)
def test_a_report_json_that_is_not_one_is_named_never_a_traceback(tmp_path: Path, content: str, words: str):
    path = tmp_path / "report.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(WarpError, match=words) as caught:
        read_report(path)
    assert str(path) in str(caught.value)


def test_the_report_command_names_a_deep_report_json_in_one_line(tmp_path: Path, capsys):
    from warp_check.cli import main

    path = tmp_path / "report.json"
    path.write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")
    assert main(["report", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "report.json" in err and len(err.strip().splitlines()) == 1


def test_a_run_file_nested_too_deep_is_a_value_error_naming_it(tmp_path: Path):
    path = tmp_path / "run.json"
    path.write_text("{" * 100 + "}" * 100, encoding="utf-8")
    with pytest.raises(ValueError, match="run.json"):
        RunResult.read_json(path)
