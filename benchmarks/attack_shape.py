"""Measure how a suite's must_fix cases sit among its must_keep cases, in the repair layer's input v.

For every must_fix case whose JSONL record names the case it was derived from (``original``,
as ``warp-check attack`` writes it), δ = v(attacked) − v(original). Printed per suite:

* ``displacement``: RMS ‖δ‖ over the RMS distance of the must_keep cases from their mean: how
  far an attack moves a sentence, against how far apart clean sentences are;
* ``shared``: ‖mean δ‖² / mean ‖δ‖², the part of the displacement all attacks have in common,
  and the mean cosine between two cases' δ;
* ``auc``: how well the mean-δ direction alone tells must_fix from must_keep cases (0.5: not
  at all, 1: perfectly).

Featureless must_fix cases (no shared part, as ``benchmarks.synthetic`` draws them) have shared ≈
1/pairs (the mean of that many random δ) and auc near 0.5 (a little above: the direction is fitted
on the same cases). Run: ``python -m benchmarks.attack_shape [SUITE ...] [--json]`` from the
repository root (default: the two example suites). Reads the suites and encodes their cases.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from benchmarks.example_models import EXAMPLE_SUITES
from benchmarks.results import add_output_arguments, report
from warp_check.cases import Kind
from warp_check.model.adapter import ClassifierAdapter
from warp_check.pipeline.evaluation import evaluate
from warp_check.suite.loader import load_suite

SUITES = (EXAMPLE_SUITES / "reviews-distilbert", EXAMPLE_SUITES / "reviews-bert")


def originals(suite) -> dict[str, str]:
    """must_fix id → the id its JSONL record names as ``original`` (each file read once)."""
    lines: dict[Path, list[str]] = {}
    found = {}
    for case in suite.cases:
        if case.kind is not Kind.MUST_FIX:
            continue
        where = suite.locations[case.id]
        if where.path not in lines:
            lines[where.path] = where.path.read_text(encoding="utf-8").splitlines()
        record = json.loads(lines[where.path][where.line - 1])
        if isinstance(record.get("original"), str):
            found[case.id] = record["original"]
    return found


def shape_of(fix: np.ndarray, original: np.ndarray, keep: np.ndarray) -> dict[str, float]:
    """The three measures above from paired (attacked, original) rows and the must_keep rows."""
    delta = fix - original
    spread = float(np.sqrt(np.mean(np.sum((keep - keep.mean(axis=0)) ** 2, axis=1))))
    energy = float(np.mean(np.sum(delta * delta, axis=1)))
    mean = delta.mean(axis=0)
    unit = delta / np.linalg.norm(delta, axis=1, keepdims=True)
    cosines = unit @ unit.T
    off_diagonal = cosines[~np.eye(len(delta), dtype=bool)]
    direction = mean / np.linalg.norm(mean)
    on_fix, on_keep = fix @ direction, keep @ direction
    return {
        "pairs": len(delta),
        "displacement": round(float(np.sqrt(energy)) / spread, 3),
        "shared": round(float(mean @ mean) / energy, 3),
        "mean_cosine": round(float(off_diagonal.mean()), 3) if off_diagonal.size else float("nan"),
        "auc": round(float(np.mean(on_fix[:, None] > on_keep[None, :])), 3),
    }


def measure(folder: Path) -> dict[str, object]:
    suite = load_suite(folder)
    adapter = ClassifierAdapter.from_pretrained(suite.model_dir)
    V = evaluate(adapter, suite.cases, batch_size=suite.model.batch_size, progress=False).encoded.V
    V = V.astype(np.float64)
    row = {c.id: i for i, c in enumerate(suite.cases)}
    pairs = [(row[f], row[o]) for f, o in originals(suite).items() if o in row]
    if len(pairs) < 2:
        raise SystemExit(f"attack_shape: {folder}: fewer than two must_fix cases name an original case in the suite")
    keep = V[[i for i, c in enumerate(suite.cases) if c.kind is Kind.MUST_KEEP]]
    fix_rows, original_rows = (list(x) for x in zip(*pairs, strict=True))
    return {"suite": str(folder), "d_in": int(V.shape[1]), **shape_of(V[fix_rows], V[original_rows], keep)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.attack_shape", description=__doc__.splitlines()[0])
    parser.add_argument("suites", nargs="*", type=Path, help="suite folders (default: the two example suites)")
    add_output_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    rows = [measure(folder) for folder in (args.suites or SUITES)]
    report("attack_shape", parser, args, argv, {"suites": rows}, print_table)
    return 0


def print_table(result: dict[str, object]) -> None:
    print("| suite | pairs | ‖δ‖ / spread of must_keep | shared part of δ | mean cos(δᵢ, δⱼ) | AUC along mean δ |")
    print("|---|---|---|---|---|---|")
    for r in result["suites"]:
        print(
            f"| {r['suite']} | {r['pairs']} | {r['displacement']:.2f} | {r['shared']:.1%} | "
            f"{r['mean_cosine']:.3f} | {r['auc']:.2f} |"
        )


if __name__ == "__main__":
    sys.exit(main())
