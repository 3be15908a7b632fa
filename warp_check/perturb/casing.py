"""Case and punctuation: a word re-cased, the final punctuation removed, repeated or added."""

from __future__ import annotations

import re
from collections.abc import Callable

from hypothesis import strategies as st

from warp_check.perturb.edits import apply_right_to_left, check_max_edits

_END_PUNCTUATION = ".!?"
_TRAILING = ".!?,;:"
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
    check_max_edits(max_edits)
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
        current = apply_right_to_left(text, recased)  # word spans never move: re-casing keeps lengths
        for kind, action, mark in edits:
            if kind == "punctuation":
                current = _punctuate(current, action, mark)
        return current

    return st.lists(edit(), max_size=max_edits).map(apply)
