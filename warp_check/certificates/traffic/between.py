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
NEW needs no certificate. A kind deciding per word (a token tagger) is compared as a repair's Cert 4 on
token traffic is measured: a row per word, a word where both models see it, and the share bounded is of
sentences with any word's tag changed (:mod:`~warp_check.certificates.traffic.sentences`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from warp_check.cases import Case
from warp_check.certificates.traffic.changes import TrafficInputs, changes_record, predictions
from warp_check.certificates.traffic.sample import Part, TrafficSample, TrafficText
from warp_check.certificates.traffic.sentences import word_rows
from warp_check.certificates.traffic.verdicts import TrafficNote, properties, traffic_note
from warp_check.certify.certificate import TrafficRecord, change_sentence, percent
from warp_check.decisions import DecisionKind
from warp_check.errors import SuiteError
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


@dataclass(frozen=True, kw_only=True)
class TrafficRows:
    """The sample's bound part as the rows a prediction is taken on: a row per text, or, for a kind deciding
    per word, a row per word of each text (:func:`~warp_check.certificates.traffic.sentences.word_rows`)."""

    texts: tuple[TrafficText, ...]
    cases: tuple[Case, ...]
    sentence_of: tuple[int, ...]  # per row, the index of its text
    per_word: bool


def traffic_rows(sample: TrafficSample, decision: DecisionKind) -> TrafficRows:
    """The rows of the sample's bound part as ``decision`` predicts on them."""
    texts = tuple(sample.part(Part.BOUND))
    if decision.per_word:
        cases, sentence_of = word_rows(texts)
    else:
        cases, sentence_of = [text.case(i) for i, text in enumerate(texts)], list(range(len(texts)))
    return TrafficRows(texts=texts, cases=tuple(cases), sentence_of=tuple(sentence_of), per_word=decision.per_word)


@dataclass(frozen=True, kw_only=True)
class ReleaseAnswers:
    """One model's predictions on the rows, in float64 from its own v: which rows it sees some text in, its
    answer on each (rows it does not see: zeros, never compared), and how its texts were encoded."""

    seen: np.ndarray  # bool, per row
    answers: np.ndarray  # per row
    encoding: Encoding
    seconds: float


def release_answers(
    adapter: ClassifierAdapter,
    rows: TrafficRows,
    *,
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = False,
) -> ReleaseAnswers:
    """``adapter``'s predictions on ``rows``: each row it sees encoded once, through the cache."""
    started = time.perf_counter()
    keys = input_keys(adapter, rows.cases) if rows.cases else []
    seen = np.array([bool(key) for key in keys], dtype=bool)
    kept = [rows.cases[i] for i in np.flatnonzero(seen)]
    if not kept:  # nothing this model reads: every row is left out of its comparisons
        nothing = Encoding(encoded=0, from_cache=0)
        answers = np.zeros(len(rows.cases), dtype=np.int64)
        return ReleaseAnswers(seen=seen, answers=answers, encoding=nothing, seconds=time.perf_counter() - started)
    encoded = encode_cases(adapter, kept, batch_size=batch_size, cache_dir=cache_dir, progress=progress)
    predicted = predictions(adapter.head(), encoded.V.astype(np.float64))
    answers = np.zeros((len(rows.cases), *predicted.shape[1:]), dtype=predicted.dtype)
    answers[seen] = predicted
    encoding = Encoding(encoded=encoded.encoded, from_cache=encoded.from_cache)
    return ReleaseAnswers(seen=seen, answers=answers, encoding=encoding, seconds=time.perf_counter() - started)


def changes_between(
    old: ReleaseAnswers,
    new: ReleaseAnswers,
    rows: TrafficRows,
    sample: TrafficSample,
    *,
    decision: DecisionKind,
    label_name: Callable[[int], str] = str,
) -> ReleaseChanges:
    """What ``new`` changes against ``old`` on the rows both see some text in (a text, for a kind deciding
    per word: a sentence, is measured where both see any of its words)."""
    both = np.flatnonzero(old.seen & new.seen)
    if rows.texts and not len(both):
        why = (
            f"the two models see no text in any of the {len(rows.texts):,} texts Cert 4 is measured on (nothing but "
            "special and unknown tokens to one of them): give traffic texts in words both models read"
        )
        raise SuiteError(why, path=sample.source)
    measured = sorted({rows.sentence_of[i] for i in both})
    seconds = old.seconds + new.seconds
    if rows.per_word:
        place = {sentence: at for at, sentence in enumerate(measured)}
        inputs = TrafficInputs(
            texts=tuple(rows.texts[i] for i in measured),
            V=np.zeros((len(both), 0)),  # each model's own v gave its answers: none is the comparison's
            no_text=len(rows.texts) - len(measured),
            seconds=seconds,
            row_texts=tuple(rows.cases[i].text for i in both),
            sentence_of=np.asarray([place[rows.sentence_of[i]] for i in both], dtype=np.int64),
        )
    else:
        inputs = TrafficInputs(
            texts=tuple(rows.texts[i] for i in both),
            V=np.zeros((len(both), 0)),
            no_text=len(rows.texts) - len(both),
            seconds=seconds,
        )
    record = changes_record(
        sample, inputs, old.answers[both], new.answers[both], label_name=label_name, seconds=seconds, decision=decision
    )
    return ReleaseChanges(record=record, old=old.encoding, new=new.encoding)


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
    rows = traffic_rows(sample, decision)
    answers = [
        release_answers(adapter, rows, batch_size=batch_size, cache_dir=cache_dir, progress=progress)
        for adapter in (old, new)
    ]
    return changes_between(*answers, rows, sample, decision=decision, label_name=new.label_name)


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
    sentence = change_sentence(note.bound, note.changed, note.n, note.confidence, words=note.word_counts)
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
        f"{percent(note.bound)} over max_change = {percent(note.max_change)}"
        f"{' (of sentences)' if note.words is not None else ''} by "
        f"{100 * (note.bound - note.max_change):.2g} points [{pairs}] ({encoded})"
    )
    return ReleaseTraffic(note=note, passed=False, words=words, figures=figures)


__all__ = [
    "Encoding", "ReleaseAnswers", "ReleaseChanges", "ReleaseTraffic", "TrafficRows", "changes_between",
    "release_answers", "release_changes", "release_verdict", "traffic_rows",
]  # fmt: skip
