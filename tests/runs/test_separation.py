"""The pair of cases that explains a final-linear repair's stall: the least weight that meets both
margins, measured against the layer's own."""

from __future__ import annotations

import numpy as np
import pytest

from warp_check.pipeline.separation import hardest_pair
from warp_check.repair.records import Miss

W = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]])  # ‖w0 − w1‖ = √2, ‖w0 − w2‖ = √5


def test_the_closest_pair_with_other_labels_bounds_the_weight_both_margins_need():
    V = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 1.01], [3.0, -2.0, 0.0], [1.0, 1.0, 1.02]])
    labels = np.array([0, 1, 1, 2])
    targets = np.array([1.0, 0.3, 0.3, 0.3])
    pair = hardest_pair(W, V, labels, targets, ("fix", "near", "far", "other"), [Miss("fix", "must_fix", -0.2, 1.0)])
    assert pair is not None and (pair.first, pair.second) == ("fix", "near")  # 1.3/(0.01·√2) beats 1.3/(0.02·√5)
    assert pair.distance == pytest.approx(0.01) and pair.norm == pytest.approx(np.sqrt(3))
    assert pair.needed == pytest.approx(130.0) and pair.current == pytest.approx(np.sqrt(2))
    assert pair.growth == pytest.approx(130.0 / np.sqrt(2))
    said = pair.describe("score", {0: "negative", 1: "positive"})
    assert "'fix' (negative) and 'near' (positive) are 0.01 apart at the input of 'score' (0.58 % of ‖v‖)" in said
    assert "grow from 1.41 to at least 130 (×91.9)" in said


def test_one_point_with_two_labels_needs_what_no_weight_gives():
    V = np.array([[0.5, 0.2, 0.1], [0.5, 0.2, 0.1], [0.0, 1.0, 0.0]])
    pair = hardest_pair(W, V, np.array([0, 1, 0]), np.full(3, 0.3), ("a", "b", "c"), [Miss("b", "must_keep", 0.1, 0.3)])
    assert pair is not None and {pair.first, pair.second} == {"a", "b"}
    assert pair.distance == 0 and pair.needed == np.inf and pair.growth == np.inf
    assert "are one point at the input of 'score' (the same v): no change of that layer meets both" in pair.describe(
        "score", {}
    )


def test_no_pair_without_a_miss_or_a_second_label():
    V = np.eye(3)
    miss = [Miss("a", "must_fix", 0.0, 1.0)]
    assert hardest_pair(W, V, np.array([0, 1, 2]), np.ones(3), ("a", "b", "c"), []) is None
    assert hardest_pair(W, V, np.array([1, 1, 1]), np.ones(3), ("a", "b", "c"), miss) is None
