"""What import and a model folder read as JSON is read within bounds: a line nested 200k deep or a
5,000-digit number is named at its file and line, never a RecursionError or ValueError traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from testkit.suite_builder import write_suite

from warp_check.cases import Kind
from warp_check.data_files import ImportSettings
from warp_check.errors import ModelError, SuiteError
from warp_check.model.loading import read_config
from warp_check.sources.importer import import_cases
from warp_check.suite.loader import load_suite

DEEP = "[" * 200_000 + "]" * 200_000


@pytest.fixture
def suite(tmp_path: Path, distilbert_dir: Path):
    folder = write_suite(
        tmp_path / "suite", model=distilbert_dir, keep=[{"id": "k", "text": "it was good", "label": "positive"}]
    )
    return load_suite(folder)


@pytest.mark.parametrize(
    ("line", "words"),
    [(DEEP, "nested more than"), ('{"text": "ok", "label": ' + "1" * 5000 + "}", "digits"), ("{", "not a readable")],
)
def test_a_jsonl_row_that_is_no_json_object_is_named_at_its_line(suite, tmp_path, line, words):
    source = tmp_path / "rows.jsonl"
    source.write_text('{"text": "fine", "label": "positive"}\n' + line + "\n", encoding="utf-8")
    out = tmp_path / "suite" / "imported.jsonl"
    with pytest.raises(SuiteError, match=words) as caught:
        import_cases(suite, source, out, ImportSettings(format="jsonl", kind=Kind.MUST_KEEP))
    assert caught.value.line == 2 and "rows.jsonl" in str(caught.value)
    assert not out.exists()


def test_an_advglue_file_nested_too_deep_is_named(suite, tmp_path):
    source = tmp_path / "dev.json"
    source.write_text('{"sst2": ' + DEEP + "}", encoding="utf-8")
    with pytest.raises(SuiteError, match="nested more than") as caught:
        import_cases(suite, source, tmp_path / "out.jsonl", ImportSettings(format="advglue", task="sst2"))
    assert "dev.json" in str(caught.value)


def test_a_model_config_nested_too_deep_is_a_model_error(tmp_path, distilbert_dir):
    model = tmp_path / "model"
    shutil.copytree(distilbert_dir, model)
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    (model / "config.json").write_text(json.dumps(config)[:-1] + ', "deep": ' + DEEP + "}", encoding="utf-8")
    with pytest.raises(ModelError, match="config.json cannot be read \\(nested too deeply\\)"):
        read_config(model)
