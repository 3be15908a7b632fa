"""The rows of a data file: CSV, TSV, JSONL, Parquet and AdvGLUE's ``dev.json``, each row with where it
is (a line, a Parquet row or an AdvGLUE entry), its texts and id in the columns the caller names.

A bad row is an error naming the file and the line, the row or the entry. Nothing is unpickled:
Parquet is read with pyarrow (the ``import`` extra), the rest with the standard library. ``warp-check
import`` reads its cases with these readers, and Cert 4 its sample of unlabelled texts.
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
from warp_check.errors import SettingsError, SuiteError, reraise_interrupt
from warp_check.json_bounded import parse_json

# conll: a token classifier's sentences, token<TAB>tag a line (warp_check.sources.conll reads it).
FORMATS = ("csv", "tsv", "jsonl", "parquet", "advglue", "goemotions", "conll")
# GoEmotions' release: TSV without a header, a row `text<TAB>label ids, comma-separated<TAB>comment id`.
GOEMOTIONS_COLUMNS = ("text", "label", "id")
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


def read_unlabelled(source: str | Path, settings: ImportSettings) -> list[UnlabelledRow]:
    """The texts (and ids) of every row of ``source``; no label column is read."""
    source, settings = opened(source, settings)
    rows = []
    for where, row in rows_of(source, settings):
        text, pair, case_id = row_fields(row, settings, row_error(source, where))
        rows.append(UnlabelledRow(text=text, text_pair=pair, id=case_id, where=where))
    return rows


def opened(source: str | Path, settings: ImportSettings) -> tuple[Path, ImportSettings]:
    source = Path(source)
    if not source.is_file():
        raise SuiteError("no such file to import", path=source)
    if settings.format == "advglue":  # its fields are fixed by the task
        pair = "text_pair" if ADVGLUE_FIELDS[settings.task or ""][1] is not None else None
        settings = replace(settings, text="text", text_pair=pair, label="label", id="id")
    elif settings.format == "goemotions":  # its columns are fixed, and unnamed
        settings = replace(settings, text="text", text_pair=None, label="label", id="id")
    return source, settings


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


def row_fields(row: dict[str, Any], settings: ImportSettings, error) -> tuple[str, str | None, str | None]:
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


def _utf8_text(path: Path) -> str:
    """The file as text (a leading byte order mark dropped); bytes that are not UTF-8 name their line."""
    raw = path.read_bytes().removeprefix(codecs.BOM_UTF8)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        why = f"not valid UTF-8 (byte 0x{raw[exc.start]:02x}): save the file as UTF-8"
        raise SuiteError(why, path=path, line=line) from None


def rows_of(path: Path, settings: ImportSettings) -> Iterator[tuple[tuple[int, str], dict[str, Any]]]:
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
    elif settings.format == "goemotions":
        for number, line in enumerate(_utf8_text(path).splitlines(), start=1):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != len(GOEMOTIONS_COLUMNS):
                why = f"a GoEmotions row is text, label ids and comment id, tab-separated: {len(fields)} field(s) here"
                raise SuiteError(why, path=path, line=number)
            yield (number, "line"), dict(zip(GOEMOTIONS_COLUMNS, fields, strict=True))
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


__all__ = [
    "ADVGLUE_FIELDS",
    "FORMATS",
    "ImportSettings",
    "UnlabelledRow",
    "format_of",
    "opened",
    "read_unlabelled",
    "row_error",
    "row_fields",
    "rows_of",
]
