"""Tiny token classifiers (``...ForTokenClassification``): every word of a review-like sentence tagged
POS (a praising word), NEG (a complaining one), TOPIC (what is reviewed) or O, trained for seconds.

The training sentences never hold the unseen sentiment words (``UNSEEN_POS``/``UNSEEN_NEG``), so the
words the model most often tags wrong are those: real must_fix words. A sentence's last word carries
a full stop (``today.``), which the tokenizer splits in two sub-tokens: the word's tag is its first's.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch
from transformers import (
    AutoConfig,
    AutoModelForTokenClassification,
    AutoTokenizer,
    BertConfig,
    BertForTokenClassification,
    DistilBertConfig,
    DistilBertForTokenClassification,
    RobertaConfig,
    RobertaForTokenClassification,
    RobertaTokenizer,
)
from transformers.convert_slow_tokenizer import bytes_to_unicode

from testkit import tiny_models as tm
from testkit.families import FAMILIES as ENCODER_FAMILIES

TAGS = ("O", "B-POS", "B-NEG", "B-TOPIC")
_GROUPS = {
    "B-POS": {*tm._POS_ADJ, *tm._POS_VERB, *tm.UNSEEN_POS},
    "B-NEG": {*tm._NEG_ADJ, *tm._NEG_VERB, *tm.UNSEEN_NEG},
    "B-TOPIC": set(tm._NOUNS),
}
_STEPS = 120


def tag_of(word: str) -> str:
    """A word's true tag (a full stop does not change it)."""
    bare = word.rstrip(".").lower()
    return next((tag for tag, group in _GROUPS.items() if bare in group), "O")


def sentences(n: int, seed: int, *, unseen_rate: float = 0.3) -> list[list[str]]:
    """``n`` sentences as words, the last with a full stop."""
    rng = random.Random(seed)
    out = []
    for case in tm.synthetic_cases("multiclass", n, seed=seed, unseen_rate=unseen_rate):
        words = case["text"].split()
        if rng.random() < 0.5:
            words[-1] += "."
        out.append(words)
    return out


def bpe_tokenizer() -> RobertaTokenizer:
    """A byte-level BPE tokenizer over the shared words, as RoBERTa's: a word inside a sentence is one
    token with its leading space (``Ġgood``), and pre-split words need ``add_prefix_space``."""
    vocab: dict[str, int] = {}
    for token in ("<s>", "<pad>", "</s>", "<unk>", "<mask>", *bytes_to_unicode().values()):
        vocab.setdefault(token, len(vocab))
    merges: list[tuple[str, str]] = []
    for word in (w for w in tm.VOCAB if not w.startswith("[")):
        built = word[0]
        for ch in word[1:]:
            if (built, ch) not in merges:
                merges.append((built, ch))
            built += ch
            vocab.setdefault(built, len(vocab))
        merges.append(("Ġ", word))
        vocab.setdefault("Ġ" + word, len(vocab))
    return RobertaTokenizer(vocab=vocab, merges=merges, model_max_length=tm.MAX_LENGTH)


# Families built from the shared tiny sizes (testkit.families) with the shared WordPiece vocabulary.
AUTO_FAMILIES = ("deberta-v2", "electra", "xlm-roberta")


def _config(family: str):
    if family in AUTO_FAMILIES:
        config = AutoConfig.for_model(family, **ENCODER_FAMILIES[family].sizes(len(tm.VOCAB)))
        return AutoModelForTokenClassification.from_config, config, ["input_ids", "attention_mask"]
    if family == "bert":
        return BertForTokenClassification, BertConfig(**tm._encoder_sizes()), None
    if family == "roberta":
        sizes = tm._encoder_sizes(
            vocab_size=len(bpe_tokenizer()),
            max_position_embeddings=tm._MAX_POSITIONS + 2,
            type_vocab_size=1,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
        )
        return RobertaForTokenClassification, RobertaConfig(**sizes), ["input_ids", "attention_mask"]
    config = DistilBertConfig(
        vocab_size=len(tm.VOCAB),
        dim=32,
        n_layers=2,
        n_heads=2,
        hidden_dim=64,
        max_position_embeddings=tm._MAX_POSITIONS,
        pad_token_id=0,
        initializer_range=tm._INIT_RANGE,
    )
    return DistilBertForTokenClassification, config, ["input_ids", "attention_mask"]


def build_tagger(out_dir: Path | str, *, family: str = "bert", seed: int = 0) -> Path:
    """A trained four-tag token classifier of ``family`` (bert, distilbert, roberta, or one of
    :data:`AUTO_FAMILIES`), saved as a Hugging Face folder."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model_cls, config, input_names = _config(family)
    config.num_labels = len(TAGS)
    config.id2label = dict(enumerate(TAGS))
    config.label2id = {tag: i for i, tag in enumerate(TAGS)}
    if family == "roberta":
        bpe_tokenizer().save_pretrained(out)
        tokenizer = _words_tokenizer(out)
    else:
        tokenizer = tm.make_tokenizer(out, model_input_names=input_names)
    train = sentences(1500, 10_000 + seed, unseen_rate=0.0)
    enc = tokenizer(train, is_split_into_words=True, padding=True, return_tensors="pt")
    labels = torch.full(enc["input_ids"].shape, -100)
    for i, words in enumerate(train):
        seen: set[int] = set()
        for position, word in enumerate(enc.word_ids(i)):
            if word is not None and word not in seen:
                seen.add(word)
                labels[i, position] = TAGS.index(tag_of(words[word]))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tm._seed_everything(seed)
        model = model_cls(config)
        generator = torch.Generator().manual_seed(seed)
        optimizer = torch.optim.AdamW(model.parameters(), lr=tm._LR, weight_decay=0.01)
        model.train()
        batch_inputs = {k: v for k, v in enc.items() if input_names is None or k in input_names}
        for _ in range(_STEPS):
            idx = torch.randint(len(train), (tm._BATCH_SIZE,), generator=generator)
            loss = model(**{k: v[idx] for k, v in batch_inputs.items()}, labels=labels[idx]).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    model.eval()
    model.save_pretrained(out)
    if family != "roberta":  # its folder keeps the tokenizer as saved, without add_prefix_space
        tokenizer.save_pretrained(out)
    return out


def _words_tokenizer(model_dir: Path | str):
    """The folder's tokenizer as a tagger's user loads it for pre-split words (Hugging Face's token
    classification guide: RoBERTa's with ``add_prefix_space=True``)."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if getattr(tokenizer, "add_prefix_space", None) is False:
        return AutoTokenizer.from_pretrained(model_dir, add_prefix_space=True)
    return tokenizer


def word_logits(model_dir: Path | str, batch: list[list[str]]) -> list[np.ndarray]:
    """Per sentence, (words, tags) logits at each word's first sub-token, with plain transformers."""
    tokenizer = _words_tokenizer(model_dir)
    model = AutoModelForTokenClassification.from_pretrained(model_dir).eval()
    enc = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
    inputs = {k: v for k, v in enc.items() if k in tokenizer.model_input_names}
    with torch.inference_mode():
        logits = model(**inputs).logits.double().numpy()
    out = []
    for i, words in enumerate(batch):
        ids = enc.word_ids(i)
        out.append(np.stack([logits[i, ids.index(w)] for w in range(len(words))]))
    return out


def split_by_model(model_dir: Path, *, fix: int = 5, keep: int = 30, seed: int = 3) -> tuple[list[dict], list[dict]]:
    """(must_fix, must_keep) sentences: those the model tags wrong somewhere, every word stated; those
    it tags all right with room, every other word stated (the rest null)."""
    batch = sentences(200, seed=seed)
    wrong, right = [], []
    for i, (words, logits) in enumerate(zip(batch, word_logits(model_dir, batch), strict=True)):
        tags = [tag_of(w) for w in words]
        ids = [TAGS.index(t) for t in tags]
        gaps = [logits[w, ids[w]] - np.max(np.delete(logits[w], ids[w])) for w in range(len(words))]
        if min(gaps) < 0 and len(wrong) < fix:
            wrong.append({"id": f"s{i}", "tokens": words, "tags": tags})
        elif min(gaps) > 0.5 and len(right) < keep:
            right.append(
                {"id": f"s{i}", "tokens": words, "tags": [t if w % 2 == 0 else None for w, t in enumerate(tags)]}
            )
    assert len(wrong) == fix and len(right) == keep, "the tiny tagger's errors moved: pick another seed"
    return wrong, right
