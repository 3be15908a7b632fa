"""Where each key of ``warp.toml`` is, so that an error can point at its line.

tomllib keeps no positions; :class:`KeyLines` finds them in the text, and :class:`SuiteToml`
(the file being loaded) turns a dotted key into a :class:`~warp_check.errors.SuiteError` that
names the file, the line and the field. :func:`edited_toml` sets keys the same way, line by line,
so that a file written back keeps the user's comments, layout and line endings; :func:`rewrite_toml`
writes it back under a lock and atomically, and refuses a read-only file.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_check.errors import SettingsError, SuiteError
from warp_check.files import replaced_atomically

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

_MODEL_SOURCE_KEYS = ("model.path", "model.factory", "model.id", "model.revision")  # where [model]'s model is
_HEADER_ARRAY = re.compile(r"^\[\[\s*([^\[\]]+?)\s*\]\]\s*(#.*)?$")


_HEADER_TABLE = re.compile(r"^\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")


_KEY = re.compile(r"""^((?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+))*)\s*=""")


def _dotted(text: str) -> str:
    parts = re.findall(r""""[^"]*"|'[^']*'|[A-Za-z0-9_\-]+""", text)
    return ".".join(p.strip("\"'") for p in parts)


class KeyLines:
    """Line numbers of tables and keys in a TOML text (tomllib keeps no positions).

    ``cases[1].path`` means the key ``path`` in the second ``[[cases]]`` table.
    """

    def __init__(self, text: str) -> None:
        self.lines: dict[str, int] = {}
        counts: dict[str, int] = {}
        table = ""
        in_multiline: str | None = None
        for number, raw in enumerate(text.split("\n"), start=1):  # TOML's lines: \u2028 and the like end none
            line = raw.strip()
            if in_multiline is not None:
                if line.count(in_multiline) % 2 == 1:
                    in_multiline = None
                continue
            if m := _HEADER_ARRAY.match(line):
                name = _dotted(m[1])
                counts[name] = counts.get(name, -1) + 1
                table = f"{name}[{counts[name]}]"
                self.lines.setdefault(table, number)
                self.lines.setdefault(name, number)  # "cases" points at the first [[cases]]
                continue
            if m := _HEADER_TABLE.match(line):
                table = _dotted(m[1])
                # [repair.solver] after [[cases]] etc.: index array parents by their last element
                for name, count in counts.items():
                    if table.startswith(name + "."):
                        table = f"{name}[{count}]{table[len(name) :]}"
                self.lines.setdefault(table, number)
                continue
            if m := _KEY.match(line):
                key = _dotted(m[1])
                self.lines.setdefault(f"{table}.{key}" if table else key, number)
                for quote in ('"""', "'''"):
                    if line.count(quote) % 2 == 1:
                        in_multiline = quote

    def line(self, dotted: str) -> int | None:
        """The line of ``dotted`` or, failing that, of its closest enclosing table or key."""
        name = dotted
        while name:
            if name in self.lines:
                return self.lines[name]
            name = name.rpartition(".")[0]
        return None


def key_at(text: str, line: int | None) -> str | None:
    """The dotted key written on ``line`` (under its table header), if that line holds one."""
    lines = text.split("\n")
    if line is None or not 1 <= line <= len(lines) or not (m := _KEY.match(lines[line - 1].strip())):
        return None
    for above in reversed(lines[: line - 1]):
        if header := _HEADER_ARRAY.match(above.strip()) or _HEADER_TABLE.match(above.strip()):
            return f"{_dotted(header[1])}.{_dotted(m[1])}"
    return _dotted(m[1])


class SuiteToml:
    """The warp.toml being loaded: its path and where its keys are, for errors that point there."""

    def __init__(self, toml: Path, *, model_given: str | None = None) -> None:
        self.toml = toml
        self.keys = KeyLines("")
        # The model a flag (or the API's model=) gave in place of [model]: a mistake of that model is
        # the flag's, never the line of warp.toml it overrides.
        self.model_given = model_given

    def error(self, dotted: str | None, message: str, line: int | None = None) -> SuiteError | SettingsError:
        if self.model_given is not None and dotted in _MODEL_SOURCE_KEYS:
            return SettingsError("model", self.model_given, message)
        if line is None and dotted is not None:
            line = self.keys.line(dotted)
        return SuiteError(message, path=self.toml, line=line, field=dotted)

    def resolve(self, path: Path, dotted: str, written: str) -> Path:
        """``path.resolve()``; a symlink loop is the suite's mistake, not a crash."""
        try:
            return path.resolve()
        except (OSError, RuntimeError) as exc:  # RuntimeError: Python < 3.13's "Symlink loop"
            raise self.error(dotted, f"{written!r} cannot be resolved ({exc}): a symlink loop?") from None

    def unknown(self, table: Mapping[str, Any], known: tuple[str, ...], prefix: str) -> None:
        for key in table:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                where = f"[{prefix}]" if prefix else "the top level of warp.toml"
                raise self.error(
                    f"{prefix}.{key}" if prefix else key,
                    f"unknown key '{key}' in {where}{hint}; known keys: {', '.join(known)}",
                )


@dataclass(frozen=True, kw_only=True)
class TomlEdit:
    """One key of warp.toml to set: ``table`` dotted (``repair.neighbours``), ``key`` within it."""

    table: str
    key: str
    value: bool | int | float | str


def toml_text(raw: bytes, path: Path) -> str:
    """warp.toml's bytes as text; a SuiteError naming the line where they are not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SuiteError(f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})", path=path, line=line) from None


def writable_toml(path: str | Path, *, hint: str) -> Path:
    """The file ``path`` (a symlink: the file it names) where it may be rewritten; a SuiteError saying
    so, with ``hint`` (what the user can do), where it is read-only or not a file."""
    path = Path(path)
    try:
        target = path.resolve(strict=True)
        mode = target.stat().st_mode
    except (OSError, RuntimeError) as exc:  # RuntimeError: Python < 3.13's "Symlink loop"
        raise SuiteError(f"cannot be read ({getattr(exc, 'strerror', None) or exc}); {hint}", path=path) from None
    if not stat.S_ISREG(mode):
        raise SuiteError(f"is not a file; {hint}", path=path)
    # The mode bits, not only access(): root may write anything, and a file made read-only is the user's word.
    if not mode & 0o222 or not os.access(target, os.W_OK):
        why = f"is read-only (mode {stat.S_IMODE(mode):o}), and warp-check never makes a file writable behind your back"
        raise SuiteError(f"{why}; {hint}", path=path)
    return target


def rewrite_toml(path: str | Path, change: Callable[[str], str], *, hint: str) -> Path:
    """``path``'s text replaced by ``change(text)``: one writer at a time (a lock held from the read to
    the rename, so two at once each edit the other's result, never the same old text) and atomically
    (a reader sees the old file or the new one, whole); the file's mode kept, a symlink kept pointing
    at it. A read-only file, or one that is not UTF-8, is a SuiteError before ``change`` runs (``hint``:
    what the user can do). Returns ``path``."""
    from filelock import FileLock

    target = writable_toml(path, hint=hint)
    with FileLock(toml_lock_path(target)):
        writable_toml(path, hint=hint)  # again, under the lock: it may have changed while we waited
        new = change(toml_text(target.read_bytes(), Path(path))).encode("utf-8")
        mode = stat.S_IMODE(target.stat().st_mode)
        with replaced_atomically(target, suffix=".tmp") as tmp:
            with open(tmp, "wb") as handle:
                handle.write(new)
            os.chmod(tmp, mode)
    return Path(path)


def toml_lock_path(target: Path) -> str:
    # In the temp folder, not beside warp.toml: no litter in the user's suite.
    key = hashlib.sha256(str(target).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"warp-check-toml-{key}.lock")


def _toml_value(value: bool | int | float | str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)


def _comment_at(line: str) -> int | None:
    """Where a ``#`` comment starts in ``line`` (outside quotes), None where there is none."""
    quote: str | None = None
    escaped = False
    for i, char in enumerate(line):
        if quote == '"' and escaped:
            escaped = False
        elif quote == '"' and char == "\\":
            escaped = True
        elif quote is not None and char == quote:
            quote = None
        elif quote is None and char in "\"'":
            quote = char
        elif quote is None and char == "#":
            return i
    return None


def edited_toml(text: str, edits: Sequence[TomlEdit], *, cases: tuple[str, str] | None = None) -> str:
    """``text`` with each edit's key set, line by line: a key already there keeps its line, its
    indentation and its comment; a new key goes after the last key of its table (a new table at the
    end). ``cases``: (path, kind) of a ``[[cases]]`` table to add at the end. Every other byte is kept,
    line endings (CRLF) and a missing final newline included; new lines take the file's first line
    ending. Raises ValueError where a table is written inline (``neighbours = {...}``) or the result
    does not read back as asked."""
    lines = _lines(text)
    newline = next((ending for _, ending in lines if ending), "\n")
    for edit in edits:
        lines = _set_key(lines, edit, newline)
    if cases is not None:
        added = ["", "[[cases]]", f"path = {_toml_value(cases[0])}", f"kind = {_toml_value(cases[1])}"]
        lines = _inserted(lines, len(lines), added, newline)
    result = "".join(body + ending for body, ending in lines)
    parsed = tomllib.loads(result)
    for edit in edits:
        table: Any = parsed
        for part in edit.table.split("."):
            table = table.get(part, {})
        if table.get(edit.key) != edit.value:
            raise ValueError(f"[{edit.table}] {edit.key} did not read back as {edit.value!r} after the edit")
    return result


def _lines(text: str) -> list[tuple[str, str]]:
    """``text`` as (body, line ending) pairs; only \\n ends a line, as in TOML (the last pair's ending
    is "" where the text does not end with one)."""
    parts = text.split("\n")
    lines = [(part[:-1], "\r\n") if part.endswith("\r") else (part, "\n") for part in parts[:-1]]
    if parts[-1]:
        lines.append((parts[-1], ""))
    return lines


def _inserted(lines: list[tuple[str, str]], at: int, bodies: list[str], newline: str) -> list[tuple[str, str]]:
    """``bodies`` as new lines before index ``at``; a last line without its ending gets one first,
    and the text keeps ending as it did."""
    before = list(lines[:at])
    ends_bare = at == len(lines) and bool(before) and before[-1][1] == ""
    if ends_bare:
        before[-1] = (before[-1][0], newline)
    new = [(body, newline) for body in bodies]
    if ends_bare:
        new[-1] = (new[-1][0], "")
    return [*before, *new, *lines[at:]]


def _continued(bodies: Sequence[str]) -> list[bool]:
    """For each line, whether it starts inside a value begun above (a multi-line string, array or
    inline table): such a line is never a header or a key, and belongs to the key above it."""
    inside: list[bool] = []
    quote: str | None = None
    depth = 0
    for body in bodies:
        inside.append(quote is not None or depth > 0)
        i = 0
        while i < len(body):
            char = body[i]
            if quote is not None:
                if char == "\\" and quote in ('"', '"""'):
                    i += 2
                    continue
                if body.startswith(quote, i):
                    i += len(quote)
                    quote = None
                    continue
            elif body.startswith('"""', i) or body.startswith("'''", i):
                quote = body[i : i + 3]
                i += 3
                continue
            elif char in "\"'":
                quote = char
            elif char == "#":
                break
            elif char in "[{":
                depth += 1
            elif char in "]}":
                depth = max(depth - 1, 0)
            i += 1
        if quote in ('"', "'"):  # a one-line string left open: a mistake tomllib names, not a value that goes on
            quote = None
    return inside


def _set_key(lines: list[tuple[str, str]], edit: TomlEdit, newline: str) -> list[tuple[str, str]]:
    wanted = f"{edit.table}.{edit.key}"
    table = ""
    header: int | None = None  # the line of the edit's table header
    last: int | None = None  # the last line of the edit's table's last key (its value may span lines)
    inside = _continued([body for body, _ in lines])
    for number, (raw, ending) in enumerate(lines):
        line = raw.strip()
        if inside[number]:
            if last is not None and last == number - 1 and table == edit.table:
                last = number
            continue
        if m := _HEADER_ARRAY.match(line):
            table = _dotted(m[1]) + "[]"  # an array's tables are never the edit's
            continue
        if m := _HEADER_TABLE.match(line):
            table = _dotted(m[1])
            if table == edit.table:
                header = last = number
            continue
        if m := _KEY.match(line):
            full = f"{table}.{_dotted(m[1])}" if table else _dotted(m[1])
            if full == edit.table:
                raise ValueError(f"[{edit.table}] is written inline ('{line}'): set {edit.key} there by hand")
            if full == wanted:
                comment = _comment_at(raw)
                kept = "  " + raw[comment:] if comment is not None else ""
                start = raw.index("=", m.start(0) + len(raw) - len(raw.lstrip()))
                edited = f"{raw[: start + 1].rstrip()} {_toml_value(edit.value)}{kept}"
                return [*lines[:number], (edited, ending), *lines[number + 1 :]]
            if table == edit.table:
                last = number
    new = f"{edit.key} = {_toml_value(edit.value)}"
    if header is None:
        return _inserted(lines, len(lines), ["", f"[{edit.table}]", new], newline)
    assert last is not None
    return _inserted(lines, last + 1, [new], newline)
