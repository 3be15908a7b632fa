"""Several labels per text on every head form the single-label matrix covers: a tiny model of a
family (tests/testkit/families.py) saved with ``problem_type = "multi_label_classification"``, so each
of its two logits is a label of its own, on above 0. Its suite: must_keep cases stating every
label as the model decides it with room, must_fix cases asking label 0 the other way where the
model is nearest its threshold (a partial answer: ``on``/``off`` of that label only).

What is promised, and asserted: the gate fails the must_fix cases, and the repair either certifies
every case (Cert 1–3, the audit recomputing them) or is refused with a named reason, nothing
written; the kind comes from the config. Expected outcomes are computed with plain transformers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from testkit.families import build
from testkit.suite_builder import exit_code
from testkit.tiny_models import synthetic_cases
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from warp_check.decisions import MULTI_LABEL
from warp_check.model.adapter import ClassifierAdapter

# One family per head form: BERT's tanh pooler, DistilBERT's ReLU pre_classifier, RoBERTa's own
# dense classifier, DeBERTa-v2's pooler, and two whose head is one linear layer (ModernBERT's and a
# decoder's, Qwen2, read at the last token).
FORMS = ("bert", "distilbert", "roberta", "deberta-v2", "modernbert", "qwen2")
NAMES = ("negative", "positive")
REFUSALS = ("repair failed (not_converged)", "repair failed (infeasible)", "repair failed (solver_failed)")


def logits_of(model_dir: Path, texts: list[str]) -> np.ndarray:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    out = []
    with torch.inference_mode():
        for text in texts:  # one at a time: some families have no pad token
            enc = tokenizer([text], return_tensors="pt")
            out.append(model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits[0].double())
    return torch.stack(out).numpy()


def multi_label_suite(model_type: str, work: Path) -> tuple[Path, Path, int, int]:
    model_dir = build(model_type, work / "model")
    config = json.loads((model_dir / "config.json").read_text())
    config["problem_type"] = "multi_label_classification"
    (model_dir / "config.json").write_text(json.dumps(config))
    texts = [c["text"] for c in synthetic_cases("binary", 160, seed=4, unseen_rate=0.1)]
    logits = logits_of(model_dir, texts)
    keep, fix = [], []
    for i in np.argsort(np.abs(logits[:, 0])):  # nearest label 0's threshold first
        on = logits[i] > 0
        if len(fix) < 4 and abs(logits[i, 0]) < 2.0:
            flipped = "off" if on[0] else "on"
            fix.append({"id": f"f{i}", "text": texts[i], flipped: [NAMES[0]], "kind": "must_fix"})
        elif np.abs(logits[i]).min() >= 0.5 and len(keep) < 30:
            keep.append({"id": f"k{i}", "text": texts[i], "labels": [NAMES[j] for j in np.flatnonzero(on)]})
    suite = work / "suite"
    suite.mkdir()
    (suite / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in fix + keep), encoding="utf-8")
    (suite / "warp.toml").write_text(
        f'[model]\npath = {json.dumps(str(model_dir))}\n[[cases]]\npath = "cases.jsonl"\nkind = "must_keep"\n'
    )
    return model_dir, suite, len(fix), len(keep)


@pytest.mark.slow
@pytest.mark.parametrize("model_type", FORMS)
def test_each_head_form_decides_several_labels_and_is_repaired_or_refused(model_type, tmp_path, capsys):
    model_dir, suite, n_fix, n_keep = multi_label_suite(model_type, tmp_path)
    assert n_fix >= 2 and n_keep >= 10, "the tiny model's margins moved: pick another seed"
    assert ClassifierAdapter.from_pretrained(model_dir).decision is MULTI_LABEL
    assert exit_code(["check", str(suite), "-q"]) == 1  # the gate: the must_fix cases fail
    out = tmp_path / "repaired"
    capsys.readouterr()
    code = exit_code(["repair", str(suite), "--out", str(out)])
    said = capsys.readouterr().out
    assert "Traceback" not in said
    if code != 0:
        assert code == 1 and any(r in said for r in REFUSALS) and "nothing was written" in said, said
        assert not out.exists()
        return
    certificate = json.loads((out / "warp_certificate.json").read_text())
    assert certificate["model"]["decision"] == "multi_label"
    assert certificate["summary"]["cert1"] == f"{n_fix}/{n_fix}"
    assert certificate["summary"]["cert2"] == f"{n_keep}/{n_keep}"
    assert exit_code(["verify", str(out), "--suite", str(suite)]) == 0
    # The repaired model, with plain transformers: every case's constrained labels as asked.
    records = [json.loads(line) for line in (suite / "cases.jsonl").read_text().splitlines()]
    after = logits_of(out, [r["text"] for r in records]) > 0
    for r, decided in zip(records, after, strict=True):
        on = r.get("on", r.get("labels", []))
        off = r.get("off", [n for n in NAMES if "labels" in r and n not in r["labels"]])
        assert all(decided[NAMES.index(n)] for n in on) and not any(decided[NAMES.index(n)] for n in off), r
