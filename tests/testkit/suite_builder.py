"""Build warp-check suites on disk for the plugin, CLI and report tests.

Which cases a tiny model gets right is measured here with plain transformers (not with
warp_check), so the tests compare the plugin's verdicts against an independent answer.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from testkit.tiny_models import LABELS, synthetic_cases


def margins(model_dir: Path, texts: Sequence[str], labels: Sequence[int]) -> np.ndarray:
    """logit(label) − max other logit per text, from a fresh transformers model."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    enc = tokenizer(list(texts), padding=True, truncation=True, return_tensors="pt")
    accepted = inspect.signature(model.forward).parameters
    enc = {k: v for k, v in enc.items() if k in accepted}
    with torch.inference_mode():
        logits = model(**enc).logits.double().numpy()
    idx = np.arange(len(texts))
    own = logits[idx, list(labels)]
    others = logits.copy()
    others[idx, list(labels)] = -np.inf
    return own - others.max(axis=1)


def split_cases(model_dir: Path, n: int, seed: int, *, unseen_rate: float = 0.5) -> tuple[list[dict], list[dict]]:
    """(wrong, right) synthetic binary cases as JSONL records, each with its measured margin."""
    names = LABELS["binary"]
    cases = synthetic_cases("binary", n, seed=seed, unseen_rate=unseen_rate)
    gaps = margins(model_dir, [c["text"] for c in cases], [c["label"] for c in cases])
    wrong, right = [], []
    for i, (case, gap) in enumerate(zip(cases, gaps, strict=True)):
        record = {"id": f"s{seed}-{i:03d}", "text": case["text"], "label": names[case["label"]], "margin": float(gap)}
        (right if gap > 0 else wrong).append(record)
    return wrong, right


def jsonl(records: Iterable[dict]) -> str:
    lines = []
    for record in records:
        lines.append(json.dumps({k: v for k, v in record.items() if k != "margin"}))
    return "\n".join(lines) + "\n"


def write_suite(
    folder: Path,
    *,
    model: Path | str,
    fix: Sequence[dict] = (),
    keep: Sequence[dict] = (),
    aux: Sequence[dict] = (),
    model_lines: str = "",
    extra: str = "",
) -> Path:
    """A suite folder with warp.toml and fix/keep/aux JSONL files; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    toml = [f"[model]\npath = {json.dumps(str(model))}\n{model_lines}"]
    for name, records in (("fix", fix), ("keep", keep), ("aux", aux)):
        if records:
            (folder / f"{name}.jsonl").write_text(jsonl(records), encoding="utf-8")
            kind = {"fix": "must_fix", "keep": "must_keep", "aux": "aux"}[name]
            toml.append(f'[[cases]]\npath = "{name}.jsonl"\nkind = "{kind}"\n')
    toml.append(extra)
    (folder / "warp.toml").write_text("\n".join(toml), encoding="utf-8")
    return folder


def write_kind_suite(folder: Path, model: Path, fix: list[dict], keep: list[dict], *, model_table: str = "") -> Path:
    """A suite folder: warp.toml naming ``model`` (and ``model_table``'s lines in its [model] table), the
    records as must_fix.jsonl and must_keep.jsonl, one JSON object a line as given."""
    folder.mkdir(parents=True, exist_ok=True)
    toml = f"[model]\npath = {json.dumps(str(model))}\n{model_table}"
    for kind, records in (("must_fix", fix), ("must_keep", keep)):
        (folder / f"{kind}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        toml += f'[[cases]]\npath = "{kind}.jsonl"\nkind = "{kind}"\n'
    (folder / "warp.toml").write_text(toml, encoding="utf-8")
    return folder


def tree_digest(folder: Path, *, skip: str | None = None) -> str:
    """SHA-256 over every file (name and bytes) under ``folder`` (but under its subfolder ``skip``)."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if skip is not None and path.relative_to(folder).parts[0] == skip:
            continue
        h.update(str(path.relative_to(folder)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def exit_code(argv: list[str]) -> int:
    """``warp-check`` main()'s return value, or argparse's exit status for a usage error."""
    from warp_check.cli import main

    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


def record_encoder_batches(monkeypatch) -> list[tuple[int, int, str]]:
    """From now on, every encoder batch appends (cases, torch threads, device) to the list returned."""
    import torch

    from warp_check.model.adapter import ClassifierAdapter

    seen: list[tuple[int, int, str]] = []
    real = ClassifierAdapter.forward_batch

    def forward_batch(self, features):
        seen.append((len(features), torch.get_num_threads(), self.device))
        return real(self, features)

    # internal: the threads and device an encoder batch runs on show only while it runs
    monkeypatch.setattr(ClassifierAdapter, "forward_batch", forward_batch)
    return seen
