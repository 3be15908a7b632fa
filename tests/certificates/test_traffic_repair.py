"""Cert 4 on a tiny model, end to end: measured before the artefact is written, recorded in the
certificate, recomputed by the audit, and a repair over its budget leaves nothing on disk.

Which predictions changed is measured apart from warp-check, with plain transformers on the input
and the saved model folders."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats
from testkit.suite_builder import write_suite
from testkit.tiny_models import synthetic_cases
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from warp_check import SuiteError, audit, load_adapter, load_suite, load_traffic, repair_suite
from warp_check.certify.certificate import CERTIFICATE_NAME


def predicted(model_dir: Path, texts: list[str]) -> np.ndarray:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    out = []
    with torch.inference_mode():
        for text in texts:  # one at a time: no padding in the way
            out.append(int(model(**tokenizer(text, return_tensors="pt")).logits.argmax()))
    return np.array(out)


def traffic_lines(seed: int, n: int) -> str:
    texts = sorted({c["text"] for c in synthetic_cases("binary", n, seed=seed, unseen_rate=0.5)})
    return "".join(json.dumps({"text": t}) + "\n" for t in texts)


@pytest.fixture(scope="module")
def repaired(tmp_path_factory, distilbert_dir: Path, tiny_split):
    wrong, right = tiny_split
    root = tmp_path_factory.mktemp("traffic")
    (root / "suite").mkdir()
    (root / "suite" / "traffic.jsonl").write_text(traffic_lines(7, 600), encoding="utf-8")
    folder = write_suite(root / "suite", model=distilbert_dir, fix=wrong, keep=right,
                         extra='[traffic]\npath = "traffic.jsonl"\n')  # fmt: skip
    suite = load_suite(folder)
    sample = load_traffic(suite)
    run = repair_suite(suite, load_adapter(suite), suite.settings(), out_dir=root / "out", traffic=sample)
    return suite, sample, run, root / "out"


def test_cert4_counts_the_predictions_the_saved_model_changed(repaired, distilbert_dir):
    suite, sample, run, out = repaired
    assert run.passed and run.traffic.passed and "changes at most" in run.traffic.message
    claim = json.loads((out / CERTIFICATE_NAME).read_text())["traffic"]
    texts = [t.text for t in sample.bound]
    before, after = predicted(distilbert_dir, texts), predicted(out, texts)
    changed = np.flatnonzero(before != after).tolist()
    assert claim["n"] == len(texts) and claim["changed"] == len(changed) > 0
    assert [c["index"] for c in claim["changes"]] == changed
    assert [c["text"] for c in claim["changes"]] == [texts[i] for i in changed]
    assert claim["predicted_before"] == before.tolist()
    assert claim["bound"] == pytest.approx(stats.beta.ppf(0.95, len(changed) + 1, len(texts) - len(changed)))
    assert sum(claim["by_pair"].values()) == len(changed)
    assert set(claim["by_pair"]) <= {"negative→positive", "positive→negative"}
    assert claim["sample_sha256"] == sample.digest and claim["max_change"] is None
    assert run.details.traffic.n == len(texts) and run.details.artefact is not None


def test_the_audit_recomputes_cert4_and_fails_on_a_false_claim(repaired, tmp_path):
    suite, sample, run, out = repaired
    held = audit(suite, out, out / CERTIFICATE_NAME, traffic=sample)
    assert held.passed and held.traffic.passed and held.details.traffic.changed == run.details.traffic.changed
    data = json.loads((out / CERTIFICATE_NAME).read_text())
    data["traffic"]["changed"] -= 1
    data["traffic"]["changes"] = data["traffic"]["changes"][1:]
    forged = tmp_path / CERTIFICATE_NAME
    forged.write_text(json.dumps(data), encoding="utf-8")
    caught = audit(suite, out, forged, traffic=sample)
    assert not caught.passed and not caught.traffic.passed
    assert "predictions changed on this model, the certificate says" in caught.traffic.message
    assert all(v.passed for v in caught.verdicts)  # the cases' own claims still hold


def test_the_audit_refuses_another_sample(repaired, tmp_path):
    suite, sample, run, out = repaired
    other = tmp_path / "other.jsonl"
    other.write_text(traffic_lines(7, 600) + traffic_lines(8, 60), encoding="utf-8")
    grown = load_traffic(suite, path=other)
    assert grown.digest != sample.digest
    with pytest.raises(SuiteError, match="not the sample the certificate's Cert 4 was measured on"):
        audit(suite, out, out / CERTIFICATE_NAME, traffic=grown)


def test_a_repair_over_its_budget_writes_nothing(repaired, tmp_path):
    suite, sample, run, _ = repaired
    assert run.details.traffic.bound > 0.05  # the tiny model's fix moves a quarter of its traffic
    tight = dataclasses.replace(sample, max_change=0.05)
    out = tmp_path / "out"
    gated = repair_suite(suite, load_adapter(suite), suite.settings(), out_dir=out, traffic=tight)
    assert not out.exists() and gated.details.artefact is None
    assert not gated.passed and not gated.traffic.passed and all(v.passed for v in gated.verdicts)
    message = gated.traffic.message
    assert "Cert 4 fails the budget" in message and "over max_change = 5 %" in message
    assert "nothing was written" in message
    assert f"({gated.details.traffic.changed} of {gated.details.traffic.n}, 95 %)" in message
    assert gated.traffic.properties["bound"] == gated.details.traffic.bound > 0.05


def test_the_report_lists_the_changed_texts(repaired, tmp_path):
    from warp_check import REPORT_JSON, read_report, write_report

    suite, sample, run, out = repaired
    text = write_report(tmp_path / "report", [run]).read_text(encoding="utf-8")
    note = run.details.traffic
    assert "### Traffic (Cert 4)" in text and f"- {note}" in text
    for change in note.changes[:20]:
        shown = f"{note.label_name(change.before)} → {note.label_name(change.after)}"
        assert f"| {change.index} | {change.text} | {shown} |" in text
    again = read_report(tmp_path / "report" / REPORT_JSON)
    assert again[0].traffic == run.traffic and again[0].details.traffic == note


def test_a_repair_over_its_budget_names_the_must_fix_cases_it_cannot_buy(repaired, tmp_path):
    # The promise: without the cases named, the suite's repair keeps within the budget on the traffic's
    # tune part (recomputed here from a repair of its own), and the bound part was never used.
    from warp_check.certificates.traffic.changes import predictions, traffic_inputs
    from warp_check.certificates.traffic.sample import Part
    from warp_check.certify.binomial import change_bound

    suite, sample, run, _ = repaired
    tight = dataclasses.replace(sample, max_change=0.05)
    gated = repair_suite(suite, load_adapter(suite), suite.settings(), out_dir=tmp_path / "out", traffic=tight)
    fit = gated.details.traffic.fit
    assert fit is not None and fit.why is None and fit.within and fit.left_out, fit
    fix_ids = {c.id for c in suite.cases if c.kind.value == "must_fix"}
    named = [c.id for c in fit.left_out]
    assert len(set(named)) == len(named) and set(named) <= fix_ids and fit.kept == len(fix_ids) - len(named)
    # The advice reads the price list: each case named with its own price, the cheapest bought.
    prices = fit.prices
    assert prices is not None and prices.why is None and fit.unpriced is None
    price = {p.id: p.changed for p in prices.prices}
    assert all(c.where.startswith("fix.jsonl:") and c.nearest == (price[c.id] or 0) for c in fit.left_out)
    assert set(prices.ids_bought(0.05)) == fix_ids - set(named)
    bought = [price[i] for i in prices.ids_bought(0.05)]
    assert all(p is not None and p <= min(price[i] or 0 for i in named if price[i] is not None) for p in bought)
    assert {b.budget for b in prices.bought} == {0.01, 0.02, 0.05, 0.10}
    message = gated.traffic.message
    assert f"these {len(named)} cannot be fixed within it" in message and all(f"'{i}'" in message for i in named)
    assert gated.traffic.properties["cannot buy"] == " ".join(named)

    rest = dataclasses.replace(suite, cases=tuple(c for c in suite.cases if c.id not in set(named)))
    adapter = load_adapter(suite)
    again = repair_suite(rest, adapter, suite.settings(), out_dir=tmp_path / "rest")
    assert again.passed
    inputs = traffic_inputs(adapter, sample, part=Part.TUNE)
    assert len(inputs.texts) == fit.n
    was = predictions(adapter.head(), inputs.V)
    now = predictions(load_adapter(dataclasses.replace(suite, model_dir=tmp_path / "rest")).head(), inputs.V)
    changed = int(np.sum(was != now))
    assert changed == fit.changed and change_bound(changed, fit.n, 0.95) <= 0.05


def test_the_report_lists_the_cases_a_budget_cannot_buy(repaired, tmp_path):
    from warp_check import REPORT_JSON, read_report, write_report

    suite, sample, _, _ = repaired
    tight = dataclasses.replace(sample, max_change=0.05)
    gated = repair_suite(suite, load_adapter(suite), suite.settings(), out_dir=tmp_path / "out", traffic=tight)
    text = write_report(tmp_path / "report", [gated]).read_text(encoding="utf-8")
    fit = gated.details.traffic.fit
    assert "Must_fix cases the budget cannot buy:" in text
    assert all(f"| {c.id} | {c.where} | {c.nearest} |" in text for c in fit.left_out)
    assert "| max_change | must_fix bought | changed (tune part) | bound |" in text and "**5 %** (this run)" in text
    again = read_report(tmp_path / "report" / REPORT_JSON)
    assert again[0].details.traffic.fit == fit


def test_too_little_tune_part_to_name_the_cases_says_so(repaired):
    from warp_check.budget.fit import fit_to_budget
    from warp_check.budget.price import budget_advice
    from warp_check.pipeline.evaluation import evaluate
    from warp_check.pipeline.ladder import Ladder

    suite, sample, _, _ = repaired
    adapter = load_adapter(suite)
    ladder = Ladder(adapter=adapter, evaluation=evaluate(adapter, suite.cases), settings=suite.settings())
    for tune, why in ((), "no text to estimate on"), (sample.tune[:5], "cannot show a share of changes"):
        fit = fit_to_budget(ladder, dataclasses.replace(sample, tune=tune), 0.05)
        assert fit.why is not None and why in fit.why and "give more traffic" in fit.why
        assert not fit.within and not fit.left_out and fit.repairs == 0
        assert fit.sentence().startswith("Which must_fix cases the budget cannot buy is not known")
        advice = budget_advice(ladder, dataclasses.replace(sample, tune=tune), 0.05)  # the run's: the price list
        assert advice.why is not None and why.replace("estimate", "price") in advice.why
        assert not advice.within and not advice.left_out and advice.repairs == 0
