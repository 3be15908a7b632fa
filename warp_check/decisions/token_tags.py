"""A tag per word (token classifiers: NER, PII redaction, slot filling): each word's tag is the argmax
of the tag logits at its first sub-token, so every constrained word is one single-label decision.

A case file states a sentence as its words and their tags, ``{"id", "tokens": [...], "tags": [...]}``,
``null`` for a word left unconstrained; or as ``"text"`` with character ``"entities"`` (``[{"start",
"end", "label"}]``), its words those of :func:`split_words` and their tags IOB2 of the model's labels
(every word outside an entity ``O``). The suite reads it into one *row* per constrained word (a
:class:`~warp_check.cases.Case` whose id is ``sentence#word`` and whose label is the word's tag), so
the loop, the QP, the certificates and the audit take word rows as they take texts: one v (the
word's first sub-token at the repair layer) and one argmax per row. A row's text is the sentence
with its word marked, ``Obama visited ⟦Washington⟧ today``: readable in every report, and all the
encoder needs to find the word again (a certificate re-encodes from it).

Standard library only at import, as every kind.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from warp_check.decisions.base import AnswerError, LabelSpace, TrafficCount, TrafficRow
from warp_check.decisions.single_label import SingleLabel

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

OPEN, CLOSE = "⟦", "⟧"  # around the word a row decides; no word may hold either
ROW_SEPARATOR = "#"  # a row's id: the sentence's id, '#', the word's index (from 0)
_SPACE = re.compile(r"\s")
# A text's words: runs of letters and digits, and each other visible character alone (the split of
# BERT's pre-tokenizer, and of CoNLL-style NER data): "Paris." is two words, so an entity ends at one.
_WORD = re.compile(r"\w+|[^\w\s]")
OUTSIDE = "O"  # the tag of a word in no entity
ENTITY_KEYS = ("start", "end", "label")


@dataclass(frozen=True, kw_only=True)
class WordRow:
    """One constrained word of a sentence: its index among the words and its tag (a class id)."""

    word: int
    tag: int


@dataclass(frozen=True, kw_only=True)
class TaggedSentence:
    """A case file's sentence: its words and the rows it asks for (the words whose tag it states)."""

    words: tuple[str, ...]
    rows: tuple[WordRow, ...]

    def row_text(self, row: WordRow) -> str:
        return row_text(self.words, row.word)


def row_text(words: Sequence[str], word: int) -> str:
    """The text of the row deciding word ``word``: the words, spaced, that one marked."""
    return " ".join(f"{OPEN}{w}{CLOSE}" if i == word else w for i, w in enumerate(words))


def row_id(sentence_id: str, word: int) -> str:
    return f"{sentence_id}{ROW_SEPARATOR}{word}"


def sentence_id(row: str) -> str:
    """The id of the sentence a row's id belongs to."""
    return row.rpartition(ROW_SEPARATOR)[0] or row


def word_problem(word: str) -> str | None:
    """Why ``word`` cannot be a word of a row's text (a space, or a mark), or None."""
    if _SPACE.search(word) or OPEN in word or CLOSE in word:
        return f"{word!r} holds a space or {OPEN}{CLOSE}: give each word alone (split it in two)"
    return None


def split_words(text: str) -> tuple[tuple[str, int, int], ...]:
    """The words of a plain text, each with its character span (start, end): runs of letters and
    digits, and each other visible character alone."""
    return tuple((m.group(), m.start(), m.end()) for m in _WORD.finditer(text))


def words_of(text: str) -> tuple[tuple[str, ...], int]:
    """(the words, the index of the marked one) of a row's text; ValueError where it marks no single
    word (a plain text: a token classifier is asked about one word of a sentence at a time)."""
    words = text.split(" ")
    marked = [i for i, w in enumerate(words) if w.startswith(OPEN) and w.endswith(CLOSE) and len(w) > 2]
    if len(marked) != 1 or any(not w for w in words):
        raise ValueError(
            f"{text[:60]!r} is no word of a sentence: a token classifier's input is the sentence's words, "
            f"single-spaced, with the word asked about marked {OPEN}so{CLOSE}"
        )
    index = marked[0]
    words[index] = words[index][len(OPEN) : -len(CLOSE)]
    return tuple(words), index


class TokenTags(SingleLabel):
    """One tag per constrained word; a row (case, word) is decided as one class, as a single label is."""

    name = "token_tags"
    problem_types = frozenset()  # token classifiers are found by their architecture
    answer_fields = ("tokens", "tags", "entities")
    per_word = True
    row_nouns, case_nouns, text_nouns = "words", "sentences", "sentences"
    changes_share = "changes a word's tag in at most {share} of sentences"  # Cert 4's count: a sentence changed
    architecture_suffix = "ForTokenClassification"

    def read_answer(self, fields: Mapping[str, Any], space: LabelSpace) -> Any:
        """A row's answer is its word's tag: a suite reads sentences with :meth:`read_sentence`."""
        if "label" in fields:
            return super().read_answer(fields, space)
        raise AnswerError(
            next(iter(fields), "tags"), 'a token classifier\'s case states its sentence: give "tokens" and "tags"'
        )

    def read_sentence(self, fields: Mapping[str, Any], space: LabelSpace) -> TaggedSentence:
        """A case file's ``tokens`` and ``tags``, or its ``text`` and ``entities``; :class:`AnswerError`
        names the field and says why not."""
        if "text" in fields or "entities" in fields:
            return self._read_entities(fields, space)
        for key in ("tokens", "tags"):
            if key not in fields:
                raise AnswerError(key, f'missing field {key!r}: a token classifier\'s case gives "tokens" and "tags"')
        words, tags = fields["tokens"], fields["tags"]
        if not isinstance(words, list) or not words:
            raise AnswerError("tokens", f"must be a non-empty list of words, got {_shown(words)}")
        for i, word in enumerate(words):
            if not isinstance(word, str) or not word:
                raise AnswerError("tokens", f"word {i} must be a non-empty string, got {_shown(word)}")
            if (problem := word_problem(word)) is not None:
                raise AnswerError("tokens", f"word {i} {problem}")
        if not isinstance(tags, list):
            raise AnswerError("tags", f"must be a list with a tag (or null) per word, got {_shown(tags)}")
        if len(tags) != len(words):
            raise AnswerError(
                "tags", f"has {len(tags)} tag(s) for {len(words)} word(s): give one per word, null where unconstrained"
            )
        rows = []
        for i, tag in enumerate(tags):
            if tag is None:
                continue
            try:
                rows.append(WordRow(word=i, tag=space.class_id(tag)))
            except ValueError as exc:
                raise AnswerError("tags", f"word {i} {words[i]!r}: {exc}") from None
        if not rows:
            raise AnswerError("tags", "constrains no word: every tag is null; give the tag of at least one word")
        return TaggedSentence(words=tuple(words), rows=tuple(rows))

    def _read_entities(self, fields: Mapping[str, Any], space: LabelSpace) -> TaggedSentence:
        """A ``text`` with character ``entities``: every word tagged, IOB2 where the model's labels are
        (``B-``/``I-`` of the entity's label), the label itself where the model tags without a prefix."""
        for key in ("tokens", "tags"):
            if key in fields:
                raise AnswerError(key, 'a sentence is "tokens" with "tags", or "text" with "entities", not both')
        for key in ("text", "entities"):
            if key not in fields:
                raise AnswerError(key, f'missing field {key!r}: a sentence as a text gives "text" and "entities"')
        text, entities = fields["text"], fields["entities"]
        if not isinstance(text, str):
            raise AnswerError("text", f"must be a string, got {_shown(text)}")
        spans = split_words(text)
        if not spans:
            raise AnswerError("text", "holds no word: a token classifier's case is a sentence")
        for word, _, _ in spans:
            if (problem := word_problem(word)) is not None:
                raise AnswerError("text", f"word {problem}")
        if not isinstance(entities, list):
            raise AnswerError("entities", f'must be a list of {{"start", "end", "label"}}, got {_shown(entities)}')
        if OUTSIDE not in space.names:
            raise AnswerError("entities", f"the model has no tag {OUTSIDE!r} for a word outside every entity")
        starts = {start: i for i, (_, start, _) in enumerate(spans)}
        ends = {end: i for i, (_, _, end) in enumerate(spans)}
        tags = [space.names[OUTSIDE]] * len(spans)
        taken: dict[int, int] = {}  # word → the entity tagging it
        for k, entity in enumerate(entities):
            start, end, label = _entity(k, entity, len(text))
            where = f"entity {k} ({start}..{end} {text[start:end]!r})"
            if start not in starts or end not in ends:
                cut = next((w for w, s, e in spans if s < start < e or s < end < e), None)
                why = f"it cuts the word {cut!r}" if cut is not None else "it starts or ends on a space"
                raise AnswerError("entities", f"{where} is off the word boundaries: {why} (words: {_words(spans)})")
            first, last = starts[start], ends[end]
            for word in range(first, last + 1):
                if word in taken:
                    other = entities[taken[word]]
                    span = f"{other['start']}..{other['end']}"
                    raise AnswerError("entities", f"{where} overlaps entity {taken[word]} ({span})")
                taken[word] = k
                tags[word] = _tag(space, label, word == first, where)
        return TaggedSentence(
            words=tuple(w for w, _, _ in spans), rows=tuple(WordRow(word=i, tag=t) for i, t in enumerate(tags))
        )

    def traffic_rows(self, texts: Sequence[tuple[str, str]]) -> tuple[TrafficRow, ...]:
        """Every word of each traffic text (split as a case file's ``text``) as a row: the sentence with
        that word marked; a text with no word has no row."""
        rows = []
        for draw, (case_id, text) in enumerate(texts):
            words = [w for w, _, _ in split_words(text)]
            rows += [TrafficRow(draw=draw, id=row_id(case_id, w), text=row_text(words, w)) for w in range(len(words))]
        return tuple(rows)

    def traffic_count(self, changed_rows: np.ndarray, draw_of: np.ndarray) -> TrafficCount:
        """A sentence changes where any of its words' tag does. The words of one sentence are not
        independent draws (one shift of the layer moves a sentence's words together): the sentences
        are, so the share Cert 4 bounds is theirs, and the words are counted beside it."""
        import numpy as np

        changed = np.asarray(changed_rows, dtype=np.int64)
        return TrafficCount(
            draws_changed=len(np.unique(np.asarray(draw_of)[changed])), rows=len(draw_of), rows_changed=len(changed)
        )

    def word_of(self, text: str) -> tuple[tuple[str, ...], int] | None:
        return words_of(text)

    def group(self, case_id: str) -> str:
        return sentence_id(case_id)

    def subject(self, text: str) -> str | None:
        words, word = words_of(text)
        return f"word {word} {words[word]!r}"


def _entity(k: int, entity: Any, length: int) -> tuple[int, int, str]:
    """(start, end, label) of entity ``k``, each checked; AnswerError naming it where not."""
    if not isinstance(entity, dict) or set(entity) != set(ENTITY_KEYS):
        raise AnswerError("entities", f'entity {k} must be {{"start", "end", "label"}}, got {_shown(entity)}')
    start, end, label = (entity[key] for key in ENTITY_KEYS)
    for key, value in (("start", start), ("end", end)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise AnswerError("entities", f"entity {k}: {key} must be a character offset, got {_shown(value)}")
    if not 0 <= start < end <= length:
        raise AnswerError("entities", f"entity {k}: {start}..{end} is no span of the text's {length} characters")
    if not isinstance(label, str) or not label:
        raise AnswerError("entities", f"entity {k}: label must be a non-empty string, got {_shown(label)}")
    return start, end, label


def _tag(space: LabelSpace, label: str, first: bool, where: str) -> int:
    """The class of a word of an entity labelled ``label``: ``B-``/``I-`` where the model tags IOB2,
    else the label itself."""
    prefixed = f"{'B' if first else 'I'}-{label}"
    if prefixed in space.names:
        return space.names[prefixed]
    if f"B-{label}" in space.names:
        raise AnswerError("entities", f"{where}: the model has 'B-{label}' but no {prefixed!r} for its later words")
    if label in space.names:
        return space.names[label]
    tags = sorted({n.split("-", 1)[-1] for n in space.names if n != OUTSIDE})
    raise AnswerError(
        "entities",
        f"{where}: the model has no label {label!r} (as 'B-{label}' or {label!r}); its labels: " + ", ".join(tags),
    )


def _words(spans: Sequence[tuple[str, int, int]]) -> str:
    shown = " ".join(f"{w}@{s}" for w, s, _ in spans[:12])
    return shown + (" …" if len(spans) > 12 else "")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
