"""Where each key of ``warp.toml`` is, so that an error can point at its line.

tomllib keeps no positions; :class:`KeyLines` finds them in the text, and :class:`SuiteToml`
(the file being loaded) turns a dotted key into a :class:`~warp_check.errors.SuiteError` that
names the file, the line and the field.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from warp_check.errors import SuiteError

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
