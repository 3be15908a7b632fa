"""A tiny multi-label classifier (Hugging Face ``problem_type = "multi_label_classification"``):
four labels per text, each on when the text has a word of its group, trained for a few seconds.

The training texts never hold the unseen sentiment words (``UNSEEN_POS``/``UNSEEN_NEG``), so texts
that hinge on them are the ones the model most often gets wrong on a label: real must_fix cases.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig, BertForSequenceClassification

from testkit import tiny_models as tm

# Each label's words: the label is on when the text holds one of them.
GROUPS: dict[str, tuple[str, ...]] = {
    "praise": (*tm._POS_ADJ, *tm._POS_VERB, *tm.UNSEEN_POS),
    "complaint": (*tm._NEG_ADJ, *tm._NEG_VERB, *tm.UNSEEN_NEG),
    "negated": tm._NEGATORS,
    "intense": tm._INTENSIFIERS,
}
NAMES = tuple(GROUPS)
_STEPS = 250


def truth(text: str) -> tuple[int, ...]:
    """The label ids a text has on."""
    words = set(text.split())
    return tuple(j for j, group in enumerate(GROUPS.values()) if words & set(group))


def texts(n: int, seed: int, *, unseen_rate: float = 0.3) -> list[str]:
    return [c["text"] for c in tm.synthetic_cases("multiclass", n, seed=seed, unseen_rate=unseen_rate)]


def build_multi_label(out_dir: Path | str, *, seed: int = 0) -> Path:
    """Trained four-label BERT (tanh pooler head), saved as a Hugging Face folder."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = BertConfig(**tm._encoder_sizes())
    config.num_labels = len(NAMES)
    config.id2label = dict(enumerate(NAMES))
    config.label2id = {name: i for i, name in enumerate(NAMES)}
    config.problem_type = "multi_label_classification"
    tokenizer = tm.make_tokenizer(out)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tm._seed_everything(seed)
        model = BertForSequenceClassification(config)
        train = texts(2000, 10_000 + seed, unseen_rate=0.0)
        enc = dict(tokenizer(train, padding=True, truncation=True, return_tensors="pt"))
        target = torch.zeros(len(train), len(NAMES))
        for i, text in enumerate(train):
            target[i, list(truth(text))] = 1.0
        generator = torch.Generator().manual_seed(seed)
        optimizer = torch.optim.AdamW(model.parameters(), lr=tm._LR, weight_decay=0.01)
        model.train()
        for _ in range(_STEPS):
            idx = torch.randint(len(train), (tm._BATCH_SIZE,), generator=generator)
            batch = {k: v[idx] for k, v in enc.items()}
            loss = model(**batch, labels=target[idx]).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    model.eval()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def logits_of(model_dir: Path, batch: list[str]) -> np.ndarray:
    """The model's logits on ``batch``, with plain transformers (not warp_check)."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    enc = tokenizer(batch, padding=True, truncation=True, return_tensors="pt")
    with torch.inference_mode():
        return model(**{k: v for k, v in enc.items() if k != "token_type_ids"}).logits.double().numpy()
