"""Measure the shape of a repair layer: the numbers behind ``_synthetic``'s ``measured`` head.

For each model folder (default: the two MiniLM example models, DistilBERT with a ReLU
pre_classifier and BERT with a tanh pooler) it reads the head warp-check repairs
(``ClassifierAdapter.head()``: W, the classifier W_c) and prints

* ``spike``: σ₁ / median σ of W, and σ₁ / σ₂ (fine-tuning leaves one large singular value);
* ``alignment r``: ‖Uᵀ(w₁ − w₀)‖ / ‖w₁ − w₀‖ for U the top-r left singular vectors of W, r = 1, 2,
  8: how much of the class direction a rank-r WARP update reaches directly;

and the same for the synthetic heads of ``_synthetic`` (``random`` and ``measured``), so the
two can be read side by side. Two-class heads only (the alignment is of w₁ − w₀).

Run: ``python benchmarks/head_shape.py [MODEL_DIR ...] [--json]``. Loads the models only; writes
nothing (the example models are assembled into the cache as the example suites do).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "example_suites" / "minilm"))

import argparse  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402

RANKS = (1, 2, 8)


def shape_of(W: np.ndarray, Wc: np.ndarray) -> dict[str, float]:
    """Spike and class alignment of a head with repair weight W (d_out × d_in) and classifier Wc (2 × d_out)."""
    from _synthetic import class_alignment

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
        row[f"alignment_r{r}"] = round(class_alignment(W, Wc, r), 3)
    return row


def measure(model_dirs: list[Path]) -> list[dict[str, object]]:
    import _synthetic

    from warp_check.model.adapter import ClassifierAdapter

    rows = []
    for folder in model_dirs:
        head = ClassifierAdapter.from_pretrained(folder).head()
        rows.append({"head": str(folder), **shape_of(head.W, head.Wc)})
    for shape in _synthetic.HEADS:
        head = _synthetic.build(0, "relu", "isotropic", shape).head
        rows.append({"head": f"synthetic {shape}", **shape_of(head.W, head.Wc)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=Path, help="model folders (default: the two MiniLM example models)")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args(argv)
    folders = args.models
    if not folders:
        import models  # example_suites/minilm/models.py

        folders = [models.assemble(name) for name in ("distilbert", "bert")]
    rows = measure(folders)
    if args.json:
        print(json.dumps(rows))
        return 0
    print("| head | σ₁ / median σ | σ₁ / σ₂ | " + " | ".join(f"class direction in top {r}" for r in RANKS) + " |")
    print("|---|---|---|" + "---|" * len(RANKS))
    for row in rows:
        aligned = " | ".join(f"{row[f'alignment_r{r}']:.0%}" for r in RANKS)
        print(f"| {row['head']} | {row['spike_over_median']:.1f} | {row['spike_over_second']:.2f} | {aligned} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
