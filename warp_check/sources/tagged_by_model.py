"""Untagged sentences into a token classifier's must_keep cases, each word tagged by the model itself.

What :mod:`warp_check.sources.predictions` does for whole texts, per word: a team's traffic (a
sample of the sentences its NER model serves) holds no tags, and the more of it a repair keeps, the
less the repair moves. Each word's tag is the model's prediction at its first sub-token, so the
repair keeps those tags, right or wrong, and Cert 2 certifies that it did.

A word the model tags by less than the must_keep margin γ_h is left free (``null``): keeping it
would mean moving it. A sentence with no word tagged clearly, one the model sees as a sentence of
the suite (any of its word rows the same input as a suite row: its tags are the suite's to say), one
it saw earlier in the file, or one it sees as no text is left out. The sentences come from a CoNLL
file of words alone (a word a line, a blank line between sentences) or from a text column (CSV, TSV,
JSONL, Parquet), each text split into words as a case file's ``text`` is. A bad line, a word the
suite cannot hold or a sentence longer than the model's window is a SuiteError naming the file, the
line and the field, and nothing is written.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from warp_check.cases import Case, Kind
from warp_check.data_files import ImportSettings, read_unlabelled, row_error
from warp_check.decisions.token_tags import row_id, row_text, split_words, word_problem
from warp_check.errors import SettingsError
from warp_check.model.encode import input_keys
from warp_check.pipeline.evaluation import evaluate
from warp_check.progress import Progress
from warp_check.releases.load import load_adapter
from warp_check.sources.conll import read_conll
from warp_check.sources.predictions import PREDICTION, naming_the_file
from warp_check.suite.casefile import AppendResult, append_sentences, writer_check
from warp_check.suite.loader import Suite

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter


@dataclass(frozen=True, kw_only=True)
class UntaggedSentence:
    """A sentence read: its id, its words, and the line it starts on (its origin in any error)."""

    id: str
    words: tuple[str, ...]
    line: int


@dataclass(frozen=True, kw_only=True)
class TaggedImport:
    """What :func:`import_tagged_by_model` read, tagged, left out and appended."""

    sentences: int  # sentences read
    appended: AppendResult  # its duplicates: sentences already in the output file
    in_suite: int  # sentences the model sees as (a word of) a suite case: left out
    no_text: int  # sentences the model sees as no text: left out
    repeated: int  # sentences the model sees as an earlier one of the file: left out
    unclear: int  # sentences with no word tagged by at least gamma_h: left out
    words: int  # words of the sentences offered
    words_free: int  # of those, tagged by less than gamma_h: left free (null)
    gamma_h: float
    by_tag: tuple[tuple[str, int], ...]  # words tagged, per tag in the suite's order


def read_untagged(source: Path, settings: ImportSettings) -> list[UntaggedSentence]:
    """The sentences of ``source``: a CoNLL file of words alone, or a column of texts split into words."""
    if settings.format == "conll":
        return [UntaggedSentence(id=s.id, words=s.words, line=s.line) for s in read_conll(source, None)]
    sentences = []
    for row in read_unlabelled(source, settings):
        error = row_error(source, row.where)
        if row.text_pair is not None:
            raise error(settings.text_pair or "text_pair", "a token classifier tags one sentence: no second text")
        words = tuple(w for w, _, _ in split_words(row.text))
        for word in words:
            if (problem := word_problem(word)) is not None:
                raise error(settings.text, f"word {problem}")
        line, unit = row.where
        sentence_id = row.id or f"{PREDICTION}-{source.stem}-{line}"
        sentences.append(UntaggedSentence(id=sentence_id, words=words, line=line if unit == "line" else 0))
    return sentences


def import_tagged_by_model(
    suite: Suite,
    source: str | Path,
    out: str | Path,
    settings: ImportSettings,
    *,
    adapter: ClassifierAdapter | None = None,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = False,
) -> TaggedImport:
    """Read the sentences of ``source``, tag each word by the model, and append to ``out`` as must_keep
    cases those with a word tagged by at least the suite's γ_h (the other words free), atomically and
    deduplicated (source ``prediction:<file name>`` unless ``settings.source`` says otherwise). The
    file is read and checked before the model is loaded (``adapter``, where the caller has it)."""
    if not suite.decision.per_word:
        raise SettingsError("format", settings.format, f"tags words; this suite's model decides {suite.decision.name}")
    source = Path(source)
    sentences = read_untagged(source, settings)
    adapter = adapter if adapter is not None else load_adapter(suite)
    rows = [
        Case(
            id=row_id(s.id, w),
            text=row_text(s.words, w),
            label=0,
            kind=Kind.MUST_KEEP,
            origin=f"{source}:{s.line}" if s.line else None,
        )
        for s in sentences
        for w in range(len(s.words))
    ]
    with naming_the_file(source):
        keys = input_keys(adapter, rows)  # refuses a sentence over the window, naming its line
    suite_keys = {key for key in input_keys(adapter, suite.cases) if key is not None}
    starts = np.cumsum([0, *(len(s.words) for s in sentences)])
    seen: set[tuple[str | None, ...]] = set()
    chosen, no_text, in_suite, repeated = [], 0, 0, 0
    for i in range(len(sentences)):
        own = tuple(keys[starts[i] : starts[i + 1]])
        if all(key is None for key in own):
            no_text += 1
        elif any(key in suite_keys for key in own):
            in_suite += 1
        elif own in seen:
            repeated += 1
        else:
            seen.add(own)
            chosen.append(i)
    measured = [r for i in chosen for r in range(starts[i], starts[i + 1]) if keys[r] is not None]
    logits = np.zeros((0, adapter.num_classes))
    if measured:
        with naming_the_file(source):
            evaluation = evaluate(
                adapter,
                [rows[r] for r in measured],
                batch_size=suite.model.batch_size,
                cache_dir=cache_dir,
                progress=progress,
            )
        logits = evaluation.logits  # float64, from the head's own weights
    predicted, margin = adapter.head().decision.prediction_margins(logits)
    tag_of = {r: int(p) for r, p, m in zip(measured, predicted, margin, strict=True) if m >= suite.repair.gamma_h}
    records, words, free, unclear = [], 0, 0, 0
    counts: Counter[int] = Counter()
    for i in chosen:
        tags = [tag_of.get(r) for r in range(starts[i], starts[i + 1])]
        if all(t is None for t in tags):
            unclear += 1
            continue
        words += len(tags)
        free += sum(t is None for t in tags)
        counts.update(t for t in tags if t is not None)
        records.append(
            {
                "id": sentences[i].id,
                "tokens": list(sentences[i].words),
                "tags": [None if t is None else suite.label_name(t) for t in tags],
                "source": settings.source or f"{PREDICTION}:{source.name}",
            }
        )
    appended = append_sentences(out, records, check=writer_check(suite, out, kind=Kind.MUST_KEEP))
    return TaggedImport(
        sentences=len(sentences),
        appended=appended,
        in_suite=in_suite,
        no_text=no_text,
        repeated=repeated,
        unclear=unclear,
        words=words,
        words_free=free,
        gamma_h=suite.repair.gamma_h,
        by_tag=tuple((suite.label_name(c), counts[c]) for c in range(adapter.num_classes) if counts[c]),
    )


__all__ = ["TaggedImport", "UntaggedSentence", "import_tagged_by_model", "read_untagged"]
