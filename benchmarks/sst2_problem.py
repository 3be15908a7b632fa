"""The real large repair problem of ``bench_scale --source sst2``: no synthetic representation.

* head: the MiniLM example model's, ``model="distilbert"`` (pre_classifier 384×384 → ReLU →
  classifier) or ``model="bert"`` (pooler 384×384 → tanh → classifier);
* must_fix: the DeepWordBug cases of its example suite (``example_suites/reviews-<model>``, real
  attacks: 167 and 170);
* must_keep: SST-2 train sentences (``../shared/data/sst2/train.tsv``, 67,349 of them, read by
  ``data.read_tsv``) in file order, those the model gets right (``keep="natural"``) or
  right by γ_h = 0.3 or more (``keep="margin"``), until n are found (``n = None``: all of them);
  with ``perturbations=k``, after them up to k seeded perturbations of each sentence (the suite's
  own strategies, :func:`perturbed_pool`): the road to a million real must_keep cases.

Representations are encoded once into ``~/.cache/warp-check/benchmarks/sst2-train-cache`` (the
representation cache warp-check uses for suites, keyed by model and text) and read from there
afterwards; encoding all of SST-2 train takes ~10 minutes on one core. Needs the data folder.
The representations are held as the cache stores them, float32 (the loop computes in float64).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from benchmarks import REPO, data
from warp_check.cases import Case, Kind
from warp_check.files import replaced_atomically
from warp_check.model.adapter import ClassifierAdapter
from warp_check.perturb import drawing_code, perturbed_texts
from warp_check.pipeline.evaluation import evaluate
from warp_check.repair.records import CaseSet
from warp_check.suite.loader import load_suite

SUITES = {model: REPO / "example_suites" / f"reviews-{model}" for model in ("distilbert", "bert")}
GAMMA_H = 0.3
BLOCK = 4096  # sentences encoded (or read from the cache) at a time
PARALLEL_FROM = 2048  # sentences from which perturbations are drawn on every core
DRAW_SIZE = 16  # perturbations a sentence drawn from one seed: the pool up to 16 is one draw
SEED_STRIDE = 1 << 20  # a sentence's further draws are seeded past every row's first (67,349 rows)


def cache_dir() -> Path:
    return data.cache_root() / "sst2-train-cache"


def sentences() -> list[dict]:
    path = data.DATA / "sst2" / "train.tsv"
    if not path.exists():
        raise SystemExit(f"bench_scale --source sst2: needs the SST-2 data at {path}")
    return data.read_tsv("sst2", "train")


def perturbed_pool(per_sentence: int) -> list[dict]:
    """SST-2 train's sentences, then up to ``per_sentence`` perturbations of each, round by round (every
    sentence's first, then every sentence's second, ...: any prefix spreads over the sentences).

    A sentence's perturbations are the draws a suite's neighbourhood makes (typos, casing and punctuation,
    contractions, rewrites that keep every negation), distinct and never the sentence, DRAW_SIZE to a seed:
    ``warp_check.perturb.perturbed_texts(text, k, seed=row)`` for the first k ≤ DRAW_SIZE, then further
    draws at seeds row + j·SEED_STRIDE, less any text an earlier draw gave. A draw is not a prefix of a
    larger one, so a larger pool keeps the smaller's draws (and their cached representations) whole and
    adds draws. Each keeps its sentence's label, its id ``<sentence id>~<k>``. Drawn once on every core
    (~20 ms a sentence for 14) and kept, a draw a file of JSON lines, under the cache root, keyed by the
    draw, its size and the drawing code."""
    rows = sentences()
    if per_sentence <= 0:
        return rows
    drawn: list[list[str]] = [[] for _ in rows]
    for j, size in enumerate(_draw_sizes(per_sentence)):
        seen = [{row["text"], *earlier} for row, earlier in zip(rows, drawn, strict=True)]
        for variants, this, before in zip(drawn, _draw(rows, j, size), seen, strict=True):
            variants += [text for text in this if text not in before]
    pool = list(rows)
    for k in range(per_sentence):
        pool += [
            {"id": f"{row['id']}~{k}", "text": variants[k], "label": row["label"]}
            for row, variants in zip(rows, drawn, strict=True)
            if k < len(variants)
        ]
    return pool


def _draw_sizes(per_sentence: int) -> list[int]:
    """The sizes of a sentence's draws: DRAW_SIZE each, the last what is left."""
    return [min(DRAW_SIZE, per_sentence - start) for start in range(0, per_sentence, DRAW_SIZE)]


def _draw(rows: list[dict], j: int, size: int) -> list[list[str]]:
    """Every sentence's draw ``j`` of ``size`` perturbations, from its cache file or drawn on every core."""
    code = drawing_code(False)[:16]  # a digest of the perturb package's files, read once
    path = data.cache_root() / "sst2-perturbed" / (f"{size}-{code}.jsonl" if j == 0 else f"{size}@{j}-{code}.jsonl")
    if not path.exists():
        texts, seeds = [row["text"] for row in rows], [index + j * SEED_STRIDE for index in range(len(rows))]
        counts = [size] * len(rows)
        if len(rows) < PARALLEL_FROM:
            drawn = list(map(_perturbed, texts, seeds, counts))
        else:
            with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
                drawn = list(pool.map(_perturbed, texts, seeds, counts, chunksize=256))
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps(variants, ensure_ascii=False) + "\n" for variants in drawn)
        with replaced_atomically(path, suffix=".jsonl") as tmp:
            Path(tmp).write_text(lines, encoding="utf-8")
    drawn = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    if len(drawn) != len(rows):
        raise SystemExit(
            f"bench_scale --perturbations: {path} holds {len(drawn)} sentences, not {len(rows)}; delete it"
        )
    return drawn


def _perturbed(text: str, seed: int, count: int) -> list[str]:
    return perturbed_texts(text, count, seed=seed)


def problem(n_keep: int | None, keep: str, model: str = "distilbert", perturbations: int = 0):
    """(head, fix, keep, info): the example model's head, its suite's must_fix, n SST-2 must_keep
    (with ``perturbations``: from :func:`perturbed_pool`)."""
    suite = load_suite(SUITES[model])
    adapter = ClassifierAdapter.from_pretrained(suite.model_dir)
    head = adapter.head()
    fix_cases = [c for c in suite.cases if c.kind is Kind.MUST_FIX]
    fixed = evaluate(adapter, fix_cases, batch_size=64, cache_dir=cache_dir(), progress=False)
    fix = CaseSet(tuple(c.id for c in fix_cases), fixed.encoded.V, np.array([c.label for c in fix_cases]))

    pool = perturbed_pool(perturbations)
    every = n_keep is None
    n_keep = len(pool) if every else n_keep
    V = np.empty((n_keep, head.d_in), dtype=np.float32)
    labels = np.empty(n_keep, dtype=np.int64)
    ids: list[str] = []
    scanned = 0
    while len(ids) < n_keep and scanned < len(pool):
        block = [
            Case(id=row["id"], text=row["text"], label=row["label"], kind=Kind.MUST_KEEP)
            for row in pool[scanned : scanned + BLOCK]
        ]
        scanned += len(block)
        done = evaluate(adapter, block, batch_size=64, cache_dir=cache_dir(), progress=False)
        qualifies = done.gaps >= GAMMA_H if keep == "margin" else done.gaps > 0
        chosen = np.flatnonzero(qualifies)[: n_keep - len(ids)]
        V[len(ids) : len(ids) + chosen.size] = done.encoded.V[chosen]
        labels[len(ids) : len(ids) + chosen.size] = [block[i].label for i in chosen]
        ids += [block[i].id for i in chosen]
    if every:
        V, labels = V[: len(ids)], labels[: len(ids)]
    elif len(ids) < n_keep:
        perturbed = " and their perturbations" if perturbations else ""
        raise SystemExit(
            f"bench_scale --source sst2: only {len(ids)} of the {len(pool)} SST-2 train sentences{perturbed} "
            f"qualify as must_keep (keep={keep!r}); ask for at most that many"
        )
    info = {
        "model": str(suite.model_dir),
        "sentences_scanned": scanned,
        "must_fix_suite": str(SUITES[model]),
        "perturbations_per_sentence": perturbations,
        "pool": len(pool),
        "perturbed_keep": sum("~" in i for i in ids),
    }
    return head, fix, CaseSet(tuple(ids), V, labels), info
