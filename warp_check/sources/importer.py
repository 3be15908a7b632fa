"""Bring your cases: CSV, TSV, JSONL, Parquet files and AdvGLUE's ``dev.json`` into a suite's JSONL.

Columns are named by the caller (text, text pair, label, id), the rows read by
:mod:`warp_check.data_files`; every label is checked against the suite's labels (a name or a class id
of the model); a bad row is an error naming the file and the line (CSV, TSV, JSONL), the row (Parquet)
or the entry (AdvGLUE). Cases are appended atomically with
:func:`warp_check.suite.casefile.append_cases`: ids kept where the file gives them, made from the text
otherwise, so importing twice adds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_check.cases import Kind
from warp_check.data_files import ImportSettings, opened, row_error, row_fields, rows_of
from warp_check.decisions import SINGLE_LABEL, AnswerError, LabelSpace
from warp_check.errors import SettingsError, WarpError
from warp_check.suite.casefile import AppendResult, NewCase, append_cases, writer_check
from warp_check.suite.loader import Suite
from warp_check.validation import is_decimal


@dataclass(frozen=True)
class ImportResult:
    rows: int
    appended: AppendResult


@dataclass(frozen=True, kw_only=True)
class LabelledRow:
    """A row read as a case (its label as the suite names it), its class id, and where it is."""

    case: NewCase
    label: Any  # the answer, as the suite's kind of decision holds it (single label: the class id)
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
    source, settings = opened(source, settings)
    rows = []
    for where, row in rows_of(source, settings):
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


def check_id(suite: Suite, case_id: str | None, out: str | Path, error, field: str) -> None:
    """Refuse a row whose id is a suite case's in another file than ``out``: listed beside it, the
    suite would not load (in ``out`` itself the append leaves a copy out and gives a clash a new id)."""
    where = suite.locations.get(case_id) if case_id is not None else None
    if where is not None and Path(where.path).resolve() != Path(out).resolve():
        clash = f"id {case_id!r} is already a case of the suite ({where.path}:{where.line})"
        raise error(field, f"{clash}: give the row another id, or leave the id column out")


def _case(
    suite: Suite, where: tuple[int, str], row: dict[str, Any], settings: ImportSettings, source: Path
) -> tuple[NewCase, Any]:
    error = row_error(source, where)
    text, pair, case_id = row_fields(row, settings, error)
    if settings.label not in row or (row[settings.label] in (None, "") and suite.decision is SINGLE_LABEL):
        raise error(settings.label, f"no label in column {settings.label!r}")
    if suite.decision is SINGLE_LABEL:
        label = _label(suite, row[settings.label], error, settings.label)
    else:  # the kind reads the column as its first answer field (several labels: a list, or "3,27")
        label = _answer(suite, row[settings.label] or [], error, settings.label)  # empty: every label off
    case = NewCase(
        text=text,
        text_pair=pair,
        label=suite.label_as_written(label),
        id=case_id,
        kind=settings.kind.value,
        source=settings.source or source.name,
    )
    return case, label


def _answer(suite: Suite, value: Any, error, column: str) -> Any:
    """The answer ``value`` states, read by the suite's kind of decision as its first answer field."""
    kind = suite.decision
    space = LabelSpace(names=suite.labels, num_classes=suite.num_classes)
    try:
        return kind.read_answer({kind.answer_fields[0]: value}, space)
    except AnswerError as exc:
        raise error(column, str(exc)) from None


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
