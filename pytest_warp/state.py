"""Per-session state of the plugin (kept in ``config.stash``): suites, models, run results.

Each suite's run happens once, when its first selected item runs. A check encodes only the
selected cases (``-k``, ``-m``, ``--lf`` decide which; ``-x`` stops after the first failure).
A repair always uses the whole suite, whatever the selection: a model repaired on a subset
would certify only that subset; the selection decides which cases are reported. Under
pytest-xdist the workers share each run: the first takes a file lock and computes, the others
wait and read its result file (``<suite>/.warp/runs``, keyed by xdist's test-run id), so a
repair happens once per test run and every worker reports the same numbers.

Representations are cached in ``<suite>/.warp/cache`` (``--warp-cache``), shared with the
``warp-check`` command, so a later run, and an audit of the repaired model, skip the encoder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from warp_check import (
    Outcome,
    RunResult,
    Suite,
    TrafficVerdict,
    Verdict,
    WarpError,
    default_cache_dir,
    load_adapter,
    load_suite,
    load_traffic,
    reraise_interrupt,
    workdir,
)
from warp_check.frontend import RunJob, collected_notices, warm_entry

from .options import WarpOptions
from .terminal import session_progress

if TYPE_CHECKING:  # pragma: no cover
    from warp_check import ClassifierAdapter
    from warp_check.frontend import WarmEntry

RUNS_DIR = "runs"  # in <suite>/.warp: result files shared by xdist workers
RUN_FILE_MAX_AGE_S = 24 * 3600


class RunRefused(Exception):
    """The core refused a suite's run (a WarpError: the suite, the model, the baseline, a setting, the out
    folder; or the environment's OSError), as the command refuses it with exit 2. The item whose run met it
    reports it once (``first``); the suite's other items are not verdicts of the model."""

    def __init__(self, message: str, *, first: bool) -> None:
        super().__init__(message)
        self.message = message
        self.first = first


class WarpSession:
    def __init__(self, config: pytest.Config, options: WarpOptions) -> None:
        self.config = config
        self.options = options
        self.suites: dict[Path, Suite] = {}
        self.suite_files: set[Path] = set()  # resolved: a suite met again through a symlink is not collected again
        self.load_notices: dict[Path, tuple[str, ...]] = {}  # the WarpWarnings each suite's loading gave
        self.adapters: dict[tuple[str, str, int], ClassifierAdapter] = {}  # suites on one model share it
        # Check mode: suites whose model an earlier check recorded (the model is then never loaded).
        self.warm: dict[Path, WarmEntry] = {}
        self.results: dict[Path, RunResult] = {}
        self.refusals: dict[Path, str] = {}  # suites whose run the core refused, with its one-line message
        self.refused: list[str] = []  # what the reports carried back (on the xdist controller too)
        self.announced: set[str] = set()  # suites whose run summary went out with a report
        # What the reports carried back (on the xdist controller too), by suite: for the summary/report.
        self.runs: dict[str, RunResult] = {}  # without verdicts
        self.cases: dict[str, list[Verdict]] = {}  # each with pytest's outcome
        self.traffic: dict[str, TrafficVerdict] = {}  # each suite's traffic item, with pytest's outcome
        self.report_path: Path | None = None
        self.report_error: str | None = None

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    # -- collection ----------------------------------------------------------------------
    def first_visit(self, toml: Path) -> bool:
        """Whether this session meets the suite file at ``toml`` (by its resolved path) for the first time."""
        key = toml.resolve()
        if key in self.suite_files:
            return False
        self.suite_files.add(key)
        return True

    def load(self, toml: Path) -> Suite:
        """Load a suite and its model (a head WARP cannot repair is a collection error).

        A check whose model folder an earlier check recorded (same content, layer, libraries)
        does not load the model: its cases are answered from the cache (warp_check.cache.warm).
        """
        key = toml.resolve()
        if key not in self.suites:
            model = self.options["model"]
            if model is None and self.options["certificate"] is not None:
                model = self.options["certificate"].parent  # audit: the certified folder itself
            with collected_notices() as warned:  # shown with the suite's run, as a run's own notices are
                suite = load_suite(toml, model=model, revision=self.options["revision"]).with_compute(
                    **self.options.overrides("model")
                )
                self.suites[key] = suite
                entry = warm_entry(suite, self._cache_path(suite)) if self.options.mode.recalls_checks else None
                if entry is not None:
                    self.warm[key] = entry
                else:
                    self.adapter(suite)
            self.load_notices[key] = tuple(warned)
        return self.suites[key]

    def adapter(self, suite: Suite) -> ClassifierAdapter:
        """The suite's model, loaded once per process (suites on one model share it)."""
        model_key = (str(suite.model_dir), repr(suite.layer), suite.model.max_length)
        if model_key not in self.adapters:
            self.adapters[model_key] = load_adapter(suite)
        return self.adapters[model_key]

    # -- running --------------------------------------------------------------------------
    def _cache_path(self, suite: Suite) -> Path | None:
        """Where the cache is, without creating anything (for reading it at collection)."""
        if self.options["no_cache"]:
            return None
        return self.options["cache"] if self.options["cache"] is not None else default_cache_dir(suite)

    def cache_dir(self, suite: Suite) -> Path | None:
        """The cache to use for a run, ``<suite>/.warp`` created if it is the default."""
        path = self._cache_path(suite)
        if path is None or self.options["cache"] is not None:
            return path
        try:
            workdir(suite)
        except OSError:  # a read-only suite folder: run without a cache rather than fail every case
            return None
        return path

    def result_for(self, key: Path, selected_ids: Callable[[], list[str]]) -> RunResult:
        """The run of the suite at ``key`` (computed once, with the ids ``selected_ids`` gives).

        Raises :class:`RunRefused` where the core refused the suite: ``first`` for the item whose run
        met it, not for the suite's later items (nor for another xdist worker's)."""
        if key in self.refusals:
            raise RunRefused(self.refusals[key], first=False)
        if key not in self.results:
            suite = self.suites[key]
            selected = selected_ids()
            try:
                self.results[key] = self._shared(suite, lambda: self._compute(key, suite, selected), selected)
            except RunRefused as refused:
                self.refusals[key] = refused.message
                raise
            except Exception as exc:  # noqa: BLE001 — stored once: never recomputed for every item
                reraise_interrupt(exc)
                message = f"internal error while running the suite: {type(exc).__name__}: {exc}"
                self.results[key] = RunResult.failed(suite, self.options.mode.records, message)
        return self.results[key]

    def _compute(self, key: Path, suite: Suite, selected: Sequence[str]) -> RunResult:
        with collected_notices() as warned:
            result = self._run(key, suite, selected)
        notices = (*self.load_notices.get(key, ()), *warned)
        return dataclasses.replace(result, warnings=result.warnings + notices) if notices else result

    def _run(self, key: Path, suite: Suite, selected: Sequence[str]) -> RunResult:
        mode = self.options.mode
        job = RunJob(
            suite=suite,
            load_model=self.adapter,
            cache_dir=self.cache_dir(suite),
            ids=selected,
            warm=self.warm.get(key),
            out_dir=self.options["out"],
            certificate=self.options["certificate"],
            baseline=self.options["baseline"],
            compute=self.options.overrides("model"),
            overrides=self.options.overrides("repair"),
            flags=self.options.flags,
            load_traffic=self.load_traffic if mode.measures_traffic else None,
            progress=session_progress(self.config, self.options),
        )
        try:
            return mode.run(job)
        except (WarpError, OSError) as exc:  # a user's mistake or environment: a message, not a traceback
            reraise_interrupt(exc)
            raise RunRefused(f"{type(exc).__name__}: {exc}", first=True) from None

    def load_traffic(self, suite: Suite):
        """The suite's traffic with --warp-traffic / --warp-max-change over its [traffic]."""
        return load_traffic(suite, **self.options.overrides("traffic"))

    def has_traffic(self, suite: Suite) -> bool:
        """Whether the suite's run measures Cert 4 (then it has a ``traffic`` item)."""
        given = suite.traffic is not None or "path" in self.options.overrides("traffic")
        return self.options.mode.measures_traffic and given

    def _shared(self, suite: Suite, compute: Callable[[], RunResult], selected: Sequence[str]) -> RunResult:
        """Compute once per test run: alone, or under xdist by the first worker to get here."""
        workerinput = getattr(self.config, "workerinput", None)
        if workerinput is None:
            return _stamp(compute(), "main")
        from filelock import FileLock

        runs = workdir(suite) / RUNS_DIR
        runs.mkdir(exist_ok=True)
        key = hashlib.sha256(
            "\n".join([workerinput["testrunuid"], str(suite.toml), self.options.mode.name, *sorted(selected)]).encode()
        ).hexdigest()[:32]
        target = runs / f"{key}.json"
        refusal = runs / f"{key}.refused"  # the refusal's message, for the workers that wait on this run
        with FileLock(str(runs / f"{key}.lock")):
            if refusal.is_file():
                raise RunRefused(refusal.read_text(encoding="utf-8"), first=False)
            if target.is_file():
                return RunResult.read_json(target)
            _prune(runs)
            try:
                result = _stamp(compute(), workerinput.get("workerid", "worker"))
            except RunRefused as refused:
                refusal.write_text(refused.message, encoding="utf-8")
                raise
            result.write_json(target)
        return result

    # -- reporting ---------------------------------------------------------------------------
    def run_summary(self, suite_path: str) -> dict[str, Any] | None:
        """The run-level part of a result, sent once per suite and process with a report."""
        if suite_path in self.announced:
            return None
        for result in self.results.values():
            if result.suite == suite_path:
                self.announced.add(suite_path)
                data = result.to_dict()
                data.pop("cases")
                return data
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep what a report carries back (in a serial run and on the xdist controller)."""
        refused = getattr(report, "warp_refused", None)
        if refused is not None:
            self.refused.append(refused)
        run = getattr(report, "warp_run", None)
        if run is not None:
            summary = RunResult.from_dict(run)
            self.runs.setdefault(summary.suite, summary)
        traffic = getattr(report, "warp_traffic", None)
        if traffic is not None:
            verdict = TrafficVerdict.from_dict(traffic["verdict"])
            self.traffic[traffic["suite"]] = dataclasses.replace(verdict, outcome=Outcome(report.outcome))
        case = getattr(report, "warp_case", None)
        if case is None:
            return
        outcome = Outcome.XFAILED if hasattr(report, "wasxfail") else Outcome(report.outcome)
        for row in getattr(report, "warp_cases", None) or [case]:  # a sentence's item: each word's verdict
            verdict = Verdict.from_dict(row)
            verdict = dataclasses.replace(verdict, outcome=_row_outcome(verdict, outcome))
            self.cases.setdefault(verdict.suite or "", []).append(verdict)

    def report_runs(self) -> list[RunResult]:
        """Each suite's run with the verdicts pytest reported, for the report."""
        return [
            dataclasses.replace(
                run, verdicts=tuple(self.cases.get(suite, [])), traffic=self.traffic.get(suite, run.traffic)
            )
            for suite, run in self.runs.items()
        ]


def _row_outcome(verdict: Verdict, item: Outcome) -> Outcome:
    """A row's outcome within its item's: in a failed (or xfailed) sentence, a right word passed and a
    word wrong on the baseline too is an expected failure."""
    if item in (Outcome.FAILED, Outcome.XFAILED) and verdict.passed:
        return Outcome.PASSED
    if item is Outcome.FAILED and verdict.expected_failure is not None:
        return Outcome.XFAILED
    return item


def _stamp(result: RunResult, who: str) -> RunResult:
    return dataclasses.replace(result, details=dataclasses.replace(result.details, computed_by=who))


def _prune(runs: Path) -> None:
    """Result files of earlier test runs are of no use: drop those older than a day."""
    now = time.time()
    for path in runs.iterdir():
        try:
            if now - path.stat().st_mtime > RUN_FILE_MAX_AGE_S:
                os.unlink(path)
        except OSError:
            continue


# The session's state, in config.stash (pytest's own place for a plugin's state).
STATE = pytest.StashKey[WarpSession]()
CTRL_C = pytest.StashKey[contextlib.ExitStack]()  # the plugin's unraisable hook, closed at unconfigure
