"""Model adapters: the head table, the explicit form, v capture, and the factorisation check.

Every expectation is computed independently of the adapter: v is read from the base model's
own last hidden state, logits from a plain forward of the Hugging Face model.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from testkit.tiny_models import make_tokenizer, synthetic_cases
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from warp_check import HEAD_SPECS, Case, ClassifierAdapter, HeadSpec, Kind, evaluate
from warp_check.errors import ModelError, SuiteError
from warp_check.model.encode import encode_cases
from warp_check.model.specs import resolve_spec

TEXTS = ["the movie was not good", "we love this film", "the plot is amazing and the cast was long"]

# fixture, repair layer, activation, classifier
ARCHITECTURES = [
    ("distilbert_dir", "pre_classifier", "relu", "classifier"),
    ("bert_dir", "bert.pooler.dense", "tanh", "classifier"),
    ("roberta_dir", "classifier.dense", "tanh", "classifier.out_proj"),
    ("electra_dir", "classifier.dense", "gelu", "classifier.out_proj"),
]


def _reference(model_dir: Path, texts, pairs=None) -> tuple[np.ndarray, np.ndarray]:
    """([CLS] hidden state, logits) from a fresh model, with no hooks and no adapter code."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    batch = tokenizer(list(texts), list(pairs) if pairs else None, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model.base_model(**batch).last_hidden_state[:, 0]
        logits = model(**batch).logits
    return hidden.double().numpy(), logits.double().numpy()


def _gaps(logits: np.ndarray, labels) -> np.ndarray:
    labels = np.asarray(labels)
    own = logits[np.arange(len(labels)), labels]
    others = np.where(np.eye(logits.shape[1], dtype=bool)[labels], -np.inf, logits)
    return own - others.max(axis=1)


@pytest.mark.parametrize(("fixture", "repair_layer", "activation", "classifier"), ARCHITECTURES)
def test_table_finds_the_head_and_v_reproduces_the_logits(request, fixture, repair_layer, activation, classifier):
    model_dir = request.getfixturevalue(fixture)
    adapter = ClassifierAdapter.from_pretrained(model_dir)

    assert adapter.spec == HeadSpec(repair_layer=repair_layer, activation=activation, classifier=classifier)
    assert adapter.repair_layer is adapter.model.get_submodule(repair_layer)
    assert adapter.classifier is adapter.model.get_submodule(classifier)
    assert adapter.activation.name == activation
    # v captured by the pre-hook is the [CLS] state the head reads, row for row.
    V, logits = adapter.forward_batch(adapter.tokenize(TEXTS))
    cls_state, reference_logits = _reference(model_dir, TEXTS)
    np.testing.assert_allclose(V, cls_state, atol=1e-6)
    np.testing.assert_allclose(logits, reference_logits, atol=1e-6)
    # W_c σ(W v + b) + b_c reproduces the model to 1e-5.
    np.testing.assert_allclose(adapter.head().logits(V.astype(np.float64)), reference_logits, atol=1e-5)


def test_explicit_names_give_the_same_head_as_the_table(distilbert_dir):
    auto = ClassifierAdapter.from_pretrained(distilbert_dir)
    named = ClassifierAdapter.from_pretrained(distilbert_dir, layer=["pre_classifier", "relu", "classifier"])
    spec = ClassifierAdapter.from_pretrained(
        distilbert_dir, layer=HeadSpec(repair_layer="pre_classifier", activation="relu", classifier="classifier")
    )
    for adapter in (named, spec):
        assert adapter.spec == auto.spec
        np.testing.assert_array_equal(adapter.head().W, auto.head().W)


# ---- a model the table does not know: the explicit form, and heads WARP cannot repair


class ToyClassifier(torch.nn.Module):
    """Mean-pooled embeddings → dense → tanh → [between] → linear, with hooks to break it."""

    def __init__(self, vocab_size: int, *, between=None, per_token: bool = False, twice: bool = False) -> None:
        super().__init__()
        self.config = SimpleNamespace(model_type="toy")
        self.embed = torch.nn.Embedding(vocab_size, 8)
        self.dense = torch.nn.Linear(8, 8)
        self.out = torch.nn.Linear(8, 3)
        self.between = between if between is not None else torch.nn.Identity()
        self.per_token, self.twice = per_token, twice

    def forward(self, input_ids, attention_mask):
        mask = attention_mask[..., None].float()
        h = self.embed(input_ids)
        if self.per_token:  # the dense layer sees every token, not one vector per input
            x = (torch.tanh(self.dense(h)) * mask).sum(1) / mask.sum(1)
        else:
            v = (h * mask).sum(1) / mask.sum(1)
            x = torch.tanh(self.dense(self.dense(v) if self.twice else v))
        return SimpleNamespace(logits=self.out(self.between(x)))


class AlwaysDropout(torch.nn.Module):
    """Dropout written as a functional call with training=True: active even in eval mode."""

    def forward(self, x):
        return torch.nn.functional.dropout(x, 0.5, training=True)


TOY_SPEC = HeadSpec(repair_layer="dense", activation="tanh", classifier="out")


@pytest.fixture
def toy_tokenizer(tmp_path):
    return make_tokenizer(tmp_path)


def test_explicit_form_works_for_any_module(toy_tokenizer):
    model = ToyClassifier(toy_tokenizer.vocab_size)
    with pytest.raises(ModelError, match="model_type 'toy'.*name the modules"):
        resolve_spec(model, "auto")
    adapter = ClassifierAdapter(model, toy_tokenizer, resolve_spec(model, ["dense", "tanh", "out"]))
    assert adapter.spec == TOY_SPEC
    V, logits = adapter.forward_batch(adapter.tokenize(TEXTS))
    np.testing.assert_allclose(adapter.head().logits(V.astype(np.float64)), logits, atol=1e-5)
    assert adapter.check_equivalence(TEXTS) <= 1e-5


@pytest.mark.parametrize(
    ("model_kwargs", "message"),
    [
        ({"between": torch.nn.LayerNorm(8)}, r"'dense' → tanh → 'out' does not reproduce the model's logits"),
        ({"between": AlwaysDropout()}, r"'dense' → tanh → 'out' does not reproduce"),
        ({"per_token": True}, r"repair layer 'dense' was called 1 time\(s\) with input shape \(\d+, \d+, 8\)"),
        ({"twice": True}, r"repair layer 'dense' was called 2 time\(s\)"),
    ],
    ids=["layernorm-between", "dropout-left-on", "per-token-dense", "dense-called-twice"],
)
def test_heads_that_are_not_dense_activation_linear_are_refused(toy_tokenizer, model_kwargs, message):
    model = ToyClassifier(toy_tokenizer.vocab_size, **model_kwargs)
    with pytest.raises(ModelError, match=message):
        ClassifierAdapter(model, toy_tokenizer, TOY_SPEC)  # the load-time check refuses it


def test_large_weights_that_cancel_are_checked_against_the_rounding_of_their_terms(toy_tokenizer):
    # What a repair can leave: classifier rows ~1e4 whose products cancel to logits of a few units.
    # float32 rounds each product at ~1e-3 there, far above 1e-5 of the logit; the head is still right.
    torch.manual_seed(0)
    model = ToyClassifier(toy_tokenizer.vocab_size)
    with torch.no_grad():
        model.dense.weight[4:] = model.dense.weight[:4]
        model.dense.bias[4:] = model.dense.bias[:4]  # the hidden units come in equal pairs
        big = 1e4 * torch.rand(3, 4)
        model.out.weight.copy_(torch.cat([big, -big * (1 + 1e-3 * torch.rand(3, 4))], dim=1))
    adapter = ClassifierAdapter(model, toy_tokenizer, TOY_SPEC)  # the load-time check passes
    V, logits = adapter.forward_batch(adapter.tokenize(TEXTS))
    error = adapter.check_logits(V, logits)
    assert error > 1e-5 * (1 + np.abs(logits).max())  # the check relative to the logits alone would refuse it
    # A wrong activation in the same model is still refused: it is off by about the logits.
    with pytest.raises(ModelError, match="does not reproduce the model's logits"):
        ClassifierAdapter(model, toy_tokenizer, HeadSpec(repair_layer="dense", activation="gelu", classifier="out"))


def test_wrong_activation_is_refused_at_load_naming_the_layer(distilbert_dir):
    with pytest.raises(ModelError) as info:
        ClassifierAdapter.from_pretrained(distilbert_dir, layer=["pre_classifier", "tanh", "classifier"])
    message = str(info.value)
    assert "'pre_classifier' → tanh → 'classifier'" in message
    assert "max error" in message and "WARP cannot repair this layer" in message


@pytest.mark.parametrize("replacement", ["tanh", "gelu_tanh"])
def test_monkeypatched_activation_is_caught_by_the_1e5_check(electra_dir, replacement):
    from transformers.activations import NewGELUActivation

    model = AutoModelForSequenceClassification.from_pretrained(electra_dir)
    tokenizer = AutoTokenizer.from_pretrained(electra_dir)
    # gelu_tanh differs from the exact GELU by < 1e-3: only a tight check notices.
    model.classifier.activation = torch.nn.Tanh() if replacement == "tanh" else NewGELUActivation()
    with pytest.raises(ModelError, match="'classifier.dense' → gelu → 'classifier.out_proj' does not reproduce"):
        ClassifierAdapter(model, tokenizer, HEAD_SPECS["electra"])


@pytest.mark.parametrize(
    ("layer", "message"),
    [
        (
            ["distilbert.embeddings.LayerNorm", "relu", "classifier"],
            "repair layer 'distilbert.embeddings.LayerNorm' is a LayerNorm, not a dense",
        ),
        (["pre_classifier", "relu", "no.such.module"], "classifier 'no.such.module' does not exist"),
        (["pre_classifier", "softsign", "classifier"], "HeadSpec.activation='softsign'"),
        (["pre_classifier", "classifier"], r"expected \[repair_layer, activation, classifier\]"),
        ("first", "layer='first': give 'auto', 'final', the three names"),
        (["distilbert.transformer.layer.1.ffn.lin1", "relu", "classifier"], "outputs 64 features but classifier"),
    ],
)
def test_bad_layer_names_fail_clearly(distilbert_dir, layer, message):
    with pytest.raises(ModelError, match=message):
        ClassifierAdapter.from_pretrained(distilbert_dir, layer=layer)


def test_a_missing_bias_is_zero_and_stays_zero(toy_tokenizer):
    model = ToyClassifier(toy_tokenizer.vocab_size)
    model.out = torch.nn.Linear(8, 3, bias=False)
    adapter = ClassifierAdapter(model, toy_tokenizer, TOY_SPEC)
    head = adapter.head()
    np.testing.assert_array_equal(head.bc, np.zeros(3))
    assert head.fixed_head  # GSN-FT may not tune a bias the model does not have
    moved = adapter.with_head(head.with_weight(head.W * 0.5))
    assert moved.classifier.bias is None and torch.equal(moved.repair_layer.weight, (model.dense.weight * 0.5))
    with pytest.raises(ModelError, match="has no bias to carry a changed one"):
        adapter.with_head(dataclasses.replace(head, bc=np.ones(3)))


def test_folders_that_are_not_models_fail_clearly(tmp_path, distilbert_dir):
    with pytest.raises(ModelError, match="does not exist"):
        ClassifierAdapter.from_pretrained(tmp_path / "missing")
    partial = tmp_path / "no_weights"
    shutil.copytree(distilbert_dir, partial, ignore=shutil.ignore_patterns("*.safetensors"))
    with pytest.raises(ModelError, match=r"has no weights \(\*\.safetensors\)"):
        ClassifierAdapter.from_pretrained(partial)
    unknown = tmp_path / "unknown_type"
    shutil.copytree(distilbert_dir, unknown)
    config = json.loads((unknown / "config.json").read_text())
    (unknown / "config.json").write_text(json.dumps({**config, "model_type": "nonexistent-arch"}))
    with pytest.raises(ModelError, match="cannot load the model"):
        ClassifierAdapter.from_pretrained(unknown)
    # A checkout without `git lfs pull`: the weights file is a pointer text.
    lfs = tmp_path / "lfs_pointer"
    shutil.copytree(distilbert_dir, lfs)
    (lfs / "model.safetensors").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 + "\nsize 123\n"
    )
    with pytest.raises(ModelError, match=r"model.safetensors is a Git LFS pointer, not weights; run `git lfs pull`"):
        ClassifierAdapter.from_pretrained(lfs)
    corrupt = tmp_path / "corrupt"
    shutil.copytree(distilbert_dir, corrupt)
    (corrupt / "model.safetensors").write_bytes(b"\x08" + b"\x00" * 7 + b"{}")
    with pytest.raises(ModelError, match="cannot load the model"):
        ClassifierAdapter.from_pretrained(corrupt)


def test_a_tokenizer_that_fails_names_the_text_it_fails_on(tmp_path, distilbert_dir):
    # A WordPiece vocabulary without its [UNK] token fails on every word it does not know.
    broken = tmp_path / "empty_vocab"
    shutil.copytree(distilbert_dir, broken)
    (broken / "tokenizer.json").unlink()
    (broken / "vocab.txt").write_text("")
    with pytest.raises(
        ModelError,
        match=r"empty_vocab': its tokenizer fails on the text 'a plain probe sentence\.' \(Exception: WordPiece "
        r"error: Missing \[UNK\] token from the vocabulary\): the tokenizer files may be damaged",
    ):
        ClassifierAdapter.from_pretrained(broken)
    # One case's text the tokenizer cannot take, among others it can: that text is named.
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    tokenizer = adapter.tokenizer

    def fails_on_bad(texts, *args, **kwargs):
        if any("bad" in t for t in texts):
            raise RuntimeError("no encoding for this text")
        return tokenizer(texts, *args, **kwargs)

    adapter.tokenizer = fails_on_bad
    with pytest.raises(ModelError, match=r"fails on the text 'a bad one' \(RuntimeError: no encoding for this text\)"):
        adapter.tokenize(["a good one", "a bad one", "a fine one"])
    # Encoding a suite's cases names the case's file and line.
    cases = [
        Case(id=str(i), text=text, label=0, kind=Kind.MUST_KEEP, origin=f"keep.jsonl:{i + 1}")
        for i, text in enumerate(["a good one", "a fine one", "a bad one"])
    ]
    with pytest.raises(
        SuiteError, match=r"keep.jsonl:3: field 'text': the model's tokenizer fails on this case \(RuntimeError: no "
    ):
        encode_cases(adapter, cases, progress=False)


# ---- multi-class heads and text pairs


def test_multiclass_gap_is_against_the_strongest_other_class(multiclass_dir):
    adapter = ClassifierAdapter.from_pretrained(multiclass_dir)
    assert adapter.classifier.out_features == 3
    raw = synthetic_cases("multiclass", 60, seed=5)
    cases = [Case(id=str(i), text=c["text"], label=c["label"], kind=Kind.MUST_KEEP) for i, c in enumerate(raw)]
    evaluation = evaluate(adapter, cases, progress=False)
    _, logits = _reference(multiclass_dir, [c.text for c in cases])
    labels = [c.label for c in cases]
    np.testing.assert_allclose(evaluation.gaps, _gaps(logits, labels), atol=1e-5)
    np.testing.assert_array_equal(evaluation.predictions, logits.argmax(1))
    # Every class is somebody's strongest competitor, so "the other class" is not one fixed index.
    competitors = np.where(np.eye(3, dtype=bool)[labels], -np.inf, logits).argmax(1)
    assert set(competitors.tolist()) == {0, 1, 2}
    with pytest.raises(ValueError, match="label 3 out of range for 3 classes"):
        evaluate(adapter, [Case(id="x", text="it was good", label=3, kind=Kind.MUST_KEEP)], progress=False)
    # No cases (a selection that leaves none): empty answers of the right shapes, no error.
    nothing = evaluate(adapter, [], progress=False)
    assert nothing.predictions.shape == nothing.gaps.shape == (0,) and nothing.logits.shape == (0, 3)


def test_text_pairs_reach_the_model_as_pairs(pair_dir):
    adapter = ClassifierAdapter.from_pretrained(pair_dir)
    raw = synthetic_cases("pair", 40, seed=5)
    cases = [
        Case(id=str(i), text=c["text"], text_pair=c["text_pair"], label=c["label"], kind=Kind.MUST_KEEP)
        for i, c in enumerate(raw)
    ]
    evaluation = evaluate(adapter, cases, progress=False)
    cls_state, logits = _reference(pair_dir, [c.text for c in cases], [c.text_pair for c in cases])
    np.testing.assert_allclose(evaluation.encoded.V, cls_state, atol=1e-5)
    np.testing.assert_allclose(evaluation.gaps, _gaps(logits, [c.label for c in cases]), atol=1e-5)
    assert (evaluation.gaps > 0).mean() > 0.7  # the pair task is learnt, so the hypothesis was seen
    # token_type_ids mark the second segment.
    features = adapter.tokenize([cases[0].text], [cases[0].text_pair])[0]
    assert set(features["token_type_ids"]) == {0, 1}
    # One call may mix single texts and pairs; each is encoded as if alone.
    mixed = [cases[0], Case(id="single", text=cases[1].text, label=0, kind=Kind.MUST_KEEP)]
    V = evaluate(adapter, mixed, progress=False).encoded.V
    np.testing.assert_allclose(V[0], cls_state[0], atol=1e-5)
    np.testing.assert_allclose(V[1], _reference(pair_dir, [cases[1].text])[0][0], atol=1e-5)


def test_the_device_is_cpu_cuda_or_auto_and_checked(distilbert_dir, monkeypatch):
    from warp_check.model.adapter import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu" and resolve_device("cpu") == "cpu"
    for bad, why in (
        ("cuda", "sees no CUDA device"),
        ("cuda:0", "sees no CUDA device"),
        ("tpu", "give 'auto'"),
        ("cuda:x", "give"),
    ):
        with pytest.raises(ModelError, match=why):
            resolve_device(bad)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("auto") == "cuda" and resolve_device("cuda:0") == "cuda:0"
    with pytest.raises(ModelError, match="sees 1 CUDA device"):
        resolve_device("cuda:3")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir, device="auto")
    assert adapter.device == "cpu" and next(adapter.model.parameters()).device.type == "cpu"


def test_inputs_the_model_sees_as_no_text_are_refused_naming_file_and_line(distilbert_dir):
    from warp_check.cases import Case, Kind
    from warp_check.errors import SuiteError
    from warp_check.model.encode import encode_cases

    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    emoji = Case(id="e", text="😀😀 🙂", label=0, kind=Kind.MUST_FIX, origin="fix.jsonl:4")
    with pytest.raises(SuiteError, match=r"fix.jsonl:4: field 'text': tokenizes to nothing but special .*\[UNK\]"):
        encode_cases(adapter, [emoji], progress=False)


def test_a_max_length_that_leaves_no_room_for_text_is_refused(distilbert_dir):
    with pytest.raises(ModelError, match=r"max_length=2 leaves no room for text: the tokenizer adds 2 special"):
        ClassifierAdapter.from_pretrained(distilbert_dir, max_length=2)
    assert ClassifierAdapter.from_pretrained(distilbert_dir, max_length=3).max_length == 3


def test_encoder_threads_default_to_one_whatever_the_cores_and_xdist_workers(monkeypatch):
    import torch

    from warp_check.model import threads

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)  # an 8-core machine
    for workers in (None, "3", "16"):
        if workers is None:
            monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
        else:
            monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", workers)
        assert threads.default_threads() == 1
    before = torch.get_num_threads()  # 1 in these tests (conftest)
    with threads.torch_threads(2) as used:
        assert used == 2 and torch.get_num_threads() == 2
    assert torch.get_num_threads() == before
    torch.set_num_threads(2)  # a caller's own setting: the encoder still runs on one thread
    try:
        with threads.torch_threads(None) as used:
            assert used == 1 == torch.get_num_threads()
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
