"""What every perturbation shares: independent edits addressed in the original text and applied
right to left, so that dropping one leaves the others meaning what they meant (hypothesis then
shrinks a failing example edit by edit), and the spelling rules that make a rewritten form look
like the one it replaced."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

APOSTROPHES = "'\u2019"  # straight and typographic (tweets use both)


def check_max_edits(max_edits: int, name: str = "max_edits") -> None:
    if isinstance(max_edits, bool) or not isinstance(max_edits, int) or max_edits < 0:
        raise ValueError(f"{name}={max_edits!r}: must be an int >= 0")


def apply_right_to_left(text: str, edits: Sequence[tuple[int, int, Callable[[str], str]]]) -> str:
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


def form_pattern(forms: Sequence[str]) -> re.Pattern[str]:
    def one(form: str) -> str:
        return re.escape(form).replace(r"\ ", r"\s+").replace("'", f"[{APOSTROPHES}]")

    body = "|".join(one(f) for f in sorted(forms, key=len, reverse=True))
    return re.compile(rf"(?<![\w{APOSTROPHES}])({body})(?![\w{APOSTROPHES}])", re.IGNORECASE)


def normal_form(form: str) -> str:
    return re.sub(r"\s+", " ", form.lower().replace("\u2019", "'"))


def spelled_like(replacement: str, matched: str, text: str) -> str:
    """``replacement`` with the case and apostrophe style of ``matched``."""
    if "\u2019" in matched or ("'" not in matched and "\u2019" in text and "'" not in text):
        replacement = replacement.replace("'", "\u2019")
    if replacement.startswith(("i'm", "i\u2019m", "i am")):
        return "I" + replacement[1:]
    if matched.isupper() and len(matched) > 1:
        return replacement.upper()
    return replacement[0].upper() + replacement[1:] if matched[0].isupper() else replacement
