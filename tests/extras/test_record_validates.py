"""``--warp-record`` writes a counterexample only where the suite will load it: by the suite's own
rules where a warp.toml lists the file, by every rule but the labels' meaning where none does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit.suite_builder import write_suite

from warp_check.errors import SuiteError
from warp_check.extras.invariance import Counterexample, InvarianceFailure, record_counterexamples
from warp_check.suite.loader import load_suite

LIMIT = 100_000  # the loader's longest text
RECORDED = '[[cases]]\npath = "recorded.jsonl"\nkind = "must_fix"\n'


def failure(text: str, label: int = 1) -> InvarianceFailure:
    return InvarianceFailure("label changed", Counterexample(text=text, label=label, original="o", check="same_label"))


def record(path: Path, text: str, label: int = 1):
    return record_counterexamples(path, failure(text, label), source="test_x.py::test_y", id_prefix="test_y")


@pytest.fixture
def suite_dir(tmp_path: Path, distilbert_dir: Path) -> Path:
    folder = write_suite(
        tmp_path / "suite",
        model=distilbert_dir,
        keep=[{"id": "k1", "text": "it was good", "label": "positive"}],
        extra=RECORDED,
    )
    (folder / "recorded.jsonl").write_text('{"id": "r0", "text": "so so", "label": "negative"}\n', encoding="utf-8")
    return folder


def test_a_counterexample_that_gives_a_suite_case_another_label_is_refused_and_the_file_kept(suite_dir: Path):
    before = (suite_dir / "recorded.jsonl").read_bytes()
    with pytest.raises(SuiteError, match=r"same text is case 'k1'") as caught:
        record(suite_dir / "recorded.jsonl", "it was good", label=0)
    assert "recorded.jsonl" in str(caught.value) and "unchanged" in str(caught.value)
    assert (suite_dir / "recorded.jsonl").read_bytes() == before


def test_a_counterexample_the_suite_takes_is_appended_and_the_suite_loads(suite_dir: Path):
    result = record(suite_dir / "recorded.jsonl", "it was goood", label=1)
    assert result is not None and len(result.added) == 1
    suite = load_suite(suite_dir)
    assert [c.text for c in suite.cases if c.id == result.added[0]] == ["it was goood"]


def test_a_class_id_the_suites_model_lacks_is_refused(suite_dir: Path):
    with pytest.raises(SuiteError, match="class id 7 is not a class of the model"):
        record(suite_dir / "recorded.jsonl", "a new text", label=7)


@pytest.mark.parametrize("length", [LIMIT + 1, 300_000])
@pytest.mark.parametrize("in_suite", [True, False])
def test_a_text_longer_than_the_loader_takes_is_not_recorded(tmp_path: Path, suite_dir: Path, length, in_suite):
    path = suite_dir / "recorded.jsonl" if in_suite else tmp_path / "alone" / "found.jsonl"
    before = path.read_bytes() if path.exists() else None
    with pytest.raises(SuiteError, match="limit 100,000"):
        record(path, "x" * length)
    assert (path.read_bytes() if path.exists() else None) == before


def test_a_file_no_suite_lists_is_checked_on_its_own(tmp_path: Path):
    path = tmp_path / "found" / "found.jsonl"
    path.parent.mkdir()
    # A label name: only a suite says which names exist, so any is taken on its own.
    path.write_text('{"id": "a", "text": "one", "label": "joy"}\n', encoding="utf-8")
    result = record(path, "two", label=1)
    assert result is not None and [json.loads(line)["text"] for line in path.read_text().splitlines()] == ["one", "two"]
    # An id the loader refuses in the file already: nothing is appended around it.
    path.write_text('{"id": "a::b", "text": "one", "label": "joy"}\n', encoding="utf-8")
    with pytest.raises(SuiteError, match="'::'"):
        record(path, "three", label=1)


def test_a_broken_suite_above_the_file_does_not_stop_the_record(tmp_path: Path):
    (tmp_path / "warp.toml").write_text("[model\n", encoding="utf-8")  # not TOML
    path = tmp_path / "found.jsonl"
    result = record(path, "two", label=1)
    assert result is not None and len(result.added) == 1
