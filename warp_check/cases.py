"""A behavioural test case: the unit every other part of warp-check works on."""

from __future__ import annotations

import difflib
import enum
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class Kind(str, enum.Enum):
    """What a case asks of the model."""

    MUST_FIX = "must_fix"  # failing now; repair must make it right with margin gamma_s
    MUST_KEEP = "must_keep"  # right now; repair must keep it right with margin gamma_h
    AUX = "aux"  # disjoint cases GSN-FT may train on; never asserted
    # must_fix cases a traffic budget could not buy, moved to the suite's deferred file (warp-check defer):
    # checked and shown as known failures, never repaired; never a kind a case file's line or table states.
    DEFERRED = "deferred"

    def __str__(self) -> str:
        return self.value


# Case.source of a perturbed copy of a suite case that a repair's neighbourhood drew
# (warp_check.pipeline.neighbourhood), or that ``warp-check neighbours`` wrote into a suite.
NEIGHBOUR = "neighbour"


@dataclass(frozen=True, kw_only=True)
class Case:
    """One labelled input. ``label`` is the answer its suite's kind of decision asks for (single
    label: the class id; another kind: a tuple of class ids, or of tuples of them (several labels:
    ``(on, off)``), as the kind reads its case file's answer); ``origin`` is 'file:line' when loaded."""

    id: str
    text: str
    label: int | tuple[int, ...] | tuple[tuple[int, ...], ...]
    kind: Kind
    text_pair: str | None = None
    source: str | None = None
    origin: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"id={self.id!r}: must be a non-empty string")
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError(f"text={self.text!r}: must be a non-empty string")
        for name in ("text", "text_pair"):
            value = getattr(self, name)
            problem = None if value is None else text_problem(value)
            if problem is not None:
                raise ValueError(f"{name}={value[:40]!r}: {problem}")
        if isinstance(self.label, str):
            raise ValueError(
                f"label={self.label!r}: a Case holds the class id; for a label name, build it with "
                "Case.labelled(labels, ...), labels being a suite's suite.labels or a model's adapter.labels"
            )
        if isinstance(self.label, (list, tuple)):  # a certificate's JSON reads a tuple back as a list
            object.__setattr__(self, "label", _answer_tuple(self.label))
            if not self.label or not all(_ids_in(c) for c in self.label):
                raise ValueError(
                    f"label={self.label!r}: a kind of decision's answer holds class ids (ints >= 0), "
                    "or tuples of them (several labels: (on, off))"
                )
        elif not _is_class_id(self.label):
            raise ValueError(f"label={self.label!r}: must be a class id (int >= 0)")
        object.__setattr__(self, "kind", Kind(self.kind))

    @classmethod
    def labelled(
        cls,
        labels: Mapping[str, int],
        /,
        *,
        id: str,  # noqa: A002 - the field's name
        text: str,
        label: str | int,
        kind: Kind | str,
        text_pair: str | None = None,
        source: str | None = None,
        origin: str | None = None,
    ) -> Case:
        """A case whose ``label`` is a name of ``labels`` (name → class id: ``suite.labels``, or a
        model's ``ClassifierAdapter.labels``) or one of its class ids; an unknown one is a
        ValueError listing the known labels."""
        return cls(
            id=id,
            text=text,
            label=label_id(label, labels),
            kind=Kind(kind),
            text_pair=text_pair,
            source=source,
            origin=origin,
        )


def _is_class_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def label_id(label: str | int, labels: Mapping[str, int]) -> int:
    """The class id ``label`` names in ``labels`` (name → class id): a name, or a class id it has (with
    no names known, any class id). Raises ValueError naming the known labels."""
    known = ", ".join(f"{name!r} ({index})" for name, index in sorted(labels.items(), key=lambda kv: kv[1]))
    if isinstance(label, str):
        if label in labels:
            return int(labels[label])
        close = difflib.get_close_matches(label, list(labels), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"label={label!r}: not a label of this model{hint}; use one of {known or 'none named'}")
    if isinstance(label, bool) or not isinstance(label, int) or label < 0:
        raise ValueError(f"label={label!r}: must be a label name or a class id (an int >= 0)")
    if labels and label not in set(labels.values()):
        raise ValueError(f"label={label!r}: not a class of this model; use one of {known}")
    return label


_SURROGATE = re.compile("[\ud800-\udfff]")


def text_problem(text: str) -> str | None:
    """Why ``text`` is no text a model can be tested on, or None: NUL bytes (a binary file read as
    text), a lone UTF-16 surrogate (no tokenizer encodes one), or no visible character at all (only
    spaces, zero-width or other format and control characters: ``str.strip()`` keeps a zero-width
    space)."""
    if "\x00" in text:
        return "holds NUL bytes (\\x00): a binary file read as text?"
    lone = _SURROGATE.search(text)
    if lone is not None:  # JSON's "\ud83d\ude00" pairs decode to one character: what is left is alone
        return (
            f"holds a lone surrogate (\\u{ord(lone[0]):04x} at character {lone.start() + 1}): not Unicode text, "
            "which no tokenizer takes; an emoji's escaped pair cut in two?"
        )
    if not any(unicodedata.category(ch)[0] not in "CZ" for ch in text):
        return "has no visible character (only spaces, zero-width or control characters)"
    return None


def _answer_tuple(answer: Any) -> tuple[Any, ...]:
    """An answer read back from JSON (lists, lists of lists) as the tuples a Case holds."""
    return tuple(_answer_tuple(a) if isinstance(a, (list, tuple)) else a for a in answer)


def _ids_in(item: Any) -> bool:
    """A class id, or a tuple of them."""
    return all(_is_class_id(c) for c in item) if isinstance(item, tuple) else _is_class_id(item)
