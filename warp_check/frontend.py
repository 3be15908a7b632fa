"""What the two front ends, the pytest plugin (``pytest_warp``) and the ``warp-check`` command
(``warp_check.cli``, ``warp_check.commands``), need beside the public API: the options' declarations
and how a value is read, the run modes' table, the checks that refuse a run before its work, the
defaults and choices their arguments show, and output helpers. Not public API: tests/test_layers.py
lets the front ends alone import it.

One table, ``_FRONTEND`` (name -> its defining module), read on each access (PEP 562,
:mod:`warp_check.lazy`): importing this costs only the standard library (``pytest --help`` reads it),
and a table replaced in its module (a test adding an option or a run mode) is what the front ends see.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports are for type checkers; __all__ is made from the table)
from __future__ import annotations

from typing import TYPE_CHECKING

from warp_check.lazy import exports

if TYPE_CHECKING:  # pragma: no cover  (what type checkers see; _FRONTEND says the same at run time)
    from warp_check.budget.tune import DEFAULT_FOLDS as TUNE_FOLDS
    from warp_check.budget.tune import check_tune
    from warp_check.cache.warm import WarmEntry
    from warp_check.data_files import ADVGLUE_FIELDS
    from warp_check.data_files import FORMATS as IMPORT_FORMATS
    from warp_check.data_files import format_of as import_format_of
    from warp_check.errors import from_interrupt
    from warp_check.extras.attacks import STATUS_MEANING as ATTACK_STATUS_MEANING
    from warp_check.extras.attacks import STATUSES as ATTACK_STATUSES
    from warp_check.extras.attacks import check_out as check_attack_out
    from warp_check.extras.attacks import check_ready as check_recipe_ready
    from warp_check.extras.attacks import default_out as must_fix_file
    from warp_check.extras.compare import METHODS as COMPARE_METHODS
    from warp_check.extras.compare import check_out_path as check_comparison_out
    from warp_check.interrupts import ctrl_c_never_lost
    from warp_check.model.hub_cache import HUB_ID
    from warp_check.modes import MODES, RunJob, RunMode, mode_named
    from warp_check.options import (
        OPTION,
        OPTIONS,
        BadValue,
        Option,
        Problem,
        ValueKind,
        check_repair_overrides,
        check_traffic_overrides,
        flag_error,
        overriding,
        setting_flags,
    )
    from warp_check.progress import write_text
    from warp_check.reports.folder import check_report_destination
    from warp_check.runs.check import warm_entry
    from warp_check.runs.notices import collected as collected_notices
    from warp_check.runs.result import tally
    from warp_check.runs.verdict import run_verdict
    from warp_check.runs.workdir import model_cache_dir
    from warp_check.sources.importer import case_file_of
    from warp_check.suite.loader import SUITE_FILE
    from warp_check.version import DOCS_URL

_FRONTEND: dict[str, str] = {
    "WarmEntry": "warp_check.cache.warm",
    "from_interrupt": "warp_check.errors",
    "ctrl_c_never_lost": "warp_check.interrupts",
    "ATTACK_STATUS_MEANING": "warp_check.extras.attacks:STATUS_MEANING",
    "ATTACK_STATUSES": "warp_check.extras.attacks:STATUSES",
    "check_attack_out": "warp_check.extras.attacks:check_out",
    "check_recipe_ready": "warp_check.extras.attacks:check_ready",
    "must_fix_file": "warp_check.extras.attacks:default_out",
    "check_comparison_out": "warp_check.extras.compare:check_out_path",
    "COMPARE_METHODS": "warp_check.extras.compare:METHODS",
    "ADVGLUE_FIELDS": "warp_check.data_files",
    "case_file_of": "warp_check.sources.importer",
    "import_format_of": "warp_check.data_files:format_of",
    "IMPORT_FORMATS": "warp_check.data_files:FORMATS",
    "HUB_ID": "warp_check.model.hub_cache",
    "mode_named": "warp_check.modes",
    "MODES": "warp_check.modes",
    "RunJob": "warp_check.modes",
    "RunMode": "warp_check.modes",
    "BadValue": "warp_check.options",
    "check_repair_overrides": "warp_check.options",
    "check_traffic_overrides": "warp_check.options",
    "flag_error": "warp_check.options",
    "run_verdict": "warp_check.runs.verdict",
    "OPTION": "warp_check.options",
    "Option": "warp_check.options",
    "OPTIONS": "warp_check.options",
    "overriding": "warp_check.options",
    "Problem": "warp_check.options",
    "setting_flags": "warp_check.options",
    "ValueKind": "warp_check.options",
    "write_text": "warp_check.progress",
    "warm_entry": "warp_check.runs.check",
    "collected_notices": "warp_check.runs.notices:collected",
    "check_report_destination": "warp_check.reports.folder",
    "tally": "warp_check.runs.result",
    "check_tune": "warp_check.budget.tune",
    "TUNE_FOLDS": "warp_check.budget.tune:DEFAULT_FOLDS",
    "model_cache_dir": "warp_check.runs.workdir",
    "SUITE_FILE": "warp_check.suite.loader",
    "DOCS_URL": "warp_check.version",
}

__getattr__, __dir__ = exports(_FRONTEND, globals(), keep=False)
__all__ = list(_FRONTEND)
