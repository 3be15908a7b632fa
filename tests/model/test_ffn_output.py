"""The FFN-output form of a token classifier (``[model] layer = "ffn_output"``): the encoder's last
feed-forward output layer repaired through its residual and LayerNorm, per word.

Every expected number comes from plain transformers (``word_logits``) or from finite differences of
the model's own float64 arithmetic, never from the code under test."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.numpy import load_file
from testkit.suite_builder import write_kind_suite
from testkit.token_tags import build_tagger, sentences, split_by_model, word_logits
from transformers import XLMRobertaXLConfig, XLMRobertaXLForTokenClassification

from warp_check import verify
from warp_check.certify.bounds import local_radius
from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.decisions.token_tags import row_text, sentence_id
from warp_check.errors import ModelError
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.encode import encode_cases
from warp_check.model.normed_head import NormedHead
from warp_check.model.specs import HeadForm, token_ffn_spec
from warp_check.repair.loop import repair_head
from warp_check.repair.records import CaseSet, RepairStatus
from warp_check.repair.settings import RepairSettings
from warp_check.suite.loader import load_suite

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest")
# The test's byte-level BPE tokenizer (RoBERTa's) is built in memory with transformers 5's API; the attack
# environment pins transformers 4, where RobertaTokenizer reads files.
BPE_IN_MEMORY = int(transformers.__version__.split(".")[0]) >= 5
FAMILIES = (
    "bert",
    "distilbert",
    pytest.param("roberta", marks=pytest.mark.skipif(not BPE_IN_MEMORY, reason="the test's BPE needs transformers 5")),
    "deberta-v2",
    "electra",
    "xlm-roberta",
)
LAST_DENSE = {
    "bert": "bert.encoder.layer.1.output.dense",
    "distilbert": "distilbert.transformer.layer.1.ffn.lin2",
    "roberta": "roberta.encoder.layer.1.output.dense",
    "deberta-v2": "deberta.encoder.layer.1.output.dense",
    "electra": "electra.encoder.layer.1.output.dense",
    "xlm-roberta": "roberta.encoder.layer.1.output.dense",
}


@pytest.fixture(scope="module")
def bert_tagger(tmp_path_factory) -> Path:
    return build_tagger(tmp_path_factory.mktemp("ffn_bert") / "model", family="bert")


def _rows(adapter: ClassifierAdapter, batch: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """Every word of ``batch`` as a row: its representation [v | r] and the model's own logits."""
    texts = [row_text(words, i) for words in batch for i in range(len(words))]
    return adapter.forward_batch(adapter.tokenize(texts))


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_s_ffn_head_gives_the_model_s_own_logits_in_float64(family, tmp_path):
    model_dir = build_tagger(tmp_path / "model", family=family)
    adapter = ClassifierAdapter.from_pretrained(model_dir, layer="ffn_output")
    assert adapter.spec.form is HeadForm.FFN_OUTPUT and adapter.spec.repair_layer == LAST_DENSE[family]
    batch = sentences(6, seed=1)
    V, _ = _rows(adapter, batch)
    head = adapter.head()
    assert isinstance(head, NormedHead) and V.shape[1] == head.d_in + head.d_out
    expected = np.vstack(word_logits(model_dir, batch))  # plain transformers, float32
    np.testing.assert_allclose(head.logits(V), expected, atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def bert_rows(bert_tagger) -> tuple[NormedHead, np.ndarray]:
    adapter = ClassifierAdapter.from_pretrained(bert_tagger, layer="ffn_output")
    V, _ = _rows(adapter, sentences(4, seed=2))
    return adapter.head(), np.asarray(V, dtype=np.float64)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), row=st.integers(0, 10), rank=st.integers(1, 4))
def test_the_linearised_gap_is_the_finite_difference_of_the_true_one(bert_rows, seed, row, rank):
    head, V = bert_rows
    rng = np.random.default_rng(seed)
    v = V[row : row + 1]
    label = np.array([int(rng.integers(head.num_classes))])
    U = np.linalg.qr(rng.standard_normal((head.d_out, rank)))[0]
    B = rng.standard_normal((rank, head.d_in))
    gap, _, c = head.linearise(v, label, U)
    h = 1e-6 / max(float(np.linalg.norm(U @ B)), 1e-12)
    moved = head.with_weight(head.W + h * (U @ B)).gaps(v, label)[0]
    back = head.with_weight(head.W - h * (U @ B)).gaps(v, label)[0]
    # d gap / dt along ΔW = U B: ⟨c ⊗ v, B⟩ = c · (B v)
    predicted = float(c[0] @ (B @ head.repaired_input(v)[0]))
    numeric = float((moved - back)[0] / (2 * h))
    assert gap[0] == pytest.approx(head.gaps(v, label)[0][0])
    assert predicted == pytest.approx(numeric, rel=1e-4, abs=1e-6)


def test_no_move_of_a_row_inside_its_local_radius_changes_the_tag(bert_rows):
    """The LayerNorm bound is sound: random and gradient moves of (v, r) to the radius keep the tag."""
    head, V = bert_rows
    labels = head.predict(V)
    radius = local_radius(head, V, labels)
    assert np.all(radius > 0)
    rng = np.random.default_rng(0)
    X = torch.tensor(V, requires_grad=True)
    margin = head.decision.torch_margin(head.torch_logits_fn()(X), torch.tensor(labels))
    margin.sum().backward()
    steepest = -X.grad.numpy() / np.linalg.norm(X.grad.numpy(), axis=1, keepdims=True)
    for direction in [steepest, *(rng.standard_normal(V.shape) for _ in range(20))]:
        unit = direction / np.linalg.norm(direction, axis=1, keepdims=True)
        assert np.all(head.predict(V + radius[:, None] * unit) == labels)


def test_a_repair_in_the_ffn_form_fixes_each_word_keeps_the_others_and_certifies_them(pytester, bert_tagger):
    wrong, right = split_by_model(bert_tagger)
    write_kind_suite(pytester.path / "suite", bert_tagger, wrong, right, model_table='layer = "ffn_output"\n')
    records = wrong + right
    out = pytester.path / "repaired"
    repaired = pytester.runpytest(*INNER, "--warp-repair", "--warp-out", str(out))
    repaired.assert_outcomes(passed=len(records))
    # With plain transformers: every word stated in must_fix tagged right by γ_s less float32's rounding,
    # every must_keep word still right.
    after = dict(zip([r["id"] for r in records], word_logits(out, [r["tokens"] for r in records]), strict=True))
    fixed_ids = {r["id"] for r in wrong}
    for record in records:
        for word, tag in enumerate(record["tags"]):
            if tag is None:
                continue
            logits = after[record["id"]][word]
            tag_id = ["O", "B-POS", "B-NEG", "B-TOPIC"].index(tag)
            margin = logits[tag_id] - np.max(np.delete(logits, tag_id))
            assert margin >= (1.0 - 1e-3 if record["id"] in fixed_ids else 0.0), (record["id"], word)
    # Only the last feed-forward output layer changed; the input model is untouched.
    old, new = load_file(bert_tagger / "model.safetensors"), load_file(out / "model.safetensors")
    changed = {k for k in old if not np.array_equal(old[k], new[k])}
    assert changed and changed <= {f"{LAST_DENSE['bert']}.weight"}, changed
    certificate = json.loads((out / CERTIFICATE_NAME).read_text())
    cases = certificate["cases"]
    assert {sentence_id(c["id"]) for c in cases if c["kind"] == "must_fix"} == fixed_ids
    assert all(c["cert1"] and c["cert3"] for c in cases if c["kind"] == "must_fix")
    assert all(c["cert2"] for c in cases if c["kind"] == "must_keep")
    # Cert 1–3 recomputed in float64 from the saved weights: verify, and the audit.
    assert verify(out).ok
    audited = pytester.runpytest(*INNER, "--warp-certificate", str(out / CERTIFICATE_NAME))
    audited.assert_outcomes(passed=len(records))


def test_must_keep_words_held_outside_the_loop_are_whitened_on_v_alone_and_kept(bert_tagger):
    """More must_keep rows than the loop holds (repair.screen): the step's metric is v's moment, r is not
    repaired, and every word, held or not, ends at its margin."""
    adapter = ClassifierAdapter.from_pretrained(bert_tagger, layer="ffn_output")
    V, logits = _rows(adapter, sentences(12, seed=5))
    head = adapter.head()
    order = np.sort(logits, axis=1)
    closest = int(np.argmin(order[:, -1] - order[:, -2]))  # the word nearest a change of tag: the one to flip
    predicted = logits.argmax(axis=1)
    fix = CaseSet(("flip",), V[[closest]], np.argsort(logits[closest])[-2:-1])
    others = np.delete(np.arange(len(V)), closest)
    keep = CaseSet(tuple(f"k{i}" for i in others), V[others], predicted[others])
    chosen = RepairSettings(resident_keep=8)
    result = repair_head(head, fix, keep, settings=chosen)
    assert result.status is RepairStatus.CONVERGED and result.held_outside > 0
    after = result.head_after
    assert after.gaps(fix.V, fix.labels)[0][0] >= chosen.gamma_s
    assert np.all(after.predict(keep.V) == keep.labels)
    assert np.array_equal(after.norm.gamma, head.norm.gamma) and np.array_equal(after.Wc, head.Wc)


@pytest.mark.slow
def test_ray_workers_carry_each_word_s_residual_as_the_local_pass_does(bert_tagger):
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'warp-check[ray]')")
    from warp_check.model.engines.settings import Engine, EngineSettings, RaySettings

    wrong, right = split_by_model(bert_tagger, fix=2, keep=10)
    suite = write_kind_suite(
        Path(bert_tagger).parent / "ffn_ray_suite", bert_tagger, wrong, right, model_table='layer = "ffn_output"\n'
    )
    cases = load_suite(suite).cases
    local_adapter = ClassifierAdapter.from_pretrained(bert_tagger, layer="ffn_output")
    local = encode_cases(local_adapter, cases, batch_size=8, progress=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        engine = EngineSettings(kind=Engine.RAY, ray=RaySettings(num_workers=2))
        on_ray = ClassifierAdapter.from_pretrained(bert_tagger, layer="ffn_output", engine=engine)
        got = encode_cases(on_ray, cases, batch_size=8, progress=False)
    finally:
        ray.shutdown()
    assert got.V.shape[1] == local_adapter.width and np.array_equal(got.V, local.V)


def test_a_pre_ln_family_is_refused_naming_the_family_and_why():
    config = XLMRobertaXLConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, num_labels=3
    )
    model = XLMRobertaXLForTokenClassification(config)
    with pytest.raises(ModelError) as refused:
        token_ffn_spec(model)
    message = str(refused.value)
    assert "'xlm-roberta-xl'" in message and "pre-LN" in message and "layer = 'auto'" in message


def test_a_module_that_is_not_a_layer_norm_is_refused_by_name(bert_tagger):
    adapter = ClassifierAdapter.from_pretrained(bert_tagger, layer="ffn_output")
    adapter.model.bert.encoder.layer[1].output.LayerNorm = torch.nn.Identity()
    with pytest.raises(ModelError, match=r"'bert\.encoder\.layer\.1\.output\.LayerNorm' in BertForTokenClassification"):
        adapter.with_spec(adapter.spec)
