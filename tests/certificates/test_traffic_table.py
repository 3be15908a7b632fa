"""warp.toml's [traffic]: every key checked when the suite loads, errors naming file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest
from testkit.suite_builder import write_suite

from warp_check import SettingsError, SuiteError, load_suite
from warp_check.options import OPTION


@pytest.fixture
def folder(tmp_path: Path, distilbert_dir: Path, tiny_split) -> Path:
    wrong, right = tiny_split
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong, keep=right)
    (folder / "traffic.jsonl").write_text('{"text": "a good day"}\n', encoding="utf-8")
    return folder


def with_traffic(folder: Path, table: str) -> Path:
    toml = folder / "warp.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + "\n[traffic]\n" + table, encoding="utf-8")
    return toml


def test_a_full_table_loads_and_the_run_overrides_it(folder):
    toml = with_traffic(folder, 'path = "traffic.jsonl"\ntext = "text"\nmax_change = 0.02\nconfidence = 0.99\n')
    suite = load_suite(toml)
    assert suite.traffic.path == folder / "traffic.jsonl"
    assert (suite.traffic.max_change, suite.traffic.confidence, suite.traffic.text) == (0.02, 0.99, "text")
    overridden = suite.traffic_settings(max_change=0.5)
    assert overridden.max_change == 0.5 and overridden.confidence == 0.99


@pytest.mark.parametrize(("written", "budget"), [('"2%"', 0.02), ('"0.5 %"', 0.005), ("0.02", 0.02), ('"0.02"', 0.02)])
def test_a_budget_reads_as_people_write_it_a_share_or_a_percentage(folder, written, budget):
    suite = load_suite(with_traffic(folder, f'path = "traffic.jsonl"\nmax_change = {written}\n'))
    assert suite.traffic.max_change == pytest.approx(budget, rel=1e-15)
    assert OPTION["max_change"].parse(written.strip('"')) == pytest.approx(budget, rel=1e-15)  # the flags, alike


@pytest.mark.parametrize(
    ("table", "key", "words"),
    [
        ('path = "traffic.jsonl"\nmax_change = 0\n', "traffic.max_change", "a number in (0, 1)"),
        ('path = "traffic.jsonl"\nmax_change = 1.5\n', "traffic.max_change", "did you mean 1.5 %?"),
        ('path = "traffic.jsonl"\nconfidence = 1\n', "traffic.confidence", "strictly between 0 and 1"),
        ('path = "traffic.jsonl"\nconfidence = "high"\n', "traffic.confidence", "must be a number"),
        ('path = "traffic.jsonl"\ntext = 3\n', "traffic.text", "must be a string"),
        ('path = "traffic.jsonl"\ntext = " "\n', "traffic.text", "non-empty"),
        ('path = "missing.jsonl"\n', "traffic.path", "no such file"),
        ('path = "traffic.jsonl"\nmax_changes = 0.1\n', "traffic.max_changes", "did you mean 'max_change'"),
        ("max_change = 0.1\n", "traffic", "needs path"),
    ],
)
def test_a_mistake_names_the_file_the_line_and_the_key(folder, table, key, words):
    toml = with_traffic(folder, table)
    with pytest.raises(SuiteError) as caught:
        load_suite(toml)
    error = caught.value
    assert Path(error.path) == toml and error.field == key and words in str(error)
    lines = toml.read_text(encoding="utf-8").splitlines()
    assert error.line is not None and lines[error.line - 1].split("=")[0].strip() in key.split(".")[-1] + "[traffic]"


def test_a_budget_without_traffic_is_refused(folder):
    suite = load_suite(folder)
    assert suite.traffic is None and suite.traffic_settings() is None
    with pytest.raises(SettingsError, match="a budget needs traffic"):
        suite.traffic_settings(max_change=0.01)
    given = suite.traffic_settings(path=folder / "traffic.jsonl", max_change=0.01)
    assert (given.text, given.max_change, given.confidence) == ("text", 0.01, 0.95)
