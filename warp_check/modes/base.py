"""What a run mode is (:class:`RunMode`) and what a front end hands it to run (:class:`RunJob`).

A mode says what it runs, how the pytest summary and the command's result show its runs, and
which JUnit properties its verdicts carry. The pytest plugin and the ``warp-check`` command find
every mode in one table (:data:`warp_check.modes.MODES`). Light: a mode imports its heavy run
(numpy, the solvers, the certifier) only when it runs.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warp_check.certificates.numbers import certified_junit
from warp_check.options import Option
from warp_check.progress import Progress
from warp_check.runs.details import RunDetails
from warp_check.runs.modes import Mode
from warp_check.runs.result import RunResult
from warp_check.suite.loader import Suite

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.cache.warm import WarmEntry
    from warp_check.certificates.traffic.sample import TrafficSample
    from warp_check.model.adapter import ClassifierAdapter


@dataclass(frozen=True, kw_only=True)
class RunJob:
    """One run of one suite, as a front end asks for it (None: the suite's own, or not given)."""

    suite: Suite
    load_model: Callable[[Suite], ClassifierAdapter]  # the suite's model, loaded (or reused) on demand
    cache_dir: Path | None = None
    ids: Sequence[str] | None = None  # the cases to check (None: every one); a repair takes them all
    warm: WarmEntry | None = None  # what an earlier check recorded for the model folder
    out_dir: Path | None = None  # where a repair saves the model (None: <suite>/.warp/repaired)
    certificate: Path | None = None  # what an audit checks
    baseline: Path | None = None  # the suite's baseline a repair restores regressions against (None: none given)
    compute: Mapping[str, Any] = field(default_factory=dict)  # encoder overrides, for any other model loaded
    overrides: Mapping[str, Any] = field(default_factory=dict)  # repair settings over the suite's
    flags: Mapping[str, str] = field(default_factory=dict)  # how the user changes each repair setting
    progress: bool | Progress = False
    # The suite's traffic with the run's overrides, read (warp_check.certificates.traffic.reading.load_traffic, which
    # the front ends bind to their flags); None: the run measures no traffic.
    load_traffic: Callable[[Suite], TrafficSample | None] | None = None

    def traffic(self) -> TrafficSample | None:
        return self.load_traffic(self.suite) if self.load_traffic is not None else None


@dataclass(frozen=True, kw_only=True)
class RunMode(abc.ABC):
    """A job a run of a suite does. ``name`` is how it is called (headers, the table);
    ``records`` the :class:`Mode` its results carry; ``selected_by`` the pytest option that
    chooses it (None: the mode when nothing else is chosen); ``command`` the ``warp-check``
    command that runs it on a suite (None: none does), with ``cli_options`` beside the common
    ones; ``junit_properties`` what each case's JUnit record carries, in this order (None: a certified
    case's, which the table of certificates gives: :func:`~warp_check.certificates.numbers.certified_junit`)."""

    name: str
    records: Mode
    selected_by: Option | None = None
    command: str | None = None
    command_help: str = ""
    cli_options: tuple[str, ...] = ()
    junit_properties: tuple[str, ...] | None = ("kind", "label", "predicted", "gap", "wrong", "subject")
    recalls_checks: bool = False  # True: an earlier check of the model folder may answer, the model unloaded
    # True: a suite with traffic gets a ``traffic`` item, Cert 4's verdict (a repair measures it, an audit
    # recomputes it); a check changes nothing, so it has none.
    measures_traffic: bool = False

    @abc.abstractmethod
    def run(self, job: RunJob) -> RunResult:
        """Run the suite; a user's mistake is a WarpError or OSError."""

    def __str__(self) -> str:
        return self.name

    def chosen_with(self, value: Any, options: Mapping[str, Any] | None = None) -> RunMode:
        """This mode as its option's ``value`` chooses it (a mode that needs the value keeps it), ``options``
        the run's other option values by name (a mode that gates on one takes it)."""
        return self

    def header(self, run: RunResult, shown_suite: str) -> str:
        return f"suite '{run.name}' ({shown_suite}): {self.name} mode"

    def model_lines(self, details: RunDetails) -> list[str]:
        """The model line (and how its head was found, where a mode says)."""
        return [f"  model: {details.model}"]

    def encoder_lines(self, details: RunDetails) -> list[str]:
        """pytest's summary: how the cases were encoded (modes that encode say)."""
        return []

    def summary_lines(self, run: RunResult) -> list[str]:
        """pytest's summary: the mode's own lines after the counts of a run that got its verdicts."""
        return []

    def result_lines(self, run: RunResult) -> list[str]:
        """The command's result: the mode's own lines after the counts."""
        return []

    def junit(self, properties: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """The JUnit properties of a verdict (its kind and properties), those given, in order."""
        names = certified_junit() if self.junit_properties is None else self.junit_properties
        return [(name, properties[name]) for name in names if properties.get(name) is not None]
