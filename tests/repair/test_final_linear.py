"""The final-linear form (σ the identity): the linearised gaps are the true gaps, so one QP with
every row hard either meets every margin or proves that no change of the layer can."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from warp_check.model.activations import get_activation
from warp_check.model.head import DenseHead
from warp_check.qp.backends.osqp import OsqpSettings
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.settings import SolverSettings
from warp_check.qp.solve import solve
from warp_check.repair.loop import repair_head
from warp_check.repair.records import CaseSet, RepairStatus
from warp_check.repair.settings import RepairSettings


def final_linear(W: np.ndarray, b: np.ndarray) -> DenseHead:
    """logits = W v + b: the classifier itself is the repair layer, the rest is the identity."""
    C = W.shape[0]
    return DenseHead(W, b, np.eye(C), np.zeros(C), get_activation("identity"), fixed_head=True)


def close_pair(rng: np.random.Generator, C: int, d: int, apart: float, n_keep: int = 8):
    """A must_fix case of label 1 at ``apart`` from a kept case of label 0 (unit norm): meeting both
    margins needs ‖w_1 − w_0‖ ≥ 1.3 / apart, far beyond the layer's own. With at most d cases in
    general position any labels are separable through the origin, so apart > 0 is feasible."""
    anchor = rng.normal(size=d)
    anchor /= np.linalg.norm(anchor)
    W = rng.normal(scale=0.3, size=(C, d))
    W[0] += 5.0 * anchor  # the anchor is clearly label 0, and so is its near twin, the fix case
    head = final_linear(W, np.zeros(C))
    keep_V = np.vstack([anchor, rng.normal(size=(n_keep, d))])
    keep = CaseSet(tuple(f"k{i}" for i in range(n_keep + 1)), keep_V, np.argmax(head.logits(keep_V), axis=1))
    fix = CaseSet(("fix",), (anchor + apart * np.eye(d)[0])[None, :], np.array([1]))
    return head, fix, keep


def test_a_fix_that_needs_the_layer_a_hundred_times_larger_is_one_qp():
    head, fix, keep = close_pair(np.random.default_rng(0), C=2, d=16, apart=0.01, n_keep=12)
    assert head.gaps(fix.V, fix.labels)[0][0] < -1  # the model gets it clearly wrong
    result = repair_head(head, fix, keep, settings=RepairSettings())
    assert result.status is RepairStatus.CONVERGED and len(result.iterations) == 1, result.message
    after = result.head_after
    assert np.all(after.gaps(fix.V, fix.labels)[0] >= 1.0)
    assert np.all(after.gaps(keep.V, keep.labels)[0] >= 0.3)
    growth = np.linalg.norm(after.W[1] - after.W[0]) / np.linalg.norm(head.W[1] - head.W[0])
    assert growth > 10  # what a priced slack crept towards and stalled on (mpnet: ×141)


def test_the_rank_is_the_number_of_classes_whatever_rank_asks():
    head, fix, keep = close_pair(np.random.default_rng(1), C=4, d=12, apart=0.05)
    result = repair_head(head, fix, keep, settings=RepairSettings(rank=1))
    assert result.status is RepairStatus.CONVERGED, result.message
    assert [it.rank for it in result.iterations] == [4]


def test_max_rank_below_the_classes_is_kept():
    head, fix, keep = close_pair(np.random.default_rng(1), C=4, d=12, apart=0.05)
    result = repair_head(head, fix, keep, settings=RepairSettings(rank=1, max_rank=2))
    assert all(it.rank == 2 for it in result.iterations)


def test_a_fix_at_the_same_point_as_a_kept_case_of_another_label_is_proved_impossible():
    head, fix, keep = close_pair(np.random.default_rng(2), C=2, d=8, apart=0.0)
    result = repair_head(head, fix, keep, settings=RepairSettings())
    assert result.status is RepairStatus.INFEASIBLE
    assert "no change of the final layer meets every must_fix margin" in result.message
    assert "this is a proof" in result.message and "gamma_s" in result.message
    assert [m.id for m in result.misses] == ["fix"]


def test_an_infeasible_exact_qp_names_the_case_in_the_way_not_every_short_one():
    # Two must_fix cases short at the start: one on top of a kept case of the other label (no weights
    # meet both), one the layer can lift. A neighbourhood drops the copies named: only the first.
    head, fix, keep = close_pair(np.random.default_rng(2), C=2, d=8, apart=0.0)
    free = np.random.default_rng(9).normal(size=(1, 8))
    label = 1 - int(np.argmax(head.logits(free)))  # wrong at the start
    both = CaseSet(("fix", "free"), np.vstack([fix.V, free]), np.array([1, label]))
    assert np.all(head.gaps(both.V, both.labels)[0] < 1.0)
    result = repair_head(head, both, keep, settings=RepairSettings())
    assert result.status is RepairStatus.INFEASIBLE and "this is a proof" in result.message
    assert [m.id for m in result.misses] == ["fix"]
    assert "leaves short (the likeliest in the way): 'fix' (1 case)" in result.message
    alone = repair_head(head, CaseSet(("free",), free, np.array([label])), keep, settings=RepairSettings())
    assert alone.status is RepairStatus.CONVERGED  # without the case named, the rest is met in one QP


def test_at_a_rank_below_the_classes_infeasibility_is_not_called_a_proof():
    head, fix, keep = close_pair(np.random.default_rng(2), C=3, d=8, apart=0.0)
    result = repair_head(head, fix, keep, settings=RepairSettings(rank=1, max_rank=2))
    assert result.status is RepairStatus.INFEASIBLE
    assert "this is a proof" not in result.message
    assert "of rank 2 meets every margin" in result.message and "raise max_rank (now 2) to 3" in result.message


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), C=st.integers(2, 4), apart=st.floats(0.02, 1.0))
@example(seed=1412, C=2, apart=0.125)  # a must_keep case below its margin, dear to lift: it was a priced slack
def test_every_feasible_final_layer_repair_converges_in_one_iteration(seed, C, apart):
    head, fix, keep = close_pair(np.random.default_rng(seed), C=C, d=10, apart=apart)
    result = repair_head(head, fix, keep, settings=RepairSettings())
    assert result.status is RepairStatus.CONVERGED and len(result.iterations) == 1, result.message


def test_a_qp_osqp_cannot_decide_in_its_iterations_goes_to_the_newton_backend():
    rng = np.random.default_rng(3)
    n, r, d = 40, 2, 6
    problem = LinearisedProblem(rng.normal(size=(n, r)), rng.normal(size=(n, d)), rng.normal(size=n) - 2, 0, 1.0, 50.0)
    starved = SolverSettings(working_set=False, backend_settings=(OsqpSettings(max_iter=1),))
    solution = solve(problem, starved)
    assert solution.status.has_solution and solution.backend == "ipm"
    assert solution.handed_over_from == "osqp" and "after OSQP's" in solution.solver_status
    named = solve(
        problem, SolverSettings(working_set=False, backend="osqp", backend_settings=(OsqpSettings(max_iter=1),))
    )
    assert not named.status.has_solution  # a backend the user names is the one that answers
