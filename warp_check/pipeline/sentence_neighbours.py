"""A token classifier's neighbourhood: perturbed copies of its sentences that the model tags wrong.

A token suite's cases are rows, one per stated word of a sentence (:mod:`warp_check.decisions.token_tags`);
a copy is drawn of the sentence whole (:func:`~warp_check.perturb.perturbed_sentences`: one word per
word, so each stated word keeps its place and its tag; typos in stated words, re-casing and synonyms
only of words tagged ``O``; free words untouched) and kept where the model tags any stated word of it
wrong. Which sentences are perturbed, and how many copies each, is the single-text neighbourhood's
rule (:func:`~warp_check.pipeline.neighbourhood.chosen_cases`) applied to sentences, a sentence's gap
being its least word's. A copy the model takes as a suite sentence (the same sub-tokens), or cannot
take (a typo that grew it past the window), is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from warp_check.cases import NEIGHBOUR, Case, Kind
from warp_check.decisions.token_tags import row_id, row_text
from warp_check.model.adapter import ClassifierAdapter, SentenceRefused
from warp_check.model.encode import input_keys
from warp_check.perturb import perturbed_sentences
from warp_check.pipeline.evaluation import Evaluation, evaluate
from warp_check.pipeline.neighbourhood import chosen_cases, synonym_use
from warp_check.repair.settings import NeighbourSettings, SynonymUse


@dataclass(frozen=True, kw_only=True)
class TaggedCopy:
    """One copy of a suite sentence: its words, each word's tag id (None: free, as in the sentence)."""

    id: str  # <sentence id>~<k>
    original: str  # the sentence it was drawn from
    words: tuple[str, ...]
    tags: tuple[int | None, ...]

    def rows(self) -> list[Case]:
        """Its rows as a suite reads them: one must_fix case per stated word."""
        return [
            Case(id=row_id(self.id, i), text=row_text(self.words, i), label=tag, kind=Kind.MUST_FIX, source=NEIGHBOUR)
            for i, tag in enumerate(self.tags)
            if tag is not None
        ]

    def record(self, name: Callable[[int], str]) -> dict[str, Any]:
        """The copy as a case file's line states it (``name``: a tag id's name)."""
        return {
            "id": self.id,
            "tokens": list(self.words),
            "tags": [None if t is None else name(t) for t in self.tags],
            "source": NEIGHBOUR,
            "original": self.original,
        }


@dataclass(frozen=True, kw_only=True)
class SentenceNeighbourhood:
    """What a draw found: the sentences perturbed, the copies drawn and run, those the model tags wrong."""

    perturbed: int
    drawn: int
    wrong: tuple[TaggedCopy, ...]
    synonyms: SynonymUse


def draw_sentence_neighbours(
    adapter: ClassifierAdapter,
    evaluation: Evaluation,
    settings: NeighbourSettings,
    name: Callable[[int], str],
    *,
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
) -> SentenceNeighbourhood:
    """The copies of ``evaluation``'s sentences (its cases: a token suite's rows) the model tags wrong;
    ``name`` names a tag id (a word tagged ``O`` is the one re-cased or given a synonym)."""
    kind = adapter.decision
    sentences: dict[str, tuple[Case, tuple[str, ...], dict[int, int], float]] = {}
    for case, gap in zip(evaluation.cases, evaluation.gaps, strict=True):
        if case.kind is Kind.AUX:
            continue
        found = kind.word_of(case.text)
        if found is None:
            raise ValueError(f"case {case.id!r} decides no word: a sentence neighbourhood is a token suite's")
        words, word = found
        sentence = kind.group(case.id)
        first, _, tags, least = sentences.setdefault(sentence, (replace(case, id=sentence), words, {}, float(gap)))
        tags[word] = int(case.label)
        sentences[sentence] = (first, words, tags, min(least, float(gap)))
    heads = [head for head, _, _, _ in sentences.values()]
    chosen = chosen_cases(heads, np.array([least for *_, least in sentences.values()]), settings)
    use = synonym_use(settings) if chosen else SynonymUse.OFF
    taken = set(evaluation.encoded.input_keys or input_keys(adapter, evaluation.cases))
    ids = set(sentences)
    copies: list[TaggedCopy] = []
    for seed, head, count in chosen:
        _, words, stated, _ = sentences[head.id]
        tags = tuple(stated.get(i) for i in range(len(words)))
        named = [None if t is None else name(t) for t in tags]
        drawn = perturbed_sentences(
            words, named, count, seed=seed, max_edits=settings.max_edits, synonyms=use is SynonymUse.USED
        )
        for k, copy in enumerate(drawn):
            ident = f"{head.id}~{k}"
            while ident in ids:  # the suite has a sentence of that id already (a copy of other settings)
                ident += "'"
            tagged = TaggedCopy(id=ident, original=head.id, words=copy, tags=tags)
            rows = tagged.rows()
            try:
                adapter.tokenize([r.text for r in rows])
            except SentenceRefused:  # a typo grew it past the window
                continue
            keys = input_keys(adapter, rows)
            if None in keys or set(keys) & taken:
                continue
            taken |= set(keys)
            ids.add(ident)
            copies.append(tagged)
    rows = [row for copy in copies for row in copy.rows()]
    wrong: tuple[TaggedCopy, ...] = ()
    if rows:
        answers = evaluate(adapter, rows, batch_size=batch_size, cache_dir=cache_dir, progress=False)
        missed = {kind.group(c.id) for c, gap in zip(answers.cases, answers.gaps, strict=True) if gap <= 0}
        wrong = tuple(c for c in copies if c.id in missed)
    return SentenceNeighbourhood(perturbed=len(chosen), drawn=len(copies), wrong=wrong, synonyms=use)


def sentence_records(hood: SentenceNeighbourhood, name: Callable[[int], str]) -> Sequence[dict[str, Any]]:
    """The copies the model tags wrong as a case file's lines."""
    return [copy.record(name) for copy in hood.wrong]


__all__ = ["SentenceNeighbourhood", "TaggedCopy", "draw_sentence_neighbours", "sentence_records"]
