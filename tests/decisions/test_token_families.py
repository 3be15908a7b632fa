"""DeBERTa-v2, ELECTRA and XLM-R token classifiers, beside the BERT, DistilBERT and RoBERTa of
test_token_tags: each is ``dropout`` + ``classifier`` on every position's final hidden state, so each
gets the final-linear form (its classifier repaired exactly); a family without an entry is refused
naming the setting that would name its layer.

Expected tags and margins are measured with plain transformers (``word_logits``)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from testkit.suite_builder import write_kind_suite
from testkit.token_tags import AUTO_FAMILIES, TAGS, build_tagger, split_by_model, word_logits

from warp_check import verify
from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.cli import main
from warp_check.decisions.token_tags import sentence_id
from warp_check.errors import ModelError
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.encode import encode_cases
from warp_check.model.specs import HeadForm, token_head_spec
from warp_check.suite.loader import load_suite


@pytest.mark.parametrize("family", AUTO_FAMILIES)
def test_a_family_s_tagger_is_repaired_in_its_classifier_and_certified(tmp_path, family, capsys):
    model_dir = build_tagger(tmp_path / "model", family=family)
    wrong, right = split_by_model(model_dir, fix=3, keep=15)
    suite = write_kind_suite(tmp_path / "suite", model_dir, wrong, right)
    loaded = load_suite(suite)
    adapter = ClassifierAdapter.from_pretrained(model_dir)
    assert adapter.spec.form is HeadForm.FINAL_LINEAR and adapter.spec.repair_layer == "classifier"
    records = wrong + right
    plain = dict(zip([r["id"] for r in records], word_logits(model_dir, [r["tokens"] for r in records]), strict=True))
    rows = [(c.id, int(c.id.rpartition("#")[2]), c.label) for c in loaded.cases]
    expected = np.stack([plain[sentence_id(i)][w] for i, w, _ in rows])
    encoded = encode_cases(adapter, loaded.cases, progress=False)
    np.testing.assert_allclose(adapter.head().logits(encoded.V.astype(np.float64)), expected, atol=1e-4)

    out = tmp_path / "repaired"
    assert main(["repair", str(suite), "--out", str(out), "--json"]) == 0
    capsys.readouterr()
    assert json.loads((out / CERTIFICATE_NAME).read_text())["model"]["decision"] == "token_tags"
    after = dict(zip([r["id"] for r in records], word_logits(out, [r["tokens"] for r in records]), strict=True))
    margins = np.array(
        [after[sentence_id(i)][w][t] - np.max(np.delete(after[sentence_id(i)][w], t)) for i, w, t in rows]
    )
    fixed = np.array([sentence_id(i) in {r["id"] for r in wrong} for i, _, _ in rows])
    assert margins[fixed].min() >= 1.0 - 1e-3 and (margins[~fixed] > 0).all()
    assert verify(out).ok
    assert len(TAGS) == adapter.head().num_classes


def test_a_token_classifier_of_a_family_without_an_entry_is_refused_naming_the_setting():
    """A family whose head is not known to be one linear layer on each position (Funnel's, say)."""
    funnel = SimpleNamespace(config=SimpleNamespace(model_type="funnel"))
    with pytest.raises(ModelError, match=r"no token-classifier head entry for model_type 'funnel'.*\[final_layer\]"):
        token_head_spec(funnel)
