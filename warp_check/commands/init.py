"""``warp-check init``: a suite from nothing, for a model given by its folder or its Hub id."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from warp_check import init_suite
from warp_check.commands.arguments import EXIT_OK, Use

# The declared options init takes (warp_check.options); it has no arguments of its own.
INIT_OPTIONS = (
    Use(
        name="model",
        required=True,
        help="the model the suite tests: a folder (written relative to the suite), or a Hub id org/name read from "
        "the local Hugging Face cache (pinned to the commit it holds)",
    ),
    Use(name="revision", help="revision of a Hub id (default main): the commit it names is written"),
)


def init_command(args: argparse.Namespace) -> int:
    made = init_suite(args.suite, args.model, revision=args.revision)
    suite, hub = made.suite, made.model.hub
    model = f"{hub.id} at commit {hub.commit}" if hub is not None else _shown(suite.model_dir)
    labels = ", ".join(f"{name} ({index})" for name, index in sorted(suite.labels.items(), key=lambda kv: kv[1]))
    print(f"suite '{suite.name}' written to {_shown(suite.root)}: {suite.toml.name} (model {model})")
    print(f"  labels: {labels or 'none named: the case files give class ids'}")
    if made.generic_labels:
        print("    (transformers' made-up names: the model names no classes; rename them in [labels] as you like)")
    print(f"  empty case files: {', '.join(path.name for path in made.case_files)}")
    root = _shown(suite.root)
    print(f"  next: warp-check import {root} FILE --split-by-model  (labelled rows: those the model gets right")
    print(f"        become must_keep cases, those it gets wrong must_fix cases), then pytest {root}")
    return EXIT_OK


def _shown(path: Path) -> str:
    """``path`` as the user would type it from here: relative where it is below the working folder."""
    relative = os.path.relpath(path)
    return path.as_posix() if relative.startswith("..") else Path(relative).as_posix()
