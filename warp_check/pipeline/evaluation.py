"""A suite's cases through the model: each case's v at the repair layer, prediction and gap.

Every job starts here (checking, repairing, comparing); the representation cache makes a second
evaluation of the same inputs a lookup.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from warp_check.cases import Case, Kind
from warp_check.decisions import SINGLE_LABEL, DecisionKind
from warp_check.errors import ModelError
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.encode import Encoded, encode_cases
from warp_check.progress import Progress
from warp_check.repair.records import CaseSet


@dataclass(frozen=True)
class Evaluation:
    """The model's answer on each case: prediction, gap to its label, cached v."""

    cases: tuple[Case, ...]
    encoded: Encoded
    predictions: np.ndarray
    gaps: np.ndarray
    logits: np.ndarray  # float64, (cases, classes): what a warm entry remembers (warp_check.cache.warm)
    seconds: float = 0.0  # encoding and the head's answers
    decision: DecisionKind = SINGLE_LABEL  # what the logits decide, and what a case's label states

    def subset(self, rows: Sequence[int]) -> Evaluation:
        """These rows of the evaluation, in this order."""
        rows = list(rows)
        encoded, keys = self.encoded, self.encoded.input_keys
        return Evaluation(
            tuple(self.cases[i] for i in rows),
            replace(
                encoded,
                ids=tuple(encoded.ids[i] for i in rows),
                V=encoded.V[rows],
                input_keys=tuple(keys[i] for i in rows) if keys else (),
            ),
            self.predictions[rows],
            self.gaps[rows],
            self.logits[rows],
            self.seconds,
            self.decision,
        )

    def joined(self, other: Evaluation | None) -> Evaluation:
        """This evaluation's cases, then ``other``'s (encoded by the same model)."""
        if other is None:
            return self
        a, b = self.encoded, other.encoded
        encoded = replace(
            a,
            ids=a.ids + b.ids,
            V=np.concatenate([a.V, b.V]),
            from_cache=a.from_cache + b.from_cache,
            encoded=a.encoded + b.encoded,
            input_keys=a.input_keys + b.input_keys if a.input_keys and b.input_keys else (),
        )
        return Evaluation(
            self.cases + other.cases,
            encoded,
            np.concatenate([self.predictions, other.predictions]),
            np.concatenate([self.gaps, other.gaps]),
            np.concatenate([self.logits, other.logits]),
            self.seconds + other.seconds,
            self.decision,
        )

    def case_set(self, kind: Kind) -> CaseSet:
        """The cases of ``kind`` as the repair loop takes them; v as encoded (float32: exact, and half
        the memory of a float64 copy; the loop computes in float64)."""
        rows = [i for i, c in enumerate(self.cases) if c.kind is kind]
        chosen = [self.cases[i] for i in rows]
        return CaseSet(tuple(c.id for c in chosen), self.encoded.V[rows], self.answers(chosen))

    def answers(self, cases: Sequence[Case]) -> np.ndarray:
        """The answers ``cases`` ask for, as the model's kind of decision holds them (a row per case)."""
        return self.decision.answers([c.label for c in cases], self.logits.shape[1])


def evaluate(
    adapter: ClassifierAdapter,
    cases: Sequence[Case],
    *,
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = True,
) -> Evaluation:
    start = time.perf_counter()
    num_classes, decision = adapter.num_classes, adapter.decision
    for case in cases:
        if max(decision.classes_of(case.label)) >= num_classes:
            raise ValueError(f"case {case.id!r}: label {case.label} out of range for {num_classes} classes")
    encoded = encode_cases(adapter, cases, batch_size=batch_size, cache_dir=cache_dir, progress=progress)
    bad = [case.id for case, row in zip(cases, encoded.V, strict=True) if not np.isfinite(row).all()]
    if bad:
        shown = ", ".join(repr(i) for i in bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise ModelError(
            f"the encoder gives NaN/Inf representations at '{adapter.spec.repair_layer}' for {len(bad)} case(s) "
            f"({shown}): the model overflows on these inputs; nothing can be checked or repaired on them"
        )
    answers = decision.answers([c.label for c in cases], num_classes)
    head = adapter.head()
    logits = head.logits(encoded.V.astype(np.float64))
    predictions, gaps = decision.answers_from_logits(logits, answers)
    return Evaluation(tuple(cases), encoded, predictions, gaps, logits, time.perf_counter() - start, decision)
