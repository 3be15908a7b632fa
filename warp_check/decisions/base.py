"""What a kind of decision is: how a classifier's logits answer a case, and by how much.

A kind (:class:`DecisionKind`) owns everything that follows from "what the model decides": the
prediction from a row of logits, how a case file states the expected answer, the margin that a
repair lifts and a certificate bounds, what "changed" means between two predictions (Cert 4), what
a regression against a baseline is, and the columns it gives the reports. Everything else (the
loop, the QP, screening, the certificates' bounds) sees only what a kind returns: per case, a
margin ``z[held] − z[rival]`` (a direction ``e_held − e_rival`` in logit space, so a QP row's
``c = Uᵀ J (W_c[held] − W_c[rival])``) and the classes that may be a margin's rival.

Answers are arrays with one row per case (the kind says their shape and dtype), so the loop slices,
stacks and orders them without knowing what they mean. Standard library only at import: a warm
check answers in pure Python (:meth:`DecisionKind.answer_of`); numpy is imported where arrays are.
"""

from __future__ import annotations

import abc
import difflib
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import torch


@dataclass(frozen=True, kw_only=True)
class Margins:
    """Per case, the margin (a positive one is a right answer) and the two classes it is the
    difference of: ``gap = z[held] − z[rival]``."""

    gap: np.ndarray
    held: np.ndarray  # the class whose logit the answer holds on to (single label: the label)
    rival: np.ndarray  # the strongest class that would make the answer wrong


@dataclass(frozen=True, kw_only=True)
class Column:
    """One column a kind gives the reports: its heading and the value for one case."""

    name: str
    value: str


@dataclass(frozen=True, kw_only=True)
class LabelSpace:
    """The classes a case file may name: label names (name → class id) and the class count."""

    names: Mapping[str, int]
    num_classes: int | None

    @property
    def help(self) -> str:
        names = ", ".join(repr(n) for n in self.names)
        ids = f"a class id 0..{self.num_classes - 1}" if self.num_classes else "a class id"
        return f"one of {names} or {ids}" if self.names else ids

    def class_id(self, label: Any) -> int:
        """The class id a case file's ``label`` value names; ValueError says why not."""
        if isinstance(label, str):
            if label not in self.names:
                close = difflib.get_close_matches(label, list(self.names), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise ValueError(f"unknown label {label!r}{hint}; use {self.help}")
            return self.names[label]
        if isinstance(label, int) and not isinstance(label, bool):
            if self.num_classes:
                ok = 0 <= label < self.num_classes
            else:
                ok = label in set(self.names.values()) if self.names else label >= 0
            if not ok:
                raise ValueError(f"class id {label} is not a class of the model; use {self.help}")
            return label
        raise ValueError(f"must be a label name or a class id, got {label!r}; use {self.help}")


class DecisionKind(abc.ABC):
    """A kind of decision. Subclass it, give it a ``name``, and register one instance in
    :data:`warp_check.decisions.registry.DECISIONS` (one call: ``register(MyKind())``)."""

    name: ClassVar[str]
    # Hugging Face ``problem_type`` values whose heads this kind decides (None: the config names none).
    problem_types: ClassVar[frozenset[str | None]] = frozenset()

    # What a case file states.
    @abc.abstractmethod
    def parse_answer(self, value: Any, space: LabelSpace) -> Any:
        """The answer a case file's ``label`` field states, as this kind's answer of one case (a class
        id, or a tuple of class ids: what a :class:`~warp_check.cases.Case` holds and a certificate
        writes); ValueError (its message without the field's name) if it states none."""

    @abc.abstractmethod
    def answers(self, stated: Sequence[Any], num_classes: int) -> np.ndarray:
        """The answers of cases (as :meth:`parse_answer` gives them) as one array, a row per case:
        what the loop slices, stacks and hands back to :meth:`margins`."""

    @abc.abstractmethod
    def answer(self, answers: np.ndarray, row: int) -> Any:
        """Row ``row`` of ``answers`` as a case holds its answer (what :meth:`parse_answer` gives)."""

    @abc.abstractmethod
    def answers_of(self, predictions: np.ndarray, num_classes: int) -> np.ndarray:
        """The answers that predictions state (a pseudo-label, a baseline's answer)."""

    # What the logits decide.
    @abc.abstractmethod
    def predict(self, logits: np.ndarray) -> np.ndarray:
        """The prediction of every row of logits."""

    @abc.abstractmethod
    def margins(self, logits: np.ndarray, answers: np.ndarray) -> Margins:
        """Every row's margin ``z[held] − z[rival]``: linear in the logits, positive when right."""

    @abc.abstractmethod
    def rivals(self, answers: np.ndarray, num_classes: int) -> np.ndarray:
        """(cases, classes) bool: the classes a case's held class must beat (a QP row, GSN's κ and
        the local radius take one margin against each)."""

    @abc.abstractmethod
    def right(self, predictions: np.ndarray, answers: np.ndarray) -> np.ndarray:
        """Per case, whether its prediction is the answer it asks for."""

    @abc.abstractmethod
    def answer_of(self, logits: Sequence[float], answer: Any) -> tuple[Any, float]:
        """(prediction, margin) of one case in plain Python, bit-identical to :meth:`predict` and
        :meth:`margins` (a warm check answers from stored logits without numpy)."""

    @abc.abstractmethod
    def torch_margin(self, logits: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        """:meth:`margins`' gap as a differentiable function of the logits (attacks descend it)."""

    @abc.abstractmethod
    def training_loss(self, logits: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        """The mean loss that training towards the answers descends (GSN-FT fine-tunes the head on it)."""

    def answers_from_logits(self, logits: np.ndarray, answers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(prediction, margin) per row: what a check reports of each case."""
        import numpy as np

        if len(answers) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        return self.predict(logits), self.margins(logits, answers).gap

    def prediction_margins(self, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(prediction, margin) per row with each prediction taken as its row's answer: how clearly
        the model decides (a pseudo-label, a traffic guard)."""
        predictions = self.predict(logits)
        return predictions, self.margins(logits, self.answers_of(predictions, logits.shape[1])).gap

    # How an answer and a prediction read.
    def classes_of(self, answer: Any) -> tuple[int, ...]:
        """The class ids a case's answer names (a model must have them all)."""
        return (int(answer),) if isinstance(answer, numbers.Integral) else tuple(sorted(answer))

    def stated(self, answer: Any, name: Callable[[int], str]) -> str:
        """A case's answer in words, ``name`` naming one class (single label: the class's name)."""
        return " or ".join(name(c) for c in self.classes_of(answer))

    def said(self, prediction: Any, name: Callable[[int], str]) -> str:
        """A prediction in words (a class id unless a kind predicts otherwise)."""
        return name(int(prediction))

    def changed(self, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        """Per row, whether two predictions differ (Cert 4 counts these)."""
        return before != after

    def regressed(self, baseline: np.ndarray, now: np.ndarray, answers: np.ndarray) -> np.ndarray:
        """Per case, whether a baseline's prediction was right and the prediction now is not."""
        return self.right(baseline, answers) & ~self.right(now, answers)

    def columns(self, prediction: Any, gap: float, names: Mapping[int, str]) -> tuple[Column, ...]:
        """What the reports show of one case's decision (``names``: class id → label name)."""
        return (
            Column(name="predicted", value=names.get(int(prediction), str(prediction))),
            Column(name="gap", value=f"{gap:.4g}"),
        )
