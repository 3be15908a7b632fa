"""Moving a suite's must_fix cases a traffic budget could not buy into its deferred file, and back
(``warp-check defer``; the file and its lines: :mod:`warp_check.suite.deferred_file`).

A deferred case is still the suite's: every check runs it and shows it as a known failure (one the
model now gets right says it can be put back); no repair ever sees it. :func:`defer_cases` and
:func:`restore_deferred` rewrite every file they touch (case files, the deferred file, ``warp.toml``
where it names no deferred file yet) or none: each new file is written beside its target and read by
the loader's rules first, then all are renamed into place with Ctrl-C held, so an interrupt leaves the
suite as it was or as it is meant to be.
"""

from __future__ import annotations

import contextlib
import datetime
import difflib
import json
import os
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_check.cases import Kind
from warp_check.certify.certificate import percent
from warp_check.errors import SuiteError
from warp_check.files import as_if_created, interrupts_held
from warp_check.suite.case_files import json_line
from warp_check.suite.casefile import loader_check, lock_path
from warp_check.suite.deferred_file import (
    AS_WRITTEN,
    DEFAULT_FILE,
    DEFERRED_KEY,
    FROM,
    LINE,
    REASON,
    DeferredCase,
    read_deferred,
    shown,
    split_line,
)
from warp_check.suite.loader import Suite
from warp_check.suite.toml_lines import SuiteToml, toml_lock_path, writable_toml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


@dataclass(frozen=True, kw_only=True)
class Deferral:
    """What :func:`defer_cases` or :func:`restore_deferred` moved: the case ids, the deferred file, the
    case files they left or went back to, and whether warp.toml was given its deferred file."""

    moved: tuple[str, ...]
    deferred_file: Path
    case_files: tuple[Path, ...]
    toml_changed: bool = False


def budget_reason(max_change: float | None, on: datetime.date) -> str:
    """Why a case is deferred, as its line and its known failure say it."""
    budget = "the traffic budget" if max_change is None else f"the budget max_change = {percent(max_change)}"
    return f"{budget} could not buy it on {on.isoformat()}"


# -- moving cases ---------------------------------------------------------------------------


def defer_cases(suite: Suite, ids: Iterable[str], *, reason: str) -> Deferral:
    """Move the must_fix cases ``ids`` of ``suite`` (a loaded :class:`~warp_check.suite.loader.Suite`)
    into its deferred file, each line remembering its file and line; warp.toml is given a deferred file
    (``deferred.jsonl``) where it names none. All files are written or none; a bad id is a SuiteError
    naming it, nothing written."""
    suite.refuse_per_word("defer")
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        raise SuiteError(
            "no case to defer: name the cases, or give the report of a run over its budget", path=suite.toml
        )
    deferred = {d.case.id: d for d in suite.deferred}
    root = suite.root
    for case_id in wanted:
        if case_id in deferred:
            d = deferred[case_id]
            raise SuiteError(
                f"case {case_id!r} is already deferred (from {d.came_from}:{d.line}): nothing is moved",
                path=d.at.path,
                line=d.at.line,
                field="id",
            )
        if case_id not in suite.locations:
            raise _unknown(suite, case_id, "a case of the suite")
        case = suite.case(case_id)
        if case.kind is not Kind.MUST_FIX:
            at = suite.locations[case_id]
            raise SuiteError(
                f"case {case_id!r} is a {case.kind.value} case: only must_fix cases are deferred (a budget buys "
                "fixes, not kept cases); nothing is moved",
                path=at.path,
                line=at.line,
                field="kind",
            )
    if not any(c.kind is not Kind.AUX and c.id not in wanted for c in suite.cases):
        raise SuiteError(
            "deferring these cases leaves the suite no must_fix or must_keep case to test: keep one, or add "
            "must_keep cases first; nothing is moved",
            path=suite.toml,
            field="cases",
        )
    toml_text = suite.toml.read_bytes()
    target = suite.deferred_file
    new_toml = None
    if target is None:
        target = root / DEFAULT_FILE
        if target.exists():
            raise SuiteError(
                f"warp.toml names no deferred file and {DEFAULT_FILE} exists: add deferred = {DEFAULT_FILE!r} to "
                "warp.toml if it is one, or move it away; nothing is moved",
                path=suite.toml,
                field=DEFERRED_KEY,
            )
        writable_toml(suite.toml, hint=f"add deferred = {DEFAULT_FILE!r} to it by hand")
        new_toml = _with_deferred_key(suite.toml, toml_text, DEFAULT_FILE)
    by_file: dict[Path, list[str]] = defaultdict(list)
    for case_id in wanted:
        by_file[suite.locations[case_id].path].append(case_id)
    with _locked([*by_file, target], suite.toml if new_toml is not None else None):
        writes: dict[Path, bytes] = {}
        appended: list[str] = []
        for path, group in by_file.items():
            lines = path.read_bytes().split(b"\n")
            numbers = sorted(suite.locations[c].line for c in group)
            for case_id in sorted(group, key=lambda c: suite.locations[c].line):
                number = suite.locations[case_id].line
                appended.append(_deferred_line(suite, case_id, lines[number - 1], path, number, reason))
            writes[path] = b"\n".join(line for n, line in enumerate(lines, start=1) if n not in set(numbers))
        before = target.read_bytes() if target.exists() else b""
        joined = before if not before or before.endswith(b"\n") else before + b"\n"
        writes[target] = joined + "".join(line + "\n" for line in appended).encode()
        if new_toml is not None:
            writes[suite.toml] = new_toml
        _commit(suite, writes, _checker(suite, set(wanted), set()))
    return Deferral(
        moved=tuple(wanted), deferred_file=target, case_files=tuple(by_file), toml_changed=new_toml is not None
    )


def restore_deferred(suite: Suite, ids: Iterable[str] | None = None) -> Deferral:
    """Put the deferred cases ``ids`` (None: every one) back into the case files they came from, each at
    its line (the files' order kept); all files are written or none."""
    if suite.deferred_file is None:
        raise SuiteError(
            "the suite names no deferred file (deferred = ... in warp.toml): nothing is deferred",
            path=suite.toml,
            field=DEFERRED_KEY,
        )
    deferred = {d.case.id: d for d in suite.deferred}
    wanted = list(deferred) if ids is None else list(dict.fromkeys(ids))
    if not wanted:
        raise SuiteError("no deferred case to put back: the deferred file is empty", path=suite.deferred_file)
    for case_id in wanted:
        if case_id not in deferred:
            if case_id in suite.locations:
                at = suite.locations[case_id]
                raise SuiteError(
                    f"case {case_id!r} is not deferred: it is a {suite.case(case_id).kind.value} case here; "
                    "nothing is moved",
                    path=at.path,
                    line=at.line,
                    field="id",
                )
            raise _unknown(suite, case_id, "a deferred case", known=list(deferred))
    files = {f.path.resolve(): f for f in suite.case_files}
    back: dict[Path, list[DeferredCase]] = defaultdict(list)
    for case_id in wanted:
        d = deferred[case_id]
        home = (suite.root / d.came_from).resolve()
        if home not in files:
            raise SuiteError(
                f"case {case_id!r} came from {d.came_from!r}, which is no case file of the suite now: list it in a "
                "[[cases]] table, or correct the field; nothing is moved",
                path=d.at.path,
                line=d.at.line,
                field=FROM,
            )
        back[files[home].path].append(d)
    target = suite.deferred_file
    with _locked([*back, target]):
        writes: dict[Path, bytes] = {}
        for path, group in back.items():
            lines = path.read_bytes().split(b"\n")
            ends_open = lines[-1] == b""
            for d in sorted(group, key=lambda d: d.line):
                room = len(lines) - 1 if ends_open else len(lines)
                lines.insert(min(d.line - 1, room), _case_line(d))
            writes[path] = b"\n".join(lines)
        gone = {deferred[c].at.line for c in wanted}
        lines = target.read_bytes().split(b"\n")
        writes[target] = b"\n".join(line for n, line in enumerate(lines, start=1) if n not in gone)
        _commit(suite, writes, _checker(suite, set(), set(wanted)))
    return Deferral(moved=tuple(wanted), deferred_file=target, case_files=tuple(back))


def _unknown(suite: Suite, case_id: str, what: str, *, known: Sequence[str] | None = None) -> SuiteError:
    names = list(suite.locations) if known is None else list(known)
    close = difflib.get_close_matches(case_id, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return SuiteError(f"no case {case_id!r} is {what}{hint}: nothing is moved", path=suite.toml, field="id")


def _deferred_line(suite: Suite, case_id: str, raw: bytes, path: Path, number: int, reason: str) -> str:
    """The deferred file's line for the case at ``path``:``number`` (its line's bytes ``raw``, read again:
    the case must still be there as the suite was loaded)."""
    text = raw.decode("utf-8")
    try:
        record = json.loads(text)
    except ValueError:
        record = None
    stated = record.get("id", f"{shown(path, suite.root)}:{number}") if isinstance(record, dict) else None
    if stated != case_id:
        raise _changed_since(case_id, path, number)
    own: dict[str, Any] = {FROM: shown(path, suite.root), LINE: number, REASON: reason}
    if json_line(record) != text or "id" not in record:
        own[AS_WRITTEN] = text
    # A line without an id is known by its place ("fix.jsonl:3"): the deferred line keeps that id.
    return json_line({"id": case_id} | record | own)


def _changed_since(case_id: str, path: Path, line: int) -> SuiteError:
    return SuiteError(
        f"case {case_id!r} is not on this line as the suite was loaded (the file changed since): load the suite "
        "again; nothing is moved",
        path=path,
        line=line,
    )


def _case_line(d: DeferredCase) -> bytes:
    """The line a deferred case goes back as: its line as it was."""
    lines = d.at.path.read_bytes().split(b"\n")
    record, own = (
        split_line(lines[d.at.line - 1].rstrip(b"\r"), d.at.path, d.at.line) if d.at.line <= len(lines) else ({}, {})
    )
    if record.get("id") != d.case.id:
        raise _changed_since(d.case.id, d.at.path, d.at.line)
    return (own[AS_WRITTEN] if AS_WRITTEN in own else json_line(record)).encode()


def _with_deferred_key(toml: Path, raw: bytes, name: str) -> bytes:
    """warp.toml's bytes with ``deferred = name`` before its first table (a top-level key), checked to
    parse to the same tables plus that key."""
    text = raw.decode("utf-8")
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    first_table = next((i for i, line in enumerate(lines) if line.lstrip().startswith("[")), len(lines))
    added = f"{DEFERRED_KEY} = {json.dumps(name)}  # must_fix cases a budget could not buy (warp-check defer){newline}"
    if first_table == len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
        added = newline + added
    new = "".join(lines[:first_table]) + added + "".join(lines[first_table:])
    if tomllib.loads(new) != tomllib.loads(text) | {DEFERRED_KEY: name}:  # pragma: no cover - a table header first
        raise SuiteError(f"cannot add {DEFERRED_KEY} = {name!r} here: add it by hand", path=toml, field=DEFERRED_KEY)
    return new.encode("utf-8")


@contextlib.contextmanager
def _locked(paths: Iterable[Path], toml: Path | None = None):
    """The case-file writers' locks on ``paths`` and, where given, warp.toml's writers' lock (in one
    order: two movers cannot wait on each other)."""
    from filelock import FileLock

    locks = sorted({lock_path(path) for path in paths} | ({toml_lock_path(toml)} if toml is not None else set()))
    with contextlib.ExitStack() as stack:
        for lock in locks:
            stack.enter_context(FileLock(lock))
        yield


def _commit(suite: Suite, writes: Mapping[Path, bytes], check: Any) -> None:
    """Write each file beside its target and ``check`` them (target → staged file), then rename every one
    into place with Ctrl-C held: all or none."""
    temps: dict[Path, str] = {}
    try:
        for path, data in writes.items():
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".tmp")
            temps[path] = tmp
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            if path.exists():
                os.chmod(tmp, path.stat().st_mode & 0o777)
            else:
                as_if_created(tmp)
        check({path: Path(tmp) for path, tmp in temps.items()})
        with interrupts_held():
            for path, tmp in temps.items():
                os.replace(tmp, path)
    finally:
        for tmp in temps.values():
            if os.path.exists(tmp):
                os.unlink(tmp)


def _checker(suite: Suite, moved_out: set[str], moved_in: set[str]) -> Any:
    """What checks the staged files by the loader's rules: each case file after the suite's others, the
    deferred file against the suite's ids as they will be (``moved_out`` of the case files, ``moved_in``
    back). A refusal names the file it was meant for."""

    def check(staged: Mapping[Path, Path]) -> None:
        files = {f.path: f for f in suite.case_files}
        for path, tmp in staged.items():
            try:
                if path in files:
                    loader_check(suite, files[path], after=[f for f in suite.case_files if f.path != path])(tmp)
                elif path != suite.toml:
                    ids = {c: at for c, at in suite.locations.items() if c not in moved_out}
                    ids |= {d.case.id: d.at for d in suite.deferred if d.case.id in moved_in}
                    loader = SuiteToml(suite.toml)
                    read_deferred(loader, tmp, suite.labels, suite.num_classes, suite.decision, ids)
            except SuiteError as exc:
                raise SuiteError(
                    f"{exc.message} (in what was about to be written: nothing is moved)",
                    path=path,
                    line=exc.line,
                    field=exc.field,
                ) from None

    return check


__all__ = ["Deferral", "budget_reason", "defer_cases", "restore_deferred"]
