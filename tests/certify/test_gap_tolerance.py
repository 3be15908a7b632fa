"""How far an audit's recomputed gap may sit from the certificate's (``gap_tolerances``).

A half-precision upstream gives v to about three digits, and another device's kernels (or another
batch shape on a GPU) round it differently: the audit must accept what that rounding can move a gap
by, and nothing a float32 model's audit would not have accepted before.
"""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from warp_check.certificates.verify import GAP_TOLERANCE, gap_tolerances
from warp_check.model.activations import get_activation
from warp_check.model.head import UNIT_ROUNDOFF, DenseHead


def _head(seed: int, activation: str, dtype: str, classes: int, d: int = 16) -> DenseHead:
    rng = np.random.default_rng(seed)
    return DenseHead(
        W=rng.normal(size=(d, d)) / np.sqrt(d),
        b=rng.normal(size=d) / 4,
        Wc=rng.normal(size=(classes, d)),
        bc=rng.normal(size=classes) / 4,
        activation=get_activation(activation),
        storage_dtype=dtype,
    )


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    activation=st.sampled_from(["relu", "tanh", "gelu"]),
    dtype=st.sampled_from(["float32", "float16", "bfloat16"]),
    classes=st.integers(2, 5),
    ulps=st.floats(0.0, 2.0),
)
def test_v_rounded_apart_by_its_dtype_moves_no_gap_past_its_tolerance(seed, activation, dtype, classes, ulps):
    head = _head(seed, activation, dtype, classes)
    rng = np.random.default_rng(seed + 1)
    V = rng.normal(size=(12, head.d_in)) * 2
    labels = rng.integers(0, classes, size=12)
    # Every entry of v moved apart by up to ``ulps`` units of roundoff, as two devices' kernels give it.
    moved = V * (1 + ulps * UNIT_ROUNDOFF[dtype] * rng.uniform(-1, 1, size=V.shape))
    shift = np.abs(head.gaps(moved, labels)[0] - head.gaps(V, labels)[0])
    assert (shift <= gap_tolerances(head, V, labels)).all()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), activation=st.sampled_from(["relu", "tanh"]), classes=st.integers(2, 4))
@example(seed=242, activation="tanh", classes=2)
def test_a_float32_head_keeps_the_fixed_tolerance_and_half_precision_widens_it(seed, activation, classes):
    rng = np.random.default_rng(seed)
    V = rng.normal(size=(8, 16))
    labels = rng.integers(0, classes, size=8)
    single = gap_tolerances(_head(seed, activation, "float32", classes), V, labels)
    gaps = _head(seed, activation, "float32", classes).gaps(V, labels)[0]
    np.testing.assert_array_equal(single, GAP_TOLERANCE * np.maximum(1.0, np.abs(gaps)))
    # Half precision widens the tolerance by what its rounding can move a gap, and never narrows it:
    # a gap a saturated tanh barely feels keeps the fixed tolerance (seed 242: 4.5, moved 0.004).
    for dtype in ("float16", "bfloat16"):
        head = _head(seed, activation, dtype, classes)
        widened = gap_tolerances(head, V, labels)
        np.testing.assert_array_equal(widened, np.maximum(single, head.gap_rounding_reach(V, labels)))
    half = gap_tolerances(_head(seed, activation, "float16", classes), V, labels)
    brain = gap_tolerances(_head(seed, activation, "bfloat16", classes), V, labels)
    assert (half >= single).all() and (brain >= half).all() and (brain > single).any()
