"""A kind of decision registered from outside the core (top_in_set.py: one module, one line) runs
through a real suite: warp.toml names it, its case files state its answers, and pytest checks,
repairs and reports on it, the repaired model's certificate recomputed in float64.

Which cases the tiny three-class model gets right, and by how much, is measured here with plain
transformers, not with warp_check: every expected outcome below is computed."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from testkit.tiny_models import LABELS, synthetic_cases
from top_in_set import TOP_IN_SET
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from warp_check import verify
from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.decisions import DECISIONS
from warp_check.errors import SuiteError
from warp_check.releases.load import load_adapter
from warp_check.runs import check as check_run
from warp_check.suite.loader import load_suite

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest")
NAMES = LABELS["multiclass"]  # negative, neutral, positive


def logits_of(model_dir: Path, texts: list[str]) -> np.ndarray:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    enc = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    accepted = inspect.signature(model.forward).parameters
    with torch.inference_mode():
        return model(**{k: v for k, v in enc.items() if k in accepted}).logits.double().numpy()


@pytest.fixture(scope="module")
def cases(multiclass_dir: Path) -> tuple[list[dict], list[dict]]:
    """(wrong, right): cases whose allowed set is two classes; right ones hold the model's top class
    with room, wrong ones leave it out by a little (the two classes the model ranks first and last)."""
    texts = [c["text"] for c in synthetic_cases("multiclass", 60, seed=5)]
    logits = logits_of(multiclass_dir, texts)
    wrong, right = [], []
    for i, (text, z) in enumerate(zip(texts, logits, strict=True)):
        order = np.argsort(-z)
        top, second, last = (int(c) for c in order)
        lead = z[top] - z[second]
        if lead > 0.5 and len(right) < 16:
            right.append({"id": f"keep{i}", "text": text, "label": [NAMES[top], NAMES[last]], "gap": lead})
        elif lead < 2.0 and len(wrong) < 4:
            wrong.append({"id": f"fix{i}", "text": text, "label": [NAMES[second], NAMES[last]], "gap": -lead})
    assert len(wrong) >= 2 and len(right) >= 10, "the tiny model's margins moved: pick another seed"
    return wrong, right


def write(folder: Path, model: Path, wrong: list[dict], right: list[dict], *, kind: str = "top_in_set") -> Path:
    """A suite of must_fix ``wrong`` and must_keep ``right`` cases whose warp.toml names ``kind``."""
    folder.mkdir(parents=True, exist_ok=True)
    toml = f"[model]\npath = {json.dumps(str(model))}\ndecision = {json.dumps(kind)}\n"
    for name, records in (("must_fix", wrong), ("must_keep", right)):
        if records:
            lines = [json.dumps({k: v for k, v in r.items() if k != "gap"}) for r in records]
            (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
            toml += f'[[cases]]\npath = "{name}.jsonl"\nkind = "{name}"\n'
    (folder / "warp.toml").write_text(toml, encoding="utf-8")
    return folder


def test_the_suite_names_its_kind_and_its_cases_state_the_kinds_answers(tmp_path, multiclass_dir, cases):
    suite = load_suite(write(tmp_path / "suite", multiclass_dir, *cases))
    assert suite.decision is TOP_IN_SET is DECISIONS["top_in_set"]
    wrong, _ = cases
    first = suite.case(wrong[0]["id"])
    assert first.label == tuple(sorted(NAMES.index(n) for n in wrong[0]["label"]))
    (tmp_path / "suite" / "warp.toml").write_text(
        (tmp_path / "suite" / "warp.toml").read_text().replace('"top_in_set"', '"top_of_set"')
    )
    with pytest.raises(SuiteError) as error:
        load_suite(tmp_path / "suite")
    assert (error.value.field, error.value.line) == ("model.decision", 3)
    assert (
        "'top_of_set' is not a registered kind of decision; use one of 'single_label', 'multi_label', "
        "'token_tags', 'top_in_set'" in str(error.value)
    )


def test_check_repair_and_report_run_on_the_kind(pytester, multiclass_dir, cases):
    wrong, right = cases
    suite = write(pytester.path / "suite", multiclass_dir, wrong, right)
    checked = pytester.runpytest(*INNER)
    checked.assert_outcomes(passed=len(right), failed=len(wrong))
    case = wrong[0]
    allowed = " or ".join(repr(n) for n in NAMES if n in case["label"])
    left_out = next(n for n in NAMES if n not in case["label"])
    checked.stdout.fnmatch_lines(
        [f"*must_fix case not fixed yet: predicted {left_out!r}, labelled {allowed} (gap {case['gap']:.3g}*"]
    )

    out = pytester.path / "repaired"
    repaired = pytester.runpytest(*INNER, "--warp-repair", "--warp-out", str(out), "--warp-report", "rep")
    repaired.assert_outcomes(passed=len(wrong) + len(right))
    n_fix, n_keep = len(wrong), len(right)
    repaired.stdout.fnmatch_lines(
        [f"  certificates: Cert 1 {n_fix}/{n_fix}, Cert 2 {n_keep}/{n_keep}, Cert 3 {n_fix}/{n_fix} *"]
    )
    certificate = json.loads((out / CERTIFICATE_NAME).read_text())
    stated = {r["id"]: sorted(NAMES.index(n) for n in r["label"]) for r in wrong + right}
    assert {c["id"]: c["label"] for c in certificate["cases"]} == stated
    # The repaired model, measured with plain transformers: every case's top class is in its set.
    logits = logits_of(out, [r["text"] for r in wrong + right])
    assert all(int(np.argmax(z)) in stated[r["id"]] for z, r in zip(logits, wrong + right, strict=True))
    assert certificate["model"]["decision"] == "top_in_set"
    # The certificate recomputed from the saved weights in float64, as the kind decides: the
    # library's verify and pytest's audit mode.
    assert verify(out).ok
    audited = pytester.runpytest(*INNER, "--warp-certificate", str(out / CERTIFICATE_NAME))
    audited.assert_outcomes(passed=len(wrong) + len(right))
    # The repaired folder checks clean as a suite of its own, the kind's answers read back.
    (suite / "warp.toml").write_text((suite / "warp.toml").read_text().replace(str(multiclass_dir), str(out)))
    pytester.runpytest(*INNER).assert_outcomes(passed=len(wrong) + len(right))
    page = (pytester.path / "rep" / "index.html").read_text(encoding="utf-8")
    assert 'data-passed="true"' in page


def test_a_warm_check_answers_as_the_kind_and_no_other_kinds_entry_answers_it(tmp_path, multiclass_dir, cases):
    wrong, right = cases
    folder = write(tmp_path / "suite", multiclass_dir, wrong, right)
    cache = tmp_path / "cache"
    toy = load_suite(folder)
    # The same folder checked as a single-label suite leaves an entry the toy kind's suite does not take.
    one = [{"id": "one", "text": wrong[0]["text"], "label": 0}]
    single = write(tmp_path / "single", multiclass_dir, one, [], kind="single_label")
    check_run.check(load_suite(single), load_adapter(load_suite(single)), cache_dir=cache)
    assert check_run.warm_entry(toy, cache) is None
    cold = check_run.check(toy, load_adapter(toy), cache_dir=cache)
    warm = check_run.check_warm(toy, check_run.warm_entry(toy, cache), cache_dir=cache)
    assert warm is not None and warm.details.model_loaded is False
    assert [v.to_dict() for v in warm.verdicts] == [v.to_dict() for v in cold.verdicts]
    assert [v.passed for v in cold.verdicts] == [False] * len(wrong) + [True] * len(right)
