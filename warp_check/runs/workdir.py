"""``<suite>/.warp``: where a suite's runs keep their cache, repaired model and shared results."""

from __future__ import annotations

import os
from pathlib import Path

from warp_check.suite.loader import SUITE_FILE, Suite

WORKDIR = ".warp"  # beside warp.toml: cache/, repaired/, runs/


def workdir(suite: Suite) -> Path:
    """``<suite>/.warp``; created with a .gitignore (like .pytest_cache) when first used."""
    folder = suite.root / WORKDIR
    folder.mkdir(exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# created by warp-check: caches and repaired models\n*\n", encoding="utf-8")
    return folder


def default_cache_dir(suite: Suite) -> Path:
    return suite.root / WORKDIR / "cache"


def default_out_dir(suite: Suite) -> Path:
    return suite.root / WORKDIR / "repaired"


def user_cache_dir() -> Path:
    """The representation cache of runs that belong to no suite folder (a model verified alone):
    ``$XDG_CACHE_HOME/warp-check/cache``, else ``~/.cache/warp-check/cache``."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "warp-check" / "cache"


def model_cache_dir(model_dir: str | Path, suite: Suite | None = None) -> Path:
    """Where a model folder's representations are cached by default (as a check caches them): the
    suite's cache when a suite is given or the folder is one of its ``.warp`` (a repair's default
    output), else :func:`user_cache_dir`. The cache is keyed by the model's upstream, so a repaired
    model reads what the repair encoded."""
    if suite is not None:
        return default_cache_dir(suite)
    folder = Path(model_dir).resolve()
    if folder.parent.name == WORKDIR and (folder.parent.parent / SUITE_FILE).is_file():
        return folder.parent / "cache"
    return user_cache_dir()
