"""Baseline mode: regression-only gating. A case fails only where the baseline model (the last
release) got it right and the model under test does not; a case both get wrong is an expected
failure. Its results are checks (``mode: check`` in JSON), each verdict with both models' answers."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_check.errors import ModelError, SettingsError, SuiteError
from warp_check.modes.base import RunJob
from warp_check.modes.check import CheckMode, check_job
from warp_check.options import OPTION, Option
from warp_check.runs.check import check_suite
from warp_check.runs.regressions import against_baseline
from warp_check.runs.result import RunResult
from warp_check.suite.loader import Suite, load_suite
from warp_check.suite.model_source import model_labels
from warp_check.suite.toml_lines import SuiteToml


@dataclass(frozen=True, kw_only=True)
class BaselineMode(CheckMode):
    name: str = "baseline"
    selected_by: Option | None = OPTION["baseline"]
    command: str | None = None  # `warp-check diff OLD NEW SUITE` runs it
    command_help: str = ""
    cli_options: tuple[str, ...] = ()
    junit_properties: tuple[str, ...] = ("kind", "label", "predicted", "gap", "baseline_predicted", "baseline_gap")
    baseline: Path | None = None  # the baseline model folder (:meth:`against` gives it)

    def against(self, baseline: str | Path) -> BaselineMode:
        """This mode gating on the model folder ``baseline``."""
        return dataclasses.replace(self, baseline=Path(baseline))

    def chosen_with(self, value: Any) -> BaselineMode:
        return self.against(value)

    def run(self, job: RunJob) -> RunResult:
        on_baseline = self.baseline_suite(job.suite).with_compute(**job.compute)  # refused before any encoding
        result = check_job(job)
        before = check_suite(on_baseline, ids=job.ids, cache_dir=job.cache_dir, progress=job.progress)
        return against_baseline(result, before, str(self.baseline))

    def baseline_suite(self, suite: Suite) -> Suite:
        """``suite`` loaded on the baseline model. A baseline whose labels are not the suite's is refused
        naming the baseline and both label sets: loading would blame the suite's case files for a label
        the baseline does not name ("unknown label 'positive'")."""
        if self.baseline is None:
            raise SettingsError("baseline", None, "baseline mode needs the baseline model folder")
        _check_labels(suite, self.baseline)
        return load_suite(suite.toml, model=self.baseline)

    def header(self, run: RunResult, shown_suite: str) -> str:
        return f"{super().header(run, shown_suite)} (regressions against {self.baseline})"


def _check_labels(suite: Suite, baseline: Path) -> None:
    try:
        id2label, classes = model_labels(SuiteToml(suite.toml), baseline)
    except SuiteError:  # no readable config.json: loading the suite on it says so, naming the folder
        return
    where = f"the baseline {baseline}"
    if classes is not None and suite.num_classes is not None and classes != suite.num_classes:
        raise ModelError(
            f"{where} has {classes} classes, the model under test {suite.num_classes}: a baseline must be "
            "a release of the same classifier, with the same classes"
        )
    theirs = {name: index for index, name in sorted(id2label.items())}
    if _names_its_labels(suite) or theirs == suite.labels:
        return  # the suite's [labels] name the classes: the models' own names do not matter
    raise ModelError(
        f"{where}: its labels are {_shown(theirs)}, the suite's (and the model under test's) "
        f"{_shown(suite.labels)}: a baseline must name the same labels; save it with the model under "
        "test's id2label and label2id in its config.json, or name the classes in the suite's [labels]"
    )


def _names_its_labels(suite: Suite) -> bool:
    """Whether warp.toml names the classes (``[labels]``, ``labels = [...]``) instead of the model."""
    return any(key == "labels" or key.startswith("labels.") for key in suite.key_lines)


def _shown(labels: dict[str, int]) -> str:
    """Label names in class order ("LABEL_0, LABEL_1"), or that the model names none."""
    return ", ".join(sorted(labels, key=labels.__getitem__)) or "none (config.json has no id2label)"


BASELINE = BaselineMode()
