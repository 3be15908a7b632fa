"""Tiny classifiers of every Hugging Face family warp-check is tried on, built from their config
classes (hidden 32, 2 layers, no download) and trained for a few seconds on the synthetic
sentiment task, with the word tokenizer every tiny model here shares."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from testkit.suite_builder import write_suite
from testkit.tiny_models import LABELS, VOCAB, make_tokenizer, synthetic_cases, training_cases

HIDDEN, LAYERS, HEADS, INTERMEDIATE, POSITIONS = 32, 2, 2, 64, 64
PAD, UNK, CLS, SEP = 0, 1, 2, 3  # the word tokenizer's special ids (testkit's [PAD] [UNK] [CLS] [SEP])


@dataclass(frozen=True)
class Family:
    """How to build one family's tiny config: its model_type and the keyword arguments it takes."""

    model_type: str
    sizes: Callable[[int], dict[str, Any]]  # vocab size -> config kwargs
    padded: bool = True  # False: the saved config has no pad token (the model runs one input at a time)
    padding_side: str = "right"  # XLNet pools the last position: its tokenizer pads on the left


def _encoder(vocab: int, **extra: Any) -> dict[str, Any]:
    return {
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "intermediate_size": INTERMEDIATE,
        "max_position_embeddings": POSITIONS,
        "pad_token_id": PAD,
        "bos_token_id": CLS,
        "eos_token_id": SEP,
        **extra,
    }


def _roberta_like(vocab: int, **extra: Any) -> dict[str, Any]:
    # Positions are numbered from padding_idx + 1: two more rows than the longest input.
    return _encoder(vocab, max_position_embeddings=POSITIONS + 2, type_vocab_size=1, **extra)


def _decoder(vocab: int, **extra: Any) -> dict[str, Any]:
    return {
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS,
        "intermediate_size": INTERMEDIATE,
        "max_position_embeddings": POSITIONS,
        "pad_token_id": PAD,
        "bos_token_id": CLS,
        "eos_token_id": SEP,
        **extra,
    }


FAMILIES: dict[str, Family] = {
    f.model_type: f
    for f in (
        Family("bert", _encoder),
        Family(
            "distilbert",
            lambda v: {
                "vocab_size": v,
                "dim": HIDDEN,
                "n_layers": LAYERS,
                "n_heads": HEADS,
                "hidden_dim": INTERMEDIATE,
                "max_position_embeddings": POSITIONS,
                "pad_token_id": PAD,
            },
        ),
        Family("roberta", _roberta_like),
        Family("xlm-roberta", _roberta_like),
        Family("camembert", _roberta_like),
        Family("electra", lambda v: _encoder(v, embedding_size=HIDDEN)),
        Family("deberta", lambda v: _encoder(v, pooler_hidden_size=HIDDEN)),
        Family("deberta-v2", lambda v: _encoder(v, pooler_hidden_size=HIDDEN)),
        Family("albert", lambda v: _encoder(v, embedding_size=HIDDEN)),
        Family("mpnet", _roberta_like),
        Family(
            "funnel",
            lambda v: {
                "vocab_size": v,
                "block_sizes": [1, 1],
                "num_decoder_layers": 1,
                "d_model": HIDDEN,
                "n_head": HEADS,
                "d_head": HIDDEN // HEADS,
                "d_inner": INTERMEDIATE,
                "pad_token_id": PAD,
            },
        ),
        Family("longformer", lambda v: _roberta_like(v, attention_window=4)),
        Family(
            "xlnet",
            lambda v: {
                "vocab_size": v,
                "d_model": HIDDEN,
                "n_layer": LAYERS,
                "n_head": HEADS,
                "d_head": HIDDEN // HEADS,
                "d_inner": INTERMEDIATE,
                "pad_token_id": PAD,
                "bos_token_id": CLS,
                "eos_token_id": SEP,
            },
            padding_side="left",
        ),
        Family(
            "bart",
            lambda v: {
                "vocab_size": v,
                "d_model": HIDDEN,
                "encoder_layers": LAYERS,
                "decoder_layers": LAYERS,
                "encoder_attention_heads": HEADS,
                "decoder_attention_heads": HEADS,
                "encoder_ffn_dim": INTERMEDIATE,
                "decoder_ffn_dim": INTERMEDIATE,
                "max_position_embeddings": POSITIONS,
                "pad_token_id": PAD,
                "bos_token_id": CLS,
                "eos_token_id": SEP,
                "decoder_start_token_id": CLS,
                "forced_eos_token_id": None,
            },
        ),
        Family(
            "t5",
            lambda v: {
                "vocab_size": v,
                "d_model": HIDDEN,
                "d_kv": HIDDEN // HEADS,
                "d_ff": INTERMEDIATE,
                "num_layers": LAYERS,
                "num_decoder_layers": LAYERS,
                "num_heads": HEADS,
                "pad_token_id": PAD,
                "eos_token_id": SEP,
                "decoder_start_token_id": PAD,
            },
        ),
        Family("ernie", _encoder),
        Family("data2vec-text", _roberta_like),
        Family("roberta-prelayernorm", _roberta_like),
        Family("big_bird", lambda v: _encoder(v, attention_type="original_full")),
        Family(
            "mobilebert",
            lambda v: _encoder(
                v,
                embedding_size=HIDDEN,
                true_hidden_size=HIDDEN,
                intra_bottleneck_size=HIDDEN,
                num_feedforward_networks=1,
            ),
        ),
        Family("convbert", lambda v: _encoder(v, embedding_size=HIDDEN)),
        Family("roformer", lambda v: _encoder(v, embedding_size=HIDDEN)),
        Family(
            "modernbert",
            lambda v: _encoder(v, cls_token_id=CLS, sep_token_id=SEP, global_attn_every_n_layers=1, local_attention=16),
        ),
        Family(
            "gpt2",
            lambda v: {
                "vocab_size": v,
                "n_embd": HIDDEN,
                "n_layer": LAYERS,
                "n_head": HEADS,
                "n_positions": POSITIONS,
                "bos_token_id": CLS,
                "eos_token_id": SEP,
            },
            padded=False,
        ),
        Family("llama", _decoder),
        Family("qwen2", _decoder),
    )
}


def qwen2_tokenizer():
    """A byte-level BPE tokenizer over the shared words: transformers loads a Qwen2 folder's tokenizer
    as Qwen2Tokenizer whatever its tokenizer_config says, so the tiny Qwen2 gets a real one."""
    from transformers import Qwen2Tokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    vocab: dict[str, int] = {}
    for token in ("<|endoftext|>", *bytes_to_unicode().values()):
        vocab.setdefault(token, len(vocab))
    merges: list[tuple[str, str]] = []
    for word in (w for w in VOCAB if not w.startswith("[")):
        built = word[0]
        for ch in word[1:]:
            if (built, ch) not in merges:
                merges.append((built, ch))
            built += ch
            vocab.setdefault(built, len(vocab))
        merges.append(("Ġ", word))
        vocab.setdefault("Ġ" + word, len(vocab))
    try:
        return Qwen2Tokenizer(vocab=vocab, merges=merges)
    except TypeError:  # transformers 4 (the attack extra's) reads them from files only
        import json
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory() as folder:
            vocab_file, merges_file = Path(folder) / "vocab.json", Path(folder) / "merges.txt"
            vocab_file.write_text(json.dumps(vocab), encoding="utf-8")
            merges_file.write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges), encoding="utf-8")
            return Qwen2Tokenizer(vocab_file=str(vocab_file), merges_file=str(merges_file))


OWN_TOKENIZER = {"qwen2": qwen2_tokenizer}


def build(model_type: str, out_dir: Path, *, steps: int = 150, seed: int = 0) -> Path:
    """A tiny ``model_type`` classifier, trained ``steps`` batches, saved with its tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    family = FAMILIES[model_type]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = LABELS["binary"]
    vocab_size = len(qwen2_tokenizer()) if model_type in OWN_TOKENIZER else len(VOCAB)
    config = AutoConfig.for_model(
        model_type,
        **family.sizes(vocab_size),
        num_labels=2,
        id2label=dict(enumerate(names)),
        label2id={n: i for i, n in enumerate(names)},
    )
    if model_type in OWN_TOKENIZER:
        tokenizer = OWN_TOKENIZER[model_type]()
    else:
        tokenizer = make_tokenizer(out_dir, model_input_names=["input_ids", "attention_mask"])
    tokenizer.padding_side = family.padding_side
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        random.seed(seed)
        model = AutoModelForSequenceClassification.from_config(config)
        model.config.pad_token_id = PAD  # batches need it to train; a family without one loses it again below
        _train(model, tokenizer, training_cases("binary", seed), steps=steps, seed=seed)
        if not family.padded:
            model.config.pad_token_id = None
    finally:
        torch.set_num_threads(threads)
    model.eval()
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def _train(model, tokenizer, cases, *, steps: int, seed: int) -> None:
    import torch

    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        picked = torch.randint(len(cases), (32,), generator=generator).tolist()
        enc = tokenizer([cases[i]["text"] for i in picked], padding=True, return_tensors="pt")
        labels = torch.tensor([cases[i]["label"] for i in picked])
        inputs = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}
        loss = model(**inputs, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


def suite(model_dir: Path, folder: Path, *, n_keep: int = 40, n_fix: int = 6, seed: int = 1) -> Path | None:
    """A suite: ``n_keep`` cases the model gets right by a margin ≥ 0.5, and the ``n_fix`` it gets
    wrong by the least (real mistakes of the model, near its boundary). None: too few of either."""
    cases = synthetic_cases("binary", 300, seed=seed, unseen_rate=0.1)
    gaps = _margins(model_dir, cases)
    names = LABELS["binary"]
    records = [{"id": f"s{seed}-{i:03d}", "text": c["text"], "label": names[c["label"]]} for i, c in enumerate(cases)]
    right = [r for r, g in zip(records, gaps, strict=True) if g >= 0.5][:n_keep]
    wrong = [records[i] for i in np.argsort(-np.where(gaps < 0, gaps, -np.inf)) if gaps[i] < 0][:n_fix]
    if len(wrong) < 2 or len(right) < 4:
        return None
    return write_suite(folder, model=model_dir, fix=wrong, keep=right)


def _margins(model_dir: Path, cases: list[dict]) -> np.ndarray:
    """logit(label) − the other logit, from plain transformers (one input at a time: some have no pad)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    out = []
    with torch.inference_mode():
        for case in cases:
            enc = tokenizer([case["text"]], return_tensors="pt")
            logits = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits[0].double()
            out.append(float(logits[case["label"]] - logits[1 - case["label"]]))
    return np.array(out)
