"""Cert 4 as a run's verdict: the suite's ``traffic`` item passes where the repair's changes on the
traffic are bounded within its budget (or measured, where it has none), and fails with the figures
and what to try where they are not."""

from __future__ import annotations

from typing import Any

from warp_check.certify.certificate import TrafficRecord, change_sentence, percent
from warp_check.certify.traffic import TrafficSample
from warp_check.runs.details import BudgetFit, TrafficNote
from warp_check.runs.result import TrafficVerdict


def traffic_note(
    record: TrafficRecord,
    sample: TrafficSample,
    labels: dict[str, int] | None = None,
    fit: BudgetFit | None = None,
) -> TrafficNote:
    """The run's record of Cert 4 (``labels``: the suite's names of the classes; ``fit``: over the
    budget, the must_fix cases it cannot buy)."""
    return TrafficNote(
        source=sample.source,
        rows=sample.rows,
        duplicates=sample.duplicates,
        in_suite=sample.in_suite,
        tune=len(sample.tune),
        no_text=record.no_text,
        sample_sha256=record.sample_sha256,
        n=record.n,
        changed=record.changed,
        bound=record.bound,
        confidence=record.confidence,
        max_change=record.max_change,
        by_pair=dict(record.by_pair),
        changes=record.changes,
        seconds=record.seconds,
        labels=dict(labels or {}),
        fit=fit,
    )


def properties(note: TrafficNote) -> dict[str, Any]:
    """Cert 4's figures, for JUnit and reports."""
    return {
        "n": note.n,
        "changed": note.changed,
        "bound": note.bound,
        "confidence": note.confidence,
        "max_change": note.max_change,
        "sample_sha256": note.sample_sha256,
        **{f"changed {pair}": count for pair, count in note.by_pair.items()},
        **({"cannot buy": " ".join(c.id for c in note.fit.left_out)} if note.fit and note.fit.left_out else {}),
    }


# What moves a repair along the curve of fixes against changes (the README's "What keeps general accuracy").
ADVICE = (
    "fewer or looser must_fix cases (a smaller gamma_s), a larger mu (the price of moving the layer on kept "
    "inputs), more must_keep cases (`warp-check import --predicted` labels traffic by the model), or more "
    "traffic texts (a larger sample brings the bound down towards the share measured)"
)


def repaired_verdict(note: TrafficNote) -> TrafficVerdict:
    """The verdict of a repair that converged, Cert 4 measured."""
    figures = str(note)
    if note.within_budget:
        return TrafficVerdict(passed=True, message=f"Cert 4: the repair {figures}", properties=properties(note))
    assert note.max_change is not None
    pairs = ", ".join(f"{pair}: {count}" for pair, count in note.by_pair.items())
    message = (
        f"Cert 4 fails the budget: the repair {change_sentence(note.bound, note.changed, note.n, note.confidence)}, "
        f"over max_change = {percent(note.max_change)} by {100 * (note.bound - note.max_change):.2g} points "
        f"({pairs}); nothing was written. "
    )
    message += f"Try {ADVICE}" if note.fit is None else f"{note.fit.sentence()} Other levers: {ADVICE}"
    return TrafficVerdict(passed=False, message=message, properties=properties(note))


def unchanged_verdict(sample: TrafficSample) -> TrafficVerdict:
    """Nothing needed repair: the model is unchanged, so are its predictions."""
    message = f"Cert 4: nothing was repaired, so no prediction changed on the {len(sample.bound):,} texts of the sample"
    return TrafficVerdict(passed=True, message=message, properties={"n": len(sample.bound), "changed": 0})


def no_model_verdict(why: str) -> TrafficVerdict:
    """The repair failed: there is no repaired model to measure."""
    return TrafficVerdict(passed=False, message=f"Cert 4 not measured: {why}")


__all__ = [
    "ADVICE", "no_model_verdict", "properties", "repaired_verdict", "traffic_note", "unchanged_verdict",
]  # fmt: skip
