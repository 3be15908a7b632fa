"""WARP on a real token classifier: the example's MiniLM encoder fine-tuned for NER on WikiANN-en.

The example model ``minilm("distilbert")`` (all-MiniLM-L6-v2 in DistilBERT's layout) loaded as a
token classifier (a new ``classifier`` over its states) and fine-tuned on the first ``--train``
sentences of a seeded shuffle of WikiANN-en train (one epoch, all layers, AdamW lr 1e-4, batch 32,
cut to 64 sub-tokens, a word's tag at its first sub-token; cached). The suite, as the issue states
it: must_fix = the first ``--fix`` dev sentences it tags wrong somewhere (every word constrained), must_keep = the first
``--keep`` of its training sentences it tags exactly right. ``warp-check repair`` with the defaults
repairs the classifier (the final-linear form; ``--layer ffn_output``: the encoder's last feed-forward
output layer through its residual and LayerNorm); the figures: words fixed and kept, measured with
plain transformers on the saved folders, Cert 1–3 from the certificate, and entity-level F1 (exact
spans, conlleval's rules) on the first ``--test`` WikiANN-en test sentences before and after, with time and peak memory.

Data: ``../shared/data/ner/wikiann-en/`` beside the checkout (``--data`` to name another folder).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from benchmarks import REPO
from benchmarks.data import cache_root
from benchmarks.example_models import minilm, store_finetune
from benchmarks.measure import peak_rss_mb, stage_log
from benchmarks.results import add_output_arguments, report
from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.cli import main as warp_check_main
from warp_check.decisions import LabelSpace
from warp_check.sources.conll import ConllSentence, read_conll

TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")
SPACE = LabelSpace(names={t: i for i, t in enumerate(TAGS)}, num_classes=len(TAGS))
FORMAT = "warp-bench-ner/1"  # part of the fine-tune's cache key: bump when the recipe changes
DATA = REPO.parent / "shared" / "data" / "ner" / "wikiann-en"
BATCH = 64
TRAIN_LENGTH = 64  # sub-tokens a training sentence is cut to (a word cut off is not trained on)


def sentences(data: Path, split: str) -> list[ConllSentence]:
    return read_conll(data / f"{split}.conll", SPACE)


def finetune(train: Sequence[ConllSentence], epochs: int, log: Callable[[str], None]) -> tuple[Path, dict]:
    """The example MiniLM fine-tuned as a token classifier on ``train``, built once into the cache."""
    base = minilm("distilbert")
    recipe = {"format": FORMAT, "rows": len(train), "epochs": epochs, "lr": 1e-4, "batch": 32, "seed": 0}
    recipe["max_length"] = TRAIN_LENGTH
    key = hashlib.sha256(json.dumps(recipe | {"base": base.name}, sort_keys=True).encode()).hexdigest()[:16]
    final = cache_root() / f"ner-minilm-{key}"
    if (final / "training.json").is_file():
        return final, json.loads((final / "training.json").read_text())
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(base)
    # The sequence head's classifier (two classes) is not this one: a new one, sized for the tags.
    model = AutoModelForTokenClassification.from_pretrained(
        base,
        id2label=dict(enumerate(TAGS)),
        label2id={t: i for i, t in enumerate(TAGS)},
        ignore_mismatched_sizes=True,
    )
    optimiser = torch.optim.AdamW(model.parameters(), lr=recipe["lr"])
    generator = torch.Generator().manual_seed(0)
    start = time.perf_counter()
    for epoch in range(epochs):
        loss = _epoch(model, tokenizer, optimiser, train, recipe["batch"], TRAIN_LENGTH, generator)
        took = time.perf_counter() - start
        log(f"fine-tune: epoch {epoch + 1}/{epochs}, loss {loss:.4f}, {took:.0f} s")
    model.eval()
    info = recipe | {"base": base.name, "seconds": round(time.perf_counter() - start, 1)}
    return store_finetune(final, model, tokenizer, info), info


def _epoch(model, tokenizer, optimiser, rows: Sequence[ConllSentence], batch: int, max_length: int, generator) -> float:
    """One epoch of cross-entropy on each word's first sub-token, in a shuffled order; the mean loss."""
    import torch

    model.train()
    order = torch.randperm(len(rows), generator=generator).tolist()
    total = 0.0
    for begin in range(0, len(order), batch):
        chunk = [rows[i] for i in order[begin : begin + batch]]
        enc = _encoded(tokenizer, chunk, max_length)
        labels = torch.full(enc["input_ids"].shape, -100)
        for i, row in enumerate(chunk):
            for position, word in _first_positions(enc.word_ids(i)).items():
                labels[i, position] = SPACE.names[row.tags[word]]
        inputs = {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask")}
        loss = model(**inputs, labels=labels).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        total += float(loss.detach()) * len(chunk)
    model.eval()
    return total / len(rows)


def baseline(
    method: str,
    model_dir: Path,
    fix: Sequence[ConllSentence],
    keep: Sequence[ConllSentence],
    max_epochs: int,
    log: Callable[[str], None],
) -> tuple[Path, dict]:
    """The paper's gradient baselines on the same cases (paper §4.1: AdamW lr 1e-4, batch 16): ``ft``
    trains every layer, ``lora`` a rank-2 LoRA (α 4) on the layer WARP repairs here, the classifier.
    Trained on must_fix ∪ must_keep until every must_fix word is right after an epoch (WARP's goal),
    or ``max_epochs``; the model saved to a temporary folder (the caller removes it)."""
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForTokenClassification.from_pretrained(model_dir)
    if method == "lora":
        from peft import LoraConfig, get_peft_model

        config = LoraConfig(r=2, lora_alpha=4.0, target_modules=["classifier"], lora_dropout=0.0, bias="none")
        model = get_peft_model(model, config)
    params = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.0)
    generator = torch.Generator().manual_seed(0)
    rows = [*fix, *keep]
    window = model.config.max_position_embeddings
    words = sum(len(s.words) for s in fix)
    start, epochs, fixed = time.perf_counter(), 0, 0
    while epochs < max_epochs and fixed < words:
        loss = _epoch(model, tokenizer, optimiser, rows, 16, window, generator)
        epochs += 1
        fixed = words_right(fix, predict_with(model, tokenizer, fix))[0]
        took = time.perf_counter() - start
        log(f"{method}: epoch {epochs}, loss {loss:.4f}, must_fix words right {fixed} of {words}, {took:.0f} s")
    trainable = sum(p.numel() for p in params)
    if method == "lora":
        model = model.merge_and_unload()
    out = Path(tempfile.mkdtemp(prefix=f"warp-ner-{method}-"))
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    info = {"epochs": epochs, "seconds": round(time.perf_counter() - start, 1), "trainable_parameters": trainable}
    return out, info


def _encoded(tokenizer, rows: Sequence[ConllSentence], max_length: int):
    """Sentences as one padded batch of pre-split words, cut to ``max_length`` sub-tokens."""
    words = [list(r.words) for r in rows]
    return tokenizer(
        words, is_split_into_words=True, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
    )


def _first_positions(word_ids: Sequence[int | None]) -> dict[int, int]:
    """Per word, the position of its first sub-token."""
    first: dict[int, int] = {}
    for position, word in enumerate(word_ids):
        if word is not None and word not in first:
            first[word] = position
    return {position: word for word, position in first.items()}


def predict(model_dir: Path, batch: Sequence[ConllSentence]) -> list[list[str]]:
    """Each sentence's tags as the model in ``model_dir`` predicts them (plain transformers); a word past
    the model's positions (a rare sentence of 500 sub-tokens) is predicted ``O``, before and after alike."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return predict_with(AutoModelForTokenClassification.from_pretrained(model_dir).eval(), tokenizer, batch)


def predict_with(model, tokenizer, batch: Sequence[ConllSentence]) -> list[list[str]]:
    """:func:`predict` with a model in memory (in eval mode)."""
    import torch

    positions = model.config.max_position_embeddings
    order = sorted(range(len(batch)), key=lambda i: len(batch[i].words))  # batches of like length pad little
    out: dict[int, list[str]] = {}
    for begin in range(0, len(order), BATCH):
        rows = [batch[i] for i in order[begin : begin + BATCH]]
        enc = _encoded(tokenizer, rows, positions)
        with torch.inference_mode():
            logits = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits
        for i, row in enumerate(rows):
            at = {word: position for position, word in _first_positions(enc.word_ids(i)).items()}
            tags = [TAGS[int(logits[i, at[w]].argmax())] if w in at else "O" for w in range(len(row.words))]
            out[order[begin + i]] = tags
    return [out[i] for i in range(len(batch))]


def _within_window(model_dir: Path) -> Callable[[ConllSentence], bool]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    window = tokenizer.model_max_length
    return lambda s: len(tokenizer(list(s.words), is_split_into_words=True)["input_ids"]) <= window


def spans(tags: Sequence[str]) -> set[tuple[int, int, str]]:
    """The entities of an IOB2 tag sequence, as (start, end, type): conlleval's rules (an ``I-`` after
    ``O`` or another type starts an entity)."""
    found: set[tuple[int, int, str]] = set()
    start, kind = None, None
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, label = tag.partition("-")
        if start is not None and (prefix != "I" or label != kind):
            found.add((start, i, kind or ""))
            start, kind = None, None
        if prefix == "B" or (prefix == "I" and start is None):
            start, kind = i, label
    return found


def entity_f1(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
    true = sum(len(spans(g) & spans(p)) for g, p in zip(gold, predicted, strict=True))
    n_gold = sum(len(spans(g)) for g in gold)
    n_pred = sum(len(spans(p)) for p in predicted)
    return 2 * true / (n_gold + n_pred) if n_gold + n_pred else 1.0


def words_right(gold: Sequence[ConllSentence], predicted: Sequence[Sequence[str]]) -> tuple[int, int]:
    """(words tagged right, words)."""
    pairs = [(t, p) for g, pr in zip(gold, predicted, strict=True) for t, p in zip(g.tags, pr, strict=True)]
    return sum(t == p for t, p in pairs), len(pairs)


def run(args: argparse.Namespace, log: Callable[[str], None]) -> dict:
    train = sentences(args.data, "train")
    random.Random(1).shuffle(train)
    train = train[: args.train]
    model_dir, training = finetune(train, args.epochs, log)
    dev = sentences(args.data, "dev")[: args.dev or None]
    test = sentences(args.data, "test")[: args.test or None]
    log(f"fine-tuned: {model_dir}")
    fits = _within_window(model_dir)  # a suite refuses a sentence over the window (truncation drops words)
    dev_pred = predict(model_dir, dev)
    fix = [s for s, p in zip(dev, dev_pred, strict=True) if list(s.tags) != p and fits(s)][: args.fix]
    if args.keep_source == "right":
        scanned = train[: 2 * args.keep]  # enough: a fine-tuned tagger gets most of its training sentences right
        train_pred = predict(model_dir, scanned)
        keep = [s for s, p in zip(scanned, train_pred, strict=True) if list(s.tags) == p and fits(s)][: args.keep]
    else:  # the model's own tags on the whole train split: a guard of what it does now, at any size
        # WikiANN repeats sentences across splits: one that is a must_fix sentence would state two tag sets
        fixing = {s.words for s in fix}
        pool = [s for s in sentences(args.data, "train") if s.words not in fixing and fits(s)][: args.keep]
        keep = [replace(s, tags=tuple(p)) for s, p in zip(pool, predict(model_dir, pool), strict=True)]
    log(f"suite: {len(fix)} must_fix, {len(keep)} must_keep sentences ({sum(len(s.words) for s in keep)} words)")
    with tempfile.TemporaryDirectory(prefix="warp-ner-") as work:
        suite = Path(work) / "suite"
        suite.mkdir()
        toml = f"[model]\npath = {json.dumps(str(model_dir))}\nlayer = {json.dumps(args.layer)}\n"
        for kind, rows in (("must_fix", fix), ("must_keep", keep)):
            (suite / f"{kind}.jsonl").write_text("".join(json.dumps(r.record) + "\n" for r in rows), encoding="utf-8")
            toml += f'[[cases]]\npath = "{kind}.jsonl"\nkind = "{kind}"\n'
        (suite / "warp.toml").write_text(toml, encoding="utf-8")
        out = Path(work) / "repaired"
        started = time.perf_counter()
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = warp_check_main(["repair", str(suite), "--out", str(out), "--cache", "none", "--json"])
        seconds = time.perf_counter() - started
        log(f"repair: exit {code}, {seconds:.1f} s")
        summary = json.loads((out / CERTIFICATE_NAME).read_text())["summary"] if code == 0 else None
        said = _run_said(printed.getvalue())  # why a run that wrote nothing ended as it did
        after_dir = out if code == 0 else model_dir
        before_test, after_test = predict(model_dir, test), predict(after_dir, test)
        fixed = words_right(fix, predict(after_dir, fix))
        kept = words_right(keep, predict(after_dir, keep))
        fix_before = words_right(fix, predict(model_dir, fix))
    gold = [list(s.tags) for s in test]
    f1_before, f1_after = entity_f1(gold, before_test), entity_f1(gold, after_test)
    baselines = {}
    for method in args.baselines:
        trained, info = baseline(method, model_dir, fix, keep, args.baseline_epochs, log)
        try:
            baselines[method] = info | {
                "must_fix_words_right": words_right(fix, predict(trained, fix))[0],
                "must_keep_words_right": words_right(keep, predict(trained, keep))[0],
                "entity_f1_after": round(entity_f1(gold, predict(trained, test)), 4),
            }
        finally:
            shutil.rmtree(trained, ignore_errors=True)
    return {
        "model": {"base": "all-MiniLM-L6-v2 (example distilbert)", "training": training},
        "suite": {
            "must_fix_sentences": len(fix),
            "must_fix_words": sum(len(s.words) for s in fix),
            "must_keep_sentences": len(keep),
            "must_keep_words": sum(len(s.words) for s in keep),
        },
        "repair": {
            "exit": code,
            "seconds": round(seconds, 1),
            "peak_rss_mb": round(peak_rss_mb()),
            "summary": summary,
            "status": said.get("status"),
            "message": said.get("message"),
        },
        "must_fix_words_right": {"before": fix_before[0], "after": fixed[0], "of": fixed[1]},
        "must_keep_words_right": {"after": kept[0], "of": kept[1]},
        "test": {
            "sentences": len(test),
            "entity_f1_before": round(f1_before, 4),
            "entity_f1_after": round(f1_after, 4),
        },
        "baselines": baselines,
    }


def _run_said(printed: str) -> dict:
    """The status and message of ``warp-check repair --json``'s output (empty where it printed none)."""
    try:
        record = json.loads(printed)
    except json.JSONDecodeError:
        return {}
    return {k: record.get(k) for k in ("status", "message")} if isinstance(record, dict) else {}


def _methods(text: str) -> list[str]:
    methods = [m for m in text.split(",") if m]
    if unknown := sorted(set(methods) - {"ft", "lora"}):
        raise argparse.ArgumentTypeError(f"unknown baseline {', '.join(unknown)} (choose from ft, lora)")
    return methods


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ner_wikiann", description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=3000, help="WikiANN train sentences fine-tuned on (default 3000)")
    parser.add_argument("--epochs", type=int, default=1, help="fine-tuning epochs (default 1)")
    parser.add_argument("--dev", type=int, default=1000, help="dev sentences searched for must_fix (default 1000)")
    parser.add_argument("--fix", type=int, default=60, help="must_fix dev sentences (default 60)")
    parser.add_argument("--keep", type=int, default=500, help="must_keep train sentences (default 500)")
    parser.add_argument(
        "--keep-source",
        choices=("right", "model"),
        default="right",
        help="must_keep: training sentences the model tags exactly right (right, default), or the first --keep "
        "train sentences with the model's own tags (model: a guard of what it does now, any size)",
    )
    parser.add_argument(
        "--layer",
        choices=("auto", "ffn_output"),
        default="auto",
        help="the layer repaired: auto (the classifier, the final-linear form; default) or ffn_output (the "
        "encoder's last feed-forward output layer, through its residual and LayerNorm)",
    )
    parser.add_argument(
        "--baselines",
        type=_methods,
        default=[],
        help="also train ft (all layers) and/or lora (rank 2, the classifier) on the same cases: ft,lora",
    )
    parser.add_argument("--baseline-epochs", type=int, default=10, help="the baselines' most epochs (default 10)")
    parser.add_argument("--test", type=int, default=1000, help="test sentences scored (default 1000; 0: all)")
    parser.add_argument("--data", type=Path, default=DATA, help="the wikiann-en folder (default ../shared/data/ner)")
    add_output_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    result = run(args, stage_log())
    report("ner_wikiann", parser, args, argv, result, print_text, ignore=("data",))
    return 0


def print_text(result: dict) -> None:
    fix, keep, test = result["must_fix_words_right"], result["must_keep_words_right"], result["test"]
    print(
        f"must_fix words right {fix['before']} → {fix['after']} of {fix['of']}; must_keep words right "
        f"{keep['after']} of {keep['of']}; test entity F1 {test['entity_f1_before']:.4f} → "
        f"{test['entity_f1_after']:.4f} ({test['sentences']} sentences); repair {result['repair']['seconds']} s"
    )
    for method, row in result.get("baselines", {}).items():
        print(
            f"{method}: {row['epochs']} epochs, {row['seconds']} s; must_fix words right {row['must_fix_words_right']}"
            f" of {fix['of']}; must_keep {row['must_keep_words_right']} of {keep['of']}; test entity F1 "
            f"{row['entity_f1_after']:.4f}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
