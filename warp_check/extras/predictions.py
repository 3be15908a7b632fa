"""Unlabelled text into must_keep cases labelled by the model's own predictions.

A repair keeps right what its must_keep cases name and is free to move the model everywhere
else. The more of the inputs a model will see are must_keep cases, the less the repair changes:
on real SST-2 classifiers (88 % dev accuracy, 51-57 DeepWordBug must_fix, benchmarks/RESULTS.md)
8,000 unlabelled train sentences added this way to 2,000 labelled must_keep cases cut the dev
accuracy a repair lost from 3.0 / 2.6 points (ReLU / tanh head) to 1.5 / 0.8 and the dev
predictions it changed from 62 / 67 to 29 / 35; it also fixed fewer held-out attacks (34.8 / 28.1 %
to 22.2 / 24.4 %): what is kept no longer moves with the fix.

Text without labels (a sample of the traffic a model serves) is what a release gate has most of.
Its labels here are the model's predictions, so the repair keeps those predictions, right or
wrong, and Cert 2 certifies that it did. A row the model predicts by less than the must_keep margin
γ_h is left out: keeping it would mean moving it. So is a row whose text is a case of the suite
already: its label is the suite's to say.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from warp_check.cases import Case, Kind
from warp_check.extras.importer import ImportSettings, read_unlabelled
from warp_check.model.head import gaps_from_logits
from warp_check.runs.evaluation import evaluate
from warp_check.suite.casefile import AppendResult, NewCase, append_cases
from warp_check.suite.loader import Suite

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter

PREDICTION = "prediction"  # the source of a case labelled by the model: prediction:<file name>


@dataclass(frozen=True, kw_only=True)
class PredictedImport:
    """What :func:`import_predicted` read, labelled, left out and appended."""

    rows: int  # rows read
    appended: AppendResult
    in_suite: int  # rows whose text is a case of the suite already: left out
    near_boundary: int  # rows predicted by less than gamma_h: left out
    gamma_h: float
    by_label: tuple[tuple[str, int], ...]  # cases offered per predicted label, in the suite's label order


def import_predicted(
    suite: Suite,
    adapter: ClassifierAdapter,
    source: str | Path,
    out: str | Path,
    settings: ImportSettings,
    *,
    cache_dir: str | Path | None = None,
    progress: bool = False,
) -> PredictedImport:
    """Read the texts of ``source`` (no label column), label each by the model's prediction and
    append those predicted by at least the suite's γ_h to ``out`` as must_keep cases, atomically and
    deduplicated (source ``prediction:<file name>`` unless ``settings.source`` says otherwise)."""
    source = Path(source)
    rows = read_unlabelled(source, settings)
    known = {(case.text, case.text_pair) for case in suite.cases}
    fresh = [row for row in rows if (row.text, row.text_pair) not in known]
    # The labels are what is being computed: the encoder reads only the texts. The origin makes an
    # input the model cannot take an error that names the file and the line.
    probes = [
        Case(
            id=f"row-{i}",
            text=row.text,
            text_pair=row.text_pair,
            label=0,
            kind=Kind.MUST_KEEP,
            origin=f"{source}:{row.where[0]}" if row.where[1] == "line" else None,
        )
        for i, row in enumerate(fresh)
    ]
    logits = np.zeros((0, adapter.num_classes))
    if probes:
        evaluation = evaluate(
            adapter, probes, batch_size=suite.model.batch_size, cache_dir=cache_dir, progress=progress
        )
        logits = evaluation.logits  # float64, from the head's own weights
    predicted = np.argmax(logits, axis=1)
    gaps = gaps_from_logits(logits, predicted)[0] if len(fresh) else np.zeros(0)
    clear = gaps >= suite.repair.gamma_h
    new = [
        NewCase(
            text=row.text,
            text_pair=row.text_pair,
            label=suite.label_name(int(label)),
            id=row.id,
            kind=Kind.MUST_KEEP.value,
            source=settings.source or f"{PREDICTION}:{source.name}",
        )
        for row, label, keep in zip(fresh, predicted, clear, strict=True)
        if keep
    ]
    appended = append_cases(out, new, id_prefix=f"{PREDICTION}-{source.stem}")
    counts = np.bincount(predicted[clear], minlength=adapter.num_classes)
    by_label = tuple((suite.label_name(i), int(counts[i])) for i in range(adapter.num_classes) if counts[i])
    return PredictedImport(
        rows=len(rows),
        appended=appended,
        in_suite=len(rows) - len(fresh),
        near_boundary=int((~clear).sum()),
        gamma_h=suite.repair.gamma_h,
        by_label=by_label,
    )
