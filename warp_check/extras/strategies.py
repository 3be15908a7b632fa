"""Hypothesis strategies for text perturbations of one sentence that shrink toward it.

Every strategy draws independent edits, each addressed by a position in the original text (or a
site found in it), and applies them right to left; an edit that would overlap one already applied
is dropped. Deleting any edit therefore leaves the others meaning what they meant, so hypothesis
shrinks a failing example to the fewest edits (usually one: with an edit count and positions in
the edited text, 5 runs in 300 stopped at two), then to simpler ones (the first edit kind, the
first replacement, the earliest position where positions are drawn) — and a passing search to
the unchanged text.

Strategies and what each guarantees:

- :func:`typos`: keyboard-neighbour substitution, swap, insert, delete inside words; whitespace
  and punctuation untouched; at most ``max_edits`` Damerau–Levenshtein edits.
- :func:`case_and_punctuation`: a word re-cased, the final punctuation added/removed/repeated.
- :func:`contractions`: "do not" ↔ "don't", "it is" ↔ "it's" ... (spelling only).
- :func:`negation_preserving`: meaning-preserving rewrites that keep every negation (see there).
- :func:`wordnet_synonyms`: a word replaced by a synonym from WordNet, when nltk and the WordNet
  data are installed (:func:`wordnet_available`); conservative, but not guaranteed to keep the
  meaning (see there).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

from hypothesis import strategies as st

from warp_check.errors import WarpError

__all__ = [
    "CONTRACTIONS",
    "INTENSIFIERS",
    "KEYBOARD_NEIGHBOURS",
    "NEGATED_FORMS",
    "NEGATORS",
    "NEUTRAL_PREFIXES",
    "WordNetUnavailable",
    "case_and_punctuation",
    "contractions",
    "negation_markers",
    "negation_preserving",
    "perturbations",
    "perturbed_texts",
    "typos",
    "wordnet_available",
    "wordnet_synonyms",
]

_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_APOSTROPHES = "'\u2019"  # straight and typographic (tweets use both)


def _neighbour_table() -> dict[str, str]:
    """Letters touching each letter on a staggered QWERTY keyboard: same row ±1, and the two
    keys above (columns c, c+1) and below (c-1, c), since each row sits half a key to the right."""
    table: dict[str, str] = {}
    for r, row in enumerate(_ROWS):
        for c, ch in enumerate(row):
            spots = [(r, c - 1), (r, c + 1), (r - 1, c), (r - 1, c + 1), (r + 1, c - 1), (r + 1, c)]
            table[ch] = "".join(_ROWS[rr][cc] for rr, cc in spots if 0 <= rr < len(_ROWS) and 0 <= cc < len(_ROWS[rr]))
    return table


KEYBOARD_NEIGHBOURS: dict[str, str] = _neighbour_table()

# (expanded, contracted); every "not" form keeps its negation in both directions.
CONTRACTIONS: tuple[tuple[str, str], ...] = (
    ("do not", "don't"),
    ("does not", "doesn't"),
    ("did not", "didn't"),
    ("is not", "isn't"),
    ("are not", "aren't"),
    ("was not", "wasn't"),
    ("were not", "weren't"),
    ("has not", "hasn't"),
    ("have not", "haven't"),
    ("had not", "hadn't"),
    ("will not", "won't"),
    ("would not", "wouldn't"),
    ("should not", "shouldn't"),
    ("could not", "couldn't"),
    ("cannot", "can't"),
    ("it is", "it's"),
    ("that is", "that's"),
    ("i am", "i'm"),
    ("you are", "you're"),
    ("we are", "we're"),
    ("they are", "they're"),
)

# Spellings of one negated auxiliary that mean exactly the same: negation_preserving picks among
# them. Built from CONTRACTIONS plus the forms it leaves out.
NEGATED_FORMS: tuple[tuple[str, ...], ...] = tuple(
    (("cannot", "can't", "can not") if e == "cannot" else (e, c)) for e, c in CONTRACTIONS if "not" in e
) + (("must not", "mustn't"), ("need not", "needn't"))

# Words that negate; their number and order is what negation_preserving keeps ("n't" counts as "not").
NEGATORS: frozenset[str] = frozenset(
    {"not", "no", "never", "nobody", "nothing", "none", "nowhere", "neither", "nor", "cannot", "without"}
)

# Degree adverbs negation_preserving may drop: they change intensity, never polarity, as long as
# no negation precedes them in the sentence ("not very good" → "not good" is left alone).
INTENSIFIERS: tuple[str, ...] = ("really", "very", "truly", "extremely")
# "very much", "very well", "the very same": dropping the adverb there changes the meaning or grammar.
_INTENSIFIER_KEEPS_BEFORE = frozenset({"much", "many", "few", "little", "well", "own", "same"})

# Sentence openers that state no sentiment of their own.
NEUTRAL_PREFIXES: tuple[str, ...] = ("In my opinion, ", "Honestly, ", "To be honest, ")
# Words lower-cased after a prefix ("Honestly, the food ..."); anything else (names, "I") keeps its case.
_LOWER_AFTER_PREFIX = frozenset(
    "the this that these those it its it's there a an my our your their his her we they you he she".split()
)

_END_PUNCTUATION = ".!?"
_TRAILING = ".!?,;:"


def _check_max_edits(max_edits: int, name: str = "max_edits") -> None:
    if isinstance(max_edits, bool) or not isinstance(max_edits, int) or max_edits < 0:
        raise ValueError(f"{name}={max_edits!r}: must be an int >= 0")


def _apply_right_to_left(text: str, edits: Sequence[tuple[int, int, Callable[[str], str]]]) -> str:
    """Apply ``(start, end, apply)`` edits, each touching ``text[start:end + 1]`` of the original,
    right to left so positions stay valid. At a tie the edit listed first wins; an edit reaching
    into one already applied is dropped, so each edit means the same whichever others are kept."""
    current, limit = text, len(text) + 1
    for start, end, apply in sorted(edits, key=lambda e: e[0], reverse=True):  # stable: list order on ties
        if end < limit:
            changed = apply(current)
            if changed is not None:
                current, limit = changed, start
    return current


# -- typos ------------------------------------------------------------------------------------


def _token_length_at(text: str, i: int) -> int:
    start, end = i, i
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    while end < len(text) and not text[end].isspace():
        end += 1
    return end - start


def _keyed(ch: str) -> bool:
    return ch.lower() in KEYBOARD_NEIGHBOURS


def _with_case(template: str, ch: str) -> str:
    return ch.upper() if template.isupper() else ch


# Each typo kind: (eligible positions in the original text, span end for position i,
# needs a neighbour letter, apply(current, i, letter) -> text or None when no longer possible).
_TYPO_KINDS: dict[str, tuple[Callable[[str], list[int]], int, bool, Callable[[str, int, str], str | None]]] = {
    "substitute": (
        lambda t: [i for i, ch in enumerate(t) if _keyed(ch)],
        0,
        True,
        lambda t, i, new: t[:i] + _with_case(t[i], new) + t[i + 1 :],
    ),
    "swap": (
        lambda t: [i for i in range(len(t) - 1) if t[i].isalpha() and t[i + 1].isalpha() and t[i] != t[i + 1]],
        1,
        False,
        lambda t, i, _: t[:i] + t[i + 1] + t[i] + t[i + 2 :],
    ),
    # A slipped finger: a neighbour of the letter just typed, right after it. Its span covers the
    # next letter too, so a delete there cannot cancel it ("gr+e" then "e" deleted = "great").
    "insert": (
        lambda t: [i for i, ch in enumerate(t) if _keyed(ch)],
        1,
        True,
        lambda t, i, new: t[: i + 1] + _with_case(t[i], new) + t[i + 1 :],
    ),
    # Never a word's last letter: other deletes in the same word are applied first, so re-check.
    "delete": (
        lambda t: [i for i, ch in enumerate(t) if ch.isalpha() and _token_length_at(t, i) > 1],
        0,
        False,
        lambda t, i, _: t[:i] + t[i + 1 :] if _token_length_at(t, i) > 1 else None,
    ),
}


def typos(text: str, max_edits: int = 2) -> st.SearchStrategy[str]:
    """Up to ``max_edits`` keyboard typos inside words: neighbour substitution, swap, insert, delete.

    Each edit changes the text by one (Damerau–Levenshtein) edit and never touches whitespace or
    punctuation, and never deletes a whole word. Shrinks to one edit, then to ``text`` itself.
    """
    _check_max_edits(max_edits)
    eligible = {kind: spec[0](text) for kind, spec in _TYPO_KINDS.items()}
    kinds = tuple(kind for kind in _TYPO_KINDS if eligible[kind])
    if not kinds or max_edits == 0:
        return st.just(text)

    @st.composite
    def edit(draw) -> tuple[int, int, Callable[[str], str | None]]:
        kind = draw(st.sampled_from(kinds))
        _, span, needs_letter, apply = _TYPO_KINDS[kind]
        i = eligible[kind][draw(st.integers(0, len(eligible[kind]) - 1))]
        letter = draw(st.sampled_from(KEYBOARD_NEIGHBOURS[text[i].lower()])) if needs_letter else ""
        return (i, i + span, lambda current: apply(current, i, letter))

    return st.lists(edit(), max_size=max_edits).map(lambda edits: _apply_right_to_left(text, edits))


# -- case and punctuation ---------------------------------------------------------------------

_CASE_CHANGES: tuple[Callable[[str], str], ...] = (str.lower, str.capitalize, str.upper)


def _punctuate(current: str, action: int, mark: str) -> str:
    body = current.rstrip()
    tail = current[len(body) :]
    if body and body[-1] in _TRAILING:
        body = body[:-1] if action == 0 else body + body[-1]
    elif body:
        body = body + mark
    return body + tail


def case_and_punctuation(text: str, max_edits: int = 2) -> st.SearchStrategy[str]:
    """Up to ``max_edits`` of: a word re-cased (lower/Capitalised/UPPER), or the final punctuation
    removed or repeated (added when there is none). Words and their order are kept. Shrinks to
    ``text`` itself; each word is re-cased at most once."""
    _check_max_edits(max_edits)
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    if not words or max_edits == 0:
        return st.just(text)

    @st.composite
    def edit(draw) -> tuple[str, int, object]:
        if draw(st.sampled_from(("case", "punctuation"))) == "case":
            return ("case", draw(st.integers(0, len(words) - 1)), draw(st.sampled_from(_CASE_CHANGES)))
        return ("punctuation", draw(st.integers(0, 1)), draw(st.sampled_from(_END_PUNCTUATION)))

    def apply(edits: list[tuple[str, int, object]]) -> str:
        recased = [
            (words[w][0], words[w][1] - 1, lambda t, s=words[w], f=change: t[: s[0]] + f(t[s[0] : s[1]]) + t[s[1] :])
            for kind, w, change in edits
            if kind == "case"
        ]
        current = _apply_right_to_left(text, recased)  # word spans never move: re-casing keeps lengths
        for kind, action, mark in edits:
            if kind == "punctuation":
                current = _punctuate(current, action, mark)
        return current

    return st.lists(edit(), max_size=max_edits).map(apply)


# -- contractions and negation-preserving rewrites -------------------------------------------


def _form_pattern(forms: Sequence[str]) -> re.Pattern[str]:
    def one(form: str) -> str:
        return re.escape(form).replace(r"\ ", r"\s+").replace("'", f"[{_APOSTROPHES}]")

    body = "|".join(one(f) for f in sorted(forms, key=len, reverse=True))
    return re.compile(rf"(?<![\w{_APOSTROPHES}])({body})(?![\w{_APOSTROPHES}])", re.IGNORECASE)


def _normal(form: str) -> str:
    return re.sub(r"\s+", " ", form.lower().replace("\u2019", "'"))


def _spelled_like(replacement: str, matched: str, text: str) -> str:
    """``replacement`` with the case and apostrophe style of ``matched``."""
    if "\u2019" in matched or ("'" not in matched and "\u2019" in text and "'" not in text):
        replacement = replacement.replace("'", "\u2019")
    if replacement.startswith(("i'm", "i\u2019m", "i am")):
        return "I" + replacement[1:]
    if matched.isupper() and len(matched) > 1:
        return replacement.upper()
    return replacement[0].upper() + replacement[1:] if matched[0].isupper() else replacement


_SWAP = {**{e: c for e, c in CONTRACTIONS}, **{c: e for e, c in CONTRACTIONS}}
_CONTRACTION_RE = _form_pattern(tuple(_SWAP))


def contractions(text: str) -> st.SearchStrategy[str]:
    """Any subset of the contractions in ``text`` expanded and expansions contracted ("do not" ↔
    "don't", "cannot" ↔ "can't", ...; see ``CONTRACTIONS``). Negations stay negations. Shrinks
    to ``text`` itself; a text with none of the forms gives only itself."""
    sites = list(_CONTRACTION_RE.finditer(text))
    if not sites:
        return st.just(text)

    @st.composite
    def build(draw) -> str:
        parts, last = [], 0
        for site in sites:
            if draw(st.booleans()):
                parts += [text[last : site.start()], _spelled_like(_SWAP[_normal(site.group())], site.group(), text)]
                last = site.end()
        return "".join(parts) + text[last:]

    return build()


# Every form negation_preserving may respell -> the other spellings of the same thing.
_ALTERNATIVES: dict[str, tuple[str, ...]] = {
    form: tuple(other for other in group if other != form)
    for group in (*NEGATED_FORMS, *((e, c) for e, c in CONTRACTIONS if "not" not in e))
    for form in group
}
_REWRITE_RE = _form_pattern(tuple(_ALTERNATIVES))
_WORD_RE = re.compile(rf"[A-Za-z]+(?:[{_APOSTROPHES}][A-Za-z]+)?")
_SENTENCE_END = re.compile(r"[.!?;]")


def negation_markers(text: str) -> list[str]:
    """The negations in ``text`` in order, normalised ("n't" and "cannot" → "not", so "isn't",
    "is not" and "cannot"/"can not" read the same): what :func:`negation_preserving` keeps."""
    out: list[str] = []
    for word in _WORD_RE.findall(text.replace("\u2019", "'")):
        lower = word.lower()
        if lower.endswith("n't") or lower in ("cannot", "not"):
            out.append("not")
        elif lower in NEGATORS:
            out.append(lower)
    return out


def _droppable_intensifiers(text: str) -> list[re.Match[str]]:
    """Intensifiers that modify a following word and follow no negation in their sentence."""
    found = []
    for sentence in re.finditer(r"[^.!?;]+[.!?;]*", text):
        negated = False
        words = list(_WORD_RE.finditer(text, sentence.start(), sentence.end()))
        for k, word in enumerate(words):
            if negation_markers(word.group()):
                negated = True
            elif not negated and word.group().lower() in INTENSIFIERS and k + 1 < len(words):
                follower = words[k + 1]
                # Only "very good", not "very, very" or "really?": the next word must follow directly.
                if text[word.end() : follower.start()].isspace() and follower.group().lower() not in (
                    _INTENSIFIER_KEEPS_BEFORE
                ):
                    found.append(word)
    return found


def _drop_word(text: str, word: re.Match[str], follower_start: int) -> str:
    """``text`` without ``word`` and the space after it; a capital moves on to the next word."""
    rest = text[follower_start:]
    if word.group()[0].isupper() and not word.group().isupper():
        rest = rest[:1].upper() + rest[1:]
    return text[: word.start()] + rest


def _with_prefix(text: str, prefix: str) -> str:
    first = re.match(rf"[A-Za-z{_APOSTROPHES}]+", text)
    word = first.group() if first else ""
    if _normal(word) in _LOWER_AFTER_PREFIX and word[:1].isupper() and (len(word) == 1 or not word.isupper()):
        text = text[:1].lower() + text[1:]
    return prefix + text


def negation_preserving(text: str) -> st.SearchStrategy[str]:
    """Rewrites of ``text`` that keep every negation and the polarity of what it says.

    Edits, each independent and any subset at once:

    - a negated auxiliary respelled: "isn't" ↔ "is not", "don't" ↔ "do not", "won't" ↔ "will not",
      "cannot" ↔ "can't" ↔ "can not", ... (``NEGATED_FORMS``); the other contractions of
      ``CONTRACTIONS`` likewise ("it's" ↔ "it is"), so "I don't think it's good" ↔ "I do not think
      it is good";
    - an intensifier (``INTENSIFIERS``: really, very, truly, extremely) dropped when it modifies
      the next word and no negation precedes it in its sentence: "The food was very good" → "The
      food was good", "I really don't like it" → "I don't like it"; but "not very good" is never
      touched (dropping it there moves the meaning: "not very good" is milder than "not good");
    - a neutral opener put in front (``NEUTRAL_PREFIXES``: "In my opinion, ", ...).

    Guaranteed: :func:`negation_markers` of the result equals that of ``text`` (same negations, same
    order, "never"/"no"/"nothing" never touched); every other word stays, in order, except the
    dropped intensifiers and the added opener; no word moves across a negation. What this
    preserves is *polarity*, not intensity: use it for sentiment/topic labels, not for graded
    scores, and not on NLI premises/hypotheses, where an opener like "In my opinion" is content.
    Shrinks to ``text`` itself (no edit).
    """
    sites = list(_REWRITE_RE.finditer(text))
    drops = _droppable_intensifiers(text)
    starts_with_word = bool(re.match(r"[A-Za-z]", text))
    if not sites and not drops and not starts_with_word:
        return st.just(text)
    followers = {
        w.start(): next(m.start() for m in _WORD_RE.finditer(text, w.end()))
        for w in drops  # found above: a word follows each
    }

    @st.composite
    def build(draw) -> str:
        # The opener first: hypothesis prefers smaller early choices, so a failing example then
        # shrinks to a rewrite of the text itself before it settles for an added opener.
        prefix = draw(st.integers(0, len(NEUTRAL_PREFIXES))) if starts_with_word else 0
        edits = []
        for site in sites:
            options = _ALTERNATIVES[_normal(site.group())]
            choice = draw(st.integers(0, len(options)))  # 0: keep
            if choice:
                new = _spelled_like(options[choice - 1], site.group(), text)
                edits.append((site.start(), site.end() - 1, lambda t, s=site, n=new: t[: s.start()] + n + t[s.end() :]))
        for word in drops:
            if draw(st.booleans()):
                follower = followers[word.start()]
                # The span stops before the next word, so respelling that word ("really don't") stays possible.
                edits.append((word.start(), follower - 1, lambda t, w=word, f=follower: _drop_word(t, w, f)))
        current = _apply_right_to_left(text, edits)
        return _with_prefix(current, NEUTRAL_PREFIXES[prefix - 1]) if prefix else current

    return build()


# -- WordNet synonyms --------------------------------------------------------------------------


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
_SWAP_WORD_RE = re.compile(rf"(?<![\w{_APOSTROPHES}-])[A-Za-z]+(?![\w{_APOSTROPHES}-])")
_POS_NAMES = {"n": ("n",), "v": ("v",), "a": ("a", "s"), "r": ("r",)}


def _wordnet():
    """The NLTK WordNet reader, or :class:`WordNetUnavailable` saying how to install it."""
    try:
        import nltk
    except ImportError:
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
    _check_max_edits(max_edits)
    _check_max_edits(min_count, "min_count")
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
        new = _spelled_like(draw(st.sampled_from(options)), word.group(), text)
        return (word.start(), word.end() - 1, lambda t: t[: word.start()] + new + t[word.end() :])

    return st.lists(edit(), max_size=max_edits).map(lambda edits: _apply_right_to_left(text, edits))


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
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hypothesis_seed

    found: list[str] = []
    if count < 1:
        return found

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
    @given(perturbations(text, max_edits, synonyms=synonyms))
    def draw(variant: str) -> None:
        if len(found) < count and variant != text and variant.strip() and variant not in found:
            found.append(variant)
        if len(found) == count:
            raise _Enough  # the rest of max_examples would be drawn for nothing (5x the time)

    try:
        draw()
    except _Enough:
        pass
    return found
