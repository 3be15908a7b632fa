"""How Cert 4 is measured: what a repair changes on unlabelled traffic, in float64 from the cached v.

Every text of the sample's bound part goes through the encoder once (the representation cache
keeps its v, so an audit of the repaired model, whose encoder is unchanged, reads it back); the
input head and the repaired one each predict a class from that v, and a text counts as changed
where they differ. The count and the sample size give the exact (Clopper–Pearson) upper bound on
the share of predictions the repair changes on traffic like the sample, which bounds the accuracy
it can lose there too: an accuracy drop needs a changed prediction. No label is needed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from warp_check.cases import Case
from warp_check.certificates.traffic.sample import Part, TrafficSample, TrafficText
from warp_check.certify.binomial import change_bound
from warp_check.certify.certificate import TrafficChange, TrafficRecord
from warp_check.decisions import SINGLE_LABEL, DecisionKind
from warp_check.errors import SuiteError
from warp_check.model.encode import encode_cases, input_keys
from warp_check.model.head import DenseHead

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter

ARROW = "→"


@dataclass(frozen=True)
class TrafficInputs:
    """The sample's bound part as the model takes it: the texts measured and their v (float64), a row
    of V per text, or, for a kind deciding per word, per word (:mod:`.sentences`)."""

    texts: tuple[TrafficText, ...]  # measured, in sample order
    V: np.ndarray
    no_text: int  # texts the model sees as no text: left out
    seconds: float
    # Per word (a token classifier): each row of V's text (its word marked) and the index of its text.
    row_texts: tuple[str, ...] | None = None
    sentence_of: np.ndarray | None = None

    def row_text(self, row: int) -> str:
        """The text of row ``row`` of V, as a change records it."""
        return self.texts[row].text if self.row_texts is None else self.row_texts[row]


def traffic_inputs(
    adapter: ClassifierAdapter,
    sample: TrafficSample,
    *,
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
    progress: bool = False,
    part: Part = Part.BOUND,
) -> TrafficInputs:
    """v of every text of the sample's ``part`` (Cert 4's: the bound part), from the cache where it has
    them; a text the model sees as no text at all (nothing but special and unknown tokens) is left
    out and counted. A bound part of which the model sees no text at all is a SuiteError naming the file:
    Cert 4 would have nothing to measure."""
    started = time.perf_counter()
    texts = sample.part(part)
    cases, sentence_of, per_text = traffic_cases(texts, adapter.decision)
    keys = input_keys(adapter, cases)
    kept = [i for i, key in enumerate(keys) if key is not None]
    measured = sorted({sentence_of[i] for i in kept})
    if part is Part.BOUND and texts and not kept:
        why = (
            f"the model sees no text in any of the {len(texts):,} texts Cert 4 is measured on (nothing but special "
            "and unknown tokens: emoji, symbols, another script): give traffic texts in words the model reads"
        )
        raise SuiteError(why, path=sample.source)
    d_in = adapter.width  # v, and the FFN-output form's residual after it
    V = np.zeros((0, d_in))
    if kept:
        encoded = encode_cases(
            adapter, [cases[i] for i in kept], batch_size=batch_size, cache_dir=cache_dir, progress=progress
        )
        V = encoded.V.astype(np.float64)
    seconds = time.perf_counter() - started
    if per_text:
        return TrafficInputs(tuple(texts[i] for i in kept), V, len(texts) - len(kept), seconds)
    place = {sentence: at for at, sentence in enumerate(measured)}
    return TrafficInputs(
        tuple(texts[i] for i in measured),
        V,
        len(texts) - len(measured),
        seconds,
        row_texts=tuple(cases[i].text for i in kept),
        sentence_of=np.asarray([place[sentence_of[i]] for i in kept], dtype=np.int64),
    )


def traffic_cases(texts: Sequence[TrafficText], decision: DecisionKind) -> tuple[list[Case], list[int], bool]:
    """The rows ``decision`` predicts the texts on (cases the encoder takes; their labels are not
    measured), per row the index of its text, and whether each text is one row (a whole-text kind)."""
    cases = [text.case(i) for i, text in enumerate(texts)]
    rows = decision.traffic_rows([(case.id, case.text) for case in cases])
    if rows is None:
        return cases, list(range(len(cases))), True
    return [replace(cases[r.draw], id=r.id, text=r.text) for r in rows], [r.draw for r in rows], False


def predictions(head: DenseHead, V: np.ndarray) -> np.ndarray:
    """What ``head`` predicts for each row of V as its kind of decision decides, in float64 (single
    label: the lowest class id on a tie)."""
    if len(V) == 0:
        return np.zeros(0, dtype=np.int64)
    return head.predict(np.asarray(V, dtype=np.float64))


def measure_changes(
    before: DenseHead,
    after: DenseHead,
    inputs: TrafficInputs,
    sample: TrafficSample,
    *,
    label_name: Callable[[int], str] = str,
) -> TrafficRecord:
    """Cert 4 of the repair from ``before`` to ``after`` on the sample's measured texts."""
    started = time.perf_counter()
    was, now = predictions(before, inputs.V), predictions(after, inputs.V)
    seconds = inputs.seconds + time.perf_counter() - started
    return changes_record(sample, inputs, was, now, label_name=label_name, seconds=seconds, decision=after.decision)


def changes_record(
    sample: TrafficSample,
    inputs: TrafficInputs,
    was: np.ndarray,
    now: np.ndarray,
    *,
    label_name: Callable[[int], str] = str,
    seconds: float = 0.0,
    decision: DecisionKind = SINGLE_LABEL,
) -> TrafficRecord:
    """The record of predictions ``was`` → ``now`` on ``inputs`` (an audit builds it again from its own);
    what counts as a change is ``decision``'s."""
    changed = [int(i) for i in np.flatnonzero(decision.changed(was, now))]
    draw_of = np.arange(len(was)) if inputs.sentence_of is None else inputs.sentence_of
    count = decision.traffic_count(np.asarray(changed, dtype=np.int64), draw_of)
    by_pair: dict[str, int] = {}
    for i in changed:
        for pair in decision.change_keys(was[i], now[i], label_name):
            by_pair[pair] = by_pair.get(pair, 0) + 1
    n = len(inputs.texts)
    return TrafficRecord(
        source=Path(sample.source).name,
        sample_sha256=sample.digest,
        n=n,
        changed=count.draws_changed,
        bound=change_bound(count.draws_changed, n, sample.confidence),
        words=count.rows,
        words_changed=count.rows_changed,
        confidence=sample.confidence,
        max_change=sample.max_change,
        by_pair=dict(sorted(by_pair.items())),
        no_text=inputs.no_text,
        predicted_before=tuple(decision.code(c) for c in was),
        changes=tuple(
            TrafficChange(
                index=i,
                text=inputs.row_text(i),
                text_pair=None if inputs.row_texts is not None else inputs.texts[i].text_pair,
                before=decision.code(was[i]),
                after=decision.code(now[i]),
            )
            for i in changed
        ),
        seconds=round(seconds, 3),
    )


__all__ = [
    "ARROW",
    "TrafficInputs",
    "changes_record",
    "measure_changes",
    "predictions",
    "traffic_cases",
    "traffic_inputs",
]
