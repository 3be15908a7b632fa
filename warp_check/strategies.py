"""Hypothesis strategies for text perturbations of one sentence that shrink toward it.

Every strategy draws its number of edits first (``st.integers(0, max_edits)``) and its
positions/characters as indices into fixed tables, so hypothesis shrinks a failing example
to the fewest, earliest, simplest edits — and a passing search to the unchanged text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hypothesis import strategies as st

__all__ = ["case_and_punctuation", "contractions", "perturbations", "typos", "KEYBOARD_NEIGHBOURS", "CONTRACTIONS"]

_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


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

_SWAP = {**{e: c for e, c in CONTRACTIONS}, **{c: e for e, c in CONTRACTIONS}}
_CONTRACTION_RE = re.compile(
    r"(?<![\w'])("
    + "|".join(re.escape(form).replace(r"\ ", r"\s+") for form in sorted(_SWAP, key=len, reverse=True))
    + r")(?![\w'])",
    re.IGNORECASE,
)

_END_PUNCTUATION = ".!?"
_TRAILING = ".!?,;:"


def _check_max_edits(max_edits: int) -> None:
    if isinstance(max_edits, bool) or not isinstance(max_edits, int) or max_edits < 0:
        raise ValueError(f"max_edits={max_edits!r}: must be an int >= 0")


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


# Each typo edit: (eligible positions in text, apply(draw, text, position) -> text). Only letters
# are touched, so whitespace — hence the word count — and punctuation survive.
def _substitute(draw, text: str, i: int) -> str:
    new = draw(st.sampled_from(KEYBOARD_NEIGHBOURS[text[i].lower()]))
    return text[:i] + _with_case(text[i], new) + text[i + 1 :]


def _swap(draw, text: str, i: int) -> str:
    return text[:i] + text[i + 1] + text[i] + text[i + 2 :]


def _insert(draw, text: str, i: int) -> str:
    # A slipped finger: a neighbour of the letter just typed, right after it.
    new = draw(st.sampled_from(KEYBOARD_NEIGHBOURS[text[i].lower()]))
    return text[: i + 1] + _with_case(text[i], new) + text[i + 1 :]


def _delete(draw, text: str, i: int) -> str:
    return text[:i] + text[i + 1 :]


_TYPO_EDITS: dict[str, tuple[Callable[[str], list[int]], Callable]] = {
    "substitute": (lambda t: [i for i, ch in enumerate(t) if _keyed(ch)], _substitute),
    "swap": (
        lambda t: [i for i in range(len(t) - 1) if t[i].isalpha() and t[i + 1].isalpha() and t[i] != t[i + 1]],
        _swap,
    ),
    "insert": (lambda t: [i for i, ch in enumerate(t) if _keyed(ch)], _insert),
    "delete": (lambda t: [i for i, ch in enumerate(t) if ch.isalpha() and _token_length_at(t, i) > 1], _delete),
}


def typos(text: str, max_edits: int = 2) -> st.SearchStrategy[str]:
    """Up to ``max_edits`` keyboard typos inside words: neighbour substitution, swap, insert, delete.

    Each edit changes the text by one (Damerau–Levenshtein) edit and never touches whitespace;
    an edit with nowhere to apply (e.g. no letters) is skipped. Shrinks to ``text`` itself.
    """
    _check_max_edits(max_edits)

    @st.composite
    def build(draw) -> str:
        current = text
        for _ in range(draw(st.integers(0, max_edits))):
            eligible, apply = _TYPO_EDITS[draw(st.sampled_from(tuple(_TYPO_EDITS)))]
            positions = eligible(current)
            if positions:
                current = apply(draw, current, positions[draw(st.integers(0, len(positions) - 1))])
        return current

    return build()


_CASE_CHANGES: tuple[Callable[[str], str], ...] = (str.lower, str.capitalize, str.upper)


def case_and_punctuation(text: str, max_edits: int = 2) -> st.SearchStrategy[str]:
    """Up to ``max_edits`` of: a word re-cased (lower/Capitalised/UPPER), or the final punctuation
    added, removed or repeated. Words and their order are kept. Shrinks to ``text`` itself."""
    _check_max_edits(max_edits)

    @st.composite
    def build(draw) -> str:
        current = text
        for _ in range(draw(st.integers(0, max_edits))):
            if draw(st.sampled_from(("case", "punctuation"))) == "case":
                words = list(re.finditer(r"\S+", current))
                if words:
                    w = words[draw(st.integers(0, len(words) - 1))]
                    recased = draw(st.sampled_from(_CASE_CHANGES))(w.group())
                    current = current[: w.start()] + recased + current[w.end() :]
                continue
            body = current.rstrip()
            tail = current[len(body) :]
            if body and body[-1] in _TRAILING:
                if draw(st.sampled_from(("remove", "repeat"))) == "remove":
                    body = body[:-1]
                else:
                    body = body + body[-1]
            elif body:
                body = body + draw(st.sampled_from(_END_PUNCTUATION))
            current = body + tail
        return current

    return build()


def _swap_contraction(form: str) -> str:
    replacement = _SWAP[re.sub(r"\s+", " ", form.lower())]
    if replacement.startswith("i'm") or replacement.startswith("i am"):
        return "I" + replacement[1:]
    return replacement[0].upper() + replacement[1:] if form[0].isupper() else replacement


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
                parts += [text[last : site.start()], _swap_contraction(site.group())]
                last = site.end()
        return "".join(parts) + text[last:]

    return build()


def perturbations(text: str, max_edits: int = 2) -> st.SearchStrategy[str]:
    """One of :func:`typos`, :func:`case_and_punctuation`, :func:`contractions`; shrinks to ``text``."""
    return st.one_of(typos(text, max_edits), case_and_punctuation(text, max_edits), contractions(text))
