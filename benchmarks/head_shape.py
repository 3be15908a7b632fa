"""Measure the shape of a repair layer: the numbers behind the synthetic ``measured`` head.

For each model folder (default: the two MiniLM example models, DistilBERT with a ReLU
pre_classifier and BERT with a tanh pooler) it reads the head warp-check repairs
(``ClassifierAdapter.head()``: W, the classifier W_c) and prints

* ``spike``: σ₁ / median σ of W, and σ₁ / σ₂ (fine-tuning leaves one large singular value);
* ``alignment r``: ‖Uᵀ(w₁ − w₀)‖ / ‖w₁ − w₀‖ for U the top-r left singular vectors of W, r = 1, 2,
  8: how much of the class direction a rank-r WARP update reaches directly;

and the same for the synthetic heads of ``benchmarks.synthetic`` (``random`` and ``measured``),
so the two can be read side by side. Two-class heads only (the alignment is of w₁ − w₀).

Run: ``python -m benchmarks.head_shape [MODEL_DIR ...] [--json]`` from the repository root. Loads
the models only (the example models are assembled into the cache as the example suites do).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from benchmarks import example_models, synthetic
from benchmarks.results import add_output_arguments, report
from warp_check.model.adapter import ClassifierAdapter

RANKS = (1, 2, 8)


def shape_of(W: np.ndarray, Wc: np.ndarray) -> dict[str, float]:
    """Spike and class alignment of a head with repair weight W (d_out × d_in) and classifier Wc (2 × d_out)."""
    if Wc.shape[0] != 2:
        raise ValueError(f"head_shape: two-class heads only, this one has {Wc.shape[0]} classes")
    singular = np.linalg.svd(W, compute_uv=False)
    row = {
        "d_out": int(W.shape[0]),
        "d_in": int(W.shape[1]),
        "spike_over_median": round(float(singular[0] / np.median(singular)), 2),
        "spike_over_second": round(float(singular[0] / singular[1]), 2),
    }
    for r in RANKS:
        row[f"alignment_r{r}"] = round(synthetic.class_alignment(W, Wc, r), 3)
    return row


def measure(model_dirs: list[Path]) -> list[dict[str, object]]:
    rows = []
    for folder in model_dirs:
        head = ClassifierAdapter.from_pretrained(folder).head()
        rows.append({"head": str(folder), **shape_of(head.W, head.Wc)})
    for shape in synthetic.HEADS:
        head = synthetic.build(0, "relu", "isotropic", shape).head
        rows.append({"head": f"synthetic {shape}", **shape_of(head.W, head.Wc)})
    return rows


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.head_shape", description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=Path, help="model folders (default: the two MiniLM example models)")
    add_output_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    folders = args.models or [example_models.minilm(name) for name in example_models.NAMES]
    rows = measure(folders)
    report("head_shape", parser, args, argv, {"heads": rows}, print_table)
    return 0


def print_table(result: dict[str, object]) -> None:
    print("| head | σ₁ / median σ | σ₁ / σ₂ | " + " | ".join(f"class direction in top {r}" for r in RANKS) + " |")
    print("|---|---|---|" + "---|" * len(RANKS))
    for row in result["heads"]:
        aligned = " | ".join(f"{row[f'alignment_r{r}']:.0%}" for r in RANKS)
        print(f"| {row['head']} | {row['spike_over_median']:.1f} | {row['spike_over_second']:.2f} | {aligned} |")


if __name__ == "__main__":
    sys.exit(main())
