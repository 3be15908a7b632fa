"""Progress and output on hostile streams: closed, gone (None), a pipe whose reader left, or one that
cannot encode what warp-check writes. The work and its verdict never depend on them: the exit code
is the run's, no traceback, and the bar or line falls back to ASCII or to nothing.

The console-script tests need real pipes and file descriptors, so they run ``warp-check`` in a
subprocess (few, and ``check`` on the tiny suite)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from warp_check import Progress, ProgressStyle
from warp_check.cli import main

SCRIPT = str(Path(sys.executable).with_name("warp-check"))
CHECK = ("check", "--cache", "none", "--progress", "lines", "--progress-after", "0")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class ReaderLeft(io.StringIO):
    """A pipe whose reader has gone: every write fails as the system says."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def closed(stream: io.StringIO) -> io.StringIO:
    stream.close()
    return stream


def run_step(progress: Progress) -> int:
    with progress.step("encoding cases", total=3) as step:
        for _ in range(3):
            step.advance(1, note="γ → 2 short")
    return step.done


@pytest.mark.parametrize(
    "stream",
    [closed(io.StringIO()), closed(Terminal()), ReaderLeft(), None],
    ids=["closed", "closed-terminal", "reader-left", "none"],
)
@pytest.mark.parametrize("style", [ProgressStyle.LINES, ProgressStyle.BAR, ProgressStyle.AUTO])
def test_a_step_on_a_stream_that_refuses_writes_runs_to_its_end(stream, style, monkeypatch):
    monkeypatch.setattr(sys, "stderr", None)  # a process started with 2>&- has no sys.stderr
    assert run_step(Progress(style=style, stream=stream, after_s=0)) == 3


@pytest.mark.parametrize("style", [ProgressStyle.LINES, ProgressStyle.BAR])
@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_stream_that_cannot_encode_gets_ascii(style, encoding):
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding)
    run_step(Progress(style=style, stream=stream, after_s=0))
    stream.flush()
    text = raw.getvalue().decode("ascii")  # nothing outside ASCII reached it
    assert "gamma -> 2 short" in text and "warp: encoding cases" in text and "3" in text


def test_the_cli_with_its_stderr_closed_keeps_its_verdict(tiny_suite, monkeypatch, capsys):
    assert main([CHECK[0], str(tiny_suite), *CHECK[1:]]) == 1
    expected = capsys.readouterr().out
    monkeypatch.setattr(sys, "stderr", closed(io.StringIO()))
    assert main([CHECK[0], str(tiny_suite), *CHECK[1:]]) == 1
    assert capsys.readouterr().out == expected


def test_the_cli_writes_ascii_on_an_ascii_stdout(tiny_suite, monkeypatch):
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii"))
    assert main([CHECK[0], str(tiny_suite), *CHECK[1:]]) == 1
    sys.stdout.flush()
    out = raw.getvalue().decode("ascii")
    assert "(pre_classifier -> relu -> classifier)" in out and out.rstrip().endswith("FAILED")


def console(tiny_suite: Path, shell: str = "", **kwargs) -> subprocess.CompletedProcess:
    """``warp-check check`` on the tiny suite as a user's shell runs it, ``shell`` its redirections."""
    line = f'"$0" {CHECK[0]} "$1" {" ".join(CHECK[1:])} {shell}'
    command = ["bash", "-c", line, SCRIPT, str(tiny_suite)]
    return subprocess.run(command, capture_output=True, timeout=120, check=False, **kwargs)


def test_the_console_script_with_its_stderr_closed_keeps_its_verdict(tiny_suite):
    done = console(tiny_suite, "2>&-")
    assert done.returncode == 1 and done.stdout.rstrip().endswith(b"FAILED")  # the check's verdict: cases fail
    assert b"Traceback" not in done.stdout and b"warp: encoding" not in done.stdout


def test_a_pipe_closed_early_ends_quietly_with_the_verdict(tiny_suite):
    # The reader leaves before warp-check writes a byte: every write to the pipe fails (EPIPE);
    # stderr goes to a file that shows what warp-check would have said on the way.
    line = f'"$0" {CHECK[0]} "$1" {" ".join(CHECK[1:])} 2>"$2" | (exec 0<&-)'
    log = tiny_suite / "stderr.log"
    done = subprocess.run(["bash", "-c", f"{line}; exit ${{PIPESTATUS[0]}}", SCRIPT, str(tiny_suite), str(log)],
                          capture_output=True, timeout=120, check=False)  # fmt: skip
    err = log.read_bytes()
    assert done.returncode == 1, err  # not 2 ("error: Broken pipe"), not 120 (a failed flush at exit)
    assert b"Traceback" not in err and b"BrokenPipe" not in err and b"Broken pipe" not in err
    assert b"warp: encoding cases: " in err  # stderr, still open, got the progress


def test_the_console_script_in_a_non_utf8_locale_falls_back_to_ascii(tiny_suite):
    environment = os.environ | {"LC_ALL": "C", "PYTHONIOENCODING": "ascii"}
    line = f'"$0" {CHECK[0]} "$1" --cache none --progress bar --progress-after 0'
    command = ["bash", "-c", line, SCRIPT, str(tiny_suite)]
    done = subprocess.run(command, capture_output=True, timeout=120, check=False, env=environment)
    assert done.returncode == 1 and b"Traceback" not in done.stderr, done.stderr[-2000:]
    assert b"pre_classifier -> relu -> classifier" in done.stdout
    assert b"warp: encoding cases" in done.stderr and max(done.stdout + done.stderr) < 128  # ASCII only
