"""Where each key of ``warp.toml`` is, so that an error can point at its line.

tomllib keeps no positions; :class:`KeyLines` finds them in the text, and :class:`SuiteToml`
(the file being loaded) turns a dotted key into a :class:`~warp_check.errors.SuiteError` that
names the file, the line and the field. :func:`edited_toml` sets keys the same way, line by line,
so that a file written back keeps the user's comments and layout.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_check.errors import SuiteError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

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
        for number, raw in enumerate(text.splitlines(), start=1):
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
    lines = text.splitlines()
    if line is None or not 1 <= line <= len(lines) or not (m := _KEY.match(lines[line - 1].strip())):
        return None
    for above in reversed(lines[: line - 1]):
        if header := _HEADER_ARRAY.match(above.strip()) or _HEADER_TABLE.match(above.strip()):
            return f"{_dotted(header[1])}.{_dotted(m[1])}"
    return _dotted(m[1])


class SuiteToml:
    """The warp.toml being loaded: its path and where its keys are, for errors that point there."""

    def __init__(self, toml: Path) -> None:
        self.toml = toml
        self.keys = KeyLines("")

    def error(self, dotted: str | None, message: str, line: int | None = None) -> SuiteError:
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
    end). ``cases``: (path, kind) of a ``[[cases]]`` table to add at the end. Raises ValueError where a
    table is written inline (``neighbours = {...}``) or the result does not read back as asked."""
    lines = text.splitlines()
    for edit in edits:
        lines = _set_key(lines, edit)
    if cases is not None:
        lines += ["", "[[cases]]", f"path = {_toml_value(cases[0])}", f"kind = {_toml_value(cases[1])}"]
    result = "\n".join(lines) + "\n"
    parsed = tomllib.loads(result)
    for edit in edits:
        table: Any = parsed
        for part in edit.table.split("."):
            table = table.get(part, {})
        if table.get(edit.key) != edit.value:
            raise ValueError(f"[{edit.table}] {edit.key} did not read back as {edit.value!r} after the edit")
    return result


def _set_key(lines: list[str], edit: TomlEdit) -> list[str]:
    wanted = f"{edit.table}.{edit.key}"
    table = ""
    header: int | None = None  # the line of the edit's table header
    last: int | None = None  # the last key line of the edit's table
    for number, raw in enumerate(lines):
        line = raw.strip()
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
                return [*lines[:number], f"{raw[: start + 1].rstrip()} {_toml_value(edit.value)}{kept}",
                        *lines[number + 1 :]]  # fmt: skip
            if table == edit.table:
                last = number
    new = f"{edit.key} = {_toml_value(edit.value)}"
    if header is None:
        return [*lines, "", f"[{edit.table}]", new]
    assert last is not None
    return [*lines[: last + 1], new, *lines[last + 1 :]]
