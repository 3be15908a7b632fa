"""Cert 4 between any two models: the share of predictions a release (NEW) changes against an earlier
one (OLD) on traffic like the sample, bounded exactly as a repair's changes are.

A repair changes only the repair layer, so its Cert 4 reads both predictions off one v. Two releases
may differ anywhere (fine-tuned again, distilled, quantised, a new base, another tokenizer): each
model encodes each text of the sample's bound part itself, through the representation cache (its
key is the model's, so a second comparison of the same two folders encodes nothing), and predicts
from its own v in float64. What is compared is the texts: a text counts where both models see some
text in it; one either sees as no text at all is left out and counted. The count of changes, the
bound and the changes per label pair are the repair's Cert 4 record
(:func:`~warp_check.certificates.traffic.changes.changes_record`: the same sample split, the same
:func:`~warp_check.certify.binomial.change_bound`, "changed" as the suite's kind of decision says).
NEW needs no certificate.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from warp_check.certificates.traffic.changes import TrafficInputs, changes_record, predictions
from warp_check.certificates.traffic.sample import Part, TrafficSample
from warp_check.certificates.traffic.verdicts import TrafficNote, properties, traffic_note
from warp_check.certify.certificate import TrafficRecord, change_sentence, percent
from warp_check.decisions import DecisionKind
from warp_check.errors import SettingsError, SuiteError
from warp_check.model.encode import encode_cases, input_keys
from warp_check.progress import Progress
from warp_check.serial import Record

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter


@dataclass(frozen=True, kw_only=True)
class Encoding(Record):
    """How the texts reached one model's v: encoded now, or read back from the cache."""

    encoded: int
    from_cache: int


@dataclass(frozen=True, kw_only=True)
class ReleaseChanges:
    """What NEW changes against OLD on the sample: the record (as a repair's Cert 4 has it) and how each
    model's texts were encoded."""

    record: TrafficRecord
    old: Encoding
    new: Encoding


def refuse_kind(decision: DecisionKind) -> None:
    """A kind whose traffic is not one text per prediction (a tag per word) is refused by name."""
    if decision.per_word:
        raise SettingsError(
            "traffic",
            decision.name,
            f"Cert 4 between two models is not built for the {decision.name} kind (a prediction per word of a "
            "sentence): leave the traffic out of this comparison; the paired test and the regressions run as they are",
        )


def release_changes(
    old: ClassifierAdapter,
    new: ClassifierAdapter,
    sample: TrafficSample,
    *,
    decision: DecisionKind,
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = False,
) -> ReleaseChanges:
    """What ``new`` changes against ``old`` on the sample's bound part, each model on its own v."""
    refuse_kind(decision)
    started = time.perf_counter()
    texts = sample.part(Part.BOUND)
    cases = [text.case(i) for i, text in enumerate(texts)]
    seen = [i for i, (a, b) in enumerate(zip(input_keys(old, cases), input_keys(new, cases), strict=True)) if a and b]
    if texts and not seen:
        why = (
            f"the two models see no text in any of the {len(texts):,} texts Cert 4 is measured on (nothing but "
            "special and unknown tokens to one of them): give traffic texts in words both models read"
        )
        raise SuiteError(why, path=sample.source)
    kept = [cases[i] for i in seen]
    answers, encodings = [], []
    for adapter in (old, new):
        encoded = encode_cases(adapter, kept, batch_size=batch_size, cache_dir=cache_dir, progress=progress)
        answers.append(predictions(adapter.head(), encoded.V.astype(np.float64)))
        encodings.append(Encoding(encoded=encoded.encoded, from_cache=encoded.from_cache))
    inputs = TrafficInputs(
        texts=tuple(texts[i] for i in seen),
        V=np.zeros((len(seen), 0)),  # each model's own v gave its answers: none is the comparison's
        no_text=len(texts) - len(seen),
        seconds=time.perf_counter() - started,
    )
    record = changes_record(
        sample, inputs, answers[0], answers[1], label_name=new.label_name, seconds=inputs.seconds, decision=decision
    )
    return ReleaseChanges(record=record, old=encodings[0], new=encodings[1])


@dataclass(frozen=True, kw_only=True)
class ReleaseTraffic:
    """Cert 4 of a release against its baseline as a run reports it: the note, the verdict and its words."""

    note: TrafficNote
    passed: bool
    words: str
    figures: dict[str, Any] = field(default_factory=dict)


def release_verdict(
    changes: ReleaseChanges, sample: TrafficSample, *, baseline: str, labels: dict[str, int], decision: str
) -> ReleaseTraffic:
    """The ``traffic`` item's verdict on NEW against the baseline named ``baseline``: within ``max_change``
    (or measured, where there is none) or over it, the bound named."""
    note = traffic_note(changes.record, sample, labels, decision=decision)
    pairs = ", ".join(f"{pair}: {count}" for pair, count in note.by_pair.items()) or "no change"
    sentence = change_sentence(note.bound, note.changed, note.n, note.confidence)
    encoded = (
        f"encoded: the baseline {changes.old.encoded}, this model {changes.new.encoded}; "
        f"from the cache {changes.old.from_cache} and {changes.new.from_cache}"
    )
    figures = properties(note) | {
        "baseline": baseline,
        "encoded_old": changes.old.encoded,
        "encoded_new": changes.new.encoded,
    }
    if note.within_budget:
        budget = "" if note.max_change is None else f", within max_change = {percent(note.max_change)}"
        words = f"Cert 4 against the baseline {baseline}: this model {sentence}{budget} [{pairs}] ({encoded})"
        return ReleaseTraffic(note=note, passed=True, words=words, figures=figures)
    assert note.max_change is not None
    words = (
        f"Cert 4 fails the budget against the baseline {baseline}: this model {sentence}, bound "
        f"{percent(note.bound)} over max_change = {percent(note.max_change)} by "
        f"{100 * (note.bound - note.max_change):.2g} points [{pairs}] ({encoded})"
    )
    return ReleaseTraffic(note=note, passed=False, words=words, figures=figures)


__all__ = ["Encoding", "ReleaseChanges", "ReleaseTraffic", "refuse_kind", "release_changes", "release_verdict"]
