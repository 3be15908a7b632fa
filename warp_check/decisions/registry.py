"""The kinds of decision, by name: each is registered here with one call (:func:`register`)."""

from __future__ import annotations

from typing import Any

from warp_check.decisions.base import DecisionKind
from warp_check.decisions.multi_label import MultiLabel
from warp_check.decisions.single_label import SingleLabel
from warp_check.decisions.token_tags import TokenTags

DECISIONS: dict[str, DecisionKind] = {}


def register(kind: DecisionKind) -> DecisionKind:
    """Make ``kind`` known by its name; a name already taken by another kind is a ValueError."""
    known = DECISIONS.get(kind.name)
    if known is not None and type(known) is not type(kind):
        raise ValueError(f"decision={kind.name!r}: already the name of {type(known).__name__}")
    DECISIONS[kind.name] = kind
    return kind


def decision(name: str) -> DecisionKind:
    """The kind registered as ``name``; ValueError naming the known ones."""
    try:
        return DECISIONS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"decision={name!r}: not a kind of decision; use one of {', '.join(map(repr, DECISIONS))}"
        ) from None


def answer_fields() -> tuple[str, ...]:
    """Every field a registered kind reads a case's answer from, in the order they were registered."""
    return tuple(dict.fromkeys(f for kind in DECISIONS.values() for f in kind.answer_fields))


def deciding(problem_type: str | None) -> DecisionKind | None:
    """The first registered kind that decides heads of a Hugging Face ``problem_type``, or None."""
    return next((kind for kind in DECISIONS.values() if problem_type in kind.problem_types), None)


def deciding_config(architectures: Any, problem_type: str | None) -> DecisionKind | None:
    """The kind that decides a model of a config: the first registered one naming one of its
    ``architectures`` (a token classifier), else the one deciding its ``problem_type``, or None."""
    named = architectures if isinstance(architectures, (list, tuple)) else ()
    return next((k for k in DECISIONS.values() if k.decides_architecture(named)), None) or deciding(problem_type)


register(SingleLabel())
register(MultiLabel())
register(TokenTags())
