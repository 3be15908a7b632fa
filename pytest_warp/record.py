"""``--warp-record FILE.jsonl``: the counterexamples hypothesis finds become must_fix cases.

A test that fails on a :class:`warp_check.extras.invariance.InvarianceFailure` has its counterexample
appended to the file (source = the test's node id). Only the exception the failed test finally
raised is seen here — hypothesis catches every example it tries while shrinking and re-raises
only the final, shrunk one — so intermediate examples are never written. Writing happens where
the test ran (an xdist worker; ``warp_check.suite.casefile`` locks and writes atomically) and the counts
travel back on the report for the controller's terminal summary.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from warp_check import WarpError

RECORDER = pytest.StashKey["Recorder"]()


class Recorder:
    """Writes counterexamples to ``path``; counts what the reports say was written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.added = 0
        self.duplicates = 0
        self.errors: list[str] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if call.when == "call" and report.failed and call.excinfo is not None:
            recorded = self.record(item, call.excinfo.value)
            if recorded is not None:
                report.warp_recorded = recorded  # plain data: it travels to the xdist controller
        return report

    def record(self, item: pytest.Item, error: BaseException) -> dict | None:
        from warp_check import record_counterexamples  # hypothesis: only where a test failed

        prefix = getattr(item, "originalname", None) or item.name
        try:
            result = record_counterexamples(self.path, error, source=item.nodeid, id_prefix=prefix)
        except (OSError, WarpError) as exc:
            return {"error": f"{item.nodeid}: {exc}"}
        return None if result is None else {"added": len(result.added), "duplicates": result.duplicates}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        recorded = getattr(report, "warp_recorded", None)
        if isinstance(recorded, dict):
            self.added += recorded.get("added", 0)
            self.duplicates += recorded.get("duplicates", 0)
            if "error" in recorded:
                self.errors.append(recorded["error"])

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.added or self.duplicates:
            already = f" ({self.duplicates} already there)" if self.duplicates else ""
            terminalreporter.write_line(
                f"warp-check: recorded {self.added} new counterexample(s) to {self.path}{already}; "
                "pytest --warp-repair on a suite listing it as must_fix fixes them"
            )
        else:
            terminalreporter.write_line(f"warp-check: no counterexample to record; {self.path} unchanged")
        for error in self.errors:
            terminalreporter.write_line(f"warp-check: counterexample NOT recorded: {error}")


def register(config: pytest.Config, path: Path | None) -> None:
    """Start recording to ``path`` (nothing happens without --warp-record)."""
    if path is not None:
        config.stash[RECORDER] = Recorder(path)
        config.pluginmanager.register(config.stash[RECORDER], "warp-record")


def unregister(config: pytest.Config) -> None:
    recorder = config.stash.get(RECORDER, None)
    if recorder is not None and config.pluginmanager.is_registered(recorder):
        config.pluginmanager.unregister(recorder)
