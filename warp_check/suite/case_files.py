"""Case files: the ``[[cases]]`` tables of ``warp.toml`` and the JSONL lines they point at.

Each line becomes a :class:`~warp_check.cases.Case`; every mistake is a SuiteError naming the
file, the line and the field. Ids are unique across the whole suite, and one text cannot carry
two labels.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_check.cases import Case, Kind, text_problem
from warp_check.decisions import SINGLE_LABEL, AnswerError, DecisionKind, LabelSpace, answer_fields
from warp_check.errors import SuiteError
from warp_check.suite.toml_lines import SuiteToml

# Windows editors save UTF-8 with a byte order mark; JSON and TOML both refuse one.
STARTS_WITH_BOM = "starts with a byte order mark (U+FEFF): save the file as UTF-8 without a BOM"

# fixed_by: the SHA-256 of the certificate that fixed a promoted case (warp-check promote).
# A case's own fields; the fields stating its answer are the kinds of decision's (``label`` for one
# class, ``labels`` / ``on`` / ``off`` for several labels: warp_check.decisions.answer_fields).
CASE_FIELDS = ("id", "text", "text_pair", "label", "kind", "source", "original", "fixed_by")


MAX_TEXT_CHARS = 100_000  # far beyond any max_length; longer is a mistake (a pasted file), not a case


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(ValueError):
    pass


def json_line(record: Mapping[str, object]) -> str:
    # Readable UTF-8, but the Unicode line separators escaped: editors and str.splitlines() break on them.
    line = json.dumps(record, ensure_ascii=False)
    return line.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


class CaseReader:
    """Reads JSONL case files into Cases; ids are unique across the whole suite."""

    def __init__(
        self, loader: SuiteToml, labels: dict[str, int], num_classes: int | None, decision: DecisionKind = SINGLE_LABEL
    ) -> None:
        self.loader = loader
        self.labels = labels
        self.num_classes = num_classes
        self.cases: list[Case] = []
        self.locations: dict[str, Location] = {}
        self.texts: dict[tuple[str, str | None], list[Case]] = {}  # (text, text_pair) -> must_fix/keep cases
        self.sentences: dict[str, Location] = {}  # a kind deciding per word: each sentence's id, where it is
        self.space = LabelSpace(names=labels, num_classes=num_classes)
        self.decision = decision  # what a case's answer is
        # Every kind's answer fields are known (another kind's is refused by this kind, saying so); the
        # fields listed are the case's own and this kind's. Once per reader, not per line.
        self.answer_keys = answer_fields()
        self.known = frozenset((*CASE_FIELDS, *self.answer_keys))
        self.listed = tuple(dict.fromkeys((*CASE_FIELDS, *decision.answer_fields)))

    def read(self, case_file: CaseFile) -> None:
        root = self.loader.toml.parent
        path = case_file.path
        rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise SuiteError(f"cannot read the file ({exc.strerror or exc})", path=path) from None
        for number, line in enumerate(raw.split(b"\n"), start=1):
            line = line.rstrip(b"\r")
            if line.strip():
                for case in self._case(line, case_file, rel, number):
                    self.cases.append(case)
                    self.locations[case.id] = Location(path=path, line=number)

    def _case(self, line_bytes: bytes, case_file: CaseFile, rel: str, number: int) -> list[Case]:
        """The case a line states: one, or for a kind deciding per word, a row per constrained word."""

        def error(field_name: str | None, message: str) -> SuiteError:
            return SuiteError(message, path=case_file.path, line=number, field=field_name)

        try:
            line = line_bytes.decode("utf-8")
        except UnicodeDecodeError as exc:
            byte = line_bytes[exc.start]
            raise error(None, f"not valid UTF-8 (byte 0x{byte:02x} at column {exc.start + 1})") from None
        if line.startswith("\ufeff"):
            raise error(None, STARTS_WITH_BOM)
        try:
            record = json.loads(line, object_pairs_hook=no_duplicate_keys)
        except _DuplicateKey as exc:
            raise error(str(exc), f"field '{exc}' is given twice") from None
        except json.JSONDecodeError as exc:
            raise error(None, f"not valid JSON: {exc.msg} (column {exc.colno}); one JSON object a line") from None
        except RecursionError:
            raise error(None, "not valid JSON: nested too deeply") from None
        except ValueError:  # Python refuses integers of more than 4300 digits
            raise error(None, "not valid JSON: a number with more than 4300 digits") from None
        if not isinstance(record, dict):
            shape = '{"text": ..., "label": ...}'
            raise error(None, f"a case is a JSON object ({shape}), got {type(record).__name__}")
        for key in record:
            if key not in self.known:
                close = difflib.get_close_matches(key, self.listed, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise error(key, f"unknown field{hint}; known fields: {', '.join(self.listed)}")
        case_id = record.get("id", f"{rel}:{number}")
        if not isinstance(case_id, str) or not case_id.strip():
            raise error("id", f"must be a non-empty string, got {case_id!r}")
        if "::" in case_id or any(ch in case_id for ch in "\n\r\t"):
            raise error("id", f"{case_id!r} must not contain '::', tabs or line breaks (pytest uses '::' in test ids)")
        if case_id in self.locations:
            first = self.locations[case_id]
            raise error("id", f"duplicate id {case_id!r}: already used at {self._shown(first.path)}:{first.line}")
        if self.decision.per_word:
            return self._word_rows(record, case_id, case_file, (rel, number), error)
        if "text" not in record:
            raise error("text", "missing field 'text'")
        text = self._text(record, "text", error)
        pair = self._text(record, "text_pair", error) if record.get("text_pair") is not None else None
        label = self._label({k: record[k] for k in self.answer_keys if k in record}, error)
        kind = self._kind(record, case_file, error)
        if kind != Kind.AUX.value:
            for same in self.texts.get((text, pair), ()):
                conflict = self.decision.conflict(same.label, label, self._class_name, self.num_classes)
                if conflict is not None:
                    first = self.locations[same.id]
                    raise error(
                        conflict.field,
                        f"the same text is case {same.id!r} at {self._shown(first.path)}:{first.line} labelled "
                        f"{self._name(same.label)}, here {self._name(label)}: no model can satisfy both"
                        + (f" ({conflict.reason})" if conflict.reason else ""),
                    )
        self._strings(record, error)
        case = Case(
            id=case_id,
            text=text,
            text_pair=pair,
            label=label,
            kind=Kind(kind),
            source=record.get("source"),
            origin=f"{rel}:{number}",
        )
        same = self.texts.setdefault((text, pair), []) if case.kind is not Kind.AUX else []
        if all(other.label != case.label for other in same):  # one case of each answer is compared
            same.append(case)
        return [case]

    def _word_rows(
        self, record: dict[str, Any], case_id: str, case_file: CaseFile, where: tuple[str, int], error: Any
    ) -> list[Case]:
        """A sentence's rows, one per constrained word (id ``sentence#word``, its text the sentence with
        that word marked, its label the word's tag): warp_check.decisions.token_tags."""
        from warp_check.decisions.token_tags import row_id

        if "text_pair" in record:
            why = 'a token classifier\'s case is one sentence: "tokens" with "tags", or "text" with "entities"'
            raise error("text_pair", why)
        if "label" in record:
            why = 'a token classifier\'s case states a tag per word: give "tags", one per token (or "entities")'
            raise error("label", why)
        if case_id in self.sentences:
            first = self.sentences[case_id]
            raise error("id", f"duplicate id {case_id!r}: already used at {self._shown(first.path)}:{first.line}")
        try:
            sentence = self.decision.read_sentence(record, self.space)
        except AnswerError as exc:
            raise error(exc.field, str(exc)) from None
        kind = self._kind(record, case_file, error)
        self._strings(record, error)
        rel, number = where
        self.sentences[case_id] = Location(path=case_file.path, line=number)
        rows = []
        for row in sentence.rows:
            text = sentence.row_text(row)
            if len(text) > MAX_TEXT_CHARS:
                raise error("tokens", f"is {len(text):,} characters long (limit {MAX_TEXT_CHARS:,}): is this a case?")
            problem = text_problem(text)
            if problem is not None:
                raise error("tokens", problem)
            rid = row_id(case_id, row.word)
            if rid in self.locations:
                first = self.locations[rid]
                raise error(
                    "id",
                    f"row id {rid!r} (word {row.word}) is already a case at {self._shown(first.path)}:{first.line}",
                )
            earlier = self.texts.get((text, None), []) if kind != Kind.AUX.value else []
            same = next((other for other in earlier if other.label != row.tag), None)
            if same is not None:
                first = self.locations[same.id]
                raise error(
                    "tags",
                    f"word {row.word} {sentence.words[row.word]!r} of the same sentence is tagged "
                    f"{self._name(same.label)} in case {same.id!r} at {self._shown(first.path)}:{first.line}, "
                    f"here {self._name(row.tag)}: no model can satisfy both",
                )
            case = Case(
                id=rid, text=text, label=row.tag, kind=Kind(kind), source=record.get("source"), origin=f"{rel}:{number}"
            )
            if case.kind is not Kind.AUX and not earlier:
                self.texts.setdefault((text, None), []).append(case)
            rows.append(case)
        return rows

    @staticmethod
    def _kind(record: dict[str, Any], case_file: CaseFile, error: Any) -> str:
        kind = record.get("kind", case_file.kind.value if case_file.kind else None)
        if kind is None:
            raise error("kind", "missing field 'kind': give it on the line or as the kind of its [[cases]] table")
        if kind not in _KINDS:
            raise error("kind", f"unknown kind {kind!r}; use one of {', '.join(_KINDS)}")
        return kind

    @staticmethod
    def _strings(record: dict[str, Any], error: Any) -> None:
        for key in ("source", "original", "fixed_by"):
            value = record.get(key)
            if value is not None and not isinstance(value, str):
                raise error(key, f"must be a string, got {type(value).__name__}")

    def _shown(self, path: Path) -> str:
        root = self.loader.toml.parent
        return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)

    def _name(self, label: Any) -> str:
        return self.decision.stated(label, self._class_name)

    def _class_name(self, label: int) -> str:
        names = [name for name, index in self.labels.items() if index == label]
        return repr(names[0]) if names else str(label)

    @staticmethod
    def _text(record: dict[str, Any], key: str, error: Any) -> str:
        text = record[key]
        if not isinstance(text, str):
            raise error(key, f"must be a string, got {type(text).__name__}")
        if not text.strip():
            raise error(key, "is empty: a case needs some text" if key == "text" else "is empty: leave it out")
        problem = text_problem(text)
        if problem is not None:
            raise error(key, problem)
        if len(text) > MAX_TEXT_CHARS:
            raise error(key, f"is {len(text):,} characters long (limit {MAX_TEXT_CHARS:,}): is this a case?")
        return text

    def _label(self, fields: dict[str, Any], error: Any) -> Any:
        try:
            return self.decision.read_answer(fields, self.space)
        except AnswerError as exc:
            raise error(exc.field, str(exc)) from None


def read_cases(
    loader: SuiteToml,
    files: tuple[CaseFile, ...],
    labels: dict[str, int],
    num_classes: int | None,
    *,
    decision: DecisionKind = SINGLE_LABEL,
    empty: bool = False,
) -> tuple[tuple[Case, ...], dict[str, Location]]:
    """The cases of ``files``, each ``label`` read as ``decision``'s answer; ``empty``: a suite being
    filled (``warp-check import``), whose listed files may not exist yet and which may hold no case."""
    reader = CaseReader(loader, labels, num_classes, decision)
    for case_file in files:
        if not (empty and not case_file.path.exists()):
            reader.read(case_file)
    if not empty and not any(c.kind is not Kind.AUX for c in reader.cases):
        raise loader.error(
            "cases",
            "the suite has no must_fix or must_keep cases: there is nothing to test; add some with "
            "warp-check import SUITE FILE (or write JSONL lines into its case files)",
        )
    return tuple(reader.cases), reader.locations


_CASES_KEYS = ("path", "kind")


_KINDS = tuple(k.value for k in Kind if k is not Kind.DEFERRED)  # deferred cases live in the deferred file


@dataclass(frozen=True, kw_only=True)
class CaseFile:
    """One ``[[cases]]`` table: a JSONL file and the kind its lines have by default."""

    path: Path
    kind: Kind | None
    line: int | None  # of the [[cases]] header in warp.toml


@dataclass(frozen=True, kw_only=True)
class Location:
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def read_case_tables(loader: SuiteToml, data: dict[str, Any], *, empty: bool = False) -> tuple[CaseFile, ...]:
    """The ``[[cases]]`` tables; ``empty`` (a suite being filled): none at all, or files not written yet."""
    tables = data.get("cases")
    if tables is None and empty:
        return ()
    if tables is None:
        raise loader.error("cases", "no [[cases]] table: list at least one JSONL case file ([[cases]] path, kind)")
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise loader.error("cases", "must be an array of tables: write each case file as a [[cases]] table")
    files: list[CaseFile] = []
    seen: dict[Path, int] = {}
    for i, table in enumerate(tables):
        prefix = f"cases[{i}]"
        loader.unknown(table, _CASES_KEYS, prefix)
        rel = table.get("path")
        if rel is None:
            raise loader.error(prefix, "missing field 'path' (the JSONL file of this [[cases]] table)")
        if not isinstance(rel, str) or not rel.strip():
            raise loader.error(f"{prefix}.path", f"must be a non-empty string, got {rel!r}")
        kind = table.get("kind")
        if kind is not None and kind not in _KINDS:
            raise loader.error(f"{prefix}.kind", f"unknown kind {kind!r}; use one of {', '.join(_KINDS)}")
        path = loader.toml.parent / rel
        try:
            is_file = path.is_file()
        except OSError as exc:  # e.g. a symlink loop
            raise loader.error(f"{prefix}.path", f"case file {rel!r} cannot be read ({exc.strerror or exc})") from None
        if not is_file and not (empty and not os.path.lexists(path)):
            if path.is_symlink() and not path.exists():
                what = "is a symlink that leads nowhere (a loop or a missing target)"
            else:
                what = "is not a file" if path.exists() else "does not exist (relative to warp.toml)"
            raise loader.error(f"{prefix}.path", f"case file {rel!r} {what}")
        resolved = loader.resolve(path, f"{prefix}.path", rel)
        if resolved in seen:
            raise loader.error(f"{prefix}.path", f"case file {rel!r} is already listed in cases[{seen[resolved]}]")
        seen[resolved] = i
        files.append(CaseFile(path=path, kind=Kind(kind) if kind else None, line=loader.keys.line(prefix)))
    return tuple(files)
