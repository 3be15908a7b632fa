"""A Hugging Face cache laid out as huggingface_hub writes it, offline: the Hub tests' model source."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO_ID = "acme/tiny-sentiment"
HUB_TOML = f'[model]\nid = "{REPO_ID}"\n{{revision}}\n\n[[cases]]\npath = "keep.jsonl"\nkind = "must_keep"\n'


def lay_out_hub_cache(cache: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``models--acme--tiny-sentiment`` in ``cache`` (refs/main → snapshots/COMMIT, a copy of
    ``model_dir``), with the environment pointing huggingface_hub at it, offline. Returns its folder."""
    repo = cache / "models--acme--tiny-sentiment"
    shutil.copytree(model_dir, repo / "snapshots" / COMMIT)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return repo


def hub_suite(folder: Path, revision_lines: str) -> Path:
    """A one-case suite whose [model] is the cache's Hub model at ``revision_lines``."""
    folder.mkdir()
    (folder / "warp.toml").write_text(HUB_TOML.format(revision=revision_lines), encoding="utf-8")
    (folder / "keep.jsonl").write_text('{"id": "a", "text": "the food was good", "label": "positive"}\n')
    return folder
