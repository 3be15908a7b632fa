"""The project's error types: every failure a user can cause is one of these."""

from __future__ import annotations

import re
from pathlib import Path


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it was raised from or while handling, outermost first (cycles cut)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def first_line(exc: BaseException) -> str:
    """What a library's exception says, in one line for a message: its first line without terminal
    colour codes (a loader's essay is not a message), joined to the next where it ends in a colon
    ("Validation error for field 'dim':" says nothing alone)."""
    lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def from_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` came from a Ctrl-C. One that lands while an extension module initialises comes
    back as another error (pybind11's ``ImportError: initialization failed``, raised from the
    interrupt)."""
    return any(isinstance(e, KeyboardInterrupt) for e in exception_chain(exc))


def reraise_interrupt(exc: BaseException) -> None:
    """Raise :class:`KeyboardInterrupt` when ``exc`` came from one (:func:`from_interrupt`): a broad
    ``except Exception`` must not report it as the model's, the suite's or the file's fault."""
    if from_interrupt(exc):
        raise KeyboardInterrupt from exc


class WarpError(Exception):
    """Base class of every error warp-check raises on purpose."""


class SuiteError(WarpError):
    """A mistake in a suite: names the file, the line (when there is one) and the field."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        self.field = field
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = self.path or "<suite>"
        if self.line is not None:
            where += f":{self.line}"
        if self.field is not None:
            where += f": field '{self.field}'"
        return f"{where}: {self.message}"


class SettingsError(WarpError, ValueError):
    """A setting has a value the method cannot work with; names the field and the value."""

    def __init__(self, field: str, value: object, why: str) -> None:
        self.field = field
        self.value = value
        self.why = why
        super().__init__(f"{field}={value!r}: {why}")

    @property
    def of_key(self) -> str:
        """The error said of the warp.toml key that gave the value, which names the field already."""
        return f"{self.value!r}: {self.why}"


class ModelError(WarpError):
    """The model cannot be loaded or its head is not of the form WARP repairs."""


class TokenizerFailure(ModelError):
    """The tokenizer raised on ``texts[index]`` (with its pair): ``reason`` is what it said. Callers that
    know the cases name the case's file and line."""

    def __init__(self, message: str, *, index: int, reason: str) -> None:
        super().__init__(message)
        self.index = index
        self.reason = reason


class EngineError(WarpError):
    """The engine that runs the encoder pass (Ray) failed, or cannot be reached; nothing was cached."""


class CertificateError(WarpError):
    """A certificate file is malformed or does not match the model it claims to describe."""


class ArtefactError(WarpError):
    """The repaired model could not be written (or would overwrite what it must not)."""


class WarpWarning(UserWarning):
    """Base class of the warnings warp-check gives: something went wrong that the run survives."""


class CacheWarning(WarpWarning):
    """The representation cache cannot be written: the run goes on without it, answers unchanged."""
