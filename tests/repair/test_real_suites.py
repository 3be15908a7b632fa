"""The loop beyond the paper, for real suites (issue 19): the function-space metric, the trust
region, the growing rank, the rising price of cases left short, warm QPs and Z carried forward,
each on its own and together."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from testkit.synthetic import synthetic_problem

from warp_check.errors import SettingsError
from warp_check.qp.settings import SolverSettings
from warp_check.repair.controls import RankSchedule, TrustRegion
from warp_check.repair.loop import repair_head
from warp_check.repair.metric import StepMetric
from warp_check.repair.settings import RepairSettings
from warp_check.repair.step import PRICE_MAX, raise_prices

PAPER = {"mu": 0.0, "trust_region": False, "max_rank": 2, "price_growth": 1.0}

finite = st.floats(-3, 3, allow_nan=False, allow_infinity=False)


@settings(max_examples=40, deadline=None)
@given(
    keep=arrays(np.float64, st.tuples(st.integers(1, 12), st.just(5)), elements=finite),
    B=arrays(np.float64, (2, 5), elements=finite),
    rho=st.floats(0.1, 10),
    mu=st.floats(0.0, 100),
)
def test_the_whitened_qp_is_the_function_space_qp(keep, B, rho, mu):
    # B̃ on whitened rows is B = B̃ L⁻¹ on the real ones: the same change of every case's
    # pre-activation, and ‖B̃‖² is the metric ½ tr(B (ρI + μS) Bᵀ) the settings promise (×2).
    metric = StepMetric.of(rho, mu, keep)
    step = metric.step(B)
    np.testing.assert_allclose(metric.whiten(keep) @ B.T, keep @ step.T, rtol=1e-8, atol=1e-8)
    M = rho * np.eye(5) + mu * keep.T @ keep / keep.shape[0]
    priced = np.trace(step @ M @ step.T) if metric.L is not None else rho * np.sum(step**2)
    assert metric.qp_rho(1.0) * np.sum(B**2) == pytest.approx(priced, rel=1e-7, abs=1e-9)


def test_mu_zero_or_no_kept_cases_whitens_nothing():
    V = np.arange(6.0).reshape(3, 2)
    for metric in (StepMetric.of(2.0, 0.0, V), StepMetric.of(2.0, 10.0, np.zeros((0, 2)))):
        assert metric.L is None and metric.whiten(V) is V and metric.qp_rho(3.0) == 6.0


def test_the_trust_region_tightens_on_a_broken_promise_and_loosens_on_a_kept_one():
    trust = TrustRegion(True)
    assert TrustRegion.ratio(10.0, 4.0, 7.0) == pytest.approx(0.5)  # promised 6, got 3
    assert TrustRegion.ratio(10.0, 4.0, 12.0) < 0  # the merit went up
    assert TrustRegion.ratio(10.0, 10.0, 10.0) == 1.0  # nothing promised, nothing lost
    assert trust.retry(-0.3, attempt=0) and trust.kappa == TrustRegion.SHRINK
    assert not trust.retry(-0.3, attempt=TrustRegion.TRIES - 1)  # the last solve is taken anyway
    assert not trust.retry(0.5, attempt=0)  # good enough to take
    trust.adapt(0.9)
    assert trust.kappa == TrustRegion.SHRINK / 2
    trust.adapt(0.1)
    assert trust.kappa == TrustRegion.SHRINK
    off = TrustRegion(False)
    assert not off.retry(-5.0, attempt=0) and (off.adapt(-5.0) or off.kappa) == 1.0


def test_the_rank_grows_fourfold_on_a_stalled_iteration_up_to_its_limits():
    ranks = RankSchedule(RepairSettings(rank=2, max_rank=32), smallest_side=20)
    assert not ranks.after(10.0, 8.0) and ranks.rank == 2  # 20 % better: progress
    assert ranks.after(10.0, 9.5) and ranks.rank == 8
    assert ranks.after(10.0, 10.0) and ranks.rank == 20  # the layer's smaller side
    assert not ranks.after(10.0, 10.0) and ranks.rank == 20
    fixed = RankSchedule(RepairSettings(rank=4, max_rank=4), smallest_side=100)
    assert not fixed.after(1.0, 1.0) and fixed.rank == 4
    assert RepairSettings(rank=64).rank_limit == 64  # never below the rank asked for


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_rank", 0), ("mu", -1.0), ("mu", float("nan")), ("trust_region", "yes"), ("price_growth", 0.5)],
)
def test_the_new_settings_are_validated_naming_field_and_value(field, value):
    with pytest.raises(SettingsError, match=field):
        RepairSettings(**{field: value})


def test_each_iteration_records_its_rank_and_metric_scale():
    head, fix, keep = synthetic_problem(seed=3, activation="relu", classes=2, n_fix=12, n_keep=80)
    result = repair_head(head, fix, keep, None, RepairSettings(trust_region=True))
    assert result.repaired
    assert all(r.rank >= 2 and r.metric_scale > 0 for r in result.iterations)
    ranks = [r.rank for r in result.iterations]
    assert ranks == sorted(ranks)  # the rank only grows


def test_a_problem_the_paper_loop_cannot_finish_at_rank_1_converges_when_the_rank_may_grow():
    # One direction of change cannot lift every must_fix case while holding the kept ones.
    head, fix, keep = synthetic_problem(seed=5, activation="tanh", classes=3, n_fix=30, n_keep=200)
    paper = repair_head(head, fix, keep, None, RepairSettings(rank=1, max_iter=60, **PAPER | {"max_rank": 1}))
    grown = repair_head(head, fix, keep, None, RepairSettings(rank=1, max_iter=60))
    assert not paper.repaired
    assert grown.repaired and grown.iterations[-1].rank > 1


def test_the_paper_loop_is_still_there():
    head, fix, keep = synthetic_problem(seed=1, activation="relu", classes=2, n_fix=10, n_keep=60)
    result = repair_head(head, fix, keep, None, RepairSettings(**PAPER))
    assert result.repaired
    assert {r.rank for r in result.iterations} == {2} and {r.metric_scale for r in result.iterations} == {1.0}


def test_the_rank_grows_at_once_where_the_qps_own_promise_leaves_the_must_fix_cases_short():
    ranks = RankSchedule(RepairSettings(rank=2, max_rank=32), smallest_side=100)
    assert not ranks.grow_for_promise(0.5, 10.0) and ranks.rank == 2  # 5 % unmet: room enough
    assert ranks.grow_for_promise(2.0, 10.0) and ranks.rank == 8  # 20 %: ×4
    assert ranks.grow_for_promise(6.0, 10.0) and ranks.rank == 32  # more than half: to the limit at once
    assert not ranks.grow_for_promise(10.0, 10.0) and ranks.rank == 32


def test_a_case_the_qp_keeps_leaving_short_costs_more_each_time_up_to_a_cap():
    price = np.array([50.0, 50.0, 500.0])
    predicted, targets = np.array([0.5, 1.2, 0.1]), np.array([1.0, 1.0, 0.3])
    settings = RepairSettings(price_growth=3.0)
    raise_prices(price, predicted, targets, 2, settings)
    assert price.tolist() == [150.0, 50.0, 500.0]  # the kept case's price is not the fix's
    for _ in range(100):
        raise_prices(price, predicted, targets, 2, settings)
    assert price[0] == PRICE_MAX * 50.0
    fixed = np.array([50.0, 50.0, 500.0])
    raise_prices(fixed, predicted, targets, 2, RepairSettings(price_growth=1.0))  # the paper's λ
    assert fixed.tolist() == [50.0, 50.0, 500.0]


def test_a_step_whose_promise_is_short_is_solved_again_at_a_higher_rank_in_the_same_iteration():
    head, fix, keep = synthetic_problem(seed=5, activation="tanh", classes=3, n_fix=30, n_keep=200)
    result = repair_head(head, fix, keep, None, RepairSettings(rank=1, max_rank=16, max_iter=60))
    assert result.repaired
    first = result.iterations[0]  # its record: the QPs it solved and the rank of the step it took
    assert first.rank > 1 and first.qp_rounds >= 2  # grown from rank 1 before any step was taken


def test_each_qp_of_the_augmented_lagrangian_starts_from_the_last_ones_rows(monkeypatch):
    import warp_check.repair.iterations as iterations

    head, fix, keep = synthetic_problem(seed=2, activation="relu", classes=2, n_fix=12, n_keep=300)
    settings = RepairSettings(solver=SolverSettings(backend="alm"))
    warm_given = []
    solve = iterations.solve
    # internal: whether a QP was warm-started is in no result (only its time)
    monkeypatch.setattr(
        iterations,
        "solve",
        lambda problem, solver, warm=None: warm_given.append(warm is not None) or solve(problem, solver, warm),
    )
    result = repair_head(head, fix, keep, None, settings)
    assert result.repaired and len(result.iterations) >= 2
    assert warm_given[0] is False and all(warm_given[1:])
    # internal: a cold start of every QP is no setting; the repair is compared against it
    monkeypatch.setattr(iterations, "solve", lambda problem, solver, warm=None: solve(problem, solver))
    cold = repair_head(head, fix, keep, None, settings)
    assert cold.repaired and len(cold.iterations) == len(result.iterations)
    np.testing.assert_allclose(cold.head_after.W, result.head_after.W, atol=1e-6)


def test_z_carried_forward_between_exact_recomputations_gives_the_exact_repair(monkeypatch):
    # Z moves by a rank-r update a step, and is recomputed from the stored W every EXACT_EVERY
    # iterations and before convergence is declared: the repair is the one recomputing every step gives.
    import warp_check.repair.iterations as iterations

    head, fix, keep = synthetic_problem(seed=3, activation="tanh", classes=2, n_fix=12, n_keep=300)
    carried = repair_head(head, fix, keep, None, RepairSettings())
    # internal: recomputing Z every step is no setting; the repair is compared against it
    monkeypatch.setattr(iterations, "EXACT_EVERY", 1)
    exact = repair_head(head, fix, keep, None, RepairSettings())
    assert carried.repaired and exact.repaired and len(carried.iterations) == len(exact.iterations) > 2
    np.testing.assert_allclose(carried.head_after.W, exact.head_after.W, atol=1e-5)
    gaps = np.array(list(carried.gaps_after.values()))
    assert gaps[: len(fix)].min() >= 1.0 and gaps[len(fix) :].min() >= 0.3
