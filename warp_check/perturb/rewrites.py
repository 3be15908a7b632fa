"""Rewrites that keep what a sentence says: contractions, and negation-preserving respellings,
dropped intensifiers and neutral openers."""

from __future__ import annotations

import re

from hypothesis import strategies as st

from warp_check.perturb.edits import APOSTROPHES, apply_right_to_left, form_pattern, normal_form, spelled_like

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


_SWAP = {**{e: c for e, c in CONTRACTIONS}, **{c: e for e, c in CONTRACTIONS}}
_CONTRACTION_RE = form_pattern(tuple(_SWAP))


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
                parts += [text[last : site.start()], spelled_like(_SWAP[normal_form(site.group())], site.group(), text)]
                last = site.end()
        return "".join(parts) + text[last:]

    return build()


# Every form negation_preserving may respell -> the other spellings of the same thing.
_ALTERNATIVES: dict[str, tuple[str, ...]] = {
    form: tuple(other for other in group if other != form)
    for group in (*NEGATED_FORMS, *((e, c) for e, c in CONTRACTIONS if "not" not in e))
    for form in group
}
_REWRITE_RE = form_pattern(tuple(_ALTERNATIVES))
_WORD_RE = re.compile(rf"[A-Za-z]+(?:[{APOSTROPHES}][A-Za-z]+)?")


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
    first = re.match(rf"[A-Za-z{APOSTROPHES}]+", text)
    word = first.group() if first else ""
    if normal_form(word) in _LOWER_AFTER_PREFIX and word[:1].isupper() and (len(word) == 1 or not word.isupper()):
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
            options = _ALTERNATIVES[normal_form(site.group())]
            choice = draw(st.integers(0, len(options)))  # 0: keep
            if choice:
                new = spelled_like(options[choice - 1], site.group(), text)
                edits.append((site.start(), site.end() - 1, lambda t, s=site, n=new: t[: s.start()] + n + t[s.end() :]))
        for word in drops:
            if draw(st.booleans()):
                follower = followers[word.start()]
                # The span stops before the next word, so respelling that word ("really don't") stays possible.
                edits.append((word.start(), follower - 1, lambda t, w=word, f=follower: _drop_word(t, w, f)))
        current = apply_right_to_left(text, edits)
        return _with_prefix(current, NEUTRAL_PREFIXES[prefix - 1]) if prefix else current

    return build()


# -- WordNet synonyms --------------------------------------------------------------------------
