"""How warp-check shows the progress of a long step, one rule for every front end.

A step (encoding cases, drawing a neighbourhood, the repair loop's iterations, an attack) that
runs longer than ``after_s`` seconds shows a bar redrawn in place on a terminal; where the output
is not a terminal, or the user asked for quiet output, it writes one line when it ends and
nothing else (a redirected log gets no carriage-return redraws); a shorter step shows nothing.
The pytest plugin hands its terminal reporter's stream in (``stream``), so a bar shows under
pytest too, outside pytest's capture; the ``warp-check`` command writes on stderr. Light: tqdm
is imported only when a bar is drawn.

Progress never stops the work it shows: a stream that is closed, gone (None), a pipe whose reader
left, or one that cannot encode a character, gets what it can take (ASCII in place of the rest)
or nothing more, and the step runs on.
"""

from __future__ import annotations

import enum
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TextIO

from warp_check.errors import SettingsError

PROGRESS_AFTER_S = 2.0  # a step shorter than this shows nothing: a bar that flashes by is noise


class ProgressStyle(enum.Enum):
    """How progress shows: ``auto`` a bar on a terminal and lines elsewhere, or one of them always."""

    AUTO = "auto"
    BAR = "bar"  # redrawn in place (tqdm)
    LINES = "lines"  # one line when a step ends
    OFF = "off"


@dataclass(frozen=True, kw_only=True)
class Progress:
    """Where and how long steps show their progress (``stream`` None: stderr when a step starts)."""

    style: ProgressStyle = ProgressStyle.AUTO
    stream: TextIO | None = None
    after_s: float = PROGRESS_AFTER_S
    prefix: str = "warp"

    def __post_init__(self) -> None:
        if not isinstance(self.style, ProgressStyle):
            raise SettingsError("style", self.style, f"must be one of {', '.join(s.value for s in ProgressStyle)}")
        after = self.after_s
        if isinstance(after, bool) or not isinstance(after, int | float) or not math.isfinite(after) or after < 0:
            raise SettingsError("after_s", after, "must be a finite number of seconds >= 0")
        if self.stream is not None and not callable(getattr(self.stream, "write", None)):
            raise SettingsError("stream", self.stream, "must be a text stream (with a write method)")

    @classmethod
    def chosen(
        cls,
        style: str | ProgressStyle | None = None,
        *,
        after_s: float | None = None,
        quiet: bool = False,
        stream: TextIO | None = None,
    ) -> Progress:
        """The progress a front end's options ask for: ``style`` by name (None: auto), ``quiet``
        turning auto into lines; a bad name is a SettingsError naming ``style``."""
        if isinstance(style, str):
            try:
                style = ProgressStyle(style.strip().lower())
            except ValueError:
                names = ", ".join(s.value for s in ProgressStyle)
                raise SettingsError("style", style, f"must be one of {names}") from None
        style = style or ProgressStyle.AUTO
        if quiet and style is ProgressStyle.AUTO:
            style = ProgressStyle.LINES
        return cls(style=style, after_s=PROGRESS_AFTER_S if after_s is None else after_s, stream=stream)

    @classmethod
    def silent(cls) -> Progress:
        return cls(style=ProgressStyle.OFF)

    def shown(self, stream: TextIO | None = None) -> ProgressStyle:
        """The style a step shows in on ``stream`` (default: this progress's): auto resolved."""
        if self.style is not ProgressStyle.AUTO:
            return self.style
        stream = stream or self.stream or sys.stderr
        isatty = getattr(stream, "isatty", None)
        try:
            terminal = bool(isatty()) if callable(isatty) else False
        except (OSError, ValueError):  # a closed or detached stream
            terminal = False
        return ProgressStyle.BAR if terminal else ProgressStyle.LINES

    def step(self, what: str, *, total: int | None = None, unit: str = "case") -> Step:
        """A step named ``what`` of ``total`` ``unit``s (None: not known ahead), as a context manager."""
        return Step(self, what, total=total, unit=unit)


def as_progress(progress: bool | Progress | None) -> Progress:
    """``progress`` as a :class:`Progress`: True the default (stderr, auto), False or None silent."""
    if isinstance(progress, Progress):
        return progress
    return Progress() if progress else Progress.silent()


class Step:
    """One step's progress: :meth:`advance` as work is done; the bar or the line when it ends."""

    def __init__(self, progress: Progress, what: str, *, total: int | None, unit: str) -> None:
        self.progress = progress
        self.what = what
        self.total = total
        self.unit = unit
        self.done = 0
        self.note = ""
        self._stream = progress.stream or sys.stderr
        # No stream at all: a process started with its stderr closed has sys.stderr None.
        self._style = progress.shown(self._stream) if self._stream is not None else ProgressStyle.OFF
        self._start = time.perf_counter()
        self._bar: Any = None

    def __enter__(self) -> Step:
        self._start = time.perf_counter()
        if self._style is ProgressStyle.BAR:
            self._bar = self._drawn(lambda: _bar(self))
        return self

    def _drawn(self, draw: Callable[[], Any]) -> Any:
        """``draw()``'s value, or None (and no bar from now on) where the stream refuses it."""
        try:
            return draw()
        except (OSError, ValueError):  # closed, a broken pipe, or a character it cannot encode
            if self._bar is not None:
                self._bar.disable = True  # its close (and __del__) write nothing more
            self._bar = None
            self._style = ProgressStyle.OFF
            return None

    def advance(self, n: int = 1, *, note: str | None = None) -> None:
        """``n`` more units done; ``note`` (a few words: the loop's shortfall, say) shown beside the count."""
        self.done += n
        if note is not None:
            self.note = note
        bar = self._bar
        if bar is not None:
            if note is not None:
                bar.set_postfix_str(_encodable(self._stream, note), refresh=False)
            self._drawn(lambda: bar.update(n))

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        seconds = time.perf_counter() - self._start
        bar = self._bar
        if bar is not None:
            self._drawn(bar.close)
        elif self._style is ProgressStyle.LINES and seconds >= self.progress.after_s:
            write_text(self._stream, self.line(seconds, stopped=kind is not None) + "\n", flush=True)

    def line(self, seconds: float, *, stopped: bool = False) -> str:
        """The step as one line: what, how much of how many, how long, and the last note."""
        of = f" of {self.total}" if self.total is not None else ""
        units = self.unit if self.done == 1 and self.total in (None, 1) else f"{self.unit}s"
        end = " (stopped)" if stopped else ""
        note = f"; {self.note}" if self.note else ""
        return f"{self.progress.prefix}: {self.what}: {self.done}{of} {units} in {seconds:.1f} s{note}{end}"


def _bar(step: Step) -> Any:
    from tqdm import tqdm

    class Bar(tqdm):
        # No monitor thread: it would redraw from another thread, where pytest's capture is not suspended.
        monitor_interval = 0

    return Bar(
        total=step.total,
        desc=_encodable(step._stream, f"{step.progress.prefix}: {step.what}"),
        unit=step.unit,
        file=step._stream,
        delay=step.progress.after_s,
        leave=True,
        dynamic_ncols=False,
    )


def write_text(stream: TextIO, text: str, *, flush: bool = False) -> bool:
    """``text`` on ``stream`` as far as it takes it: in its encoding's ASCII look-alikes where it
    cannot encode the rest, and nothing where it is closed or its reader left. False: the stream is
    gone (closed, EPIPE, EIO), and a caller writes nothing more on it."""
    try:
        try:
            stream.write(text)
        except UnicodeEncodeError:
            stream.write(as_ascii(text, getattr(stream, "encoding", None) or "ascii"))
        if flush and callable(getattr(stream, "flush", None)):
            stream.flush()
    except (OSError, ValueError):  # closed ("I/O operation on closed file"), EPIPE, EIO
        return False
    return True


_ASCII = str.maketrans({"→": "->", "…": "...", "–": "-", "—": "--", "‖": "||", "γ": "gamma", "ε": "eps", "κ": "kappa"})


def _encodable(stream: TextIO, text: str) -> str:
    """``text``, or its ASCII form where ``stream``'s encoding cannot carry it."""
    try:
        text.encode(getattr(stream, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return as_ascii(text)
    return text


def as_ascii(text: str, encoding: str = "ascii") -> str:
    """``text`` as ``encoding`` can carry it: the marks warp-check writes beyond ASCII as their
    ASCII look-alikes, any other character it lacks as its escape (``\\u00e9``), so a case id still reads."""
    return text.translate(_ASCII).encode(encoding, "backslashreplace").decode(encoding)
