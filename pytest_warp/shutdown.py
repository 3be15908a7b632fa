"""A Ctrl-C once the test session is over: ignored, not a traceback from pytest's shutdown.

After the last summary line, an interrupt can only cut pytest's own clean-up short: it ends the
process by the signal (exit −2), or in a traceback from pytest's ``main``. Only the outermost
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


def session_closed() -> None:
    global _open_sessions
    _open_sessions -= 1
    if _open_sessions == 0 and _is_the_pytest_command() and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _is_the_pytest_command() -> bool:
    """This process is `pytest …` or `python -m pytest …`, not a script that called pytest.main."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return name in ("pytest", "py.test", "__main__.py") and "pytest" in (sys.argv[0] or "")
