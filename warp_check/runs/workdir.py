"""``<suite>/.warp``: where a suite's runs keep their cache, repaired model and shared results."""

from __future__ import annotations

from pathlib import Path

from warp_check.suite.loader import Suite

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
