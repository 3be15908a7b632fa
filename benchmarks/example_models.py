"""The MiniLM example models the benchmarks run on, and their RTE fine-tunes.

``minilm(name)``: the model of the example suite ``example_suites/reviews-<name>`` (``distilbert``:
DistilBERT layout with a ReLU ``pre_classifier`` head; ``bert``: the tanh pooler head), assembled
into the user cache by the suite's own factory on first use. They were trained on airline
tweets, not SST-2 (73-74 % on SST-2 dev). ``rte_finetune(name, epochs, log)``: the same model
fine-tuned on RTE train pairs (the example heads are two-class sentiment heads; RTE needs its own).
``sst2_finetune(name, rows, log)``: the same model fine-tuned on SST-2 train sentences, one epoch,
for classifiers as strong as the ones release gates carry (88 % on SST-2 dev at 20,000 rows, both heads):
a tweet model has slack an SST-2 model has not, and a repair's drawdown shows on the latter.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import REPO
from benchmarks.data import LABELS, cache_root, read_tsv
from warp_check.suite.loader import load_suite

EXAMPLE_SUITES = REPO / "example_suites"
NAMES = ("distilbert", "bert")
RTE_FORMAT = "warp-bench-rte/1"  # part of the cache key: bump when the recipe below changes
SST2_FORMAT = "warp-bench-sst2/1"  # the same, for sst2_finetune


def minilm(name: str) -> Path:
    """The folder of the example model ``name`` (``distilbert`` or ``bert``), assembled if missing."""
    if name not in NAMES:
        raise SystemExit(f"benchmarks: no example model {name!r}; there are {', '.join(NAMES)}")
    return load_suite(EXAMPLE_SUITES / f"reviews-{name}").model_dir


def rte_finetune(name: str, epochs: int, log: Callable[[str], None]) -> tuple[Path, dict]:
    """The example model ``name`` fine-tuned on RTE train pairs, and its training record.

    All layers, AdamW lr 5e-5, batch 16, max_length 128, seed 0; built once into
    ``data.cache_root()`` under a hash of that recipe, and read from there afterwards.
    """
    recipe = {"format": RTE_FORMAT, "epochs": epochs, "lr": 5e-5, "batch": 16, "seed": 0}
    return _finetune("rte", name, recipe, read_tsv("rte", "train"), log)


def sst2_finetune(name: str, rows: int, log: Callable[[str], None]) -> tuple[Path, dict]:
    """The example model ``name`` fine-tuned for one epoch on the first ``rows`` SST-2 train sentences
    of a seeded shuffle (seed 1: not the order the splits draw their cases in), and its record.

    All layers, AdamW lr 5e-5, batch 32, max_length 128, seed 0; cached as :func:`rte_finetune`.
    """
    recipe = {"format": SST2_FORMAT, "rows": rows, "epochs": 1, "lr": 5e-5, "batch": 32, "seed": 0}
    return _finetune("sst2", name, recipe, sst2_training_rows(rows), log)


def sst2_training_rows(rows: int) -> list[dict]:
    """The SST-2 train sentences :func:`sst2_finetune` trains on (rows of a seed-1 shuffle)."""
    train = read_tsv("sst2", "train")
    random.Random(1).shuffle(train)
    return train[:rows]


def _finetune(task: str, name: str, recipe: dict, train: list[dict], log: Callable[[str], None]) -> tuple[Path, dict]:
    """The example model ``name`` fine-tuned on ``train`` by ``recipe``, built once into the cache."""
    base = minilm(name)
    recipe = recipe | {"base": base.name}
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
    root = cache_root()
    final = root / f"{task}-minilm-{name}-{key}"
    if (final / "training.json").is_file():
        return final, json.loads((final / "training.json").read_text())
    # torch and transformers only to train: a cached fine-tune needs neither.
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(base)
    model.config.id2label = dict(enumerate(LABELS[task]))
    model.config.label2id = {v: k for k, v in model.config.id2label.items()}
    accepted = set(inspect.signature(model.forward).parameters)
    optimiser = torch.optim.AdamW(model.parameters(), lr=recipe["lr"])
    generator = torch.Generator().manual_seed(0)
    start = time.perf_counter()
    for epoch in range(recipe["epochs"]):
        model.train()
        order = torch.randperm(len(train), generator=generator).tolist()
        total = 0.0
        for begin in range(0, len(order), recipe["batch"]):
            rows = [train[i] for i in order[begin : begin + recipe["batch"]]]
            batch = pair_batch(tokenizer, rows, accepted)
            loss = F.cross_entropy(model(**batch).logits, torch.tensor([r["label"] for r in rows]))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(rows)
        seconds = time.perf_counter() - start
        log(f"{task} {name}: epoch {epoch + 1}/{recipe['epochs']}, loss {total / len(train):.4f}, {seconds:.0f} s")
    model.eval()
    dev = read_tsv(task, "dev")
    with torch.inference_mode():
        correct = 0
        for begin in range(0, len(dev), 64):
            rows = dev[begin : begin + 64]
            batch = pair_batch(tokenizer, rows, accepted)
            correct += int((model(**batch).logits.argmax(-1) == torch.tensor([r["label"] for r in rows])).sum())
    info = recipe | {"seconds": round(time.perf_counter() - start, 1), "dev_accuracy": correct / len(dev)}
    return store_finetune(final, model, tokenizer, info), info


def store_finetune(final: Path, model, tokenizer, info: dict) -> Path:
    """A fine-tuned model, its tokenizer and ``training.json`` (``info``) written into the cache
    folder ``final`` at once (a temporary folder beside it, renamed): a half-written one is never read."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    (tmp / "training.json").write_text(json.dumps(info, indent=2))
    os.replace(tmp, final)
    return final


def pair_batch(tokenizer, rows: list[dict], accepted: set[str]) -> dict:
    """Rows as one padded batch (of (text, text_pair) where they have pairs), with only the inputs the
    model accepts."""
    pairs = [r["text_pair"] for r in rows] if "text_pair" in rows[0] else None
    batch = tokenizer(
        [r["text"] for r in rows], pairs, truncation=True, max_length=128, padding=True, return_tensors="pt"
    )
    return {k: v for k, v in batch.items() if k in accepted}
