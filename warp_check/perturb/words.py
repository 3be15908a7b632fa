"""Perturbed copies of a tagged sentence (a token classifier's case): each keeps one word per word, so
every word keeps its place and the tag its case states for it.

Only edits that cannot move a word's tag are drawn, each inside one stated word:

- a keyboard typo (:func:`~warp_check.perturb.typos.typos`, one edit) in any stated word: a
  misspelt "Washingtno" is still the location the case says (noisy text, as in WNUT-17);
- a re-casing ("the" → "The", "THE") only of a word stated outside every entity (``outside``: "O"),
  since casing changes entities ("Apple" the company, "apple" the fruit);
- a WordNet synonym (:func:`~warp_check.perturb.wordnet.wordnet_synonyms`, nouns) only of a word
  stated outside every entity, and only where it is one word.

A free word (no tag stated) is never edited: nothing says what its tag is, so nothing shows an edit
keeps it, nor keeps its neighbours' (an entity's words read each other). Contractions and rewrites,
which merge or split words, are never drawn.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from warp_check.perturb.edits import check_max_edits
from warp_check.perturb.typos import typos
from warp_check.perturb.wordnet import wordnet_synonyms

OUTSIDE = "O"  # the IOB tag of a word outside every entity


def recased(word: str) -> st.SearchStrategy[str]:
    """``word`` in lower case, upper case or capitalised (those that differ from it); itself where none does."""
    options = [w for w in dict.fromkeys((word.lower(), word.capitalize(), word.upper())) if w != word]
    return st.sampled_from(options) if options else st.just(word)


def one_word(word: str) -> bool:
    """Whether an edit left one word: no space inside, nothing empty."""
    return bool(word) and word.split() == [word]


def word_edits(
    words: Sequence[str],
    tags: Sequence[str | None],
    max_edits: int = 2,
    *,
    outside: str = OUTSIDE,
    synonyms: bool = False,
) -> st.SearchStrategy[tuple[str, ...]]:
    """Up to ``max_edits`` words of a sentence edited (at most one edit a word), each stated word by a
    typo, and a word tagged ``outside`` also by a re-casing or, with ``synonyms``, a WordNet synonym
    (then nltk's WordNet must be installed). Shrinks to ``words`` unchanged."""
    check_max_edits(max_edits)
    if len(words) != len(tags):
        raise ValueError(f"{len(words)} words but {len(tags)} tags: a tag (or None) for each word")
    original = tuple(words)
    sites: list[tuple[int, st.SearchStrategy[str]]] = []
    for i, (word, tag) in enumerate(zip(original, tags, strict=True)):
        if tag is None:
            continue
        choices = [typos(word, 1)]
        if tag == outside:
            choices.append(recased(word))
            if synonyms:
                choices.append(wordnet_synonyms(word, 1))
        sites.append((i, st.one_of(choices)))
    if not sites or max_edits == 0:
        return st.just(original)

    def at(k: int) -> st.SearchStrategy[tuple[int, str]]:
        index, edits = sites[k]
        return edits.map(lambda new: (index, new))

    def applied(edits: list[tuple[int, str]]) -> tuple[str, ...]:
        out = list(original)
        for index, new in edits:
            if one_word(new):
                out[index] = new
        return tuple(out)

    edit = st.integers(0, len(sites) - 1).flatmap(at)
    return st.lists(edit, max_size=max_edits, unique_by=lambda e: e[0]).map(applied)


__all__ = ["OUTSIDE", "one_word", "recased", "word_edits"]
