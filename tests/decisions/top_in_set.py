"""A kind of decision added from outside the core: "the top class must be one of a set".

A case states the classes it allows (a list of label names or class ids); the prediction is right
when the first largest logit is one of them; the margin is max_{c∈set} z_c − max_{c∉set} z_c, a
difference of two logits (the strongest allowed one held against the strongest other one), so the
core's loop, QP rows, screening and certificates take it unchanged. One module, one line below.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from warp_check.decisions import Constraints, DecisionKind, LabelSpace, Margins, register


class TopInSet(DecisionKind):
    """Answers: (cases, classes) bool masks of the allowed classes."""

    name = "top_in_set"

    def parse_answer(self, value: Any, space: LabelSpace) -> tuple[int, ...]:
        if not isinstance(value, list) or not value:
            raise ValueError(f"must be a non-empty list of labels, got {value!r}")
        allowed = tuple(sorted({space.class_id(label) for label in value}))
        if space.num_classes is not None and len(allowed) >= space.num_classes:
            raise ValueError(f"allows every class ({list(allowed)}): no prediction could be wrong")
        return allowed

    def answer(self, answers: np.ndarray, row: int) -> tuple[int, ...]:
        return tuple(int(c) for c in np.flatnonzero(answers[row]))

    def answers(self, stated: Sequence[Any], num_classes: int) -> np.ndarray:
        mask = np.zeros((len(stated), num_classes), dtype=bool)
        for row, allowed in enumerate(stated):
            mask[row, sorted(allowed)] = True
        return mask

    def answers_of(self, predictions: np.ndarray, num_classes: int) -> np.ndarray:
        return np.arange(num_classes)[None, :] == np.asarray(predictions)[:, None]

    def predict(self, logits: np.ndarray) -> np.ndarray:
        return np.argmax(logits, axis=1)

    def margins(self, logits: np.ndarray, answers: np.ndarray) -> Margins:
        allowed = np.asarray(answers, dtype=bool)
        rows = np.arange(logits.shape[0])
        held = np.argmax(np.where(allowed, logits, -np.inf), axis=1)
        rival = np.argmax(np.where(allowed, -np.inf, logits), axis=1)
        return Margins(gap=logits[rows, held] - logits[rows, rival], held=held, rival=rival)

    def constraints(self, logits: np.ndarray, answers: np.ndarray) -> Constraints:
        """The strongest allowed class against every class outside the set."""
        allowed = np.asarray(answers, dtype=bool)
        n, classes = logits.shape
        rows = np.arange(n)
        held = np.argmax(np.where(allowed, logits, -np.inf), axis=1)
        return Constraints(
            gap=logits[rows, held][:, None] - logits,
            plus=np.broadcast_to(held[:, None], (n, classes)),
            minus=np.broadcast_to(np.arange(classes), (n, classes)),
            active=~allowed,
            binding=np.argmax(np.where(allowed, -np.inf, logits), axis=1),
        )

    def right(self, predictions: np.ndarray, answers: np.ndarray) -> np.ndarray:
        return np.asarray(answers, dtype=bool)[np.arange(len(predictions)), predictions]

    def answer_of(self, logits: Sequence[float], answer: Any) -> tuple[int, float]:
        values = [float(z) for z in logits]
        inside = max((values[c] for c in answer), default=-math.inf)
        outside = max((z for c, z in enumerate(values) if c not in answer), default=-math.inf)
        return max(range(len(values)), key=lambda c: (values[c], -c)), inside - outside

    def torch_margin(self, logits: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        allowed = answers.bool()
        inside = logits.masked_fill(~allowed, float("-inf")).max(dim=1).values
        return inside - logits.masked_fill(allowed, float("-inf")).max(dim=1).values

    def training_loss(self, logits: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        allowed = answers.bool()
        return (
            torch.logsumexp(logits, dim=1) - torch.logsumexp(logits.masked_fill(~allowed, float("-inf")), dim=1)
        ).mean()


TOP_IN_SET = register(TopInSet())
