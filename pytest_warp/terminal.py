"""The terminal reporter's stream, as the file the core's progress (``warp_check.Progress``) writes on.

A suite runs inside its first item's test, where pytest captures the output: each write suspends
the capture (as pytest's own live logging does) and starts on a line of its own, so a bar shows
on the terminal and pytest's next result starts a fresh line after it. Under pytest-xdist a
worker has no terminal: its progress is off.
"""

from __future__ import annotations

import contextlib

import pytest

from warp_check import Progress

from .options import WarpOptions


class TerminalStream:
    """Writes on pytest's terminal, outside the capture of the test that runs."""

    encoding = "utf-8"

    def __init__(self, config: pytest.Config) -> None:
        self._config = config

    def _reporter(self):
        return self._config.pluginmanager.get_plugin("terminalreporter")

    def write(self, text: str) -> int:
        reporter = self._reporter()
        if reporter is None:
            return 0
        capture = self._config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            reporter.ensure_newline()
            reporter.write(text, flush=True)
        return len(text)

    def flush(self) -> None:
        reporter = self._reporter()
        if reporter is not None:
            reporter.flush()

    def isatty(self) -> bool:
        reporter = self._reporter()
        return reporter is not None and bool(reporter.isatty())


def session_progress(config: pytest.Config, options: WarpOptions) -> Progress:
    """The progress the options ask for, on the terminal; -q (or -qq) shows lines, not a bar."""
    if hasattr(config, "workerinput"):
        return Progress.silent()
    quiet = config.getoption("verbose") < 0
    return Progress.chosen(
        options["progress"], after_s=options["progress_after"], quiet=quiet, stream=TerminalStream(config)
    )
