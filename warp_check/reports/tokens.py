"""The tagged-sentence view of a token classifier's run: each sentence of its cases whole, each
constrained word with its tag before and after (a check: now), the words it tags wrong and those the
repair fixed marked, the words the case leaves free plain.

A token suite's verdicts are rows, one per constrained word (its text the sentence with that word
marked, :mod:`warp_check.decisions.token_tags`); the view gathers a sentence's rows back into the
sentence (the kind says which sentence a row is of, and which word it decides). Words and tags are
a suite's and a model's strings: escaped and bidi-isolated as every user string of the page.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from warp_check.cases import Kind
from warp_check.decisions import DecisionKind
from warp_check.reports.markup import esc, esc_attr, inline
from warp_check.reports.parts import kind_of
from warp_check.reports.summary import when_words
from warp_check.runs.modes import Mode
from warp_check.runs.result import Outcome, RunResult, Verdict

SENTENCES_SHOWN = 200  # sentences the page and report.md show, failures first (report.json has all)


class WordMark(enum.Enum):
    """What the view marks a word as."""

    FREE = "free"  # the case states no tag for it
    RIGHT = "right"  # tagged as the case asks (before and after, where a repair ran)
    FIXED = "fixed"  # tagged wrong before, right after
    WRONG = "wrong"  # tagged wrong after (a check: now)


@dataclass(frozen=True, kw_only=True)
class TaggedWord:
    """One word of a sentence: the tag its case asks for (None: free), whether the model tags it so
    before and after (None: not known), and the tags it predicted where the run recorded them."""

    word: str
    tag: str | None
    right_before: bool | None
    right_after: bool | None
    predicted_before: str | None
    predicted_after: str | None

    @property
    def mark(self) -> WordMark:
        if self.tag is None or self.right_after is None:
            return WordMark.FREE
        if not self.right_after:
            return WordMark.WRONG
        return WordMark.FIXED if self.right_before is False else WordMark.RIGHT

    @property
    def tags(self) -> str:
        """Its tags in a few characters: ``O → B-LOC ✓``, ``O ✗ asks B-LOC``, or the tag alone where it holds."""
        mark = self.mark
        if mark is WordMark.RIGHT:
            return str(self.tag)
        if mark is WordMark.FIXED:
            return f"{self.predicted_before or 'wrong'} → {self.tag} ✓"
        was = ""
        if self.right_before is not None:
            was = f"{self.tag} → " if self.right_before else f"{self.predicted_before or 'wrong'} → "
        return f"{was}{self.predicted_after or 'wrong'} ✗ asks {self.tag}"


@dataclass(frozen=True, kw_only=True)
class TaggedSentence:
    """One case's sentence: its id, kind and outcome (failed where any of its words failed)."""

    sentence: str
    kind: Kind
    outcome: Outcome
    words: tuple[TaggedWord, ...]

    @property
    def wrong(self) -> int:
        return sum(w.mark is WordMark.WRONG for w in self.words)

    @property
    def fixed(self) -> int:
        return sum(w.mark is WordMark.FIXED for w in self.words)


def _right(gap: object) -> bool | None:
    return gap > 0 if isinstance(gap, (int, float)) and math.isfinite(gap) else None


def _tagged(run: RunResult, verdict: Verdict, word: str) -> TaggedWord:
    """A constrained word as its verdict says: a check's gap now and on its baseline, with the tags it
    predicted; a repair's gaps before and after, with the tags it answered (where the run recorded them)."""
    p = verdict.properties
    if run.mode is Mode.CHECK:
        before, after = p.get("baseline_gap"), p.get("gap")
        said_before, said_after = p.get("baseline_predicted"), p.get("predicted")
    else:
        answered = verdict.answered
        before, after = p.get("gap_before"), p.get("gap_after")
        said_before = answered.before if answered is not None else None
        said_after = answered.after if answered is not None else None
    return TaggedWord(
        word=word,
        tag=str(p.get("label", "")),
        right_before=_right(before),
        right_after=_right(after),
        predicted_before=None if said_before is None else str(said_before),
        predicted_after=None if said_after is None else str(said_after),
    )


def _outcome(verdicts: Sequence[Verdict]) -> Outcome:
    """A sentence's outcome: its worst row's (a failed word fails the sentence, as its pytest item)."""
    order = (Outcome.FAILED, Outcome.XFAILED, Outcome.SKIPPED, Outcome.PASSED)
    return min((v.reported for v in verdicts), key=order.index)


def tagged_sentences(run: RunResult) -> tuple[TaggedSentence, ...]:
    """Every sentence of the run's cases, failures first (then by kind and id); () where the run's kind
    decides whole texts, or its verdicts recorded no texts."""
    kind = kind_of(run)
    if kind is None or not kind.per_word:
        return ()
    gathered: dict[tuple[Kind, str], tuple[tuple[str, ...], dict[int, Verdict]]] = {}
    for verdict in run.verdicts:
        found = _word(kind, verdict)
        if found is None or verdict.kind is Kind.AUX:
            continue
        words, index = found
        sentence = gathered.setdefault((verdict.kind, kind.group(verdict.case_id)), (words, {}))
        if sentence[0] == words:
            sentence[1][index] = verdict
    out = [
        TaggedSentence(
            sentence=sentence_id,
            kind=case_kind,
            outcome=_outcome(list(rows.values())),
            words=tuple(
                _tagged(run, rows[i], w)
                if i in rows
                else TaggedWord(
                    word=w, tag=None, right_before=None, right_after=None, predicted_before=None, predicted_after=None
                )
                for i, w in enumerate(words)
            ),
        )
        for (case_kind, sentence_id), (words, rows) in gathered.items()
    ]
    return tuple(sorted(out, key=lambda s: (s.outcome is Outcome.PASSED, s.kind.value, s.sentence)))


def _word(kind: DecisionKind, verdict: Verdict) -> tuple[tuple[str, ...], int] | None:
    """(the sentence's words, the index of the word the row decides); None where the run recorded no
    text for it (nothing to show)."""
    if not verdict.text:
        return None
    try:
        return kind.word_of(verdict.text)
    except ValueError:
        return None


def _title(word: TaggedWord, when: tuple[str, str]) -> str:
    before, after = when
    said = [f"the case asks {word.tag}"]
    for name, right, predicted in (
        (before or "before", word.right_before, word.predicted_before),
        (after or "now", word.right_after, word.predicted_after),
    ):
        if right is not None:
            said.append(f"{name}: {predicted or ('right' if right else 'wrong')}")
    return f"{word.mark.value}: " + "; ".join(said)


def _word_html(word: TaggedWord, when: tuple[str, str]) -> str:
    if word.mark is WordMark.FREE:
        return f'<span class="tw">{inline(word.word)}</span>'
    return (
        f'<span class="tw {word.mark.value}" title="{esc_attr(_title(word, when))}">{inline(word.word)}'
        f'<span class="tags">{inline(word.tags)}</span></span>'
    )


def sentences_html(run: RunResult) -> str:
    """The run's sentences as the page shows them (nothing where its kind decides whole texts)."""
    sentences = tagged_sentences(run)
    if not sentences:
        return ""
    when = when_words(run)
    shown = sentences[:SENTENCES_SHOWN]
    items = "".join(
        f'<div class="sentence {s.outcome.value}" data-sentence="{esc_attr(s.sentence)}">'
        f'<p class="meta">{inline(s.sentence)} · {s.kind.value} · {" · ".join([s.outcome.value, *_counts(s)])}</p>'
        f'<p class="tagged">{" ".join(_word_html(w, when) for w in s.words)}</p></div>'
        for s in shown
    )
    more = len(sentences) - len(shown)
    return (
        f"<h3>Sentences ({len(sentences)})</h3>"
        f'<p class="meta">{esc(_legend(when))}</p><div class="sentences">{items}</div>'
        + (f'<p class="meta">{more} more sentence(s) in report.json.</p>' if more else "")
    )


def _counts(sentence: TaggedSentence) -> list[str]:
    """How many of its words are wrong, and how many fixed (where any)."""
    return [f"{n} word(s) {what}" for n, what in ((sentence.wrong, "wrong"), (sentence.fixed, "fixed")) if n]


def _legend(when: tuple[str, str]) -> str:
    before, after = when
    tags = f"its tag {before} → {after} where they differ" if before else "its tag now"
    return (
        f"Each sentence whole, each word its case constrains with {tags}: ✗ a wrong tag (then the tag the "
        "case asks for), ✓ a word the repair fixed; a word without a tag is one the case leaves free."
    )


def sentences_markdown(run: RunResult, escape: Callable[[str], str]) -> list[str]:
    """The run's sentences for report.md, a line each (``escape`` making a word Markdown text): each
    constrained word followed by its tags in brackets, a wrong one in bold."""
    sentences = tagged_sentences(run)
    if not sentences:
        return []
    when = when_words(run)
    out = [f"### Sentences ({len(sentences)})", "", _legend(when), ""]
    for s in sentences[:SENTENCES_SHOWN]:
        words = []
        for w in s.words:
            shown = escape(w.word)
            if w.mark is not WordMark.FREE:
                shown = f"{shown} \\[{escape(w.tags)}\\]"
            words.append(f"**{shown}**" if w.mark is WordMark.WRONG else shown)
        said = ", ".join([s.kind.value, s.outcome.value, *_counts(s)])
        out.append(f"- `{s.sentence}` ({said}): {' '.join(words)}")
    if len(sentences) > SENTENCES_SHOWN:
        out.append(f"\n_{len(sentences) - SENTENCES_SHOWN} more sentence(s) in report.json._")
    return out + [""]


TOKENS_CSS = """
.sentences{display:flex;flex-direction:column;gap:6px;max-height:80vh;overflow-y:auto;border:1px solid #ddd;
padding:6px 10px}
.sentence p{margin:2px 0}.sentence.failed{background:#fff6f5}
.tagged{line-height:2.6;unicode-bidi:plaintext}
.tw{display:inline-block;vertical-align:top;line-height:1.3;margin:0 2px;padding:1px 3px;border-radius:4px}
.tw .tags{display:block;font-size:11px;color:#555}
.tw.right{border:1px solid #cfd8dc}.tw.fixed{border:1px solid #2e8b57;background:#e8f5ec}
.tw.wrong{border:1px solid #c0392b;background:#fdecea;font-weight:600}.tw.wrong .tags{color:#a02c20}
"""

__all__ = [
    "SENTENCES_SHOWN",
    "TOKENS_CSS",
    "TaggedSentence",
    "TaggedWord",
    "WordMark",
    "sentences_html",
    "sentences_markdown",
    "tagged_sentences",
]
