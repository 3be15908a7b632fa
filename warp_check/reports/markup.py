"""HTML the report's pages share: a user's text escaped and bidi-isolated, a case's text cut for its
cell, a row of facts; the offline report (``html.py``), the comparison of two releases
(``comparison.py``) and the history of releases (``releases.py``) write with these."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from warp_check.reports.summary import Fact

DISPLAY_CHARS = 160  # a case's text shown in its table cell
PAGE_CHARS = 2000  # the most of one text the page holds
TRAFFIC_ROWS = 500  # changed traffic texts the page lists (report.json has them all)

# Characters no HTML page can carry (C0/C1 controls but tab and newline, lone surrogates, noncharacters).
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff]")


def carried(text: str) -> str:
    """``text`` with each character no HTML page can carry replaced by U+FFFD."""
    return _UNSAFE.sub("\ufffd", text)


def esc(text: object) -> str:
    """``text`` as HTML text: ``&``, ``<`` and ``>`` escaped (quotes need no escape outside a tag,
    and a case's text is full of them)."""
    return html.escape(_UNSAFE.sub("\ufffd", str(text)), quote=False)


def esc_attr(text: object) -> str:
    """``text`` as an attribute value in double quotes: quotes escaped too."""
    return html.escape(_UNSAFE.sub("\ufffd", str(text)), quote=True)


def inline(text: object) -> str:
    """A user's string inside a sentence of ours: escaped and bidi-isolated."""
    return f"<bdi>{esc(text)}</bdi>"


def text_parts(text: str, pair: str | None) -> str | tuple[str, str, str, str]:
    """A case's text (and its pair) as its cell shows it, characters HTML cannot carry replaced:
    whole where it has at most DISPLAY_CHARS, else (its first DISPLAY_CHARS, the rest up to
    PAGE_CHARS, its length, how many characters the page leaves out) with numbers as shown."""
    full = _UNSAFE.sub("\ufffd", text if pair is None else f"{text}  ‖  {pair}")
    if not full:
        return "–"
    if len(full) <= DISPLAY_CHARS:
        return full
    kept = full[:PAGE_CHARS]
    more = len(full) - len(kept)
    return kept[:DISPLAY_CHARS], kept[DISPLAY_CHARS:], f"{len(full):,}", f"{more:,}" if more else ""


def text_cell(text: str, pair: str | None) -> str:
    """A case's text (and its pair) for a table cell: cut to DISPLAY_CHARS, the rest (up to
    PAGE_CHARS) behind a click."""
    parts = text_parts(text, pair)
    if isinstance(parts, str):
        return esc(parts)
    head, rest, length, more = parts
    tail = f'<i class="more">… {more} more characters in report.json</i>' if more else ""
    # The click shows the rest, not the whole text again: each text is in the page once.
    return f"<details><summary>{esc(head)}… <i>({length} characters)</i></summary>…{esc(rest)}{tail}</details>"


def facts(shown: Sequence[Fact]) -> str:
    """Figures as a row of name/value cards, each green or red where it is good or bad."""
    items = []
    for fact in shown:
        tone = "" if fact.good is None else (' class="good"' if fact.good else ' class="bad"')
        detail = f"<small>{esc(fact.detail)}</small>" if fact.detail else ""
        items.append(f"<div{tone}><dt>{esc(fact.name)}</dt><dd>{inline(fact.value)}{detail}</dd></div>")
    return f'<dl class="facts">{"".join(items)}</dl>' if items else ""


__all__ = [
    "DISPLAY_CHARS",
    "PAGE_CHARS",
    "TRAFFIC_ROWS",
    "esc",
    "esc_attr",
    "facts",
    "inline",
    "text_cell",
    "text_parts",
]
