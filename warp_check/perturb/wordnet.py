"""WordNet synonyms, when nltk and the WordNet data are installed: conservative, not guaranteed to
keep the meaning."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

from hypothesis import strategies as st

from warp_check.errors import WarpError, reraise_interrupt
from warp_check.perturb.edits import APOSTROPHES, apply_right_to_left, check_max_edits, spelled_like
from warp_check.perturb.rewrites import INTENSIFIERS, NEGATORS


class WordNetUnavailable(WarpError, LookupError):
    """:func:`wordnet_synonyms` needs nltk and the WordNet corpus; says how to get them."""


_WORDNET_HELP = (
    "pip install nltk, then `python -m nltk.downloader wordnet` (or, offline, point NLTK_DATA at a folder "
    "holding corpora/wordnet with its lexnames file, as .ci/prepare_nltk_offline.sh builds)"
)

# Function words and words whose swap would change what a sentence says about anything.
_STOP_WORDS = (
    frozenset(
        """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself of off on once only
    or other our ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up us very was we were what when where
    which while who whom why will with would you your yours yourself yourselves get got make made go went gone
    one two first last much many well also even still yet ever again okay ok""".split()
    )
    | NEGATORS
    | set(INTENSIFIERS)
)
_SWAP_WORD_RE = re.compile(rf"(?<![\w{APOSTROPHES}-])[A-Za-z]+(?![\w{APOSTROPHES}-])")
_POS_NAMES = {"n": ("n",), "v": ("v",), "a": ("a", "s"), "r": ("r",)}


def _wordnet():
    """The NLTK WordNet reader, or :class:`WordNetUnavailable` saying how to install it."""
    try:
        import nltk
    except ImportError as exc:
        reraise_interrupt(exc)
        raise WordNetUnavailable(f"wordnet_synonyms needs nltk, which is not installed: {_WORDNET_HELP}") from None
    try:
        nltk.data.find("corpora/wordnet/lexnames")
    except LookupError:
        raise WordNetUnavailable(
            f"wordnet_synonyms needs the WordNet corpus, which nltk does not find: {_WORDNET_HELP}"
        ) from None
    from nltk.corpus import wordnet

    return wordnet


def wordnet_available() -> bool:
    """Whether :func:`wordnet_synonyms` can run here (nltk importable, WordNet data found)."""
    try:
        _wordnet()
    except WordNetUnavailable:
        return False
    return True


@lru_cache(maxsize=4096)
def _synonyms(word: str, pos: tuple[str, ...], min_count: int) -> tuple[str, ...]:
    """Single-word synonyms of ``word`` (lower case) in its dominant sense, most frequent first."""
    if len(word) < 3 or word in _STOP_WORDS:
        return ()
    wn = _wordnet()
    own = [(lemma, synset) for synset in wn.synsets(word) for lemma in synset.lemmas() if lemma.name().lower() == word]
    total = sum(lemma.count() for lemma, _ in own)
    if not own or total < min_count:
        return ()  # never sense-tagged in SemCor: a rare word, whose senses we cannot rank
    lemma, synset = max(own, key=lambda pair: pair[0].count())
    # Without a part-of-speech tagger the sentence cannot tell us the sense; swap only words that
    # have a dominant one (≥ half of their tagged uses), of an allowed part of speech, in base form.
    if 2 * lemma.count() < total or synset.pos() not in pos or wn.morphy(word, synset.pos()) != word:
        return ()
    found = [
        (other.count(), other.name())
        for other in synset.lemmas()
        if other.name() != lemma.name()
        and other.name().isalpha()
        and other.name().islower()  # no proper nouns, acronyms
        and other.name() not in _STOP_WORDS
        and other.count() >= min_count
    ]
    return tuple(name for _, name in sorted(found, key=lambda pair: (-pair[0], pair[1])))


def wordnet_synonyms(
    text: str, max_edits: int = 1, *, pos: Sequence[str] = ("n",), min_count: int = 1
) -> st.SearchStrategy[str]:
    """Up to ``max_edits`` words replaced by a WordNet synonym: "The movie was late" → "The film was late".

    Conservative by construction: only words of three or more letters, not stop words, negations or
    intensifiers, in base form (no inflection to redo), whose most frequent WordNet sense (by SemCor
    tag counts, ``Lemma.count()``) covers at least half of their tagged uses and has a part of
    speech in ``pos``; the replacement is a single-word, lower-case lemma of that same synset seen at
    least ``min_count`` times in SemCor (common words only). Capitalisation is carried over.

    Not guaranteed to keep the meaning: WordNet lists senses, not the one in this sentence, and no
    tagger checks the part of speech ("I book a flight": "book" is a noun to WordNet). Synsets also
    mix registers: "great" shares one with "bully", "groovy" and "peachy", so a swap from any sense
    turns "Great flight" into "Bully flight"; the dominant-sense rule blocks that one ("great" is
    mostly great.s.01, which has no other lemma), but not every such case. The default
    ``pos=("n",)`` (nouns) is the safe end: adjectives and adverbs carry sentiment, verbs are very
    polysemous ("like" shares a synset with "wish"). Widen ``pos`` to ("n", "v", "a", "r") only
    for tests whose failures you review before adding them to a suite.

    Needs nltk and its WordNet data: raises :class:`WordNetUnavailable` naming how to get them
    (check first with :func:`wordnet_available`). Shrinks to one swap at the earliest word with its
    most frequent synonym, then to ``text`` itself.
    """
    check_max_edits(max_edits)
    check_max_edits(min_count, "min_count")
    if isinstance(pos, str) or not pos or any(name not in _POS_NAMES for name in pos):
        raise ValueError(f"pos={pos!r}: must be a non-empty sequence of 'n', 'v', 'a', 'r'")
    allowed = tuple(sorted({p for name in pos for p in _POS_NAMES[name]}))
    _wordnet()  # fail at once, not at the first draw
    words = ((m, _synonyms(m.group().lower(), allowed, min_count)) for m in _SWAP_WORD_RE.finditer(text))
    sites = [(m, options) for m, options in words if options]
    if not sites or max_edits == 0:
        return st.just(text)

    @st.composite
    def edit(draw) -> tuple[int, int, Callable[[str], str]]:
        word, options = sites[draw(st.integers(0, len(sites) - 1))]
        new = spelled_like(draw(st.sampled_from(options)), word.group(), text)
        return (word.start(), word.end() - 1, lambda t: t[: word.start()] + new + t[word.end() :])

    return st.lists(edit(), max_size=max_edits).map(lambda edits: apply_right_to_left(text, edits))
