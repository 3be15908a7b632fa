"""Minimal change in function space (``mu``, DESIGN §7): the step is priced by how far it moves the
repair layer's output on the must_keep cases, not only by its size. Same certificates; a smaller
change where the kept cases live than the paper's ρ/2‖ΔW‖² gives."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from warp_check.model.activations import get_activation
from warp_check.model.head import DenseHead
from warp_check.repair.loop import repair_head
from warp_check.repair.records import CaseSet, RepairStatus
from warp_check.repair.settings import RepairSettings


def reference_change(before: DenseHead, after: DenseHead, V: np.ndarray) -> float:
    """‖ΔW Vᵀ‖_F over the reference (must_keep) representations: what mu prices."""
    return float(np.linalg.norm((after.W - before.W) @ V.T))


def anisotropic_problem(seed: int, activation: str, d: int, classes: int, n_keep: int, n_fix: int):
    """Representations sharing a few strong directions (as real encoders' do: a large common
    component), a random head, the cases it gets right as must_keep, and cases near its boundary
    relabelled to their strongest competitor as must_fix."""
    rng = np.random.default_rng(seed)
    scales = np.where(np.arange(d) < 4, 6.0, 1.0)
    V = rng.normal(size=(6 * (n_keep + n_fix), d)) * scales
    W = rng.normal(size=(d, d)) / np.sqrt(d) if activation != "identity" else rng.normal(size=(classes, d)) / 4
    if activation == "identity":
        head = DenseHead(W, np.zeros(classes), np.eye(classes), np.zeros(classes), get_activation("identity"),
                         fixed_head=True)  # fmt: skip
    else:
        Wc = rng.normal(size=(classes, d)) * (3.0 / np.sqrt(d))
        head = DenseHead(W, rng.normal(size=d) * 0.1, Wc, np.zeros(classes), get_activation(activation))
    head = head.with_weight(head.round_to_storage(head.W))
    labels = head.predict(V)
    gaps, competitor = head.gaps(V, labels)
    keep = np.flatnonzero(gaps > 0.5)[:n_keep]
    near = np.setdiff1d(np.flatnonzero(gaps < 0.3), keep)[:n_fix]
    return (
        head,
        CaseSet(tuple(f"f{i}" for i in near), V[near], competitor[near]),
        CaseSet(tuple(f"k{i}" for i in keep), V[keep], labels[keep]),
    )


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), classes=st.integers(2, 3), mu=st.floats(0.5, 100.0))
def test_on_the_exact_final_layer_problem_the_function_space_step_moves_the_kept_outputs_least(seed, classes, mu):
    # One QP over the same rows either way: the minimiser of ρ‖ΔW‖² + μ‖ΔW Vᵀ‖²/n cannot move the kept
    # outputs more than the minimiser of ρ‖ΔW‖² alone (adding the two optimality inequalities).
    head, fix, keep = anisotropic_problem(seed, "identity", d=12, classes=classes, n_keep=10, n_fix=1)
    assume(len(fix))  # some heads have no case near the boundary: nothing to repair
    paper = repair_head(head, fix, keep, settings=RepairSettings(mu=0.0))
    function = repair_head(head, fix, keep, settings=RepairSettings(mu=mu))
    assert paper.status is RepairStatus.CONVERGED and function.status is RepairStatus.CONVERGED
    for result in (paper, function):
        assert np.all(result.head_after.gaps(fix.V, fix.labels)[0] >= 1.0)
        assert np.all(result.head_after.gaps(keep.V, keep.labels)[0] >= 0.3)
    moved = reference_change(head, function.head_after, keep.V)
    assert moved <= reference_change(head, paper.head_after, keep.V) * (1 + 1e-4) + 1e-6


def test_on_a_dense_head_the_default_moves_the_kept_outputs_less_than_the_papers_price():
    head, fix, keep = anisotropic_problem(4, "relu", d=24, classes=2, n_keep=120, n_fix=8)
    paper = repair_head(head, fix, keep, settings=RepairSettings(mu=0.0))
    default = repair_head(head, fix, keep, settings=RepairSettings())
    assert paper.repaired and default.repaired
    for result in (paper, default):  # the same guarantees
        assert np.all(result.head_after.gaps(fix.V, fix.labels)[0] >= 1.0)
        assert np.all(result.head_after.gaps(keep.V, keep.labels)[0] >= 0.3)
    assert reference_change(head, default.head_after, keep.V) < 0.8 * reference_change(head, paper.head_after, keep.V)
