"""Keyboard typos inside words: neighbour substitution, swap, insert, delete."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st

from warp_check.perturb.edits import apply_right_to_left, check_max_edits

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
    check_max_edits(max_edits)
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

    return st.lists(edit(), max_size=max_edits).map(lambda edits: apply_right_to_left(text, edits))
