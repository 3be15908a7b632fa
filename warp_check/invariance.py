"""CheckList-style invariance (INV) and directional (DIR) assertions for ordinary pytest tests.

Use with a strategy from :mod:`warp_check.strategies` inside ``@given``; a failure raises
``AssertionError`` naming both texts, so hypothesis shrinks it and reports the smallest variant.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .model import ClassifierAdapter

Predict = Callable[[list[str]], Sequence[int]]
PredictScores = Callable[[list[str]], "np.ndarray | Sequence[Sequence[float]]"]


def _logits(adapter: ClassifierAdapter, texts: list[str], batch_size: int) -> np.ndarray:
    # No cache: variants are new texts every call, a cache would only grow.
    rows = [
        adapter.forward_batch(adapter.tokenize(texts[i : i + batch_size]))[1] for i in range(0, len(texts), batch_size)
    ]
    return np.concatenate(rows) if rows else np.zeros((0, adapter.classifier.out_features))


def predictor(adapter: ClassifierAdapter, *, batch_size: int = 32) -> Callable[[list[str]], list[int]]:
    """``texts -> labels``: the adapter's argmax prediction for each text."""
    return lambda texts: [int(k) for k in _logits(adapter, list(texts), batch_size).argmax(axis=1)]


def scorer(adapter: ClassifierAdapter, *, batch_size: int = 32) -> Callable[[list[str]], np.ndarray]:
    """``texts -> (n, classes) softmax probabilities``: the scores :func:`assert_moves_toward` compares."""

    def scores(texts: list[str]) -> np.ndarray:
        logits = _logits(adapter, list(texts), batch_size).astype(np.float64)
        z = np.exp(logits - logits.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)

    return scores


def _two(result, what: str) -> list:
    rows = list(result)
    if len(rows) != 2:
        raise ValueError(f"{what} returned {len(rows)} results for 2 texts; it must return one per text")
    return rows


def assert_same_label(predict: Predict, original: str, variant: str) -> None:
    """INV: ``predict`` gives ``variant`` the same label as ``original``."""
    before, after = _two(predict([original, variant]), "predict")
    if int(before) != int(after):
        raise AssertionError(
            f"label changed under perturbation: {int(before)} -> {int(after)}\n"
            f"  original (label {int(before)}): {original!r}\n"
            f"  variant  (label {int(after)}): {variant!r}"
        )


def assert_moves_toward(
    predict_scores: PredictScores, original: str, variant: str, label: int, *, tolerance: float = 0.0
) -> None:
    """DIR: the variant's score for ``label`` is not lower than the original's (minus ``tolerance``)."""
    if tolerance < 0:
        raise ValueError(f"tolerance={tolerance!r}: must be >= 0")
    before, after = (np.asarray(row, dtype=np.float64) for row in _two(predict_scores([original, variant]), "scores"))
    if not 0 <= label < before.shape[-1]:
        raise ValueError(f"label={label!r}: out of range for {before.shape[-1]} classes")
    drop = float(before[label] - after[label])
    if drop > tolerance:
        raise AssertionError(
            f"score for label {label} fell by {drop:.4g} (tolerance {tolerance:g}) under perturbation\n"
            f"  original (score {before[label]:.4g}): {original!r}\n"
            f"  variant  (score {after[label]:.4g}): {variant!r}"
        )
