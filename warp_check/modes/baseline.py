"""Baseline mode: regression-only gating. A case fails only where the baseline model (the last
release) got it right and the model under test does not; a case both get wrong is an expected
failure. Its results are checks (``mode: check`` in JSON), each verdict with both models' answers."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_check.errors import SettingsError
from warp_check.modes.base import RunJob
from warp_check.modes.check import CheckMode, check_job
from warp_check.options import OPTION, Option
from warp_check.releases.baseline_folder import suite_on_baseline
from warp_check.runs.check import check_suite
from warp_check.runs.regressions import against_baseline
from warp_check.runs.result import RunResult
from warp_check.suite.loader import Suite


@dataclass(frozen=True, kw_only=True)
class BaselineMode(CheckMode):
    name: str = "baseline"
    selected_by: Option | None = OPTION["baseline"]
    command: str | None = None  # `warp-check diff OLD NEW SUITE` runs it
    command_help: str = ""
    cli_options: tuple[str, ...] = ()
    junit_properties: tuple[str, ...] = (
        "kind", "label", "predicted", "gap", "wrong", "baseline_predicted", "baseline_gap",
    )  # fmt: skip
    baseline: Path | None = None  # the baseline model folder (:meth:`against` gives it)

    def against(self, baseline: str | Path) -> BaselineMode:
        """This mode gating on the model folder ``baseline``."""
        return dataclasses.replace(self, baseline=Path(baseline))

    def chosen_with(self, value: Any) -> BaselineMode:
        return self.against(value)

    def run(self, job: RunJob) -> RunResult:
        on_baseline = self.baseline_suite(job.suite, job.compute)  # refused before any encoding
        result = check_job(job)
        before = check_suite(on_baseline, ids=job.ids, cache_dir=job.cache_dir, progress=job.progress)
        return against_baseline(result, before, str(self.baseline))

    def baseline_suite(self, suite: Suite, compute: Mapping[str, Any] | None = None) -> Suite:
        """``suite`` loaded on the baseline model. A baseline whose labels are not the suite's is refused
        (or one that holds no model) naming the baseline
        (:func:`~warp_check.releases.baseline_folder.check_baseline`)."""
        if self.baseline is None:
            raise SettingsError("baseline", None, "baseline mode needs the baseline model folder")
        return suite_on_baseline(suite, self.baseline, compute)

    def header(self, run: RunResult, shown_suite: str) -> str:
        return f"{super().header(run, shown_suite)} (regressions against {self.baseline})"


BASELINE = BaselineMode()
