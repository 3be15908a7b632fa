"""Several labels per text: each label is its own yes/no decision, on when its logit is above its
threshold (Hugging Face's ``problem_type = "multi_label_classification"``: a sigmoid per label).

A case states the labels it wants on and off: ``"labels": [...]`` (exactly these on, every other
off) or a partial answer ``"on": [...]`` / ``"off": [...]`` (the rest unconstrained). Each
constrained label j is one constraint ``s_j (z_j − t_j) ≥ γ`` (s_j = +1 on, −1 off): one logit
against its threshold, linear in the logits, so every QP row, screen and certificate the loop has
takes it unchanged; a case's margin is its worst label's.

Answers are (cases, labels) int8: +1 on, −1 off, 0 unconstrained. A case holds its answer as
``(on, off)``, two sorted tuples of label ids; predictions are (cases, labels) bool.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from warp_check.decisions.base import (
    AnswerError,
    Conflict,
    Constraints,
    DecisionKind,
    LabelF1,
    LabelSpace,
    PartAnswer,
    PartChange,
)

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import torch


class MultiLabel(DecisionKind):
    """Each label on or off by its own logit; ``thresholds``: label id → logit threshold (0 where absent)."""

    name = "multi_label"
    problem_types = frozenset({"multi_label_classification"})
    answer_fields = ("labels", "on", "off")
    part_word = "label"
    change_columns = ("turned on", "turned off")

    def __init__(self, thresholds: Mapping[int, float] | None = None) -> None:
        self._thresholds: dict[int, float] = {int(k): float(v) for k, v in (thresholds or {}).items() if v != 0.0}

    @property
    def thresholds(self) -> Mapping[int, float]:
        return dict(self._thresholds)

    def bound(self, thresholds: Mapping[int, float]) -> MultiLabel:
        return MultiLabel(thresholds)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MultiLabel) and other._thresholds == self._thresholds

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted(self._thresholds.items()))))

    def __repr__(self) -> str:
        return f"MultiLabel(thresholds={self._thresholds})"

    def _t(self, num_classes: int) -> np.ndarray:
        import numpy as np

        t = np.zeros(num_classes)
        for label, value in self._thresholds.items():
            if label < num_classes:
                t[label] = value
        return t

    def threshold(self, label: int) -> float:
        return self._thresholds.get(label, 0.0)

    # What a case file states.
    def read_answer(self, fields: Mapping[str, Any], space: LabelSpace) -> tuple[tuple[int, ...], tuple[int, ...]]:
        if "label" in fields:
            raise AnswerError(
                "label",
                "states one class, but this model decides several labels per text (multi_label): give "
                '"labels": [...] (exactly these on) or "on": [...] / "off": [...]',
            )
        if "labels" in fields and ("on" in fields or "off" in fields):
            given = "on" if "on" in fields else "off"
            raise AnswerError(given, '"labels" already states every label; give "labels" or "on"/"off", not both')
        if "labels" in fields:
            on = self._ids(fields["labels"], "labels", space, empty_ok=True)
            if space.num_classes is None:
                raise AnswerError("labels", 'the model\'s label count is unknown: give "on" and "off"')
            off = tuple(c for c in range(space.num_classes) if c not in on)
            return on, off
        if "on" not in fields and "off" not in fields:
            raise AnswerError("labels", 'missing field \'labels\' (or "on" / "off"): which labels must be on?')
        on = self._ids(fields.get("on", []), "on", space, empty_ok=True)
        off = self._ids(fields.get("off", []), "off", space, empty_ok=True)
        both = sorted(set(on) & set(off))
        if both:
            raise AnswerError("off", f"label {space.name_of(both[0])} is both on and off")
        if not on and not off:
            raise AnswerError("on", "constrains no label: name at least one label on or off")
        return on, off

    def unstated(self, num_classes: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return (), (0,)

    def answer_record(self, answer: Any, name: Callable[[int], Any], num_classes: int | None) -> dict[str, Any]:
        on, off = answer
        if num_classes is not None and len(on) + len(off) == num_classes:  # every label stated: exact
            return {"labels": [name(c) for c in on]}
        return {"on": [name(c) for c in on], "off": [name(c) for c in off]}

    def parse_answer(self, value: Any, space: LabelSpace) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return self.read_answer({"labels": value}, space)

    @staticmethod
    def _ids(value: Any, field: str, space: LabelSpace, *, empty_ok: bool) -> tuple[int, ...]:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list):
            raise AnswerError(field, f"must be a list of label names or ids, got {type(value).__name__}")
        ids: set[int] = set()
        for item in value:
            if isinstance(item, str) and item not in space.names and item.strip().isdigit():
                item = int(item)  # a class id written as digits (GoEmotions' "3,27")
            try:
                ids.add(space.class_id(item))
            except ValueError as exc:
                raise AnswerError(field, str(exc)) from None
        if not ids and not empty_ok:
            raise AnswerError(field, "is empty")
        return tuple(sorted(ids))

    def answers(self, stated: Sequence[Any], num_classes: int) -> np.ndarray:
        import numpy as np

        answers = np.zeros((len(stated), num_classes), dtype=np.int8)
        for row, (on, off) in enumerate(stated):
            answers[row, list(on)] = 1
            answers[row, list(off)] = -1
        return answers

    def answer(self, answers: np.ndarray, row: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        import numpy as np

        return (
            tuple(int(c) for c in np.flatnonzero(answers[row] > 0)),
            tuple(int(c) for c in np.flatnonzero(answers[row] < 0)),
        )

    def answers_of(self, predictions: np.ndarray, num_classes: int) -> np.ndarray:
        import numpy as np

        return np.where(np.asarray(predictions, dtype=bool), 1, -1).astype(np.int8)

    # What the logits decide.
    def predict(self, logits: np.ndarray) -> np.ndarray:
        return logits > self._t(logits.shape[1])

    def constraints(self, logits: np.ndarray, answers: np.ndarray) -> Constraints:
        """One constraint per label: (z_j − t_j)·s_j, the label's logit against its threshold."""
        import numpy as np

        n, classes = logits.shape
        sign = np.asarray(answers, dtype=np.float64)
        gap = (logits - self._t(classes)) * sign
        active = sign != 0
        label = np.broadcast_to(np.arange(classes), (n, classes))
        none = np.full((n, classes), classes)
        on = sign > 0
        return Constraints(
            gap=gap,
            plus=np.where(on, label, none),
            minus=np.where(on, none, label),
            active=active,
            binding=np.argmin(np.where(active, gap, np.inf), axis=1),
        )

    def right(self, predictions: np.ndarray, answers: np.ndarray) -> np.ndarray:
        import numpy as np

        answers = np.asarray(answers)
        return np.all((answers == 0) | (np.asarray(predictions, dtype=bool) == (answers > 0)), axis=1)

    def answer_of(self, logits: Sequence[float], answer: Any) -> tuple[tuple[int, ...], float]:
        on, off = answer
        values = [float(z) for z in logits]
        predicted = tuple(j for j, z in enumerate(values) if z > self.threshold(j))
        margins = [(values[j] - self.threshold(j)) * 1.0 for j in on]
        margins += [(values[j] - self.threshold(j)) * -1.0 for j in off]
        if any(math.isnan(m) for m in margins):
            return predicted, math.nan
        return predicted, min(margins)

    def torch_margin(self, logits: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        import torch

        t = torch.as_tensor(self._t(logits.shape[1]), dtype=logits.dtype, device=logits.device)
        sign = answers.to(logits.dtype)
        gap = (logits - t) * sign
        return gap.masked_fill(answers == 0, float("inf")).min(dim=1).values

    def training_loss(self, logits: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        import torch

        t = torch.as_tensor(self._t(logits.shape[1]), dtype=logits.dtype, device=logits.device)
        weight = (answers != 0).to(logits.dtype)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            logits - t, (answers > 0).to(logits.dtype), weight=weight, reduction="sum"
        )
        return loss / weight.sum().clamp(min=1.0)

    # How an answer and a prediction read.
    def classes_of(self, answer: Any) -> tuple[int, ...]:
        on, off = answer
        return tuple(sorted((*on, *off))) or (0,)

    def stated(self, answer: Any, name: Callable[[int], str]) -> str:
        on, off = answer
        words = "on " + ", ".join(name(c) for c in on) if on else "none on"
        return (
            f"{words}; off {', '.join(name(c) for c in off)}"
            if off and len(off) <= 6
            else (f"{words}; {len(off)} off" if off else words)
        )

    def said(self, prediction: Any, name: Callable[[int], str]) -> str:
        on = self.on_labels(prediction)
        return ", ".join(name(c) for c in on) if on else "no label"

    @staticmethod
    def on_labels(prediction: Any) -> tuple[int, ...]:
        """The label ids a prediction turns on (a row of a bool array, or a tuple of ids)."""
        if isinstance(prediction, tuple):
            return prediction
        import numpy as np

        return tuple(int(c) for c in np.flatnonzero(np.asarray(prediction, dtype=bool)))

    def code(self, prediction: Any) -> int:
        """The labels a prediction turns on as a bit set: label j is bit j."""
        return sum(1 << c for c in self.on_labels(prediction))

    def decode(self, codes: Sequence[int], num_classes: int) -> np.ndarray:
        import numpy as np

        bits = np.asarray([[(int(code) >> j) & 1 for j in range(num_classes)] for code in codes], dtype=bool)
        return bits.reshape(len(codes), num_classes)

    def wrong_parts(self, prediction: Any, answer: Any) -> tuple[int, ...]:
        on_now = set(self.on_labels(prediction))
        on, off = answer
        return tuple(sorted([c for c in on if c not in on_now] + [c for c in off if c in on_now]))

    def wrong_words(self, prediction: Any, answer: Any, name: Callable[[int], str]) -> str | None:
        wrong = self.wrong_parts(prediction, answer)
        on = set(answer[0])
        missed = [name(c) for c in wrong if c in on]
        extra = [name(c) for c in wrong if c not in on]
        parts = ([f"{', '.join(missed)} should be on"] if missed else []) + (
            [f"{', '.join(extra)} should be off"] if extra else []
        )
        return "; ".join(parts) or None

    def part_answers(self, logits: Sequence[float], answer: Any) -> tuple[PartAnswer, ...]:
        """Each constrained label against its threshold, ``(z_j − t_j)·s_j``: what :meth:`answer_of`
        takes the least of."""
        on, off = answer
        values = [float(z) for z in logits]
        asked = sorted([(j, "on") for j in on] + [(j, "off") for j in off])
        return tuple(
            PartAnswer(part=j, asks=asks, gap=(values[j] - self.threshold(j)) * (1.0 if asks == "on" else -1.0))
            for j, asks in asked
        )

    def part_changes(self, before: Any, after: Any) -> tuple[PartChange, ...]:
        """Each label the change turned on (column 0), then each it turned off (column 1)."""
        was, now = set(self.on_labels(before)), set(self.on_labels(after))
        return tuple(PartChange(part=c, column=0) for c in sorted(now - was)) + tuple(
            PartChange(part=c, column=1) for c in sorted(was - now)
        )

    def change_keys(self, before: Any, after: Any, name: Callable[[int], str]) -> tuple[str, ...]:
        """Per label the change turned on or off: "+label" or "−label" (Cert 4 counts per label)."""
        return tuple(f"{'+−'[p.column]}{name(p.part)}" for p in self.part_changes(before, after))

    def changed(self, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        import numpy as np

        return np.any(np.asarray(before, dtype=bool) != np.asarray(after, dtype=bool), axis=1)

    def regressed(self, baseline: np.ndarray, now: np.ndarray, answers: np.ndarray) -> np.ndarray:
        """A label decision the baseline had right and the model now has wrong."""
        import numpy as np

        answers = np.asarray(answers)
        want = answers > 0
        base_right = np.asarray(baseline, dtype=bool) == want
        now_right = np.asarray(now, dtype=bool) == want
        return np.any((answers != 0) & base_right & ~now_right, axis=1)

    # Two answers asked of one input, and how well predictions answer many.
    def conflict(self, first: Any, later: Any, name: Callable[[int], str], num_classes: int | None) -> Conflict | None:
        """A label one answer wants on and the other off: two partial answers that constrain different
        labels (``"on": [a]`` and ``"off": [b]``) ask for one prediction that has both."""
        (on_first, off_first), (on_later, off_later) = first, later
        clash = sorted((set(on_first) & set(off_later)) | (set(off_first) & set(on_later)))
        if not clash:
            return None
        if num_classes is not None and len(on_later) + len(off_later) == num_classes:
            field = "labels"  # every label stated: the case file gave "labels"
        else:
            field = "on" if clash[0] in on_later else "off"
        words = ", ".join(name(c) for c in clash)
        said = f"label {words} is" if len(clash) == 1 else f"labels {words} are"
        return Conflict(field=field, reason=f"{said} on in one and off in the other")

    def label_f1(self, predictions: np.ndarray, answers: np.ndarray) -> LabelF1:
        """Over the constrained label decisions: a label stated on is a positive, one stated off a negative."""
        import numpy as np

        predicted, answers = np.asarray(predictions, dtype=bool), np.asarray(answers)
        on = answers > 0
        tp = (predicted & on).sum(axis=0)
        wrong = (predicted & (answers < 0)).sum(axis=0) + (~predicted & on).sum(axis=0)
        micro = 2 * tp.sum() / max(2 * tp.sum() + wrong.sum(), 1)
        per_label = np.where(2 * tp + wrong > 0, 2 * tp / np.maximum(2 * tp + wrong, 1), 0.0)
        return LabelF1(micro=float(micro), macro=float(per_label.mean()) if per_label.size else 0.0)
