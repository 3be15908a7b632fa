"""Reading a JSON file from a user's folder within bounds: every refusal is one error naming the file.

Python's ``json`` turns a hostile or damaged file into a traceback: a document nested 200,000
levels deep raises RecursionError (in the parser, or in whatever walks the result), an integer of
more than 4,300 digits a bare ValueError, and ``NaN``/``Infinity`` or ``1e999`` parse into floats
that no certificate holds. Here the text is bounded before it is parsed:

- its size: :data:`MAX_BYTES`, 1 GiB. A certificate takes ~560 bytes a case with the example's
  short texts (``example_suites``), so this is ~1.9 M cases, or 1 M cases of 1 KiB; a file larger
  than that is not one warp-check wrote, and parsing it would take ~10x its size in memory before
  any message could be given.
- its nesting: :data:`MAX_DEPTH`, 64 levels; a certificate is 4 deep. Checked on the text without
  recursion (strings blanked, then matched bracket pairs removed one level a pass).
- its numbers: integers of at most :data:`MAX_DIGITS` digits (Python's own limit, which would
  otherwise raise ValueError mid-parse) and finite floats only; the key holding the number is named.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_BYTES = 1 << 30
MAX_DEPTH = 64
MAX_DIGITS = 4300

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")
# A number that may be refused: an integer past Python's digit limit or a float that may not be finite
# (309 digits or more, or a 3-digit exponent); NaN and Infinity, which JSON does not allow.
_LONG_NUMBER = re.compile(r"[eE][-+]?[0-9]{3}|(?<![0-9])[0-9]{309}")


class _Refused:
    """What a number hook returns for a number refused, so the object holding it can name its key."""

    def __init__(self, why: str) -> None:
        self.why = why


class _RefusedAt(Exception):
    def __init__(self, why: str, key: str | None) -> None:
        super().__init__(why)
        self.why = why
        self.key = key


def read_json(path: str | Path, *, error: Callable[[str], Exception], what: str) -> Any:
    """The parsed JSON of the file at ``path``; every refusal raises ``error("<path>: ...")``.

    ``what`` names the file in the messages ("certificate"): a missing file is "no <what> file
    here", an unreadable or malformed one "not a readable JSON <what>".
    """
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise error(f"{path}: no {what} file here") from None
    except OSError as exc:  # a folder, a file without read permission, a symlink loop
        raise error(f"{path}: not a readable JSON {what} ({exc.strerror or exc})") from None
    if len(raw) > MAX_BYTES:
        raise error(f"{path}: more than {MAX_BYTES:,} bytes: too large for a {what}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{path}: not a readable JSON {what} (not UTF-8: byte 0x{raw[exc.start]:02x} at {exc.start})"
        ) from None
    return parse_json(text, where=str(path), error=error, what=what)


def parse_json(text: str, *, where: str, error: Callable[[str], Exception], what: str) -> Any:
    """``text`` parsed within the bounds of this module; refusals raise ``error("<where>: ...")``."""
    outside_strings = _STRING.sub('""', text)
    if nesting_depth(outside_strings) > MAX_DEPTH:
        raise error(f"{where}: nested more than {MAX_DEPTH} levels deep: too deep for a {what}")
    if (
        "NaN" not in outside_strings and "Infinity" not in outside_strings and not _LONG_NUMBER.search(outside_strings)
    ):  # the common case, at the C parser's full speed
        return _decode(json.JSONDecoder(), text, where=where, error=error, what=what)
    found: list[_Refused] = []

    def refuse(why: str) -> _Refused:
        found.append(_Refused(why))
        return found[-1]

    def parse_int(digits: str) -> int | _Refused:
        count = len(digits.lstrip("-"))
        if count > MAX_DIGITS:
            return refuse(f"an integer of {count:,} digits (at most {MAX_DIGITS:,})")
        return int(digits)

    def parse_float(literal: str) -> float | _Refused:
        value = float(literal)
        return (
            value
            if math.isfinite(value)
            else refuse(f"{literal if len(literal) <= 24 else literal[:24] + '…'} is not a finite number")
        )

    def parse_constant(name: str) -> _Refused:
        return refuse(f"{name} is not a number JSON allows")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        if found:
            for key, value in items:
                refused = _refused_in(value)
                if refused is not None:
                    raise _RefusedAt(refused.why, key)
        return dict(items)

    decoder = json.JSONDecoder(
        parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant, object_pairs_hook=pairs
    )
    try:
        data = _decode(decoder, text, where=where, error=error, what=what)
    except _RefusedAt as exc:
        raise error(f"{where}: key '{exc.key}': {exc.why}") from None
    if found:  # a refused number outside every object: a bare number or a list at the top
        raise error(f"{where}: {found[0].why}")
    return data


def _decode(decoder: json.JSONDecoder, text: str, *, where: str, error: Callable[[str], Exception], what: str) -> Any:
    try:
        return decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not a readable JSON {what} ({exc})") from None
    except RecursionError:  # brackets that do not match, nested past the parser's own limit
        raise error(f"{where}: nested more than {MAX_DEPTH} levels deep: too deep for a {what}") from None
    except ValueError as exc:  # what the checks before let through all the same: a message
        raise error(f"{where}: not a readable JSON {what} ({exc})") from None


def nesting_depth(outside_strings: str) -> int:
    """How deep the brackets of a JSON text (its strings blanked) nest, up to ``MAX_DEPTH + 1`` (more
    is not counted); without recursion, in a few passes of C-speed regular expressions. Brackets that
    do not match leave the rest to the parser's own message."""
    brackets = _NOT_BRACKET.sub("", outside_strings)
    for level in range(MAX_DEPTH + 1):
        if not brackets:
            return level
        brackets, removed = _INNERMOST.subn("", brackets)
        if not removed:
            return 0  # brackets that do not match: JSON the parser refuses with its own message
    return MAX_DEPTH + 1


def _refused_in(value: Any) -> _Refused | None:
    """The refused number ``value`` is or holds within lists (objects name their own keys)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Refused):
            return item
        if isinstance(item, list):
            stack.extend(item)
    return None
