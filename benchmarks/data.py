"""The benchmarks' real data: SST-2 and RTE as rows, and the files a suite is made of.

The data lives outside the repository, in ``../shared/data/{sst2,rte}/{train,dev}.tsv`` beside
the checkout (GLUE's TSVs; never copied in), or in ``$WARP_CHECK_DATA/{sst2,rte}`` where that is
set (a worktree elsewhere). ``read_tsv`` turns a split into rows ``{"id",
"text", ["text_pair"], "label"}`` with integer labels (index into ``LABELS[task]``);
``write_jsonl`` and ``write_suite`` turn rows into a suite folder warp-check can load.
``cache_root`` is where the benchmarks keep what they build once (fine-tuned models, encoded
representations).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from benchmarks import REPO

DATA = Path(os.environ.get("WARP_CHECK_DATA") or REPO.parent / "shared" / "data")
LABELS = {"sst2": ["negative", "positive"], "rte": ["entailment", "not_entailment"]}


def read_tsv(task: str, split: str) -> list[dict]:
    """The rows of ``DATA/<task>/<split>.tsv``; ids are ``<split>-<row>`` (SST-2) or ``<split>-<idx>`` (RTE)."""
    path = DATA / task / f"{split}.tsv"
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    out = []
    for i, row in enumerate(rows):
        if task == "sst2":
            out.append({"id": f"{split}-{i}", "text": row["sentence"].strip(), "label": int(row["label"])})
        else:
            out.append(
                {
                    "id": f"{split}-{row['idx']}",
                    "text": row["sentence1"].strip(),
                    "text_pair": row["sentence2"].strip(),
                    "label": int(row["label"]),
                }
            )
    return out


def write_jsonl(path: Path, rows: list[dict], task: str) -> Path:
    """Rows as a suite's JSONL cases (labels by name)."""
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            record = {k: v for k, v in row.items() if k in ("id", "text", "text_pair", "source", "original")}
            record["label"] = LABELS[task][row["label"]] if isinstance(row["label"], int) else row["label"]
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def read_jsonl(path: Path) -> list[dict]:
    """The records of a JSONL file; none if it does not exist."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_suite(folder: Path, model_dir: Path, task: str, files: dict[str, str]) -> Path:
    """A warp.toml in ``folder`` for ``model_dir`` with the case files ``{name: kind}``."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"labels = {json.dumps(LABELS[task])}\n", f"[model]\npath = {json.dumps(str(model_dir))}\n"]
    for name, kind in files.items():
        lines.append(f'[[cases]]\npath = "{name}"\nkind = "{kind}"\n')
    (folder / "warp.toml").write_text("\n".join(lines), encoding="utf-8")
    return folder


def cache_root() -> Path:
    """Where the benchmarks keep what they build once: ``$XDG_CACHE_HOME/warp-check/benchmarks``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "warp-check" / "benchmarks"
