"""Issue 57: multi-label repair measured on real GoEmotions with the real MiniLM encoder.

1. **The model**: the example MiniLM (``example_models.minilm(name)``: ``bert``, tanh pooler head;
   ``distilbert``, ReLU ``pre_classifier`` head) with a new 28-label head
   (``problem_type = "multi_label_classification"``, names from ``goemotions/labels.txt``), trained
   with BCE on the first ``--rows`` texts of a seeded shuffle of GoEmotions train (:func:`finetune`:
   ``--train head`` the head over the frozen encoder, ``all`` every layer; cached by its recipe).
   Each label's threshold: the probability of best dev F1 (``--thresholds dev``), written into the
   suite's ``[model] thresholds``; ``half``: 0.5 for all.
2. **The suite**, a real folder (warp.toml + JSONL with ``"labels"``): must_fix = the first
   ``--fix`` dev texts of a seeded shuffle the model gets wrong on some label; must_keep = the first
   ``--keep`` train texts of another shuffle it gets right on all 28 labels, those it was not
   trained on first (``--keep 0``: every one it gets right; ``--keep-partial``: every text, as the
   labels it gets right, ``"on"`` / ``"off"``: the scale run's rows). A text is taken once.
3. **The repair**: the public API (``load_suite``, ``load_adapter``, ``repair_suite``) in a child
   process, so that its peak memory (``resource.getrusage``) is the repair's alone; its encodings
   come from the cache this process filled.
4. **Measured** from the saved weights, not from the repair's own report: every constrained
   label of every case decided as asked (fixed / kept), the certificate's Cert 1-3 counts and its
   hashes (frozen parameters unchanged), the tensors that differ from the original's, test-set
   micro and macro F1 before and after (at the thresholds; before also at 0.5), the share of test
   texts with any label decision changed, repair seconds and peak memory. A sample of test texts is
   re-run through plain transformers on the saved model, as a check of the head's factorisation.
5. ``--compare``: ``warp-check compare`` (LoRA, fine-tuning, WARP) on the same suite in a
   subprocess (every must_keep case, or a seeded ``--compare-keep`` of them), the test texts its general
   set (``--compare-general``: the first N of them), its baselines trained for ``--compare-epochs``: per
   method must_fix fixed, must_keep kept, test micro and macro F1 at the thresholds, seconds
   (:func:`compare_summary`), and its JSON, or where it failed.

Run: ``python -m benchmarks.multi_label [--model bert] [--keep 2000] [--compare] [--json] [--save]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks import REPO
from benchmarks.data import DATA, cache_root
from benchmarks.example_models import NAMES, minilm, store_finetune
from benchmarks.measure import stage_log
from benchmarks.results import add_output_arguments, report
from warp_check.cases import Case, Kind

GOEMOTIONS_FORMAT = "warp-bench-goemotions/1"  # part of the cache key: bump when the recipe below changes
THRESHOLD_GRID = tuple(round(0.02 * k, 2) for k in range(1, 26))  # probabilities 0.02 ... 0.5


# -- the data -------------------------------------------------------------------------------------


def label_names() -> list[str]:
    """GoEmotions' 28 label names, id i on line i of ``labels.txt``."""
    return [line.strip() for line in (DATA / "goemotions" / "labels.txt").read_text().splitlines() if line.strip()]


def read_goemotions(split: str) -> list[dict]:
    """The rows of ``DATA/goemotions/<split>.tsv``: ``{"id", "text", "labels": [label ids]}``, in file order."""
    rows = []
    with open(DATA / "goemotions" / f"{split}.tsv", encoding="utf-8") as handle:
        for line in handle:
            text, labels, comment = line.rstrip("\n").split("\t")
            rows.append(
                {"id": f"{split}-{comment}", "text": text.strip(), "labels": sorted(map(int, labels.split(",")))}
            )
    return rows


def training_rows(rows: int) -> list[dict]:
    """The train texts the fine-tune learns from: the first ``rows`` of a seed-1 shuffle of train."""
    train = read_goemotions("train")
    random.Random(1).shuffle(train)
    return train[:rows]


# -- the fine-tune --------------------------------------------------------------------------------


def finetune(name: str, rows: int, epochs: int, lr: float, part: str, log: Callable[[str], None]) -> tuple[Path, dict]:
    """The example model ``name`` with a new 28-label multi-label head, fine-tuned with BCE on
    :func:`training_rows` (AdamW at ``lr``, batch 32, max_length 64, seed 0), and its record; built
    once into ``data.cache_root()`` under a hash of that recipe.

    ``part`` "all": every layer trained. "head": the encoder frozen as the example model has it, the
    head (the dense layer before the classifier and the new classifier) trained on its input, encoded
    once: minutes where "all" takes an hour on a shared CPU (and "all" at lr 1e-4 and 2e-4 ended with
    logits that do not vary from text to text: a collapsed encoder)."""
    base = minilm(name)
    recipe = {
        "format": GOEMOTIONS_FORMAT,
        "base": base.name,
        "part": part,
        "rows": rows,
        "epochs": epochs,
        "lr": lr,
        "batch": 32,
        "max_length": 64,
        "seed": 0,
    }
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
    root = cache_root()
    final = root / f"goemotions-minilm-{name}-{key}"
    if (final / "training.json").is_file():
        return final, json.loads((final / "training.json").read_text())
    # torch and transformers only to train: a cached fine-tune needs neither.
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    names = label_names()
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(base)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the new head's "newly initialized" notice is the point here
    try:
        model = AutoModelForSequenceClassification.from_pretrained(
            base,
            num_labels=len(names),
            problem_type="multi_label_classification",
            id2label=dict(enumerate(names)),
            label2id={n: i for i, n in enumerate(names)},
            ignore_mismatched_sizes=True,
        )
    finally:
        hf_logging.set_verbosity(verbosity)
    train = training_rows(rows)
    targets = torch.zeros(len(train), len(names))
    for i, row in enumerate(train):
        targets[i, row["labels"]] = 1.0
    generator = torch.Generator().manual_seed(0)
    start = time.perf_counter()
    if part == "head":
        train_head(model, tokenizer, name, train, targets, recipe, generator, log)
    optimiser = torch.optim.AdamW(model.parameters(), lr=recipe["lr"])
    for epoch in range(epochs if part == "all" else 0):
        model.train()
        order = torch.randperm(len(train), generator=generator).tolist()
        total = 0.0
        for begin in range(0, len(order), recipe["batch"]):
            chunk = order[begin : begin + recipe["batch"]]
            batch = tokenizer(
                [train[i]["text"] for i in chunk],
                truncation=True,
                max_length=recipe["max_length"],
                padding=True,
                return_tensors="pt",
            )
            loss = F.binary_cross_entropy_with_logits(model(**batch).logits, targets[chunk])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(chunk)
        log(
            f"goemotions {name}: epoch {epoch + 1}/{epochs}, loss {total / len(train):.4f}, "
            f"{time.perf_counter() - start:.0f} s"
        )
    model.eval()
    info = recipe | {"train_seconds": round(time.perf_counter() - start, 1)}
    return store_finetune(final, model, tokenizer, info), info


# The head "head" fine-tuning trains: the dense layer before the classifier, and its activation.
HEADS = {"bert": ("bert.pooler.dense", "tanh"), "distilbert": ("pre_classifier", "relu")}


def train_head(model, tokenizer, name: str, train: list[dict], targets, recipe: dict, generator, log) -> None:
    """The dense layer before the classifier and the classifier trained with BCE on the dense layer's
    input, encoded once by the frozen encoder (no dropout: the input is fixed)."""
    import torch
    import torch.nn.functional as F

    dense = model.get_submodule(HEADS[name][0])
    activation = torch.tanh if HEADS[name][1] == "tanh" else torch.relu
    seen: list = []
    hook = dense.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].detach()))
    model.eval()
    with torch.inference_mode():
        for begin in range(0, len(train), 64):
            batch = tokenizer(
                [r["text"] for r in train[begin : begin + 64]],
                truncation=True,
                max_length=recipe["max_length"],
                padding=True,
                return_tensors="pt",
            )
            model(**batch)
    hook.remove()
    V = torch.cat(seen).clone()
    log(f"goemotions {name}: {len(train)} texts encoded for the head")
    parameters = [*dense.parameters(), *model.classifier.parameters()]
    optimiser = torch.optim.AdamW(parameters, lr=recipe["lr"])
    for epoch in range(recipe["epochs"]):
        order = torch.randperm(len(train), generator=generator)
        total = 0.0
        for begin in range(0, len(order), recipe["batch"]):
            rows = order[begin : begin + recipe["batch"]]
            logits = model.classifier(activation(dense(V[rows])))
            loss = F.binary_cross_entropy_with_logits(logits, targets[rows])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(rows)
        if (epoch + 1) % 10 == 0 or epoch + 1 == recipe["epochs"]:
            log(f"goemotions {name} head: epoch {epoch + 1}/{recipe['epochs']}, loss {total / len(train):.4f}")


# -- cases and what the model decides ---------------------------------------------------------------


def answer_of(row: dict, num_labels: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(on, off) of a row: its ``labels`` on and every other off, or its partial ``on`` / ``off``."""
    if "labels" in row:
        return tuple(row["labels"]), tuple(j for j in range(num_labels) if j not in row["labels"])
    return tuple(row["on"]), tuple(row["off"])


def as_cases(rows: list[dict], kind: Kind, num_labels: int) -> list[Case]:
    """Rows as cases whose answer is their (on, off) (:func:`answer_of`)."""
    return [Case(id=row["id"], text=row["text"], label=answer_of(row, num_labels), kind=kind) for row in rows]


def usable(rows: list[dict]) -> list[dict]:
    """The rows a case may be made of (a few comments are a text warp-check refuses: control characters)."""
    out = []
    for row in rows:
        try:
            Case(id=row["id"], text=row["text"], label=0, kind=Kind.MUST_KEEP)
        except ValueError:
            continue
        out.append(row)
    return out


def distinct_texts(rows: list[dict]) -> list[dict]:
    """The rows, each text once (its first row): a case file states one answer per text, and GoEmotions'
    test split repeats a few texts (6 of 5,427 rows), one of them with other labels."""
    seen: set[str] = set()
    return [row for row in rows if not (row["text"] in seen or seen.add(row["text"]))]


def truth_of(rows: list[dict], num_labels: int) -> np.ndarray:
    """(rows, labels) bool: the label sets the rows state."""
    truth = np.zeros((len(rows), num_labels), dtype=bool)
    for i, row in enumerate(rows):
        truth[i, row["labels"]] = True
    return truth


def logits_of(adapter, rows: list[dict], encode: dict) -> np.ndarray:
    """The model's float64 logits of ``rows``, by warp-check's encoder and head (and its cache)."""
    from warp_check import evaluate

    if not rows:
        return np.zeros((0, adapter.num_classes))
    return evaluate(adapter, as_cases(rows, Kind.MUST_KEEP, adapter.num_classes), **encode).logits


def f1_scores(predicted: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """(micro F1, macro F1) of (texts, labels) bool decisions; a label never on in either scores 0."""
    tp = (predicted & truth).sum(axis=0)
    wrong = (predicted & ~truth).sum(axis=0) + (~predicted & truth).sum(axis=0)
    micro = 2 * tp.sum() / max(2 * tp.sum() + wrong.sum(), 1)
    per_label = np.where(2 * tp + wrong > 0, 2 * tp / np.maximum(2 * tp + wrong, 1), 0.0)
    return float(micro), float(per_label.mean())


def input_key(tokenizer) -> Callable[[str], tuple[int, ...]]:
    """A text's key as the model reads it: its token ids (max_length 128, as the adapter's). Two texts
    with one key are one input, and a suite may not ask two answers of it."""
    return lambda text: tuple(tokenizer(text, truncation=True, max_length=128)["input_ids"])


# -- the suite ----------------------------------------------------------------------------------------


def tune_thresholds(logits: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per label, the probability in ``THRESHOLD_GRID`` with the best F1 on (logits, truth); 0.5 where
    none gives a true positive (as a team tunes a tagger's thresholds on dev before release)."""
    best = np.full(truth.shape[1], 0.5)
    for j in range(truth.shape[1]):
        scores = [f1_scores(logits[:, [j]] > logit(p), truth[:, [j]])[0] for p in THRESHOLD_GRID]
        if max(scores) > 0:
            best[j] = THRESHOLD_GRID[int(np.argmax(scores))]
    return best


def logit(p: float | np.ndarray) -> float | np.ndarray:
    return np.log(p) - np.log1p(-p)


def pick_fix(dev: list[dict], decided: np.ndarray, n: int, seed: int, text_key, log) -> list[dict]:
    """The first ``n`` dev texts of a seeded shuffle the model gets wrong on some label (``decided``:
    its decisions on ``dev``)."""
    wrong_rows = (decided != truth_of(dev, decided.shape[1])).any(axis=1)
    order = list(range(len(dev)))
    random.Random(f"warp-bench-goemotions-fix:{seed}").shuffle(order)
    wrong, seen = [], set()
    for i in order:
        if wrong_rows[i] and text_key(dev[i]["text"]) not in seen and len(wrong) < n:
            seen.add(text_key(dev[i]["text"]))
            wrong.append(dev[i])
    log(f"must_fix: {len(wrong)} dev texts the model gets wrong (of {int(wrong_rows.sum())} of {len(dev)})")
    return wrong


def pick_keep(
    adapter,
    encode: dict,
    t: np.ndarray,
    n: int,
    seed: int,
    trained: set[str],
    taken: set,
    text_key,
    log,
    *,
    partial: bool,
):
    """The first ``n`` train texts of a seeded shuffle the model gets right on every label (label j on
    where its logit is above ``t[j]``), those it was not fine-tuned on first (``n`` 0: all it gets
    right); none whose key is in ``taken``. ``partial``: every text, as the labels it gets right
    (``on`` / ``off``; the others unconstrained), each label decision the model gets right a row."""
    train = usable(read_goemotions("train"))
    random.Random(f"warp-bench-goemotions-keep:{seed}").shuffle(train)
    train.sort(key=lambda row: row["id"] in trained)  # stable: the shuffle's order within each part
    if n == 0:
        # All are taken, so the order only says which of two equal texts stays: from the end, so that
        # a run with a smaller n beside this one encodes other texts into the shared cache meanwhile.
        train.reverse()
    right, seen, done = [], set(taken), 0
    step = 4000 if n == 0 else 2 * n  # chunks: the cache keeps what a long encoding reached
    for begin in range(0, len(train), step):
        chunk = train[begin : begin + step]
        started = time.perf_counter()
        decided = logits_of(adapter, chunk, encode) > t
        truth = truth_of(chunk, adapter.num_classes)
        for i, row in enumerate(chunk):
            good = bool((decided[i] == truth[i]).all())
            if partial and not good:
                on, off = np.flatnonzero(decided[i] & truth[i]), np.flatnonzero(~decided[i] & ~truth[i])
                row = {"id": row["id"], "text": row["text"], "on": on.tolist(), "off": off.tolist()}
            if (good or partial) and text_key(row["text"]) not in seen and (n == 0 or len(right) < n):
                seen.add(text_key(row["text"]))
                right.append(row)
        done += len(chunk)
        log(f"must_keep: {len(right)} right of {done} train texts ({time.perf_counter() - started:.0f} s)")
        if n and len(right) == n:
            break
    return right


def write_suite(
    folder: Path, model_dir: Path, names: list[str], files: dict[str, list[dict]], thresholds: dict[str, float]
) -> Path:
    """A suite folder: warp.toml naming the model and its ``thresholds`` (label → probability), one
    JSONL per kind with ``"labels"`` (or ``"on"`` / ``"off"``) by name."""
    folder.mkdir(parents=True, exist_ok=True)
    toml = f"[model]\npath = {json.dumps(str(model_dir))}\n"
    if thresholds:
        toml += "thresholds = { " + ", ".join(f"{name} = {p!r}" for name, p in thresholds.items()) + " }\n"
    for kind, rows in files.items():
        lines = [
            json.dumps(
                {"id": r["id"], "text": r["text"]}
                | {key: [names[j] for j in r[key]] for key in ("labels", "on", "off") if key in r}
            )
            for r in rows
        ]
        (folder / f"{kind}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        toml += f'\n[[cases]]\npath = "{kind}.jsonl"\nkind = "{kind}"\n'
    (folder / "warp.toml").write_text(toml, encoding="utf-8")
    return folder


# -- the repair, in a child process ------------------------------------------------------------------

# The public API, as a user's script calls it; the child's peak memory is the repair's own.
REPAIR_CHILD = """
import dataclasses, json, resource, sys, time
import torch
torch.set_num_threads(int(sys.argv[4]))
import warp_check as wc
suite_dir, out_dir, cache_dir = sys.argv[1:4]
start = time.perf_counter()
suite = wc.load_suite(suite_dir)
model = wc.load_adapter(suite)
loaded = time.perf_counter()
result = wc.repair_suite(suite, model, suite.settings(), out_dir=out_dir, cache_dir=cache_dir)
done = time.perf_counter()
counts = {str(kind): dataclasses.asdict(tally) for kind, tally in result.counts().items()}
print(json.dumps({
    "ok": result.ok, "passed": result.passed, "status": str(result.status), "message": result.message,
    "counts": counts, "load_seconds": round(loaded - start, 1), "repair_seconds": round(done - loaded, 1),
    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
}, default=str))
"""


def child_env() -> dict[str, str]:
    """This process's environment with the checkout first on the path (the child imports its warp_check)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return env


def repair_in_child(suite_dir: Path, out_dir: Path, cache_dir: Path, threads: int, log) -> dict:
    """``repair_suite`` on the suite in a child process: its JSON line, or the failure's last lines."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", REPAIR_CHILD, str(suite_dir), str(out_dir), str(cache_dir), str(threads)],
        capture_output=True,
        text=True,
        env=child_env(),
    )
    wall = round(time.perf_counter() - started, 1)
    if done.returncode != 0:
        log(done.stderr[-3000:])
        return {"failed": True, "returncode": done.returncode, "stderr_tail": done.stderr[-3000:], "wall_seconds": wall}
    return json.loads(done.stdout.strip().splitlines()[-1]) | {"wall_seconds": wall}


# -- what the saved weights do ----------------------------------------------------------------------


def changed_tensors(before: Path, after: Path) -> list[str]:
    """The names of the tensors of ``after/model.safetensors`` that differ from ``before``'s."""
    from safetensors.numpy import load_file

    old, new = load_file(str(before / "model.safetensors")), load_file(str(after / "model.safetensors"))
    return sorted(n for n in set(old) | set(new) if n not in old or n not in new or not np.array_equal(old[n], new[n]))


def decided_as_asked(logits: np.ndarray, t: np.ndarray, rows: list[dict]) -> tuple[int, float]:
    """(rows with every constrained label decided as stated, the least margin s_j·(z_j − t_j) over them)."""
    signs = np.zeros(logits.shape)
    for i, row in enumerate(rows):
        on, off = answer_of(row, logits.shape[1])
        signs[i, list(on)], signs[i, list(off)] = 1.0, -1.0
    margin = np.where(signs != 0, signs * (logits - t), np.inf)
    return int((margin > 0).all(axis=1).sum()), float(margin.min()) if len(rows) else float("nan")


def plain_transformers_check(after: Path, rows: list[dict], head_logits: np.ndarray, t: np.ndarray) -> dict:
    """The saved model run by plain transformers on ``rows``: its decisions against the head's."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(after)
    model = AutoModelForSequenceClassification.from_pretrained(after).eval()
    out = []
    with torch.inference_mode():
        for begin in range(0, len(rows), 64):
            batch = tokenizer(
                [r["text"] for r in rows[begin : begin + 64]],
                truncation=True,
                max_length=128,
                padding=True,
                return_tensors="pt",
            )
            out.append(model(**batch).logits.double().numpy())
    logits = np.concatenate(out)
    return {
        "texts": len(rows),
        "decisions_differing": int(((logits > t) != (head_logits > t)).sum()),
        "max_abs_logit_difference": float(np.abs(logits - head_logits).max()),
    }


# -- warp-check compare ---------------------------------------------------------------------------------


def run_compare(suite_dir: Path, general: Path | None, cache_dir: Path, args, log) -> dict:
    """``warp-check compare`` on the suite (LoRA, fine-tuning, WARP) in a subprocess, on its must_keep
    (or a seeded ``--compare-keep`` of them): its JSON and :func:`compare_summary`, or the failure's last lines."""
    command = [
        sys.executable,
        "-c",
        "from warp_check.cli import console; console()",
        "compare",
        str(suite_dir),
        *(["--general", str(general)] if general is not None else []),
        *(["--keep-size", str(args.compare_keep)] if args.compare_keep is not None else []),
        "--epochs",
        str(args.compare_epochs),
        "--restore-best",
        "--threads",
        str(args.threads),
        "--cache",
        str(cache_dir),
        "--json",
        "--quiet",
    ]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=child_env())
    wall = round(time.perf_counter() - started, 1)
    record = {"command": " ".join(command[3:]), "returncode": done.returncode, "wall_seconds": wall}
    if done.returncode != 0:
        log(f"compare failed ({done.returncode}):\n{done.stderr[-3000:]}")
        return record | {"failed": True, "stderr_tail": done.stderr[-3000:], "stdout_tail": done.stdout[-1000:]}
    try:
        comparison = json.loads(done.stdout)
    except ValueError:
        return record | {"failed": True, "stdout_tail": done.stdout[-3000:], "stderr_tail": done.stderr[-2000:]}
    return record | {"summary": compare_summary(comparison), "comparison": comparison}


def compare_summary(comparison: dict) -> list[dict]:
    """Per method of a ``warp-check compare --json``: must_fix fixed and must_keep kept (%, every
    constrained label as stated), the general set's micro and macro F1, and the seconds it took."""

    def pct(accuracy: float | None) -> float | None:
        return None if accuracy is None else round(100 * accuracy, 2)

    return [
        {
            "method": row["title"],
            "fixed_pct": pct(row["repair_acc"]),
            "kept_pct": pct(row["remain_acc"]),
            "micro_f1": row.get("general_micro_f1"),
            "macro_f1": row.get("general_macro_f1"),
            "seconds": None if row["seconds"] is None else round(row["seconds"], 1),
            "epochs": row["details"].get("epochs"),
        }
        for row in comparison["methods"]
    ]


# -- the run ---------------------------------------------------------------------------------------------


def run(args, log) -> dict:
    import torch

    from warp_check.model.adapter import ClassifierAdapter

    torch.set_num_threads(args.threads)
    names = label_names()
    model_dir, training = finetune(args.model, args.rows, args.epochs, args.lr, args.train, log)
    log(f"model {model_dir}")
    encodings = cache_root() / "encodings"
    encode = {"batch_size": 64, "cache_dir": encodings, "progress": False}
    adapter = ClassifierAdapter.from_pretrained(model_dir)

    started = time.perf_counter()
    dev = usable(read_goemotions("dev"))
    dev_logits = logits_of(adapter, dev, encode)
    probabilities = tune_thresholds(dev_logits, truth_of(dev, len(names))) if args.thresholds == "dev" else None
    if probabilities is None:
        probabilities = np.full(len(names), 0.5)
    t = logit(probabilities)
    thresholds = {names[j]: round(float(p), 4) for j, p in enumerate(probabilities) if p != 0.5}
    log(f"thresholds ({args.thresholds}): {thresholds}")
    from transformers import AutoTokenizer

    text_key = input_key(AutoTokenizer.from_pretrained(model_dir))
    fix = pick_fix(dev, dev_logits > t, args.fix, args.seed, text_key, log)
    trained = {row["id"] for row in training_rows(args.rows)}
    taken = {text_key(r["text"]) for r in fix}
    keep = pick_keep(adapter, encode, t, args.keep, args.seed, trained, taken, text_key, log, partial=args.keep_partial)
    pick_seconds = time.perf_counter() - started
    started = time.perf_counter()
    test = usable(read_goemotions("test"))
    test_truth = truth_of(test, len(names))
    test_before = logits_of(adapter, test, encode)
    micro_before, macro_before = f1_scores(test_before > t, test_truth)
    micro_half, macro_half = f1_scores(test_before > 0, test_truth)
    log(f"test: micro-F1 {micro_before:.4f}, macro-F1 {macro_before:.4f} ({time.perf_counter() - started:.0f} s)")

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="warp-bench-goemotions-"))
    suite_dir = write_suite(work / "suite", model_dir, names, {"must_fix": fix, "must_keep": keep}, thresholds)
    out_dir = work / "repaired"
    constrained = sum(len(a) + len(b) for a, b in (answer_of(r, len(names)) for r in fix + keep))
    log(f"suite {suite_dir}: {len(fix)} must_fix, {len(keep)} must_keep, {constrained} (case, label) rows; repairing")

    repair = repair_in_child(suite_dir, out_dir, encodings, args.threads, log)
    result = {
        "model": {"name": args.model, "folder": str(model_dir), "training": training},
        "suite": {
            "must_fix": len(fix),
            "must_keep": len(keep),
            "must_keep_fine_tuned_on": sum(r["id"] in trained for r in keep),
            "rows": constrained,
            "pick_seconds": round(pick_seconds, 1),
        },
        "repair": repair,
        "thresholds": thresholds,
        "test": {
            "texts": len(test),
            "micro_f1_before": micro_before,
            "macro_f1_before": macro_before,
            "micro_f1_at_half": micro_half,
            "macro_f1_at_half": macro_half,
        },
    }
    certificate_path = out_dir / "warp_certificate.json"
    if repair.get("failed") or not certificate_path.is_file():
        log("the repair wrote no certificate")
    else:
        certificate = json.loads(certificate_path.read_text())
        model, parent = certificate["model"], certificate["parent"]
        result["certificate"] = {
            "summary": certificate["summary"],
            "status": certificate["repair"]["status"],
            "iterations": certificate["repair"]["iterations"],
            "rank": certificate["settings"]["rank"],
            "loop_seconds": round(sum(h["seconds"] for h in certificate["repair"]["history"]), 1),
            "repair_layer": model["repair_layer"],
            "frozen_unchanged": model["sha256_frozen"] == parent["sha256_frozen"] == model["sha256_source_frozen"],
            "repair_layer_changed": model["sha256_repair_layer"] != parent["sha256_repair_layer"],
            "thresholds": model.get("thresholds"),
        }
        result["changed_tensors"] = changed_tensors(model_dir, out_dir)
        repaired = ClassifierAdapter.from_pretrained(out_dir)
        fixed, fix_margin = decided_as_asked(logits_of(repaired, fix, encode), t, fix)
        kept, keep_margin = decided_as_asked(logits_of(repaired, keep, encode), t, keep)
        result["verified"] = {
            "fixed": fixed,
            "kept": kept,
            "least_fix_margin": fix_margin,
            "least_keep_margin": keep_margin,
        }
        test_after = logits_of(repaired, test, encode)
        micro_after, macro_after = f1_scores(test_after > t, test_truth)
        changed = (test_after > t) != (test_before > t)
        result["test"] |= {
            "micro_f1_after": micro_after,
            "macro_f1_after": macro_after,
            "micro_f1_drop_points": round(100 * (micro_before - micro_after), 3),
            "macro_f1_drop_points": round(100 * (macro_before - macro_after), 3),
            "texts_changed": int(changed.any(axis=1).sum()),
            "change_share": float(changed.any(axis=1).mean()),
            "decisions_changed": int(changed.sum()),
        }
        sample = test[: args.plain_check]
        if sample:
            result["plain_transformers"] = plain_transformers_check(out_dir, sample, test_after[: len(sample)], t)
    if args.compare:
        general = work / "general.jsonl" if args.compare_general != 0 else None
        if general is not None:
            lines = [
                json.dumps({"id": r["id"], "text": r["text"], "labels": [names[j] for j in r["labels"]]}) + "\n"
                for r in distinct_texts(test[: args.compare_general])  # None: every test text
            ]
            general.write_text("".join(lines), encoding="utf-8")
        result["compare"] = run_compare(suite_dir, general, encodings, args, log)
    return result


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.multi_label", description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=NAMES, default="bert", help="the example MiniLM to fine-tune (default bert)")
    parser.add_argument("--rows", type=int, default=6000, help="train texts fine-tuned on (default 6000)")
    parser.add_argument(
        "--train", choices=("head", "all"), default="head", help="what fine-tuning trains (default head)"
    )
    parser.add_argument("--epochs", type=int, default=40, help="fine-tuning epochs (default 40)")
    parser.add_argument("--lr", type=float, default=1e-3, help="fine-tuning learning rate (default 1e-3)")
    parser.add_argument(
        "--thresholds",
        choices=("dev", "half"),
        default="dev",
        help="labels' thresholds: per label the best F1 on dev (default), or probability 0.5 for all",
    )
    parser.add_argument("--fix", type=int, default=60, help="must_fix dev texts (default 60)")
    parser.add_argument(
        "--keep", type=int, default=2000, help="must_keep train texts (default 2000; 0: all it gets right)"
    )
    parser.add_argument(
        "--keep-partial",
        action="store_true",
        help="must_keep: every train text, as the labels the model gets right (on/off; the rest unconstrained)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the shuffles' seed (default 0)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads here and in the children (default 1)")
    parser.add_argument(
        "--plain-check", type=int, default=256, help="test texts re-run by plain transformers (default 256)"
    )
    parser.add_argument("--compare", action="store_true", help="also run warp-check compare on the suite")
    parser.add_argument("--compare-epochs", type=int, default=3, help="compare's baseline epoch limit (default 3)")
    parser.add_argument(
        "--compare-general", type=int, help="the first N test texts as compare's general set (default: all; 0: none)"
    )
    parser.add_argument(
        "--compare-keep", type=int, help="a seeded N of the must_keep cases for compare (default: all of them)"
    )
    parser.add_argument("--work", help="where the suite and the repaired model go (default: a new temp folder)")
    add_output_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    result = run(args, stage_log())
    report("multi_label", parser, args, argv, result, print_text, ignore=("work", "threads"))
    return 0


def print_text(result: dict) -> None:
    suite, repair, test = result["suite"], result["repair"], result["test"]
    print(
        f"model {result['model']['name']}: {suite['must_fix']} must_fix, {suite['must_keep']} must_keep, "
        f"{suite['rows']} rows"
    )
    if repair.get("failed"):
        print(f"repair FAILED:\n{repair.get('stderr_tail', '')}")
    else:
        print(
            f"repair: {repair['status']}, {repair['repair_seconds']} s, peak {repair['peak_rss_mb']} MB: "
            f"{repair['message']}"
        )
    if "verified" in result:
        v, c = result["verified"], result["certificate"]
        print(
            f"fixed {v['fixed']}/{suite['must_fix']}, kept {v['kept']}/{suite['must_keep']}; certificate {c['summary']}"
        )
        print(f"changed tensors: {', '.join(result['changed_tensors'])}; frozen unchanged: {c['frozen_unchanged']}")
        print(
            f"test micro-F1 {test['micro_f1_before']:.4f} -> {test['micro_f1_after']:.4f} "
            f"(drop {test['micro_f1_drop_points']} points), macro-F1 {test['macro_f1_before']:.4f} -> "
            f"{test['macro_f1_after']:.4f}; texts changed {test['texts_changed']}/{test['texts']}"
        )
    if "compare" in result:
        compared = result["compare"]
        if compared.get("failed"):
            print(f"compare FAILED:\n{compared.get('stderr_tail', '')}")
            return
        print("method | must_fix fixed % | must_keep kept % | test micro-F1 | test macro-F1 | seconds")
        for row in compared["summary"]:
            f1 = [("n/a" if row[k] is None else f"{row[k]:.4f}") for k in ("micro_f1", "macro_f1")]
            print(f"{row['method']} | {row['fixed_pct']} | {row['kept_pct']} | {f1[0]} | {f1[1]} | {row['seconds']}")


if __name__ == "__main__":
    sys.exit(main())
