"""Bring your cases: CSV, TSV, JSONL, Parquet files and AdvGLUE's ``dev.json`` into a suite's JSONL.

Columns are named by the caller (text, text pair, label, id); every label is checked against the
suite's labels (a name or a class id of the model); a bad row is an error naming the file and the
line (CSV, TSV, JSONL), the row (Parquet) or the entry (AdvGLUE). Cases are appended atomically
with :func:`warp_check.suite.casefile.append_cases`: ids kept where the file gives them, made from
the text otherwise, so importing twice adds nothing. Nothing is unpickled: Parquet is read with
pyarrow (the ``import`` extra), the rest with the standard library.
"""

from __future__ import annotations

import codecs
import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from warp_check.cases import Kind, text_problem
from warp_check.errors import SettingsError, SuiteError, WarpError, reraise_interrupt
from warp_check.json_bounded import parse_json
from warp_check.suite.casefile import AppendResult, NewCase, append_cases, writer_check
from warp_check.suite.loader import Suite
from warp_check.validation import is_decimal

FORMATS = ("csv", "tsv", "jsonl", "parquet", "advglue")
# AdvGLUE dev.json: {task: [{"idx", "label", <text fields>}]}; the fields of each task, in order.
ADVGLUE_FIELDS: dict[str, tuple[str, str | None]] = {
    "sst2": ("sentence", None),
    "qqp": ("question1", "question2"),
    "mnli": ("premise", "hypothesis"),
    "mnli-mm": ("premise", "hypothesis"),
    "qnli": ("question", "sentence"),
    "rte": ("sentence1", "sentence2"),
}


@dataclass(frozen=True, kw_only=True)
class ImportSettings:
    """What to read from the file: its format and columns, and the kind and source of the cases."""

    format: str
    text: str = "text"
    text_pair: str | None = None
    label: str = "label"
    id: str | None = None
    kind: Kind = Kind.MUST_KEEP
    source: str | None = None  # written on every case (default: the file's name)
    task: str | None = None  # advglue: which task of dev.json
    # Label every row by the model's own prediction, no label column read: the repair keeps the
    # predictions (warp_check.sources.predictions). must_keep only.
    predicted: bool = False

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise SettingsError("format", self.format, f"must be one of {', '.join(FORMATS)}")
        object.__setattr__(self, "kind", Kind(self.kind))
        if not isinstance(self.predicted, bool):
            raise SettingsError("predicted", self.predicted, "must be true or false")
        if self.predicted and self.kind is not Kind.MUST_KEEP:
            why = "must be must_keep with predicted labels: a repair keeps the model's predictions"
            raise SettingsError("kind", self.kind.value, why)
        if self.format == "advglue" and self.task not in ADVGLUE_FIELDS:
            raise SettingsError("task", self.task, f"AdvGLUE needs one of {', '.join(ADVGLUE_FIELDS)}")


@dataclass(frozen=True)
class ImportResult:
    rows: int
    appended: AppendResult


def format_of(path: str | Path) -> str:
    """The format a file's name says (``dev.json`` is AdvGLUE's layout)."""
    name = Path(path).name.lower()
    if name.endswith(".json"):
        return "advglue"
    for suffix, fmt in ((".csv", "csv"), (".tsv", "tsv"), (".jsonl", "jsonl"), (".parquet", "parquet")):
        if name.endswith(suffix):
            return fmt
    raise SettingsError(
        "format", None, f"cannot tell the format of {Path(path).name!r}: give one of {', '.join(FORMATS)}"
    )


@dataclass(frozen=True, kw_only=True)
class UnlabelledRow:
    """A row's texts and id as read, and where it is: a line (CSV, TSV, JSONL), a row (Parquet) or an
    entry (AdvGLUE)."""

    text: str
    text_pair: str | None
    id: str | None
    where: tuple[int, str]


@dataclass(frozen=True, kw_only=True)
class LabelledRow:
    """A row read as a case (its label as the suite names it), its class id, and where it is."""

    case: NewCase
    label: int
    where: tuple[int, str]


def import_cases(suite: Suite, source: str | Path, out: str | Path, settings: ImportSettings) -> ImportResult:
    """Read ``source``, check every row against the suite's labels, append the cases to ``out``."""
    if settings.predicted:
        raise SettingsError("predicted", True, "needs the model: use warp_check.sources.predictions.import_predicted")
    source = Path(source)
    rows = read_labelled(suite, source, settings)
    for row in rows:
        check_id(suite, row.case.id, out, row_error(source, row.where), settings.id or "id")
    cases = [row.case for row in rows]
    appended = append_cases(
        out, cases, id_prefix=import_prefix(source), check=writer_check(suite, out, kind=settings.kind)
    )
    return ImportResult(len(cases), appended)


def read_labelled(suite: Suite, source: str | Path, settings: ImportSettings) -> list[LabelledRow]:
    """Every row of ``source`` as a case of ``settings.kind``, its label checked against the suite's."""
    source, settings = _opened(source, settings)
    rows = []
    for where, row in _rows(source, settings):
        case, label = _case(suite, where, row, settings, source)
        rows.append(LabelledRow(case=case, label=label, where=where))
    return rows


def import_prefix(source: Path) -> str:
    """The prefix of the ids made for rows of ``source`` that give none."""
    return f"import-{source.stem}"


def case_file_of(suite: Suite, kind: Kind) -> Path:
    """The suite's one case file of ``kind``: where imported cases of that kind go by default."""
    files = [f.path for f in suite.case_files if f.kind is kind]
    if len(files) == 1:
        return files[0]
    what = f"no [[cases]] file of kind {kind.value}" if not files else f"{len(files)} {kind.value} case files"
    raise WarpError(f"{suite.toml} has {what}: say where the {kind.value} cases go with --out FILE.jsonl")


def read_unlabelled(source: str | Path, settings: ImportSettings) -> list[UnlabelledRow]:
    """The texts (and ids) of every row of ``source``; no label column is read."""
    source, settings = _opened(source, settings)
    rows = []
    for where, row in _rows(source, settings):
        text, pair, case_id = _fields(row, settings, row_error(source, where))
        rows.append(UnlabelledRow(text=text, text_pair=pair, id=case_id, where=where))
    return rows


def _opened(source: str | Path, settings: ImportSettings) -> tuple[Path, ImportSettings]:
    source = Path(source)
    if not source.is_file():
        raise SuiteError("no such file to import", path=source)
    if settings.format == "advglue":  # its fields are fixed by the task
        pair = "text_pair" if ADVGLUE_FIELDS[settings.task or ""][1] is not None else None
        settings = replace(settings, text="text", text_pair=pair, label="label", id="id")
    return source, settings


def check_id(suite: Suite, case_id: str | None, out: str | Path, error, field: str) -> None:
    """Refuse a row whose id is a suite case's in another file than ``out``: listed beside it, the
    suite would not load (in ``out`` itself the append leaves a copy out and gives a clash a new id)."""
    where = suite.locations.get(case_id) if case_id is not None else None
    if where is not None and Path(where.path).resolve() != Path(out).resolve():
        clash = f"id {case_id!r} is already a case of the suite ({where.path}:{where.line})"
        raise error(field, f"{clash}: give the row another id, or leave the id column out")


def row_error(source: Path, where: tuple[int, str]):
    """``error(field, message)``: a SuiteError naming the file and the row's line, or its row or entry."""
    line, unit = where

    def error(field: str, message: str) -> SuiteError:
        # Parquet rows and AdvGLUE entries have no line: the position says which one.
        return SuiteError(
            message if unit == "line" else f"{unit} {line}: {message}",
            path=source,
            line=line if unit == "line" else None,
            field=field,
        )

    return error


def _case(
    suite: Suite, where: tuple[int, str], row: dict[str, Any], settings: ImportSettings, source: Path
) -> tuple[NewCase, int]:
    error = row_error(source, where)
    text, pair, case_id = _fields(row, settings, error)
    if settings.label not in row or row[settings.label] in (None, ""):
        raise error(settings.label, f"no label in column {settings.label!r}")
    label = _label(suite, row[settings.label], error, settings.label)
    case = NewCase(
        text=text,
        text_pair=pair,
        label=suite.label_name(label),
        id=case_id,
        kind=settings.kind.value,
        source=settings.source or source.name,
    )
    return case, label


def _fields(row: dict[str, Any], settings: ImportSettings, error) -> tuple[str, str | None, str | None]:
    """The row's text, text pair and id, as its columns give them."""
    text = _text(row, settings.text, error)
    pair = _text(row, settings.text_pair, error) if settings.text_pair else None
    case_id = None
    if settings.id is not None:
        value = row.get(settings.id)
        if value in (None, ""):
            raise error(settings.id, f"no id in column {settings.id!r}")
        case_id = str(value)
    return text, pair, case_id


def _text(row: dict[str, Any], column: str, error) -> str:
    value = row.get(column)
    if not isinstance(value, str) or not value.strip():
        raise error(column, f"no text in column {column!r} (got {value!r}); columns here: {', '.join(map(str, row))}")
    problem = text_problem(value)
    if problem is not None:
        raise error(column, problem)
    return value


def _label(suite: Suite, value: Any, error, column: str) -> int:
    """The class id of ``value``: a label name of the suite, or a class id (also as digits)."""
    if isinstance(value, str) and value in suite.labels:
        return suite.labels[value]
    number = value
    if isinstance(value, str) and is_decimal(value.strip().removeprefix("-")):
        number = int(value)
    if isinstance(number, float) and number.is_integer():
        number = int(number)
    known = set(suite.labels.values())
    if isinstance(number, int) and not isinstance(number, bool) and number in known:
        return number
    names = ", ".join(f"{name!r} ({index})" for name, index in suite.labels.items())
    shown = repr(value) if len(repr(value)) <= 60 else f"{repr(value)[:50]}… ({len(str(value)):,} characters)"
    raise error(column, f"label {shown} is not a label of this suite's model: use one of {names}")


def _utf8_text(path: Path) -> str:
    """The file as text (a leading byte order mark dropped); bytes that are not UTF-8 name their line."""
    raw = path.read_bytes().removeprefix(codecs.BOM_UTF8)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        why = f"not valid UTF-8 (byte 0x{raw[exc.start]:02x}): save the file as UTF-8"
        raise SuiteError(why, path=path, line=line) from None


def _rows(path: Path, settings: ImportSettings) -> Iterator[tuple[tuple[int, str], dict[str, Any]]]:
    """((position, what the position counts), row) for every row of the file."""
    if settings.format in ("csv", "tsv"):
        # CSV strict: a quote left open would swallow the rest of the file into one field, silently.
        # TSV unquoted, as GLUE's and pandas' (quoting=3): a text may begin with a quote of its own.
        dialect = {"delimiter": ","} if settings.format == "csv" else {"delimiter": "\t", "quoting": csv.QUOTE_NONE}
        reader = csv.DictReader(io.StringIO(_utf8_text(path), newline=""), strict=True, **dialect)
        try:
            for row in reader:
                yield (reader.line_num, "line"), row
        except csv.Error as exc:
            # line_num counts the lines of the rows read whole: the bad row starts on the next
            why = f"not valid {settings.format.upper()}: {exc}"
            raise SuiteError(why, path=path, line=reader.line_num + 1) from None
    elif settings.format == "jsonl":
        for number, raw in enumerate(io.StringIO(_utf8_text(path), newline=None), start=1):  # as open() reads
            if not raw.strip():
                continue
            row = parse_json(raw, where="", error=_line_error(path, number), what="row")
            if not isinstance(row, dict):
                raise SuiteError("a row is a JSON object", path=path, line=number)
            yield (number, "line"), row
    elif settings.format == "parquet":
        yield from _parquet_rows(path)
    else:
        yield from _advglue_rows(path, settings)


def _line_error(path: Path, line: int | None):
    """The bounded JSON reader's refusal as a SuiteError at ``path`` (and ``line``)."""

    def error(message: str) -> SuiteError:
        return SuiteError(message.removeprefix(": "), path=path, line=line)

    return error


def _parquet_rows(path: Path) -> Iterator[tuple[tuple[int, str], dict[str, Any]]]:
    try:
        import pyarrow.parquet as pq  # the import extra: only Parquet files need it
    except ImportError as exc:
        reraise_interrupt(exc)
        raise SuiteError("reading Parquet needs pyarrow: pip install 'warp-check[import]'", path=path) from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 — whatever pyarrow says, the file is not readable Parquet
        reraise_interrupt(exc)
        raise SuiteError(f"not a readable Parquet file ({exc})", path=path) from None
    for number, row in enumerate(table.to_pylist(), start=1):
        yield (number, "row"), row


def _advglue_rows(path: Path, settings: ImportSettings) -> Iterator[tuple[tuple[int, str], dict[str, Any]]]:
    data = parse_json(path.read_text(encoding="utf-8"), where="", error=_line_error(path, None), what="AdvGLUE file")
    if not isinstance(data, dict) or not isinstance(data.get(settings.task), list):
        tasks = ", ".join(data) if isinstance(data, dict) else "none"
        raise SuiteError(f"no task {settings.task!r} in this AdvGLUE file (tasks: {tasks})", path=path)
    first, second = ADVGLUE_FIELDS[settings.task]
    for number, entry in enumerate(data[settings.task], start=1):
        if not isinstance(entry, dict):
            raise SuiteError(f"entry {number}: not a JSON object", path=path)
        row = {
            "text": entry.get(first),
            "label": entry.get("label"),
            "id": f"advglue-{settings.task}-{entry.get('idx')}",
        }
        if second is not None:
            row["text_pair"] = entry.get(second)
        yield (number, "entry"), row
