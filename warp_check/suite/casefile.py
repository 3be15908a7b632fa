"""Adding generated cases (attacks, hypothesis counterexamples) to a suite's JSONL case file.

Generated cases get ids derived from what they say (source prefix + a hash of the text), so the
same finding gets the same id on every run and a second run adds nothing new. The file is
rewritten atomically under a lock: concurrent writers (pytest-xdist workers recording
counterexamples) cannot lose each other's lines, and a killed writer leaves the old file.
Lines already in the file are kept byte for byte; only new lines are appended.

Every writer here (append, remove, rewrite in place) writes through one place, which, given a
``check`` (:func:`loader_check`: the suite loader's own reader), reads what it is about to write
by the loader's rules before the file is replaced: a write the suite would not load is refused
and the old file stays.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_check.cases import Kind
from warp_check.errors import SuiteError
from warp_check.files import replaced_atomically
from warp_check.suite.case_files import CaseFile, CaseReader, json_line
from warp_check.suite.loader import Suite, load_suite
from warp_check.suite.toml_lines import SuiteToml

# Reads a case file (the path given) as the suite's loader would; raises SuiteError at the first bad line.
CaseFileCheck = Callable[[Path], object]

_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True, kw_only=True)
class NewCase:
    """A case to add. ``label`` is the label as the suite names it (name or class id), or, for a kind
    of decision whose answer is more than one class, the case-file fields that state it
    (``DecisionKind.answer_record``: ``{"labels": [...]}``, ``{"on": [...], "off": [...]}``)."""

    text: str
    label: str | int | Mapping[str, Any]
    text_pair: str | None = None
    source: str | None = None
    original: str | None = None  # id of the case this one was derived from
    id: str | None = None  # kept when given (and not taken in the file); else one from the text
    kind: str | None = None  # written on the line when given; else the file's [[cases]] kind applies
    fixed_by: str | None = None  # promoted cases: the SHA-256 of the certificate that fixed them

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError(f"text={self.text!r}: must be a non-empty string")
        if self.text_pair is not None and (not isinstance(self.text_pair, str) or not self.text_pair.strip()):
            raise ValueError(f"text_pair={self.text_pair!r}: must be a non-empty string or None")
        if isinstance(self.label, Mapping):
            if not self.label or not all(isinstance(k, str) for k in self.label):
                raise ValueError(f"label={self.label!r}: an answer's fields are named by strings")
        elif isinstance(self.label, bool) or not isinstance(self.label, (str, int)):
            raise ValueError(f"label={self.label!r}: must be a label name or a class id")

    @property
    def content_key(self) -> tuple[str, str | None]:
        return (self.text, self.text_pair)


@dataclass(frozen=True)
class AppendResult:
    """What :func:`append_cases` did: ids written, and how many offered cases were already there."""

    path: Path
    added: tuple[str, ...]
    duplicates: int


def case_id(prefix: str, text: str, text_pair: str | None = None, *, length: int = 10) -> str:
    """``<prefix>-<hash>``: the same text always gets the same id, whichever run found it."""
    digest = hashlib.sha256(text.encode() + b"\0" + (text_pair or "").encode()).hexdigest()
    slug = _ID_UNSAFE.sub("-", prefix).strip("-") or "case"
    return f"{slug}-{digest[:length]}"


def append_cases(
    path: str | Path, cases: Iterable[NewCase], *, id_prefix: str, check: CaseFileCheck | None = None
) -> AppendResult:
    """Append the cases not yet in ``path`` (same text and text_pair), creating it if needed.

    Raises :class:`SuiteError` (file and line) when an existing line is not a JSON object, so a
    user's hand-written file is never silently rewritten around a mistake; with ``check``, when
    the file as it would be written is not one the suite loads.
    """
    from filelock import FileLock

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(lock_path(path)):
        original = path.read_bytes() if path.exists() else b""
        seen_ids, seen_content = _existing(path, original)
        lines: list[str] = []
        added: list[str] = []
        duplicates = 0
        for case in cases:
            if case.content_key in seen_content:
                duplicates += 1
                continue
            new_id = (
                case.id if case.id is not None and case.id not in seen_ids else _fresh_id(id_prefix, case, seen_ids)
            )
            record: dict[str, object] = {"id": new_id, "text": case.text}
            if case.text_pair is not None:
                record["text_pair"] = case.text_pair
            if isinstance(case.label, Mapping):
                record.update(case.label)
            else:
                record["label"] = case.label
            for key in ("kind", "source", "original", "fixed_by"):
                if getattr(case, key) is not None:
                    record[key] = getattr(case, key)
            lines.append(json_line(record))
            seen_ids.add(new_id)
            seen_content.add(case.content_key)
            added.append(new_id)
        if lines:
            prefix = original if not original or original.endswith(b"\n") else original + b"\n"
            _write_atomically(path, prefix + ("\n".join(lines) + "\n").encode(), check)
    return AppendResult(path=path, added=tuple(added), duplicates=duplicates)


def append_sentences(
    path: str | Path, records: Sequence[Mapping[str, Any]], *, check: CaseFileCheck | None = None
) -> AppendResult:
    """Append a token classifier's sentences (``{"id", "tokens", "tags"}``) not yet in ``path``: none
    with an id or the same words and tags already there. The file as written must load (``check``)."""
    from filelock import FileLock

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(lock_path(path)):
        original = path.read_bytes() if path.exists() else b""
        seen_ids, _ = _existing(path, original)
        seen = {_sentence_key(json.loads(raw)) for raw in original.splitlines() if raw.strip()}
        fresh = [r for r in records if r["id"] not in seen_ids and _sentence_key(r) not in seen]
        if fresh:
            prefix = original if not original or original.endswith(b"\n") else original + b"\n"
            _write_atomically(path, prefix + "".join(json_line(r) + "\n" for r in fresh).encode(), check)
    return AppendResult(path=path, added=tuple(r["id"] for r in fresh), duplicates=len(records) - len(fresh))


def _sentence_key(record: Mapping[str, Any]) -> str:
    return json.dumps([record.get("tokens"), record.get("tags")])


def lock_path(path: Path) -> str:
    # In the temp folder, not beside the case file: no litter in the user's suite.
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"warp-check-casefile-{key}.lock")


def _existing(path: Path, data: bytes) -> tuple[set[str], set[tuple[str, str | None]]]:
    ids: set[str] = set()
    content: set[tuple[str, str | None]] = set()
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise SuiteError(
                f"not a JSON object ({exc}); fix the line before adding cases", path=path, line=number
            ) from None
        if not isinstance(record, dict):
            raise SuiteError("not a JSON object; fix the line before adding cases", path=path, line=number)
        if isinstance(record.get("id"), str):
            ids.add(record["id"])
        if isinstance(record.get("text"), str):
            pair = record.get("text_pair")
            content.add((record["text"], pair if isinstance(pair, str) else None))
    return ids, content


def _fresh_id(prefix: str, case: NewCase, taken: set[str]) -> str:
    for length in (10, 16, 64):  # a longer hash on the (astronomically rare) prefix collision
        candidate = case_id(prefix, case.text, case.text_pair, length=length)
        if candidate not in taken:
            return candidate
    n = 2
    while f"{candidate}-{n}" in taken:  # the same hash but different content: cannot happen for sha256
        n += 1
    return f"{candidate}-{n}"


def _write_atomically(path: Path, data: bytes, check: CaseFileCheck | None) -> None:
    mode = path.stat().st_mode & 0o777 if path.exists() else None
    with replaced_atomically(path, suffix=".tmp") as tmp:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:  # an existing case file keeps its mode
            os.chmod(tmp, mode)
        if check is not None:
            try:
                check(Path(tmp))
            except SuiteError as exc:  # named at the file it was meant for: the temporary one is gone
                raise SuiteError(
                    f"{exc.message} (in what was about to be written: {path.name} is unchanged)",
                    path=path,
                    line=exc.line,
                    field=exc.field,
                ) from None


def loader_check(suite: Suite, case_file: CaseFile, *, after: Sequence[CaseFile] = ()) -> CaseFileCheck:
    """A check that reads a file as ``suite``'s loader reads ``case_file`` (its [[cases]] kind, the
    suite's labels), after the files ``after`` (what the loader checks across files: ids unique, one
    label a text): the loader's own rules, not a copy of them. Returns the reader, its cases and
    their lines."""

    def check(path: Path) -> CaseReader:
        reader = CaseReader(SuiteToml(suite.toml), suite.labels, suite.num_classes, suite.decision)
        for earlier in after:
            if earlier.path.exists():  # a suite being filled lists files not written yet
                reader.read(earlier)
        reader.read(CaseFile(path=path, kind=case_file.kind, line=case_file.line))
        return reader

    return check


def writer_check(suite: Suite, path: str | Path, *, kind: Kind) -> CaseFileCheck:
    """The loader's check for a file a command appends ``kind`` cases to, read with the rest of the
    suite: the file as ``suite`` lists it where it does, else as a ``[[cases]]`` table of that kind
    would list it. The suite's other files are read first, so what the loader refuses is named at
    the new line."""
    where = Path(path).resolve()
    listed = next((f for f in suite.case_files if f.path.resolve() == where), None)
    others = [f for f in suite.case_files if f.path.resolve() != where]
    return loader_check(suite, listed or CaseFile(path=where, kind=kind, line=None), after=others)


def file_check(path: str | Path, *, kind: Kind) -> CaseFileCheck:
    """The loader's check for a case file written outside any command that names a suite
    (``--warp-record``): with the suite that lists it, where a ``warp.toml`` in its folder or a folder
    above does (:func:`writer_check`); else the file on its own, by every rule of the loader but which
    labels exist, which only a suite says (each label name the file uses stands for a class of its own)."""
    where = Path(path).resolve()
    for folder in where.parents:
        if (folder / "warp.toml").is_file():
            try:
                suite = load_suite(folder)
            except SuiteError:  # a suite that does not load cannot say how this file is read
                continue
            if any(f.path.resolve() == where for f in suite.case_files):
                return writer_check(suite, where, kind=kind)

    def check(tmp: Path) -> CaseReader:
        labels = list(_labels_in(tmp))
        names = sorted({label for label in labels if isinstance(label, str)})
        ids = [label for label in labels if isinstance(label, int) and not isinstance(label, bool) and label >= 0]
        first = max(ids, default=-1) + 1  # every class id the file uses is a class; each name one more
        classes = {name: first + i for i, name in enumerate(names)}
        reader = CaseReader(SuiteToml(where.parent / "warp.toml"), classes, first + len(names))
        reader.read(CaseFile(path=tmp, kind=kind, line=None))
        return reader

    return check


def _labels_in(path: Path) -> Iterable[object]:
    """The ``label`` of each line that is a JSON object (the reader names every other line's fault)."""
    for raw in path.read_bytes().splitlines():
        try:
            record = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            continue
        if isinstance(record, dict):
            yield record.get("label")


def remove_lines(path: str | Path, line_numbers: Iterable[int], *, check: CaseFileCheck) -> int:
    """Rewrite ``path`` without the given (1-based) lines, every other byte kept; atomic, under the
    same lock as :func:`append_cases`. Returns how many lines went."""
    from filelock import FileLock

    path = Path(path)
    wanted = set(line_numbers)
    with FileLock(lock_path(path)):
        lines = path.read_bytes().split(b"\n")
        kept = [line for number, line in enumerate(lines, start=1) if number not in wanted]
        removed = len(lines) - len(kept)
        if removed:
            _write_atomically(path, b"\n".join(kept), check)
    return removed


def rewrite_lines(path: str | Path, changes: Mapping[int, Mapping[str, str]], *, check: CaseFileCheck) -> int:
    """Rewrite the given (1-based) lines of ``path`` with their fields set as ``changes`` says (a
    field already there keeps its place), every other byte kept; atomic, under the same lock as
    :func:`append_cases`. Returns how many lines changed."""
    from filelock import FileLock

    path = Path(path)
    with FileLock(lock_path(path)):
        lines = path.read_bytes().split(b"\n")
        for number, fields in changes.items():
            raw = lines[number - 1].rstrip(b"\r")
            record = json.loads(raw)
            if not isinstance(record, dict):
                raise SuiteError("not a JSON object; fix the line before rewriting it", path=path, line=number)
            record.update(fields)
            ending = b"\r" if lines[number - 1].endswith(b"\r") else b""
            lines[number - 1] = json_line(record).encode() + ending
        if changes:
            _write_atomically(path, b"\n".join(lines), check)
    return len(changes)


__all__ = [
    "AppendResult",
    "CaseFileCheck",
    "NewCase",
    "append_cases",
    "case_id",
    "loader_check",
    "writer_check",
    "remove_lines",
    "rewrite_lines",
]
