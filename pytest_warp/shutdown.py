"""A Ctrl-C once the test session is over: ignored, not a traceback from pytest's shutdown.

Once the last test has run, an interrupt can only cut pytest's reporting and clean-up short:
pytest runs ``pytest_sessionfinish`` (and the terminal summary in it) outside its own
KeyboardInterrupt handling, so it ends in a traceback from pytest's ``main``, or the process
ends by the signal (exit −2). Only the outermost
session of a ``pytest`` command does this: a session run in-process (pytester's inline runs,
``pytest.main`` from a script) leaves its caller's Ctrl-C alone.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

_open_sessions = 0  # configured and not yet unconfigured in this process (nested: pytester, pytest.main)


def session_opened() -> None:
    global _open_sessions
    _open_sessions += 1


def tests_done() -> None:
    """The outermost session's test loop has ended: what follows is reporting and clean-up."""
    if _open_sessions == 1:
        _ignore_ctrl_c()


def session_closed() -> None:
    global _open_sessions
    _open_sessions -= 1
    if _open_sessions == 0:
        _ignore_ctrl_c()


def _ignore_ctrl_c() -> None:
    if _is_the_pytest_command() and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _is_the_pytest_command() -> bool:
    """This process is `pytest …` or `python -m pytest …`, not a script that called pytest.main."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return name in ("pytest", "py.test", "__main__.py") and "pytest" in (sys.argv[0] or "")
