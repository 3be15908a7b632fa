"""Write the example suites' must_keep and aux files from the hand-written sentences and the models.

    python example_suites/minilm/make_cases.py    # ~1 min on 2 cores; rewrites reviews-*/must_keep.jsonl, aux.jsonl

For each example model (``models.py``):

* **must_keep**: the sentences of ``sentences.jsonl`` (written for this project; the id prefix
  names the capability: plain, negation, intensifier, contrast, fact-opinion, typo) that the model
  gets right, by a gap of at least ``--margin`` so that the plain run gives the same verdict on
  every machine (BLAS rounding moves logits by ~1e-6, not 0.05).
* **aux**: ``aux_sentences.jsonl`` as is (disjoint from the rest; only GSN-FT trains on them).

must_fix comes from a real attack on the must_keep cases, TextAttack's DeepWordBug recipe, through
warp-check's own command (needs ``pip install -e ".[attack]"`` and the NLTK data, see the README):

    : > example_suites/reviews-distilbert/must_fix.jsonl
    warp-check attack example_suites/reviews-distilbert --recipe DeepWordBugGao2018 --seed 0 --threads 1

Run ``train.py`` first if ``weights/`` is missing. The output is deterministic for given weights.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # a script beside models.py, not an installed package

import models  # noqa: E402

SUITES = {name: HERE.parent / f"reviews-{name}" for name in models.NAMES}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    tmp.replace(path)


def gaps_to_label(adapter, texts: list[str], labels: list[int], batch_size: int = 64) -> list[float]:
    """Logit of the true label minus the other one, batched."""
    out: list[float] = []
    for start in range(0, len(texts), batch_size):
        _, logits = adapter.forward_batch(adapter.tokenize(texts[start : start + batch_size]))
        rows = range(len(logits))
        out += [float(logits[i, y] - logits[i, 1 - y]) for i, y in zip(rows, labels[start:], strict=False)]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", choices=models.NAMES, default=list(models.NAMES))
    parser.add_argument("--margin", type=float, default=0.05, help="|gap| a kept case must clear (default 0.05)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    import torch

    from warp_check import ClassifierAdapter

    torch.set_num_threads(args.threads)
    pool = read_jsonl(HERE / "sentences.jsonl")
    aux = read_jsonl(HERE / "aux_sentences.jsonl")
    for name in args.models:
        adapter = ClassifierAdapter.from_pretrained(models.assemble(name))
        gaps = gaps_to_label(adapter, [row["text"] for row in pool], [models.LABELS.index(r["label"]) for r in pool])
        keep = [row for row, gap in zip(pool, gaps, strict=True) if gap >= args.margin]
        wrong = [row["id"] for row, gap in zip(pool, gaps, strict=True) if gap < 0]
        suite = SUITES[name]
        suite.mkdir(exist_ok=True)
        write_jsonl(suite / "must_keep.jsonl", [{**row, "source": "handwritten"} for row in keep])
        write_jsonl(suite / "aux.jsonl", [{**row, "source": "handwritten"} for row in aux])
        print(
            f"{name}: must_keep {len(keep)}/{len(pool)} (wrong: {len(wrong)}, right by < {args.margin}: "
            f"{len(pool) - len(keep) - len(wrong)}), aux {len(aux)}",
            flush=True,
        )
        print(f"  wrong: {' '.join(wrong)}", flush=True)
        print(
            f"  must_fix: : > {suite}/must_fix.jsonl && warp-check attack {suite} --recipe DeepWordBugGao2018 "
            "--seed 0 --threads 1",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
