"""What a kind of decision is: how a classifier's logits answer a case, and by how much.

A kind (:class:`DecisionKind`) owns everything that follows from "what the model decides": the
prediction from a row of logits, how a case file states the expected answer, the margins that a
repair lifts and a certificate bounds, what "changed" means between two predictions (Cert 4), what
a regression against a baseline is, and how a prediction and an answer read. Everything else (the
loop, the QP, screening, the certificates' bounds) sees only what a kind returns: per case, its
*constraints* (:class:`Constraints`), each a margin ``z[plus] − z[minus] + offset`` that a right
answer keeps positive, a direction ``e_plus − e_minus`` in logit space (so a QP row's
``c = Uᵀ J (W_c[plus] − W_c[minus])``); index ``num_classes`` names no class (a zero logit), so one
logit held against a threshold is a constraint too. A case's margin is its smallest constraint's.

Answers are arrays with one row per case (the kind says their shape and dtype), so the loop slices,
stacks and orders them without knowing what they mean. Standard library only at import: a warm
check answers in pure Python (:meth:`DecisionKind.answer_of`); numpy is imported where arrays are.
"""

from __future__ import annotations

import abc
import difflib
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import torch


def logit_of(probability: float) -> float:
    """The logit threshold of a probability threshold: σ(z) > p ⇔ z > log(p / (1 − p))."""
    return math.log(probability) - math.log1p(-probability)


class AnswerError(ValueError):
    """A case file's answer is wrong: which field, and why (the message, without the field's name)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, kw_only=True)
class Margins:
    """Per case, the margin (a positive one is a right answer) and the constraint it is: ``gap =
    z[held] − z[rival] + offset``, ``held`` or ``rival`` ``num_classes`` where it names no class."""

    gap: np.ndarray
    held: np.ndarray  # the class whose logit the answer holds on to (single label: the label)
    rival: np.ndarray  # the strongest class that would make the answer wrong


@dataclass(frozen=True, kw_only=True)
class Constraints:
    """Per case (rows) and constraint (columns, as many for every case), what its answer asks:
    ``gap[i, k] = z[plus[i, k]] − z[minus[i, k]] + offset`` must stay positive where ``active``.

    A class index of ``num_classes`` names no class (its logit is zero): ``plus = j, minus = C`` is
    "logit j above its threshold", the offset being minus the threshold. ``binding`` is, per case, the
    constraint whose gap is its margin (:meth:`DecisionKind.margins`)."""

    gap: np.ndarray  # (cases, K) float; undefined where not active
    plus: np.ndarray  # (cases, K) int in 0..num_classes
    minus: np.ndarray  # (cases, K) int in 0..num_classes
    active: np.ndarray  # (cases, K) bool
    binding: np.ndarray  # (cases,) int: the active constraint with the smallest gap

    def margins(self) -> Margins:
        """The binding constraint of every case, as :class:`Margins`."""
        import numpy as np

        rows = np.arange(self.gap.shape[0])
        k = self.binding
        return Margins(gap=self.gap[rows, k], held=self.plus[rows, k], rival=self.minus[rows, k])

    def rows(self, index: Any) -> Constraints:
        """The constraints of the cases ``index`` selects."""
        return Constraints(
            gap=self.gap[index],
            plus=self.plus[index],
            minus=self.minus[index],
            active=self.active[index],
            binding=self.binding[index],
        )


@dataclass(frozen=True, kw_only=True)
class PartAnswer:
    """One part of a case's answer, where a kind decides several things at once (a label of a
    multi-label case), and the model's answer to it: ``gap`` is positive when right."""

    part: int  # the class id the part is about
    asks: str  # what the case asks of it, in a word ("on", "off")
    gap: float


@dataclass(frozen=True, kw_only=True)
class PartChange:
    """What one changed prediction does to one part, for Cert 4's per-part counts: ``column`` indexes
    the kind's :attr:`DecisionKind.change_columns` (several labels: turned on, turned off)."""

    part: int
    column: int


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

    def name_of(self, class_id: int) -> str:
        """A class id as a case file would name it: its label name where it has one."""
        return next((repr(n) for n, i in self.names.items() if i == class_id), str(class_id))

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

    # Where an answer is several decisions, each with its own margin (:meth:`part_answers`): what one
    # is called (a report's per-part table, a JUnit property per part: "label") and the columns Cert 4's
    # changes on traffic count each part under. None: an answer is one decision, with no parts.
    part_word: ClassVar[str | None] = None
    change_columns: ClassVar[tuple[str, ...]] = ()

    # The case-file fields that state an answer: a case file's reader knows every registered kind's,
    # and a case giving another kind's fields is told which ones this model's kind reads.
    answer_fields: ClassVar[tuple[str, ...]] = ("label",)

    # What a case file states.
    def read_answer(self, fields: Mapping[str, Any], space: LabelSpace) -> Any:
        """The answer a case states in its answer fields (those of any kind's ``answer_fields`` it
        gives); :class:`AnswerError` names the field and says why not. The default reads ``label``."""
        if "label" not in fields:
            given = next(iter(fields), None)
            if given is None:
                raise AnswerError("label", "missing field 'label'")
            raise AnswerError(given, f'states another kind of answer; this model decides {self.name}: give "label"')
        try:
            return self.parse_answer(fields["label"], space)
        except AnswerError:
            raise
        except ValueError as exc:
            raise AnswerError("label", str(exc)) from None

    @property
    def thresholds(self) -> Mapping[int, float]:
        """Per class id, the logit threshold the kind decides by, where it has any (none: every 0)."""
        return {}

    def unstated(self, num_classes: int) -> Any:
        """An answer for an input nobody labelled (traffic, text to label by the model): the encoder
        takes cases, and nothing is measured against this one. Single label: class 0."""
        return 0

    def answer_of_prediction(self, prediction: Any, num_classes: int) -> Any:
        """The answer a prediction states, as a case holds it (a pseudo-label)."""
        import numpy as np

        return self.answer(self.answers_of(np.asarray([prediction]), num_classes), 0)

    def answer_record(self, answer: Any, name: Callable[[int], Any], num_classes: int | None) -> dict[str, Any]:
        """The case-file fields that state ``answer`` (what :meth:`read_answer` reads back), ``name``
        naming one class as a case file does (its label name, or its id)."""
        if isinstance(answer, numbers.Integral):
            return {"label": name(int(answer))}
        return {"label": [name(c) for c in self.classes_of(answer)]}

    def bound(self, thresholds: Mapping[int, float]) -> DecisionKind:
        """This kind deciding with per-class thresholds (``[model] thresholds``), where it has any."""
        raise ValueError(f"{self.name} decides without thresholds: leave [model] thresholds out")

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

    def margins(self, logits: np.ndarray, answers: np.ndarray) -> Margins:
        """Every row's margin, its binding constraint's gap: positive when right. A kind may compute
        it without the whole (cases, K) table; it must then equal ``constraints(...).margins()``."""
        return self.constraints(logits, answers).margins()

    @abc.abstractmethod
    def constraints(self, logits: np.ndarray, answers: np.ndarray) -> Constraints:
        """Every constraint of every case (a QP row, GSN's κ and the local radius take one margin
        each); its binding one is what :meth:`margins` returns."""

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

    def code(self, prediction: Any) -> int:
        """One prediction as the integer a record keeps (single label: its class id)."""
        return int(prediction)

    def decode(self, codes: Sequence[int], num_classes: int) -> np.ndarray:
        """Predictions as :meth:`predict` gives them, from the integers :meth:`code` made."""
        import numpy as np

        return np.asarray(codes, dtype=np.int64)

    def wrong_parts(self, prediction: Any, answer: Any) -> tuple[int, ...]:
        """Where a kind decides several things at once, the ones a prediction gets wrong (class ids:
        a regression is one the baseline had right); () where the prediction is one thing."""
        return ()

    def wrong_words(self, prediction: Any, answer: Any, name: Callable[[int], str]) -> str | None:
        """Where a wrong prediction departs from the answer, in words, where a kind decides several
        things at once (None: the prediction and the answer say it all)."""
        return None

    def part_answers(self, logits: Sequence[float], answer: Any) -> tuple[PartAnswer, ...]:
        """Where a kind decides several things at once (a :attr:`part_word`), each part the case's
        answer constrains, in class order, with its margin on one row of logits (plain Python, like
        :meth:`answer_of`); () where the answer is one decision (its gap is the case's)."""
        return ()

    def part_changes(self, before: Any, after: Any) -> tuple[PartChange, ...]:
        """Which parts one changed prediction counts under in a report's per-part table, and in which
        of :attr:`change_columns` (() where the kind has no such table)."""
        return ()

    def change_keys(self, before: Any, after: Any, name: Callable[[int], str]) -> tuple[str, ...]:
        """What one changed prediction counts under in Cert 4's tally (single label: "before→after")."""
        return (f"{self.said(before, name)}→{self.said(after, name)}",)

    def changed(self, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        """Per row, whether two predictions differ (Cert 4 counts these)."""
        return before != after

    # Cert 4 on traffic: the rows a traffic text is predicted on, and how the sample's draws changed.
    def traffic_rows(self, texts: Sequence[tuple[str, str]]) -> tuple[TrafficRow, ...] | None:
        """Where a kind decides parts of a text, the rows traffic texts, each (its case id, its text),
        are predicted on; None: each text is one row, and its own draw."""
        return None

    def traffic_count(self, changed_rows: np.ndarray, draw_of: np.ndarray) -> TrafficCount:
        """How a repair changed a traffic sample, from the rows it changed (indices) and, per row, the
        index of its text (the sample's independent draw): by default a text is one row."""
        return TrafficCount(draws_changed=len(changed_rows), rows=None, rows_changed=None)

    def regressed(self, baseline: np.ndarray, now: np.ndarray, answers: np.ndarray) -> np.ndarray:
        """Per case, whether a baseline's prediction was right and the prediction now is not."""
        return self.right(baseline, answers) & ~self.right(now, answers)

    # Two answers asked of one input, and how well predictions answer many (issue 57).
    def conflict(self, first: Any, later: Any, name: Callable[[int], str], num_classes: int | None) -> Conflict | None:
        """Why no prediction answers both ``first`` and ``later``, two cases the model sees as one input
        (None: one can), ``name`` naming one class as a case file does. By default two answers conflict
        when they differ (single label: two classes)."""
        if first == later:
            return None
        return Conflict(field=self.answer_fields[0], reason=None)

    def label_f1(self, predictions: np.ndarray, answers: np.ndarray) -> LabelF1 | None:
        """Micro and macro F1 of the label decisions the answers state, where a kind decides several
        labels per text (None: a kind that decides one thing per text, scored by accuracy alone)."""
        return None

    # A decision per word (a token classifier): each row a suite reads is one word of a sentence.
    per_word: ClassVar[bool] = False  # a row's text is its sentence with the word it decides marked
    # What a message counts, plural: a row a suite reads, a case (the rows one pytest item decides), a
    # traffic text; and a share of traffic changed, in words (``share``: "2 %").
    row_nouns: ClassVar[str] = "cases"
    case_nouns: ClassVar[str] = "cases"
    text_nouns: ClassVar[str] = "texts"
    changes_share: ClassVar[str] = "changes at most {share} of predictions"
    # Hugging Face architectures this kind decides, by how their names end (None: by problem_type).
    architecture_suffix: ClassVar[str | None] = None

    def decides_architecture(self, architectures: Sequence[Any]) -> bool:
        """Whether a config's ``architectures`` name a head of this kind."""
        suffix = self.architecture_suffix
        return suffix is not None and any(isinstance(a, str) and a.endswith(suffix) for a in architectures)

    def word_of(self, text: str) -> tuple[tuple[str, ...], int] | None:
        """Where a kind decides per word, a row's words and the index of the word it decides
        (ValueError: the text marks no word); None where a kind decides whole texts."""
        return None

    def group(self, case_id: str) -> str:
        """The id of the verdict a case's row is part of (a pytest item): a whole-text kind's case is its
        own; a per-word kind's rows are their sentence's."""
        return case_id

    def subject(self, text: str) -> str | None:
        """Where a kind decides a part of a text, the part a row's text decides, in words (a verdict
        names it); None where it decides the whole text."""
        return None


@dataclass(frozen=True, kw_only=True)
class TrafficRow:
    """A row a traffic text is predicted on, where a kind predicts several per text: the index of its
    text (the sample's draw it belongs to), and its case id and text as the encoder takes them."""

    draw: int
    id: str
    text: str


@dataclass(frozen=True, kw_only=True)
class TrafficCount:
    """What a repair changed on a traffic sample: the texts (its draws, what Cert 4 bounds) with any
    changed prediction and, where a kind predicts several rows per text, the rows measured and changed
    (None where a text is one row)."""

    draws_changed: int
    rows: int | None
    rows_changed: int | None


@dataclass(frozen=True, kw_only=True)
class Conflict:
    """Why two answers of one input cannot both hold: the case-file field of the later case that
    states the clash, and the clash in words (None: the two answers, stated, say it all)."""

    field: str
    reason: str | None


@dataclass(frozen=True, kw_only=True)
class LabelF1:
    """F1 over label decisions: micro (every (text, label) decision pooled) and macro (the mean of the
    labels' own F1; a label neither stated on nor predicted on scores 0)."""

    micro: float
    macro: float
