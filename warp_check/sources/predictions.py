"""Unlabelled text into must_keep cases labelled by the model's own predictions.

A repair keeps right what its must_keep cases name and is free to move the model everywhere
else. The more of the inputs a model will see are must_keep cases, the less the repair changes:
on real SST-2 classifiers (88 % dev accuracy, 51-57 DeepWordBug must_fix, benchmarks/RESULTS.md)
8,000 unlabelled train sentences added this way to 2,000 labelled must_keep cases cut the dev
accuracy a repair lost from 3.0 / 2.6 points (ReLU / tanh head) to 0.6 / 1.6 and the dev
predictions it changed from 62 / 67 to 29 / 32; it also fixed fewer held-out attacks (34.8 / 28.1 %
to 23.4 / 14.4 %): what is kept no longer moves with the fix.

Text without labels (a sample of the traffic a model serves) is what a release gate has most of.
Its labels here are the model's predictions, so the repair keeps those predictions, right or
wrong, and Cert 2 certifies that it did. A row the model predicts by less than the must_keep margin
γ_h is left out: keeping it would mean moving it. So is a row the model sees as a case of the
suite already: its label is the suite's to say.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from warp_check.cases import Case, Kind
from warp_check.data_files import ImportSettings, UnlabelledRow, read_unlabelled, row_error
from warp_check.errors import SuiteError
from warp_check.model.encode import input_keys
from warp_check.pipeline.evaluation import evaluate
from warp_check.progress import Progress
from warp_check.releases.load import load_adapter
from warp_check.sources.importer import check_id
from warp_check.suite.casefile import AppendResult, NewCase, append_cases, writer_check
from warp_check.suite.loader import Suite

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter

PREDICTION = "prediction"  # the source of a case labelled by the model: prediction:<file name>


@dataclass(frozen=True, kw_only=True)
class PredictedImport:
    """What :func:`import_predicted` read, labelled, left out and appended."""

    rows: int  # rows read
    appended: AppendResult  # its duplicates: rows already in the output file
    in_suite: int  # rows the model sees as a case of the suite (the same tokens): left out
    no_text: int  # rows the model sees as no text (nothing but special and unknown tokens): left out
    repeated: int  # rows the model sees as an earlier row of the file: left out
    near_boundary: int  # rows predicted by less than gamma_h: left out
    gamma_h: float
    by_label: tuple[tuple[str, int], ...]  # rows labelled and offered, per label in the suite's order


def import_predicted(
    suite: Suite,
    source: str | Path,
    out: str | Path,
    settings: ImportSettings,
    *,
    adapter: ClassifierAdapter | None = None,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = False,
) -> PredictedImport:
    """Read the texts of ``source`` (no label column), label each by the model's prediction and
    append those predicted by at least the suite's γ_h to ``out`` as must_keep cases, atomically and
    deduplicated (source ``prediction:<file name>`` unless ``settings.source`` says otherwise).

    The file is read and checked before the suite's model is loaded (``adapter``, where the caller
    has it loaded already): a bad row costs no model load."""
    source = Path(source)
    rows = read_unlabelled(source, settings)
    _check_fits(suite, source, out, rows, settings)
    adapter = adapter if adapter is not None else load_adapter(suite)
    probes = _probes(source, rows, suite.decision.unstated(adapter.num_classes))
    with naming_the_file(source):
        keys = input_keys(adapter, probes)
    # What the model sees, not the raw text: a copy of a suite case, even one differing in case or
    # spacing, would be the same input twice, with a label the suite does not give it. A row it sees
    # as no text (None: emoji for an English vocabulary, say) has nothing to label: text scraped in
    # bulk holds such rows, and they are left out, not an error. Only the rows kept are encoded.
    suite_keys = set(input_keys(adapter, suite.cases))
    no_text = keys.count(None)
    chosen = [i for i, key in enumerate(keys) if key is not None and key not in suite_keys]
    firsts = _first_of_each(keys, chosen)
    taken = [rows[i] for i in firsts]
    logits = np.zeros((0, adapter.num_classes))
    if firsts:
        labelled = [probes[i] for i in firsts]
        with naming_the_file(source):
            evaluation = evaluate(
                adapter, labelled, batch_size=suite.model.batch_size, cache_dir=cache_dir, progress=progress
            )
        logits = evaluation.logits  # float64, from the head's own weights
    decision = adapter.head().decision
    predicted, margin = decision.prediction_margins(logits)
    clear = margin >= suite.repair.gamma_h
    new = [
        NewCase(
            text=row.text,
            text_pair=row.text_pair,
            label=suite.label_as_written(decision.answer_of_prediction(label, adapter.num_classes)),
            id=row.id,
            kind=Kind.MUST_KEEP.value,
            source=settings.source or f"{PREDICTION}:{source.name}",
        )
        for row, label, keep in zip(taken, predicted, clear, strict=True)
        if keep
    ]
    check = writer_check(suite, out, kind=Kind.MUST_KEEP)
    appended = append_cases(out, new, id_prefix=f"{PREDICTION}-{source.stem}", check=check)
    # Per label, the cases written that it labels (several labels: the cases with the label on).
    stated = decision.answers_of(predicted[clear], adapter.num_classes)
    counts = (stated > 0).sum(axis=0) if stated.ndim == 2 else np.bincount(stated, minlength=adapter.num_classes)
    by_label = tuple((suite.label_name(i), int(counts[i])) for i in range(adapter.num_classes) if counts[i])
    return PredictedImport(
        rows=len(rows),
        appended=appended,
        in_suite=len(rows) - no_text - len(chosen),
        no_text=no_text,
        repeated=len(chosen) - len(firsts),
        near_boundary=int((~clear).sum()),
        gamma_h=suite.repair.gamma_h,
        by_label=by_label,
    )


def _first_of_each(keys: list[str], chosen: list[int]) -> list[int]:
    """Of the positions ``chosen``, the first of each input key, in order."""
    first: dict[str, int] = {}
    for i in chosen:
        first.setdefault(keys[i], i)
    return list(first.values())


def _check_fits(
    suite: Suite, source: Path, out: str | Path, rows: list[UnlabelledRow], settings: ImportSettings
) -> None:
    """Rows of the suite's shape (single texts or pairs), whose ids are no suite case's outside ``out``."""
    cases = [case for case in suite.cases if case.kind is not Kind.AUX]
    if cases and rows:
        suite_pairs, file_pairs = cases[0].text_pair is not None, rows[0].text_pair is not None
        if suite_pairs != file_pairs:
            why = (
                "the suite's cases are text pairs: name the column of the second text (--text-pair)"
                if suite_pairs
                else "the suite's cases are single texts: a label predicted for a pair would be for another input"
            )
            raise SuiteError(why, path=source, field="text_pair")
    for row in rows:
        check_id(suite, row.id, out, row_error(source, row.where), settings.id or "id")


def _probes(source: Path, rows: list[UnlabelledRow], unstated: Any) -> list[Case]:
    """The rows as cases for the encoder, which reads only their texts (the labels are what is being
    computed). A row's place names it in an error about an input the model cannot take: its line as
    the case's origin (CSV, TSV, JSONL), its row or entry in the case id (Parquet, AdvGLUE)."""
    return [
        Case(
            id=f"{row.where[1]} {row.where[0]}",
            text=row.text,
            text_pair=row.text_pair,
            label=unstated,
            kind=Kind.MUST_KEEP,
            origin=f"{source}:{row.where[0]}" if row.where[1] == "line" else None,
        )
        for row in rows
    ]


@contextmanager
def naming_the_file(source: Path) -> Iterator[None]:
    """An error about a row without a line (Parquet, AdvGLUE: its case id names it) names the file too."""
    try:
        yield
    except SuiteError as exc:
        if exc.path is not None:
            raise
        raise SuiteError(exc.message, path=source, field=exc.field) from None
