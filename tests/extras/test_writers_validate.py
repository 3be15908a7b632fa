"""Every command that writes a case file checks what it writes by the loader's own rules first.

What the suite would refuse at its next load is refused where it is written, naming the row,
and the file is left as it was (issue: import exited 0 and wrote files the suite then refused).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit.suite_builder import write_suite

from warp_check.cases import Kind
from warp_check.data_files import ImportSettings
from warp_check.errors import SuiteError
from warp_check.sources.importer import import_cases
from warp_check.suite.loader import load_suite

LIMIT = 100_000  # the loader's longest text


@pytest.fixture
def suite(tmp_path: Path, distilbert_dir: Path):
    folder = write_suite(
        tmp_path / "suite", model=distilbert_dir, keep=[{"id": "k", "text": "it was good", "label": "positive"}]
    )
    return load_suite(folder)


def _import_jsonl(suite, tmp_path: Path, rows: list[dict], out: Path):
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    settings = ImportSettings(format="jsonl", id="id" if any("id" in r for r in rows) else None, kind=Kind.MUST_FIX)
    return import_cases(suite, source, out, settings)


@pytest.mark.parametrize(
    ("case_id", "why"),
    [
        ("a::b", "'::'"),
        ("line\nbreak", "line breaks"),
        ("tab\there", "tabs"),
    ],
)
@pytest.mark.parametrize("existing", [False, True])
def test_an_id_the_loader_refuses_is_refused_at_import_and_the_file_kept(suite, tmp_path, case_id, why, existing):
    out = tmp_path / "suite" / "imported.jsonl"
    before = '{"id": "x1", "text": "fine", "label": "positive", "kind": "must_fix"}\n'
    if existing:
        out.write_text(before, encoding="utf-8")
    with pytest.raises(SuiteError, match=why) as caught:
        _import_jsonl(suite, tmp_path, [{"id": case_id, "text": "dull", "label": "negative"}], out)
    assert "imported.jsonl" in str(caught.value)
    assert out.read_text(encoding="utf-8") == before if existing else not out.exists()


@pytest.mark.parametrize("length", [LIMIT + 1, 1_000_000])
def test_a_text_longer_than_the_loader_takes_is_refused_at_import(suite, tmp_path, length):
    out = tmp_path / "suite" / "imported.jsonl"
    with pytest.raises(SuiteError, match="characters long"):
        _import_jsonl(suite, tmp_path, [{"text": "a" * length, "label": "negative"}], out)
    assert not out.exists()


def test_a_text_at_the_limit_is_imported_and_the_suite_loads_it(suite, tmp_path):
    out = tmp_path / "suite" / "imported.jsonl"
    result = _import_jsonl(suite, tmp_path, [{"text": "a " * (LIMIT // 2), "label": "negative"}], out)
    assert len(result.appended.added) == 1
    with (suite.toml).open("a", encoding="utf-8") as toml:
        toml.write('\n[[cases]]\npath = "imported.jsonl"\n')
    assert len(load_suite(suite.toml).cases) == 2


def test_the_command_refuses_a_bad_row_with_one_line_and_exit_2(suite, tmp_path, capsys):
    from warp_check.cli import main

    source = tmp_path / "rows.csv"
    source.write_text('text,label,id\n"dull",negative,"a::b"\n', encoding="utf-8")
    out = tmp_path / "suite" / "imported.jsonl"
    code = main(["import", str(suite.toml), str(source), "--out", str(out), "--id", "id"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "'::'" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_row_that_gives_a_suite_case_another_label_is_refused_naming_both(suite, tmp_path):
    # The loader refuses one text with two labels across files ("no model can satisfy both"): so does import.
    out = tmp_path / "suite" / "imported.jsonl"
    with pytest.raises(SuiteError, match=r"imported.jsonl:1: field 'label': the same text is case 'k' at keep.jsonl:1"):
        _import_jsonl(suite, tmp_path, [{"text": "it was good", "label": "negative"}], out)
    assert not out.exists()


def test_a_row_that_repeats_a_suite_case_with_its_label_is_imported(suite, tmp_path):
    out = tmp_path / "suite" / "imported.jsonl"
    result = _import_jsonl(suite, tmp_path, [{"text": "it was good", "label": "positive"}], out)
    assert len(result.appended.added) == 1
