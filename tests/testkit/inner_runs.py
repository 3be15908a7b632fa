"""What pytester's in-process runs import, imported once by a test module before its first run.

pytester drops the modules an inner run imported, so without this every in-process run would import
transformers' model code again, and a later in-process repair would meet two copies of the same enums.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from testkit.suite_builder import write_suite

INNER_RUN_MODULES = (
    "pytest_warp.summary",
    "warp_check.qp.osqp_backend",
    "warp_check.reports.folder",
    "warp_check.runs.check",
    "warp_check.runs.repair",
)


def warm_inner_runs(model_dir: Path | None = None) -> None:
    """Import the modules inner runs import and, given a model folder, load its adapter once (the
    tokenizer and model classes transformers imports on first use)."""
    for name in INNER_RUN_MODULES:
        importlib.import_module(name)
    if model_dir is not None:
        from warp_check.releases.load import load_adapter
        from warp_check.suite.loader import load_suite

        folder = write_suite(model_dir.parent / "warm-suite", model=model_dir, keep=[{"text": "a", "label": 0}])
        load_adapter(load_suite(folder))
