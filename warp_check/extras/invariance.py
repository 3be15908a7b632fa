"""CheckList-style invariance (INV) and directional (DIR) assertions for ordinary pytest tests.

Use with a strategy from :mod:`warp_check.perturb` inside ``@given``. A failure raises
:class:`InvarianceFailure` (an ``AssertionError``) naming both texts, so hypothesis shrinks it and
reports the smallest variant; the exception carries that variant as a :class:`Counterexample`,
which :func:`record_counterexamples` appends to a suite's case file as a must_fix case (what
``pytest --warp-record FILE.jsonl`` does with the final, shrunk example of each failing test).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from warp_check.cases import Kind, label_id
from warp_check.decisions import SINGLE_LABEL, DecisionKind

if TYPE_CHECKING:
    from warp_check.model.adapter import ClassifierAdapter
    from warp_check.suite.casefile import AppendResult, NewCase

Predict = Callable[[list[str]], Sequence[int]]
PredictScores = Callable[[list[str]], "np.ndarray | Sequence[Sequence[float]]"]


@dataclass(frozen=True, kw_only=True)
class Counterexample:
    """A text the model labels wrongly, by an INV/DIR check: ``label`` is what it should get."""

    text: str
    label: int
    original: str  # the text the check started from
    check: str  # "same_label" or "moves_toward"
    original_id: str | None = None  # the original's case id, when the test said it


class InvarianceFailure(AssertionError):
    """An INV/DIR check failed. ``counterexample`` is the case to fix, or None when the failure
    says nothing about the variant's right label (a DIR check from an original of another label)."""

    def __init__(self, message: str, counterexample: Counterexample | None) -> None:
        super().__init__(message)
        self.counterexample = counterexample

    def __reduce__(self):
        return (type(self), (self.args[0], self.counterexample))


def _logits(adapter: ClassifierAdapter, texts: list[str], batch_size: int) -> np.ndarray:
    # No cache: variants are new texts every call, a cache would only grow.
    rows = [
        adapter.forward_batch(adapter.tokenize(texts[i : i + batch_size]))[1] for i in range(0, len(texts), batch_size)
    ]
    return np.concatenate(rows) if rows else np.zeros((0, adapter.num_classes))


@dataclass(frozen=True)
class _Predictor:
    """``texts -> labels``, knowing the model's label names (``labels``: name → class id)."""

    adapter: ClassifierAdapter
    batch_size: int

    @property
    def labels(self) -> dict[str, int]:
        return self.adapter.labels

    @cached_property
    def decision(self) -> DecisionKind:
        return self.adapter.head().decision

    def __call__(self, texts: list[str]) -> list[int]:
        return [int(k) for k in self.decision.predict(_logits(self.adapter, list(texts), self.batch_size))]


@dataclass(frozen=True)
class _Scorer(_Predictor):
    """``texts -> (n, classes) softmax probabilities``, knowing the model's label names."""

    def __call__(self, texts: list[str]) -> np.ndarray:  # type: ignore[override]
        logits = _logits(self.adapter, list(texts), self.batch_size).astype(np.float64)
        z = np.exp(logits - logits.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)


def predictor(adapter: ClassifierAdapter, *, batch_size: int = 32) -> Callable[[list[str]], list[int]]:
    """``texts -> labels``: the adapter's argmax prediction for each text. It knows the model's label
    names, so the assertions below take ``label="positive"`` with it."""
    return _Predictor(adapter, batch_size)


def scorer(adapter: ClassifierAdapter, *, batch_size: int = 32) -> Callable[[list[str]], np.ndarray]:
    """``texts -> (n, classes) softmax probabilities``: the scores :func:`assert_moves_toward` compares."""
    return _Scorer(adapter, batch_size)


def _two(result, what: str) -> list:
    rows = list(result)
    if len(rows) != 2:
        raise ValueError(f"{what} returned {len(rows)} results for 2 texts; it must return one per text")
    return rows


def _class_id(label: object, model: object) -> int:
    """The class id ``label`` gives: an id, or a name the model (``predictor``/``scorer``) knows."""
    if isinstance(label, str):
        labels = getattr(model, "labels", None)
        if labels is None:
            raise ValueError(
                f"label={label!r}: a label name needs the model's names: pass warp_check.predictor(adapter) or "
                "scorer(adapter), which know them, or give the class id"
            )
        return label_id(label, labels)
    if isinstance(label, bool) or not isinstance(label, (int, np.integer)) or label < 0:
        raise ValueError(f"label={label!r}: must be a label name or a class id (an int >= 0)")
    return int(label)


def assert_same_label(
    predict: Predict,
    original: str,
    variant: str,
    *,
    label: int | str | None = None,
    original_id: str | None = None,
) -> None:
    """INV: ``predict`` gives ``variant`` the same label as ``original``.

    With ``label`` (the original's true class id, or its name where ``predict`` is a
    :func:`predictor`), both must get ``label``: a model that already
    gets the original wrong fails on the original itself (hypothesis then shrinks to it), and a
    recorded counterexample never carries the model's mistake as its label. Without it, the
    original's predicted label is the expected one. ``original_id`` (the original's case id in a
    suite) goes into a recorded case's ``original`` field.
    """
    wanted = None if label is None else _class_id(label, predict)
    before, after = (int(k) for k in _two(predict([original, variant]), "predict"))
    expected = before if wanted is None else wanted

    def case(text: str) -> Counterexample:
        return Counterexample(text=text, label=expected, original=original, check="same_label", original_id=original_id)

    if before != expected:
        raise InvarianceFailure(
            f"the original itself gets label {before}, not the expected {expected}: {original!r}",
            case(original),
        )
    if after != expected:
        raise InvarianceFailure(
            f"label changed under perturbation: {before} -> {after}\n"
            f"  original (label {before}): {original!r}\n"
            f"  variant  (label {after}): {variant!r}",
            case(variant),
        )


def assert_moves_toward(
    predict_scores: PredictScores,
    original: str,
    variant: str,
    label: int | str,
    *,
    tolerance: float = 0.0,
    original_id: str | None = None,
) -> None:
    """DIR: the variant's score for ``label`` is not lower than the original's (minus ``tolerance``).

    A failure is a must_fix case (the variant, labelled ``label``) only when the original's top
    class is ``label``: a variant moved further toward the label the original already has should
    have it too. From an original of another class, the variant's right label is unknown.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance={tolerance!r}: must be >= 0")
    label = _class_id(label, predict_scores)  # a name where predict_scores is a scorer()
    before, after = (np.asarray(row, dtype=np.float64) for row in _two(predict_scores([original, variant]), "scores"))
    if not 0 <= label < before.shape[-1]:
        raise ValueError(f"label={label!r}: out of range for {before.shape[-1]} classes")
    drop = float(before[label] - after[label])
    if drop > tolerance:
        top = int(SINGLE_LABEL.predict(before[None, :])[0])  # a label's scores: one class decides
        found = None
        why = f"\n  not a must_fix case: the original's top class is {top}, not {label}"
        if top == label:
            found = Counterexample(
                text=variant, label=int(label), original=original, check="moves_toward", original_id=original_id
            )
            why = ""
        raise InvarianceFailure(
            f"score for label {label} fell by {drop:.4g} (tolerance {tolerance:g}) under perturbation\n"
            f"  original (score {before[label]:.4g}): {original!r}\n"
            f"  variant  (score {after[label]:.4g}): {variant!r}{why}",
            found,
        )


def counterexamples(error: BaseException) -> list[Counterexample]:
    """The counterexamples ``error`` carries: its own, or those of the exceptions it groups
    (hypothesis raises an exception group when a test has several distinct failures)."""
    found: list[Counterexample] = []
    pending = [error]
    while pending:
        current = pending.pop(0)
        if isinstance(current, InvarianceFailure) and current.counterexample is not None:
            if current.counterexample not in found:
                found.append(current.counterexample)
        grouped = getattr(current, "exceptions", None)
        if isinstance(grouped, (tuple, list)):
            pending.extend(e for e in grouped if isinstance(e, BaseException))
    return found


def as_new_cases(found: Iterable[Counterexample], *, source: str) -> list[NewCase]:
    """must_fix cases for a suite; ``original`` is the original's id when known, else its text."""
    from warp_check.suite.casefile import NewCase

    cases = []
    for c in found:
        if c.text.strip():  # a case needs text; a perturbation that erased it is no case
            cases.append(NewCase(text=c.text, label=c.label, source=source, original=c.original_id or c.original))
    return cases


def record_counterexamples(
    path: str | Path, error: BaseException, *, source: str, id_prefix: str = "inv"
) -> AppendResult | None:
    """Append the counterexamples ``error`` carries to the JSONL case file ``path`` (created if
    needed; deduplicated by text, atomic, safe for concurrent writers); None when it carries none.
    What would be written is read first by the loader's rules (:func:`~warp_check.suite.casefile.file_check`:
    with the suite that lists the file, where one does): a line the suite would refuse is refused here,
    and the file stays as it was."""
    from warp_check.suite.casefile import append_cases, file_check

    cases = as_new_cases(counterexamples(error), source=source)
    if not cases:
        return None
    return append_cases(path, cases, id_prefix=id_prefix, check=file_check(path, kind=Kind.MUST_FIX))
