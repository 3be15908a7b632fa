"""A Ctrl-C once pytest's session is over is ignored by the outermost pytest command only."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_warp import shutdown

pytest_plugins = ["pytester"]

# Interrupted between two bytecodes, a frame can have tb_lineno None; pytest's terminal reporter then
# fails inside its own pytest_keyboard_interrupt (seen once in CI, in _pytest/_code/code.py).
PYTESTS_OWN_CRASH = "TypeError: unsupported operand type(s) for -: 'NoneType' and 'int'"


def test_only_the_outermost_session_of_a_pytest_command_ignores_a_late_ctrl_c(monkeypatch):
    calls = []
    monkeypatch.setattr(signal, "signal", lambda signum, handler: calls.append((signum, handler)))
    # internal: this test runs inside a pytest session: the count of open sessions must start from none
    monkeypatch.setattr(shutdown, "_open_sessions", 0)
    monkeypatch.setattr(sys, "argv", ["/venv/bin/pytest", "tests"])
    shutdown.session_opened()
    shutdown.session_opened()  # an inline run inside it (pytester)
    shutdown.session_closed()
    assert calls == []  # the outer session still runs: its Ctrl-C is its own
    shutdown.session_closed()
    assert calls == [(signal.SIGINT, signal.SIG_IGN)]
    calls.clear()
    shutdown.session_opened()
    shutdown.session_opened()
    shutdown.tests_done()  # the inline run's tests are done: the outer session still runs
    assert calls == []
    shutdown.session_closed()
    shutdown.tests_done()  # the outermost session's: its summary runs outside pytest's Ctrl-C handling
    assert calls == [(signal.SIGINT, signal.SIG_IGN)]
    shutdown.session_closed()
    calls.clear()
    monkeypatch.setattr(sys, "argv", ["/home/me/release_gate.py"])  # a script that called pytest.main
    shutdown.session_opened()
    shutdown.session_closed()
    assert calls == []


def test_ctrl_c_to_pytest_at_any_moment_is_pytests_own_exit_never_a_traceback(tiny_suite: Path, tmp_path: Path):
    command = [sys.executable, "-X", "faulthandler", "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tiny_suite)]
    command += ["--warp-cache", "none"]
    start = time.monotonic()
    whole = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    duration = time.monotonic() - start
    assert whole.returncode in (0, 1), whole.stdout[-2000:]
    for fraction in (0.4, 0.7, 0.85, 0.95, 1.05):
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
        time.sleep(fraction * duration)
        process.send_signal(signal.SIGINT)
        try:
            out, _ = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)  # -X faulthandler: every thread's stack, to say where it hung
            out, _ = process.communicate(timeout=30)
            pytest.fail(f"a Ctrl-C at {fraction:.0%} of the run left pytest running after 120 s:\n{out[-6000:]}")
        if PYTESTS_OWN_CRASH in out:
            continue  # pytest's KeyboardInterrupt report itself failed on a frame with no line: not ours
        assert "Traceback" not in out, out[-3000:]
        # Interrupted: pytest's exit 2; or it had finished: the run's own exit code.
        assert process.returncode in (pytest.ExitCode.INTERRUPTED, whole.returncode), (process.returncode, out[-2000:])


DROPPED_CTRL_C = """
import signal, time, weakref

# As in a terminal: a process started in the background (CI runners) inherits SIGINT ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)


class Held:
    pass


def interrupted(_):
    raise KeyboardInterrupt  # as a Ctrl-C landing in importlib's module-lock callback does


def test_pressed_during():
    held = Held()
    reference = weakref.ref(held, interrupted)
    del held
    assert reference() is None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(0.001)


def test_after():
    pass
"""


def test_a_ctrl_c_python_would_drop_ends_the_pytest_run_as_pytests_own_interrupt(pytester):
    # Python drops a KeyboardInterrupt raised in a callback; pytest's own unraisable hook would keep
    # it as a warning with a traceback and run on. Under the plugin it is delivered again: exit 2.
    pytester.makepyfile(test_dropped=DROPPED_CTRL_C)
    start = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()[-3000:]
    assert time.monotonic() - start < 25  # not after the test's 30 s wait
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "PytestUnraisableExceptionWarning" not in output, output[-3000:]
