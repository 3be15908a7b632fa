"""The README's Python examples ("The Python API") run as written, on a real suite folder and a real
model folder, and what they say of label names holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from testkit import REPO

import warp_check as wc


def readme_examples() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## The Python API") :]
    section = section[: section.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def run(code: str) -> tuple[dict, list[tuple]]:
    printed: list[tuple] = []
    namespace = {"print": lambda *args: printed.append(args)}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code, as a user runs it
    return namespace, printed


def test_the_readme_python_example_checks_repairs_and_reads_the_certificate(tiny_suite: Path, tmp_path: Path):
    code = next(block for block in readme_examples() if "wc.load_suite(" in block)
    assert len(code.strip().splitlines()) <= 12  # ten lines of work, and the import
    out = tmp_path / "repaired"
    namespace, printed = run(code.replace('"reviews/"', repr(str(tiny_suite))).replace('"repaired', f'"{out}'))

    before, after, certificate = namespace["before"], namespace["after"], namespace["certificate"]
    assert not before.passed  # the suite's must_fix cases fail on the model as it is
    assert after.passed and (out / "model.safetensors").is_file()
    for held_of_total in (certificate.summary.cert1, certificate.summary.cert2, certificate.summary.cert3):
        held, total = held_of_total.split("/")
        assert held == total != "0"
    assert len(printed) == 3


def test_the_readme_cases_example_repairs_cases_labelled_by_name(distilbert_dir: Path, tmp_path: Path):
    code = next(block for block in readme_examples() if "wc.Case.labelled(" in block)
    out, cache = tmp_path / "repaired", tmp_path / "cache"
    code = code.replace('"path/to/model"', repr(str(distilbert_dir))).replace('"repaired"', repr(str(out)))
    namespace, printed = run(code.replace('".warp/cache"', repr(str(cache))))

    cases, outcome = namespace["cases"], namespace["outcome"]
    assert [(c.label, c.kind) for c in cases] == [(0, wc.Kind.MUST_FIX), (0, wc.Kind.MUST_KEEP), (1, wc.Kind.MUST_KEEP)]
    assert outcome.result.repaired and outcome.certificate is not None
    assert {r.id: r.cert1 for r in outcome.certificate.cases if r.kind is wc.Kind.MUST_FIX} == {"c1": True}
    assert (out / "warp_certificate.json").is_file() and len(printed) == 2


def test_label_names_are_read_against_a_suite_or_a_model_and_unknown_ones_name_the_known(tiny_suite: Path):
    suite = wc.load_suite(tiny_suite)
    case = wc.Case.labelled(suite.labels, id="x", text="the food was good", label="positive", kind="must_keep")
    assert case.label == 1 and wc.Case.labelled(suite.labels, id="y", text="bad", label=0, kind="aux").label == 0
    clf = wc.ClassifierAdapter.from_pretrained(suite.model_dir)
    assert clf.labels == suite.labels == {"negative": 0, "positive": 1}
    # The README's words for a mistake, and the Case constructor's pointer to the helper.
    with pytest.raises(
        ValueError,
        match=re.escape(
            "label='postive': not a label of this model (did you mean 'positive'?); use one of "
            "'negative' (0), 'positive' (1)"
        ),
    ):
        wc.Case.labelled(clf.labels, id="z", text="good", label="postive", kind="must_keep")
    with pytest.raises(ValueError, match=r"label=7: not a class of this model; use one of 'negative' \(0\)"):
        wc.Case.labelled(clf.labels, id="z", text="good", label=7, kind="must_keep")
    with pytest.raises(ValueError, match=r"label='positive': a Case holds the class id; .*Case\.labelled\(labels"):
        wc.Case(id="z", text="good", label="positive", kind="must_keep")
    # The invariance assertions take names with the adapter's predictor and scorer.
    predict = wc.predictor(clf)
    wc.assert_same_label(predict, "the food was good", "the food was good!", label="positive")
    with pytest.raises(wc.InvarianceFailure, match="the original itself gets label 1, not the expected 0"):
        wc.assert_same_label(predict, "the food was good", "the food was good!", label="negative")
    with pytest.raises(ValueError, match="a label name needs the model's names"):
        wc.assert_same_label(lambda texts: [1, 1], "good", "good!", label="positive")
    wc.assert_moves_toward(wc.scorer(clf), "the food was good", "the food was good", "positive")
