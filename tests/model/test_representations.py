"""The representation cache: hits skip the encoder, anything that changes v misses, writes are atomic."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from testkit.tiny_models import synthetic_cases

from warp_check import Case, ClassifierAdapter, Kind, encode_cases
from warp_check.errors import CacheWarning
from warp_check.model.batches import length_batches
from warp_check.model.head import DenseHead


@pytest.fixture
def adapter(distilbert_dir) -> ClassifierAdapter:
    return ClassifierAdapter.from_pretrained(distilbert_dir)


@pytest.fixture
def cases() -> list[Case]:
    raw = synthetic_cases("binary", 40, seed=3)
    return [Case(id=f"c{i}", text=c["text"], label=c["label"], kind=Kind.MUST_KEEP) for i, c in enumerate(raw)]


class ForwardCounter:
    """Counts the model's forward calls; ``forbid()`` makes any further call fail the test."""

    def __init__(self, adapter: ClassifierAdapter) -> None:
        self.calls = 0
        self.forbidden = False
        self.widths: list[int] = []
        self.padded: list[bool] = []
        adapter.model.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, _module, args, kwargs):
        if self.forbidden:
            raise AssertionError("the encoder ran although every case was cached")
        self.calls += 1
        self.widths.append(int(kwargs["input_ids"].shape[1]))
        self.padded.append(bool((kwargs["attention_mask"] == 0).any()))
        self.lengths = kwargs["attention_mask"].sum(1).tolist()

    def forbid(self) -> None:
        self.forbidden = True


def _shards(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*") if p.is_file())


def test_second_run_never_calls_the_encoder(adapter, cases, tmp_path, distilbert_dir):
    counter = ForwardCounter(adapter)
    first = encode_cases(adapter, cases, batch_size=8, cache_dir=tmp_path, progress=False)
    assert (first.encoded, first.from_cache) == (40, 0)
    lengths = [len(f["input_ids"]) for f in adapter.tokenize([c.text for c in cases])]
    assert counter.calls == sum(-(-lengths.count(n) // 8) for n in set(lengths))  # batches of ≤ 8 of one length
    counter.forbid()
    second = encode_cases(adapter, cases, batch_size=8, cache_dir=tmp_path, progress=False)
    assert (second.encoded, second.from_cache) == (0, 40)
    np.testing.assert_array_equal(second.V, first.V)
    # A fresh load of the same folder (another process, another day) hits too.
    fresh = ClassifierAdapter.from_pretrained(distilbert_dir)
    ForwardCounter(fresh).forbid()
    third = encode_cases(fresh, cases, cache_dir=tmp_path, progress=False)
    np.testing.assert_array_equal(third.V, first.V)
    # Ids, labels and kinds are not part of the key: only what the encoder sees is.
    relabelled = [Case(id=f"other-{c.id}", text=c.text, label=1 - c.label, kind=Kind.MUST_FIX) for c in cases]
    assert encode_cases(fresh, relabelled, cache_dir=tmp_path, progress=False).from_cache == 40


def test_batches_hold_one_length_each_are_never_padded_and_return_rows_in_order(adapter, cases):
    counter = ForwardCounter(adapter)
    encoded = encode_cases(adapter, cases, batch_size=8, progress=False)
    assert counter.widths == sorted(counter.widths) and len(set(counter.widths)) > 1 and not any(counter.padded)
    # Row i is case i: the same as encoding each case alone.
    for i in (0, 17, 39):
        alone, _ = adapter.forward_batch(adapter.tokenize([cases[i].text]))
        np.testing.assert_allclose(encoded.V[i], alone[0], atol=1e-5)
    # A case's v does not depend on the cases it is encoded with (a cache, a neighbourhood, an audit).
    fewer = encode_cases(adapter, cases[::3], batch_size=8, progress=False)
    np.testing.assert_allclose(fewer.V, encoded.V[::3], rtol=0, atol=1e-6)


@given(st.lists(st.integers(1, 6), max_size=60), st.integers(1, 7))
def test_length_batches_partition_the_inputs_into_fewest_full_single_length_batches(lengths, batch_size):
    batches = length_batches(lengths, batch_size)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert all(0 < len(b) <= batch_size and len({lengths[i] for i in b}) == 1 for b in batches)
    assert len(batches) == sum(-(-lengths.count(n) // batch_size) for n in set(lengths))
    assert [lengths[b[0]] for b in batches] == sorted(lengths[b[0]] for b in batches)


def test_a_repaired_model_hits_the_cache_of_the_original(adapter, cases, tmp_path):
    first = encode_cases(adapter, cases, cache_dir=tmp_path / "cache", progress=False)
    head = adapter.head()
    rng = np.random.default_rng(0)
    changed = DenseHead(
        head.W + 0.1 * rng.standard_normal(head.W.shape), head.b + 0.1, head.Wc * 1.5, head.bc - 0.2, head.activation
    )
    repaired = adapter.with_head(changed)
    assert not torch.equal(repaired.repair_layer.weight, adapter.repair_layer.weight)
    ForwardCounter(repaired).forbid()
    np.testing.assert_array_equal(
        encode_cases(repaired, cases, cache_dir=tmp_path / "cache", progress=False).V, first.V
    )
    # ... and so does the repaired model saved and loaded back, as verify will load it.
    repaired.model.save_pretrained(tmp_path / "repaired")
    repaired.tokenizer.save_pretrained(tmp_path / "repaired")
    reloaded = ClassifierAdapter.from_pretrained(tmp_path / "repaired", check=False)
    ForwardCounter(reloaded).forbid()
    np.testing.assert_array_equal(
        encode_cases(reloaded, cases, cache_dir=tmp_path / "cache", progress=False).V, first.V
    )


@pytest.mark.parametrize(
    "parameter",
    ["distilbert.embeddings.word_embeddings.weight", "distilbert.transformer.layer.1.ffn.lin2.bias"],
)
def test_an_upstream_weight_change_misses_the_cache(adapter, cases, tmp_path, parameter):
    first = encode_cases(adapter, cases, cache_dir=tmp_path, progress=False)
    model = copy.deepcopy(adapter.model)
    with torch.no_grad():
        weight = model.get_parameter(parameter)
        # Random, not constant: a LayerNorm right after would cancel a constant shift.
        weight += 1e-2 * torch.randn(weight.shape, generator=torch.Generator().manual_seed(0))
    changed = ClassifierAdapter(model, adapter.tokenizer, adapter.spec)
    counter = ForwardCounter(changed)
    second = encode_cases(changed, cases, cache_dir=tmp_path, progress=False)
    assert (second.encoded, second.from_cache) == (40, 0) and counter.calls > 0
    assert not np.allclose(second.V, first.V, atol=1e-6)
    assert second.upstream_sha256 != first.upstream_sha256


def test_a_config_change_that_moves_v_misses_the_cache(adapter, cases, tmp_path, distilbert_dir):
    # Same weights, a different FFN activation in config.json: v differs, so must the key.
    first = encode_cases(adapter, cases, cache_dir=tmp_path / "cache", progress=False)
    edited = tmp_path / "edited"
    shutil.copytree(distilbert_dir, edited)
    config = json.loads((edited / "config.json").read_text())
    assert config["activation"] == "gelu"
    (edited / "config.json").write_text(json.dumps({**config, "activation": "relu"}))
    other = ClassifierAdapter.from_pretrained(edited)
    second = encode_cases(other, cases, cache_dir=tmp_path / "cache", progress=False)
    assert second.encoded == 40
    assert not np.allclose(second.V, first.V, atol=1e-4)


def test_a_change_in_the_tokenised_input_misses_only_that_case(adapter, cases, tmp_path, distilbert_dir):
    encode_cases(adapter, cases, cache_dir=tmp_path, progress=False)
    edited = list(cases)
    edited[5] = Case(id="c5", text=cases[5].text + " today", label=cases[5].label, kind=Kind.MUST_KEEP)
    counter = ForwardCounter(adapter)
    second = encode_cases(adapter, edited, cache_dir=tmp_path, progress=False)
    assert (second.encoded, second.from_cache, counter.calls) == (1, 39, 1)
    # A shorter max_length truncates the longer inputs: those miss, the rest still hit.
    short = ClassifierAdapter.from_pretrained(distilbert_dir, max_length=8)
    lengths = np.array([len(f["input_ids"]) for f in adapter.tokenize([c.text for c in cases])])
    third = encode_cases(short, cases, cache_dir=tmp_path, progress=False)
    assert third.encoded == int((lengths > 8).sum()) > 0


def test_a_failed_shard_write_leaves_no_file_behind(adapter, cases, tmp_path, monkeypatch):
    import safetensors.numpy

    def write_half_then_fail(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"\x00" * 100)  # what a full disk leaves
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(safetensors.numpy, "save_file", write_half_then_fail)
    with pytest.warns(CacheWarning, match="cannot be written .No space left on device.: going on without it"):
        failed = encode_cases(adapter, cases, cache_dir=tmp_path, progress=False)
    assert failed.encoded == 40 and _shards(tmp_path) == []  # the answers, and no half shard
    monkeypatch.undo()
    encoded = encode_cases(adapter, cases, cache_dir=tmp_path, progress=False)
    assert encoded.encoded == 40
    assert [p.name.startswith(".") for p in _shards(tmp_path)] == [False]


def test_damaged_shards_and_leftover_temp_files_are_misses(adapter, cases, tmp_path):
    first = encode_cases(adapter, cases, cache_dir=tmp_path, progress=False)
    (shard,) = _shards(tmp_path)
    # A writer killed between write and rename leaves a complete ".tmp-" file: not a shard.
    shard.rename(shard.with_name(".tmp-killed.safetensors"))
    counter = ForwardCounter(adapter)
    assert encode_cases(adapter, cases, cache_dir=tmp_path, progress=False).encoded == 40
    assert counter.calls > 0
    # A truncated shard is only a miss, never an error or wrong rows.
    (shard,) = [p for p in _shards(tmp_path) if not p.name.startswith(".")]
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    again = encode_cases(adapter, cases, cache_dir=tmp_path, progress=False)
    assert again.encoded == 40
    np.testing.assert_allclose(again.V, first.V, atol=1e-6)
