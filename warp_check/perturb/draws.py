"""One perturbation of any kind, and a seeded list of distinct perturbed texts (what a repair's
neighbourhood draws)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from hypothesis import strategies as st

from warp_check.files import interrupts_held
from warp_check.perturb.casing import case_and_punctuation
from warp_check.perturb.rewrites import contractions, negation_preserving
from warp_check.perturb.typos import typos
from warp_check.perturb.wordnet import wordnet_available, wordnet_synonyms
from warp_check.perturb.words import OUTSIDE, word_edits

T = TypeVar("T")


def perturbations(text: str, max_edits: int = 2, *, synonyms: bool = False) -> st.SearchStrategy[str]:
    """One of :func:`typos`, :func:`case_and_punctuation`, :func:`contractions`,
    :func:`negation_preserving` and, with ``synonyms=True``, :func:`wordnet_synonyms` (which then
    must be available: it is never silently left out, so a test draws the same examples
    everywhere). Shrinks to ``text``."""
    choices = [typos(text, max_edits), case_and_punctuation(text, max_edits), contractions(text)]
    choices.append(negation_preserving(text))
    if synonyms:
        choices.append(wordnet_synonyms(text, max_edits))
    return st.one_of(choices)


# Draws allowed per distinct text wanted: hypothesis repeats small edits.
DRAWS_PER_TEXT = 10


class _Enough(Exception):
    """Stops hypothesis' run once enough distinct texts are drawn (its settings have no such limit)."""


def perturbed_texts(text: str, count: int, *, seed: int, max_edits: int = 2, synonyms: bool = False) -> list[str]:
    """Up to ``count`` distinct perturbations of ``text`` (never ``text`` itself), in draw order."""
    if count < 1:
        return []
    strategy = perturbations(text, max_edits, synonyms=synonyms)
    return distinct_draws(strategy, count, seed=seed, fresh=lambda variant: variant != text and bool(variant.strip()))


def perturbed_sentences(
    words: Sequence[str],
    tags: Sequence[str | None],
    count: int,
    *,
    seed: int,
    max_edits: int = 2,
    synonyms: bool = False,
    outside: str = OUTSIDE,
) -> list[tuple[str, ...]]:
    """Up to ``count`` distinct copies of a tagged sentence (:func:`~warp_check.perturb.words.word_edits`:
    one word per word, each stated word's tag kept; never the sentence itself), in draw order."""
    if count < 1:
        return []
    original = tuple(words)
    strategy = word_edits(original, tags, max_edits, outside=outside, synonyms=synonyms)
    return distinct_draws(strategy, count, seed=seed, fresh=lambda variant: variant != original)


def distinct_draws(strategy: st.SearchStrategy[T], count: int, *, seed: int, fresh: Callable[[T], bool]) -> list[T]:
    """Up to ``count`` distinct draws of ``strategy`` that are ``fresh``, in draw order, seeded."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hypothesis_seed

    found: list[T] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=count * DRAWS_PER_TEXT,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
    )
    @given(strategy)
    def draw(variant: T) -> None:
        if len(found) < count and fresh(variant) and variant not in found:
            found.append(variant)
        if len(found) == count:
            raise _Enough  # the rest of max_examples would be drawn for nothing (5x the time)

    # Hypothesis' engine takes a KeyboardInterrupt in the middle of a draw for a failing example and
    # replays it, which then draws less and ends in FlakyStrategyDefinition: a traceback where the user
    # pressed Ctrl-C. A draw takes milliseconds.
    with interrupts_held():
        try:
            draw()
        except _Enough:
            pass
    return found


def draw_key(text: str, count: int, *, seed: int, max_edits: int = 2, synonyms: bool = False) -> str:
    """What :func:`perturbed_texts` draws from, as one string (a memo's key)."""
    return json.dumps([text, count, seed, max_edits, synonyms], ensure_ascii=False)


@lru_cache(maxsize=2)
def drawing_code(synonyms: bool) -> str:
    """A digest of what decides a draw besides its inputs: this package's code, hypothesis'
    version and, with synonyms, nltk's and where its WordNet lies. Another digest, other draws."""
    import hypothesis

    digest = hashlib.sha256(f"hypothesis {hypothesis.__version__}".encode())
    for source in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    if synonyms and wordnet_available():  # else the draw itself says what to install
        import nltk

        digest.update(f"nltk {nltk.__version__} {nltk.data.find('corpora/wordnet/lexnames')}".encode())
    return digest.hexdigest()
