"""Labelled rows sorted by the model as they come in: right ones to must_keep, wrong ones to must_fix.

A labelled file (a dev set, a sample of traffic someone labelled) holds rows the model already
gets wrong. Imported as must_keep, each is a failing test and a case a repair leaves out ("the
original model already got them wrong"). Sorted here instead: a row the model predicts right
(gap > 0) becomes a must_keep case, a row it gets wrong a must_fix case, which a repair fixes,
or with ``drop_wrong`` is left out. The rows are encoded with the suite's model and
representation cache, so a later run of the suite finds them there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from warp_check.cases import Case, Kind
from warp_check.data_files import ImportSettings, row_error
from warp_check.errors import SettingsError
from warp_check.pipeline.evaluation import evaluate
from warp_check.releases.load import load_adapter
from warp_check.sources.importer import LabelledRow, check_id, import_prefix, read_labelled
from warp_check.sources.predictions import naming_the_file
from warp_check.suite.casefile import AppendResult, append_cases, writer_check
from warp_check.suite.loader import Suite

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter


@dataclass(frozen=True, kw_only=True)
class SplitImport:
    """What :func:`import_split` read and where each row went."""

    rows: int  # rows read
    right: int  # rows the model predicts right: offered as must_keep cases
    wrong: int  # rows it gets wrong: offered as must_fix cases, or dropped
    kept: AppendResult  # the must_keep file, what was appended and what was there already
    fixed: AppendResult | None  # the must_fix file, likewise (None: the wrong rows were dropped)

    @property
    def dropped(self) -> int:
        return self.wrong if self.fixed is None else 0


def import_split(
    suite: Suite,
    source: str | Path,
    settings: ImportSettings,
    *,
    keep_out: str | Path,
    fix_out: str | Path | None,
    adapter: ClassifierAdapter | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = False,
) -> SplitImport:
    """Read the labelled rows of ``source``, run the suite's model on them (``adapter``, where the
    caller has it loaded) and append those it gets right to ``keep_out`` as must_keep cases, those
    it gets wrong to ``fix_out`` as must_fix cases (``fix_out`` None: left out). Every row is read
    and checked before the model loads: a bad row costs no model load."""
    if settings.predicted:
        raise SettingsError("predicted", True, "labels come from the file here, not from the model")
    if settings.kind is not Kind.MUST_KEEP:
        why = "must be must_keep: the model sorts the rows into must_keep and must_fix cases"
        raise SettingsError("kind", settings.kind.value, why)
    source = Path(source)
    rows = read_labelled(suite, source, settings)
    _check_one_label_a_text(source, rows, settings)
    right = [False] * len(rows)
    if rows:
        adapter = adapter if adapter is not None else load_adapter(suite)
        probes = [
            Case(
                id=f"{row.where[1]} {row.where[0]}",
                text=row.case.text,
                text_pair=row.case.text_pair,
                label=row.label,
                kind=Kind.MUST_KEEP,
                origin=f"{source}:{row.where[0]}" if row.where[1] == "line" else None,
            )
            for row in rows
        ]
        with naming_the_file(source):
            evaluation = evaluate(
                adapter, probes, batch_size=suite.model.batch_size, cache_dir=cache_dir, progress=progress
            )
        right = [bool(gap > 0) for gap in evaluation.gaps]
    going = [(row, keep_out if ok else fix_out) for row, ok in zip(rows, right, strict=True)]
    for row, out in going:
        if out is not None:
            check_id(suite, row.case.id, out, row_error(source, row.where), settings.id or "id")
    keep = [row.case for row, ok in zip(rows, right, strict=True) if ok]
    fix = [replace(row.case, kind=Kind.MUST_FIX.value) for row, ok in zip(rows, right, strict=True) if not ok]
    prefix = import_prefix(source)
    kept = append_cases(keep_out, keep, id_prefix=prefix, check=writer_check(suite, keep_out, kind=Kind.MUST_KEEP))
    fixed = None
    if fix_out is not None:
        fixed = append_cases(fix_out, fix, id_prefix=prefix, check=writer_check(suite, fix_out, kind=Kind.MUST_FIX))
    return SplitImport(rows=len(rows), right=len(keep), wrong=len(fix), kept=kept, fixed=fixed)


def _check_one_label_a_text(source: Path, rows: list[LabelledRow], settings: ImportSettings) -> None:
    """Refuse two rows of one text with two labels before anything is written: one of them would
    go to each file, and the second file's write be refused after the first was made."""
    first: dict[tuple[str, str | None], LabelledRow] = {}
    for row in rows:
        key = (row.case.text, row.case.text_pair)
        seen = first.setdefault(key, row)
        if seen.label != row.label:
            unit, number = seen.where[1], seen.where[0]
            raise row_error(source, row.where)(
                settings.label,
                f"the same text is labelled {seen.case.label!r} at {unit} {number} and {row.case.label!r} here: "
                "no model can satisfy both",
            )


__all__ = ["SplitImport", "import_split"]
