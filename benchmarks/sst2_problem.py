"""The real large repair problem of ``bench_scale --source sst2``: no synthetic representation.

* head: the MiniLM example model's, ``model="distilbert"`` (pre_classifier 384×384 → ReLU →
  classifier) or ``model="bert"`` (pooler 384×384 → tanh → classifier);
* must_fix: the DeepWordBug cases of its example suite (``example_suites/reviews-<model>``, real
  attacks: 167 and 170);
* must_keep: SST-2 train sentences (``../shared/data/sst2/train.tsv``, 67,349 of them, read by
  ``data.read_tsv``) in file order, those the model gets right (``keep="natural"``) or
  right by γ_h = 0.3 or more (``keep="margin"``), until n are found (``n = None``: all of them).

Representations are encoded once into ``~/.cache/warp-check/benchmarks/sst2-train-cache`` (the
representation cache warp-check uses for suites, keyed by model and text) and read from there
afterwards; encoding all of SST-2 train takes ~10 minutes on one core. Needs the data folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks import REPO, data
from warp_check.cases import Case, Kind
from warp_check.model.adapter import ClassifierAdapter
from warp_check.repair.records import CaseSet
from warp_check.runs.evaluation import evaluate
from warp_check.suite.loader import load_suite

SUITES = {model: REPO / "example_suites" / f"reviews-{model}" for model in ("distilbert", "bert")}
GAMMA_H = 0.3
BLOCK = 4096  # sentences encoded (or read from the cache) at a time


def cache_dir() -> Path:
    return data.cache_root() / "sst2-train-cache"


def sentences() -> list[dict]:
    path = data.DATA / "sst2" / "train.tsv"
    if not path.exists():
        raise SystemExit(f"bench_scale --source sst2: needs the SST-2 data at {path}")
    return data.read_tsv("sst2", "train")


def problem(n_keep: int | None, keep: str, model: str = "distilbert"):
    """(head, fix, keep, info): the example model's head, its suite's must_fix, n SST-2 must_keep."""
    suite = load_suite(SUITES[model])
    adapter = ClassifierAdapter.from_pretrained(suite.model_dir)
    head = adapter.head()
    fix_cases = [c for c in suite.cases if c.kind is Kind.MUST_FIX]
    fixed = evaluate(adapter, fix_cases, batch_size=64, cache_dir=cache_dir(), progress=False)
    fix = CaseSet(tuple(c.id for c in fix_cases), fixed.encoded.V, np.array([c.label for c in fix_cases]))

    pool = sentences()
    every = n_keep is None
    n_keep = len(pool) if every else n_keep
    V = np.empty((n_keep, head.d_in))
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
        raise SystemExit(
            f"bench_scale --source sst2: only {len(ids)} of the {len(pool)} SST-2 train sentences "
            f"qualify as must_keep (keep={keep!r}); ask for at most that many"
        )
    info = {"model": str(suite.model_dir), "sentences_scanned": scanned, "must_fix_suite": str(SUITES[model])}
    return head, fix, CaseSet(tuple(ids), V, labels), info
