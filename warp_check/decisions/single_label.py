"""The single-label decision: the prediction is the first largest logit, a case states one class,
and its margin is ``z_y − max_{c≠y} z_c`` against the strongest other class."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from warp_check.decisions.base import Constraints, DecisionKind, LabelSpace, Margins

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import torch


class SingleLabel(DecisionKind):
    """One class per case: answers are class ids (int64, one per case)."""

    name = "single_label"
    problem_types = frozenset({None, "single_label_classification"})

    def parse_answer(self, value: Any, space: LabelSpace) -> int:
        return space.class_id(value)

    def answers(self, stated: Sequence[Any], num_classes: int) -> np.ndarray:
        import numpy as np

        return np.array(stated, dtype=np.int64)

    def answer(self, answers: np.ndarray, row: int) -> int:
        return int(answers[row])

    def answers_of(self, predictions: np.ndarray, num_classes: int) -> np.ndarray:
        import numpy as np

        return np.asarray(predictions, dtype=np.int64)

    def predict(self, logits: np.ndarray) -> np.ndarray:
        import numpy as np

        return np.argmax(logits, axis=1)

    def margins(self, logits: np.ndarray, answers: np.ndarray) -> Margins:
        import numpy as np

        labels = np.asarray(answers, dtype=np.int64)
        rows = np.arange(logits.shape[0])
        others = logits.copy()
        others[rows, labels] = -np.inf
        competitor = np.argmax(others, axis=1)
        return Margins(gap=logits[rows, labels] - others[rows, competitor], held=labels, rival=competitor)

    def constraints(self, logits: np.ndarray, answers: np.ndarray) -> Constraints:
        """One constraint per class: ``z_y − z_c`` for every c ≠ y (K = C), the strongest rival binding."""
        import numpy as np

        labels = np.asarray(answers, dtype=np.int64)
        n, classes = logits.shape
        rows = np.arange(n)
        others = logits.copy()
        others[rows, labels] = -np.inf
        return Constraints(
            gap=logits[rows, labels][:, None] - logits,
            plus=np.broadcast_to(labels[:, None], (n, classes)),
            minus=np.broadcast_to(np.arange(classes), (n, classes)),
            active=np.arange(classes)[None, :] != labels[:, None],
            binding=np.argmax(others, axis=1),
        )

    def right(self, predictions: np.ndarray, answers: np.ndarray) -> np.ndarray:
        return predictions == answers

    def answer_of(self, logits: Sequence[float], answer: Any) -> tuple[int, float]:
        """The first largest logit (NaN counts as largest, as in ``numpy.argmax``), and the label's
        logit minus the largest other one (NaN if any of them is NaN)."""
        values = [float(z) for z in logits]

        def first_largest(indices: Sequence[int]) -> int:
            best = indices[0]
            for i in indices:
                if math.isnan(values[i]):
                    return i
                if values[i] > values[best]:
                    best = i
            return best

        competitor = first_largest([i for i in range(len(values)) if i != answer])
        return first_largest(range(len(values))), values[answer] - values[competitor]

    def torch_margin(self, logits: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        own = logits.gather(1, answers[:, None])[:, 0]
        masked = logits.scatter(1, answers[:, None], float("-inf"))
        return own - masked.max(dim=1).values

    def training_loss(self, logits: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        import torch

        return torch.nn.functional.cross_entropy(logits, answers)
