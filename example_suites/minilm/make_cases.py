"""Write the example suites' case files from the hand-written sentences and the assembled models.

    python example_suites/minilm/make_cases.py    # ~2 min on 2 cores; rewrites reviews-*/*.jsonl

For each example model (``models.py``):

* **must_keep**: the sentences of ``sentences.jsonl`` (written for this project; the id prefix
  names the capability: plain, negation, intensifier, contrast, fact-opinion, typo) that the model
  gets right, by a gap of at least ``--margin`` so that the plain run gives the same verdict on
  every machine (BLAS rounding moves logits by ~1e-6, not 0.05).
* **must_fix**: adversarial variants of those sentences in the style of DeepWordBug (Gao et al.,
  2018): words ranked by leave-one-out importance (how much the gap to the true label drops when
  the word is deleted), then, most important first, each of up to ``--max-words`` words gets the
  one-character edit (swap adjacent letters, delete, insert or substitute a letter) that lowers the
  gap most; a variant is kept only when the model really gets it wrong (gap <= -margin).
* **aux**: ``aux_sentences.jsonl`` as is (disjoint from the rest; only GSN-FT trains on them).

Run ``train.py`` first if ``weights/`` is missing. The output is deterministic for given weights
(fixed seed, no sampling beyond the seeded letter choices).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import string
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # a script beside models.py, not an installed package

import models  # noqa: E402

SUITES = {name: HERE.parent / f"reviews-{name}" for name in models.NAMES}
SOURCE = "deepwordbug-style (minilm/make_cases.py)"
WORD = re.compile(r"[A-Za-z]+")
# Words DeepWordBug-style attacks leave alone (TextAttack's recipe has a stop-word constraint too).
STOPWORDS = frozenset(
    "a an and are as at be by for from had has have he her his i in is it its me my of on or our she so that the "
    "their them they this to us was we were with you your".split()
)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    tmp.replace(path)


class Scorer:
    """Gap to the true label (true logit minus the other) for many texts, batched."""

    def __init__(self, adapter, batch_size: int = 64) -> None:
        self.adapter, self.batch_size, self.queries = adapter, batch_size, 0

    def gaps(self, texts: list[str], label: int) -> list[float]:
        out: list[float] = []
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            _, logits = self.adapter.forward_batch(self.adapter.tokenize(chunk))
            out += (logits[:, label] - logits[:, 1 - label]).tolist()
        self.queries += len(texts)
        return out


def edits(word: str, rng: random.Random) -> list[str]:
    """One-character edits of ``word``: adjacent swaps, deletions, insertions and substitutions."""
    letters = string.ascii_lowercase
    out = set()
    for i in range(len(word) - 1):
        if word[i] != word[i + 1]:
            out.add(word[:i] + word[i + 1] + word[i] + word[i + 2 :])
    for i in range(len(word)):
        out.add(word[:i] + word[i + 1 :])
        out.add(word[:i] + rng.choice(letters) + word[i + 1 :])
    for i in range(len(word) + 1):
        out.add(word[:i] + rng.choice(letters) + word[i:])
    out.discard(word)
    return sorted(w for w in out if w)


def attack(text: str, label: int, scorer: Scorer, rng: random.Random, max_words: int, margin: float):
    """The DeepWordBug-style variant of ``text`` the model gets wrong, or None."""
    spans = [m.span() for m in WORD.finditer(text) if len(m.group()) >= 3 and m.group().lower() not in STOPWORDS]
    if not spans:
        return None
    without = [re.sub(r"\s+", " ", text[:a] + text[b:]).strip() for a, b in spans]
    base, *dropped = scorer.gaps([text, *without], label)
    order = sorted(range(len(spans)), key=lambda k: (-(base - dropped[k]), k))  # most important first
    current = text
    shift = [0] * len(spans)  # edits change lengths: keep every span's offset right
    for k in order[:max_words]:
        a, b = spans[k][0] + shift[k], spans[k][1] + shift[k]
        word = current[a:b]
        variants = [current[:a] + w + current[b:] for w in edits(word, rng)]
        gaps = scorer.gaps(variants, label)
        best = min(range(len(variants)), key=lambda j: (gaps[j], j))
        delta = len(variants[best]) - len(current)
        current = variants[best]
        for j, (start, _) in enumerate(spans):
            if start > spans[k][0]:
                shift[j] += delta
        if gaps[best] <= -margin:
            return current, gaps[best]
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", choices=models.NAMES, default=list(models.NAMES))
    parser.add_argument("--margin", type=float, default=0.05, help="|gap| a kept case must clear (default 0.05)")
    parser.add_argument("--max-words", type=int, default=3, help="words an attack may edit (default 3)")
    parser.add_argument("--max-fix", type=int, default=40, help="must_fix cases per model at most (default 40)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    import torch

    from warp_check import ClassifierAdapter

    torch.set_num_threads(args.threads)
    pool = read_jsonl(HERE / "sentences.jsonl")
    aux = read_jsonl(HERE / "aux_sentences.jsonl")
    for name in args.models:
        adapter = ClassifierAdapter.from_pretrained(models.assemble(name))
        scorer = Scorer(adapter)
        labels = [models.LABELS.index(row["label"]) for row in pool]
        gaps = [scorer.gaps([row["text"]], y)[0] for row, y in zip(pool, labels, strict=True)]
        keep = [row for row, gap in zip(pool, gaps, strict=True) if gap >= args.margin]
        wrong = [row["id"] for row, gap in zip(pool, gaps, strict=True) if gap < 0]
        rng = random.Random(args.seed)
        fixes = []
        for row in keep:
            found = attack(row["text"], models.LABELS.index(row["label"]), scorer, rng, args.max_words, args.margin)
            if found:
                fixes.append((row, *found))
        # Spread the cap over capabilities (id prefix) rather than taking the first ones.
        by_capability: dict[str, list] = {}
        for item in fixes:
            by_capability.setdefault(item[0]["id"].rsplit("-", 1)[0], []).append(item)
        chosen = []
        while len(chosen) < min(args.max_fix, len(fixes)):
            for items in by_capability.values():
                if items and len(chosen) < args.max_fix:
                    chosen.append(items.pop(0))
        chosen.sort(key=lambda item: pool.index(item[0]))
        suite = SUITES[name]
        suite.mkdir(exist_ok=True)
        write_jsonl(suite / "must_keep.jsonl", [{**row, "source": "handwritten"} for row in keep])
        write_jsonl(
            suite / "must_fix.jsonl",
            [
                {"id": f"dwb-{row['id']}", "text": text, "label": row["label"], "source": SOURCE, "original": row["id"]}
                for row, text, _ in chosen
            ],
        )
        write_jsonl(suite / "aux.jsonl", [{**row, "source": "handwritten"} for row in aux])
        print(
            f"{name}: must_keep {len(keep)}/{len(pool)} (wrong: {len(wrong)}, right by < {args.margin}: "
            f"{len(pool) - len(keep) - len(wrong)}), attacks succeeded {len(fixes)}/{len(keep)}, "
            f"must_fix {len(chosen)}, aux {len(aux)}, model queries {scorer.queries}",
            flush=True,
        )
        print(f"  wrong: {' '.join(wrong)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
