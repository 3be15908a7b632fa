"""``--warp-record``: counterexamples hypothesis finds become must_fix cases, and a repair fixes them.

Inner test runs use pytester; the model-free ones plant a non-invariance in a keyword predictor,
the last one in the tiny DistilBERT, whose predictions are measured independently
(testkit/suite_builder.py, plain transformers).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit.suite_builder import margins, split_cases, write_suite

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:cacheprovider")
SOURCE = "The food was great"

# A predictor with a planted non-invariance: positive only for the exact word "great".
INV_TEST = f"""
import re
from hypothesis import given, settings
from warp_check import assert_moves_toward, assert_same_label
from warp_check import case_and_punctuation, typos

TEXT = {SOURCE!r}


def keyword(texts):
    return [int("great" in re.findall(r"[a-z]+", t)) for t in texts]


@settings(max_examples=50, deadline=None, database=None, derandomize=True)
@given(typos(TEXT))
def test_label_survives_typos(variant):
    assert_same_label(keyword, TEXT, variant, label=1, original_id="food-1")
"""

PASSING_TEST = """
from hypothesis import given, settings
from warp_check import assert_same_label
from warp_check import case_and_punctuation

@settings(max_examples=20, deadline=None, database=None, derandomize=True)
@given(case_and_punctuation("The food was great"))
def test_label_survives_case(variant):
    assert_same_label(lambda texts: [1 for _ in texts], "The food was great", variant)


def test_plain_assertion_is_not_recorded():
    assert 1 == 2
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*INNER, *args)


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def one_edit_from(text: str, variant: str) -> bool:
    """True when ``variant`` differs from ``text`` by one substitution, swap, insert or delete."""
    if len(variant) == len(text):
        diff = [i for i, (a, b) in enumerate(zip(text, variant, strict=True)) if a != b]
        swap = len(diff) == 2 and diff[1] == diff[0] + 1 and text[diff[0]] == variant[diff[1]]
        return len(diff) == 1 or (swap and text[diff[1]] == variant[diff[0]])
    short, long = sorted((text, variant), key=len)
    return len(long) == len(short) + 1 and any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


@pytest.fixture(autouse=True, scope="module")
def _public_names_loaded() -> None:
    """Load the modules behind ``from warp_check import ...`` before any inner run: pytester drops
    what a run imported, and warp_check (which stays) would keep pointing at the dropped ones."""
    import warp_check.extras.invariance  # noqa: F401
    import warp_check.perturb  # noqa: F401


def test_record_writes_the_shrunk_counterexample_once(pytester):
    pytester.makepyfile(test_inv=INV_TEST)
    out = pytester.path / "found" / "recorded.jsonl"
    result = run(pytester, "--warp-record", "found/recorded.jsonl")
    result.assert_outcomes(failed=1)
    [case] = records(out)
    assert case["label"] == 1 and case["source"] == "test_inv.py::test_label_survives_typos"
    assert case["original"] == "food-1" and case["id"].startswith("test_label_survives_typos-")
    assert case["text"] != SOURCE and one_edit_from(SOURCE, case["text"])  # the final, shrunk example only
    assert repr(case["text"]) in result.stdout.str()  # the one hypothesis reported
    result.stdout.fnmatch_lines([f"warp-check: recorded 1 new counterexample(s) to {out}; *"])

    before = out.read_bytes()
    again = run(pytester, "--warp-record", str(out))
    again.assert_outcomes(failed=1)
    assert out.read_bytes() == before  # deduplicated: the same example is found again
    again.stdout.fnmatch_lines([f"warp-check: recorded 0 new counterexample(s) to {out} (1 already there); *"])


def test_nothing_is_written_without_the_flag_or_without_a_counterexample(pytester):
    pytester.makepyfile(test_inv=INV_TEST, test_pass=PASSING_TEST)
    run(pytester).assert_outcomes(failed=2, passed=1)
    assert list(pytester.path.glob("*.jsonl")) == []

    out = pytester.path / "recorded.jsonl"
    result = run(pytester, "--warp-record", str(out), "test_pass.py")
    result.assert_outcomes(failed=1, passed=1)  # the failure is a plain assert: nothing to record
    assert not out.exists()
    result.stdout.fnmatch_lines([f"warp-check: no counterexample to record; {out} unchanged"])


def test_ini_key_records_relative_to_the_ini_file(pytester, monkeypatch):
    pytester.makepyfile(test_inv=INV_TEST)
    pytester.makeini("[pytest]\nwarp_record = suite/recorded.jsonl\n")
    sub = pytester.mkdir("elsewhere")
    monkeypatch.chdir(sub)
    run(pytester, str(pytester.path / "test_inv.py")).assert_outcomes(failed=1)
    assert len(records(pytester.path / "suite" / "recorded.jsonl")) == 1
    assert not (sub / "suite").exists()


def test_record_refuses_a_folder_and_reports_a_broken_case_file(pytester):
    pytester.makepyfile(test_inv=INV_TEST)
    pytester.mkdir("folder")
    refused = run(pytester, "--warp-record", "folder")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*--warp-record: * is a folder; name a JSONL file*"])

    broken = pytester.path / "broken.jsonl"
    broken.write_text('{"id": "a", "text": "x", "label": 1}\nnot json\n', encoding="utf-8")
    result = run(pytester, "--warp-record", str(broken))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"warp-check: counterexample NOT recorded: test_inv.py::*: {broken}:2: not a JSON*"])
    assert broken.read_text(encoding="utf-8").endswith("not json\n")  # left as it was


def test_xdist_workers_append_to_one_file(pytester):
    pytester.makepyfile(
        test_a=INV_TEST,
        test_b=INV_TEST.replace(repr(SOURCE), repr("The staff were great")).replace("test_label_survives", "test_b"),
    )
    out = pytester.path / "recorded.jsonl"
    result = pytester.runpytest_subprocess(*INNER, "-n", "2", "--warp-record", str(out))
    result.assert_outcomes(failed=2)
    found = records(out)
    assert sorted(case["source"] for case in found) == [
        "test_a.py::test_label_survives_typos",
        "test_b.py::test_b_typos",
    ]
    assert len({case["id"] for case in found}) == 2
    result.stdout.fnmatch_lines([f"warp-check: recorded 2 new counterexample(s) to {out}; *"])


# -- the recorded file feeds a repair -----------------------------------------------------------

MODEL_TEST = """
from hypothesis import given, settings
from warp_check import ClassifierAdapter, assert_same_label, predictor, typos

PREDICT = predictor(ClassifierAdapter.from_pretrained({model!r}))
TEXT = {text!r}


@settings(max_examples=40, deadline=None, database=None, derandomize=True)
@given(typos(TEXT, 1))
def test_typos_keep_the_label(variant):
    assert_same_label(PREDICT, TEXT, variant, label=1)
"""


@pytest.fixture(scope="module")
def warm(distilbert_dir: Path) -> None:
    """Import what the inner runs import (pytester drops modules a run imported)."""
    import pytest_warp.summary  # noqa: F401
    import warp_check.runs.repair  # noqa: F401
    from warp_check.releases.load import load_adapter
    from warp_check.suite.loader import load_suite

    folder = write_suite(distilbert_dir.parent / "warm-record", model=distilbert_dir, keep=[{"text": "a", "label": 0}])
    load_adapter(load_suite(folder))


def test_recorded_counterexample_feeds_a_repair_that_fixes_it(pytester, distilbert_dir, warm):
    # The planted non-invariance: the tiny model reads "not bad" as positive, but a typo in "not"
    # or "bad" makes it an unknown word and the label flips (measured here, not assumed).
    text = "the movie was not bad"
    assert margins(distilbert_dir, [text], [1])[0] > 0, "the tiny model no longer gets the original right"
    pytester.makepyfile(test_recorded_invariance=MODEL_TEST.format(model=str(distilbert_dir), text=text))
    suite = pytester.path / "suite"
    wrong, right = split_cases(distilbert_dir, 24, seed=2)
    write_suite(
        suite, model=distilbert_dir, keep=right, extra='[[cases]]\npath = "recorded.jsonl"\nkind = "must_fix"\n'
    )

    run(pytester, "test_recorded_invariance.py", "--warp-record", str(suite / "recorded.jsonl")).assert_outcomes(
        failed=1
    )
    [case] = records(suite / "recorded.jsonl")
    assert case["label"] == 1 and case["original"] == text and one_edit_from(text, case["text"])
    assert margins(distilbert_dir, [case["text"]], [1])[0] < 0  # the model really gets it wrong

    repaired = run(pytester, str(suite), "--warp-repair")
    repaired.assert_outcomes(passed=len(right) + 1)  # the recorded case and every must_keep: certified
    repaired.stdout.fnmatch_lines(["  repair: converged in *"])
    out = suite / ".warp" / "repaired"
    assert margins(out, [case["text"]], [1])[0] >= 0.99  # Cert 1's margin γ_s = 1, independently (float32)
    assert (margins(out, [r["text"] for r in right], [1 if r["label"] == "positive" else 0 for r in right]) > 0).all()
