"""Baseline mode: regression-only gating of a release against the last one. A case fails only where the
baseline model got it right and the model under test does not; a case both get wrong is an expected
failure. Its results are checks (``mode: check`` in JSON), each verdict with both models' answers; beside
them the paired test of the two models on the suite (exact McNemar, gating at ``worse_p`` where given)
and, with traffic, Cert 4 between the two models: the share of predictions the release changes,
bounded, held to ``max_change`` (the ``traffic`` item)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warp_check.errors import SettingsError
from warp_check.modes.base import RunJob
from warp_check.modes.check import CheckMode, check_job
from warp_check.modes.repair import traffic_lines
from warp_check.options import OPTION, Option
from warp_check.releases.baseline_folder import suite_on_baseline
from warp_check.releases.load import load_adapter
from warp_check.runs.check import check, check_warm, warm_entry
from warp_check.runs.details import CheckDetails
from warp_check.runs.regressions import against_baseline
from warp_check.runs.result import RunResult, TrafficVerdict
from warp_check.suite.loader import Suite

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.certificates.traffic.sample import TrafficSample
    from warp_check.model.adapter import ClassifierAdapter


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
    measures_traffic: bool = True  # Cert 4 between the two models
    baseline: Path | None = None  # the baseline model folder (:meth:`against` gives it)
    worse_p: float | None = None  # the paired test's gate (None: reported, never gating)

    def against(self, baseline: str | Path, *, worse_p: float | None = None) -> BaselineMode:
        """This mode gating on the model folder ``baseline`` (and on the paired test at ``worse_p``)."""
        return dataclasses.replace(self, baseline=Path(baseline), worse_p=worse_p)

    def chosen_with(self, value: Any, options: Mapping[str, Any] | None = None) -> BaselineMode:
        return self.against(value, worse_p=(options or {}).get("worse_p"))

    def run(self, job: RunJob) -> RunResult:
        on_baseline = self.baseline_suite(job.suite, job.compute)  # refused before any encoding
        traffic = job.traffic()  # read before any model loads: a bad file costs no encoder pass
        new_model = _loaded_once(lambda: job.load_model(job.suite))
        result = check_job(dataclasses.replace(job, load_model=lambda _suite: new_model()))
        old_model = _loaded_once(lambda: load_adapter(on_baseline))
        recalled = check_warm(on_baseline, warm_entry(on_baseline, job.cache_dir), ids=job.ids, cache_dir=job.cache_dir)
        before = recalled or check(
            on_baseline, old_model(), ids=job.ids, cache_dir=job.cache_dir, progress=job.progress
        )
        judged = against_baseline(result, before, str(self.baseline), worse_p=self.worse_p)
        if traffic is None:
            return judged
        return self.with_traffic(judged, traffic, job, old_model, new_model)

    def with_traffic(
        self,
        judged: RunResult,
        traffic: TrafficSample,
        job: RunJob,
        old_model: Callable[[], ClassifierAdapter],
        new_model: Callable[[], ClassifierAdapter],
    ) -> RunResult:
        """``judged`` with Cert 4 of the model under test against the baseline on ``traffic``."""
        from warp_check.certificates.traffic.between import release_changes, release_verdict

        suite = job.suite
        changes = release_changes(
            old_model(),
            new_model(),
            traffic,
            decision=suite.decision,
            batch_size=suite.model.batch_size,
            cache_dir=job.cache_dir,
            progress=job.progress,
        )
        verdict = release_verdict(
            changes, traffic, baseline=str(self.baseline), labels=suite.labels, decision=suite.decision.name
        )
        details = judged.details
        if isinstance(details, CheckDetails):
            details = dataclasses.replace(details, traffic=verdict.note)
        return dataclasses.replace(
            judged,
            details=details,
            traffic=TrafficVerdict(passed=verdict.passed, message=verdict.words, properties=verdict.figures),
        )

    def baseline_suite(self, suite: Suite, compute: Mapping[str, Any] | None = None) -> Suite:
        """``suite`` loaded on the baseline model. A baseline whose labels are not the suite's is refused
        (or one that holds no model) naming the baseline
        (:func:`~warp_check.releases.baseline_folder.check_baseline`)."""
        if self.baseline is None:
            raise SettingsError("baseline", None, "baseline mode needs the baseline model folder")
        return suite_on_baseline(suite, self.baseline, compute)

    def header(self, run: RunResult, shown_suite: str) -> str:
        return f"{super().header(run, shown_suite)} (regressions against {self.baseline})"

    def summary_lines(self, run: RunResult) -> list[str]:
        return self.comparison_lines(run)

    def result_lines(self, run: RunResult) -> list[str]:
        return self.comparison_lines(run)

    def comparison_lines(self, run: RunResult) -> list[str]:
        """The paired test's line (FAILED where its gate does not hold), then Cert 4's against the baseline."""
        details = run.details
        paired = details.paired_test if isinstance(details, CheckDetails) else None
        out = [] if paired is None else [f"  {'' if paired.passed else 'FAILED '}{paired}"]
        return out + traffic_lines(run)


def _loaded_once(load: Callable[[], ClassifierAdapter]) -> Callable[[], ClassifierAdapter]:
    """``load``, run on the first call only: each model is loaded where its check or Cert 4 needs it, once."""
    loaded: list[ClassifierAdapter] = []

    def once() -> ClassifierAdapter:
        if not loaded:
            loaded.append(load())
        return loaded[0]

    return once


BASELINE = BaselineMode()
