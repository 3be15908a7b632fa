"""A suite's deferred file, read: the must_fix cases a traffic budget could not buy, moved out of the
release's must_fix files (``warp-check defer``, :mod:`warp_check.suite.deferred`) into the file
``warp.toml`` names (``deferred = "deferred.jsonl"``). Standard library only, as the loader is.

A line is the case's line as it was in its case file, plus where it came from and why it went::

    {"id": "c17", "text": "...", "label": "positive", "from": "fix.jsonl", "line": 12,
     "deferred": "the budget max_change = 1% could not buy it on 2026-11-29"}

(``as_written``: the line's own text, only where it is not the record as warp-check writes it, so that
putting it back restores the file byte for byte). Every mistake is a SuiteError naming file, line and field.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_check.cases import Case, Kind
from warp_check.decisions import DecisionKind
from warp_check.errors import SuiteError
from warp_check.suite.case_files import CaseFile, CaseReader, Location, json_line, no_duplicate_keys
from warp_check.suite.toml_lines import SuiteToml

DEFERRED_KEY = "deferred"  # warp.toml's top-level key naming the deferred file
DEFAULT_FILE = "deferred.jsonl"  # what `warp-check defer` names where warp.toml names none
# A deferred line's own fields beside its case's: the case file it came from, its line there, why it went,
# and (where the line was not the record as written back) the line itself.
FROM, LINE, REASON, AS_WRITTEN = "from", "line", "deferred", "as_written"
_OWN_FIELDS = (FROM, LINE, REASON, AS_WRITTEN)


@dataclass(frozen=True, kw_only=True)
class DeferredCase:
    """A case of the deferred file: the case (kind deferred, its origin the deferred file's line), the
    case file it came from (as ``warp.toml``'s folder names it) and its line there, and why it went."""

    case: Case
    came_from: str
    line: int
    reason: str
    at: Location

    def __post_init__(self) -> None:
        if self.case.kind is not Kind.DEFERRED:
            raise ValueError(f"case.kind={self.case.kind.value!r}: a deferred case's kind is deferred")
        if self.line < 1:
            raise ValueError(f"line={self.line!r}: a line number (>= 1)")


# -- reading --------------------------------------------------------------------------------


def read_deferred_table(loader: SuiteToml, data: Mapping[str, Any], case_files: Sequence[CaseFile]) -> Path | None:
    """The deferred file warp.toml names (``deferred = "..."``), which must exist and be no case file of
    ``[[cases]]``; None where it names none."""
    written = data.get(DEFERRED_KEY)
    if written is None:
        return None
    if not isinstance(written, str) or not written.strip():
        raise loader.error(DEFERRED_KEY, f"must be a non-empty string (a JSONL file), got {written!r}")
    path = loader.toml.parent / written
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist (relative to warp.toml)"
        raise loader.error(
            DEFERRED_KEY,
            f"deferred file {written!r} {what}: create it empty, or leave the key out (warp-check defer writes both)",
        )
    resolved = loader.resolve(path, DEFERRED_KEY, written)
    for i, case_file in enumerate(case_files):
        if case_file.path.resolve() == resolved:
            raise loader.error(DEFERRED_KEY, f"{written!r} is a case file of cases[{i}]: name a file of its own")
    return path


def read_deferred(
    loader: SuiteToml,
    path: Path,
    labels: dict[str, int],
    num_classes: int | None,
    decision: DecisionKind,
    locations: Mapping[str, Location],
) -> tuple[DeferredCase, ...]:
    """The deferred file's cases, each line read by the case files' rules (file, line and field named);
    an id the suite's case files hold too (``locations``) is refused: a case is deferred or not."""
    reader = CaseReader(loader, labels, num_classes, decision)
    root = loader.toml.parent
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SuiteError(f"cannot read the file ({exc.strerror or exc})", path=path) from None
    out: list[DeferredCase] = []
    as_fix = CaseFile(path=path, kind=Kind.MUST_FIX, line=None)
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.rstrip(b"\r").strip():
            continue
        if decision.per_word:
            raise SuiteError(
                "deferred cases are not built for a token classifier yet (decision token_tags)", path=path, line=number
            )
        record, own = split_line(line.rstrip(b"\r"), path, number)
        [case] = reader._case(json_line(record).encode(), as_fix, rel, number)
        if case.id in reader.locations:
            first = reader.locations[case.id]
            raise SuiteError(
                f"duplicate id {case.id!r}: already at line {first.line}", path=path, line=number, field="id"
            )
        if case.id in locations:
            there = locations[case.id]
            raise SuiteError(
                f"case {case.id!r} is deferred here and still a case at {shown(there.path, root)}:{there.line}: "
                "a case is deferred or not; remove one of the two lines (warp-check defer SUITE --restore ID puts "
                "a deferred case back)",
                path=path,
                line=number,
                field="id",
            )
        at = Location(path=path, line=number)
        reader.locations[case.id] = at
        out.append(
            DeferredCase(
                case=dataclasses.replace(case, kind=Kind.DEFERRED),
                came_from=own[FROM],
                line=own[LINE],
                reason=own[REASON],
                at=at,
            )
        )
    return tuple(out)


def split_line(line: bytes, path: Path, number: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A deferred line's case record and its own fields (checked: file, line and field named)."""

    def error(field_name: str | None, message: str) -> SuiteError:
        return SuiteError(message, path=path, line=number, field=field_name)

    try:
        record = json.loads(line.decode("utf-8"), object_pairs_hook=no_duplicate_keys)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise error(None, f"not a JSON object ({exc}); one deferred case a line") from None
    if not isinstance(record, dict):
        raise error(None, f"a deferred case is a JSON object, got {type(record).__name__}")
    own = {key: record.pop(key) for key in _OWN_FIELDS if key in record}
    for key in (FROM, LINE, REASON):
        if key not in own:
            raise error(key, f"missing field {key!r}: a deferred case says where it came from and why it went")
    if not isinstance(own[FROM], str) or not own[FROM].strip():
        raise error(FROM, f"must be the case file it came from, got {own[FROM]!r}")
    if isinstance(own[LINE], bool) or not isinstance(own[LINE], int) or own[LINE] < 1:
        raise error(LINE, f"must be its line there (an integer >= 1), got {own[LINE]!r}")
    if not isinstance(own[REASON], str):
        raise error(REASON, f"must be a string (why it was deferred), got {own[REASON]!r}")
    if record.get("kind", Kind.MUST_FIX.value) != Kind.MUST_FIX.value:
        raise error("kind", f"a deferred case was a must_fix case, got kind {record['kind']!r}")
    written = own.get(AS_WRITTEN)
    if written is not None:
        try:
            stated = json.loads(written) if isinstance(written, str) else None
            # a line without an id was known by its place, which its deferred line states as its id
            same = isinstance(stated, dict) and stated in (record, {k: v for k, v in record.items() if k != "id"})
        except ValueError:
            same = False
        if not same:
            raise error(AS_WRITTEN, "must be the case's line as it was, stating the same case as this line")
    return record, own


def shown(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


__all__ = [
    "AS_WRITTEN",
    "DEFAULT_FILE",
    "DEFERRED_KEY",
    "FROM",
    "LINE",
    "REASON",
    "DeferredCase",
    "read_deferred",
    "read_deferred_table",
    "shown",
    "split_line",
]
