"""The repair loop on synthetic heads: convergence, the stopping rule, failures that say why."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from testkit.synthetic import synthetic_problem

from warp_check.errors import SettingsError
from warp_check.model.activations import ACTIVATIONS
from warp_check.model.head import DenseHead, top_left_singular_vectors
from warp_check.pipeline import ladder
from warp_check.qp.settings import SolverSettings
from warp_check.repair.gsn import gsn_finetune
from warp_check.repair.loop import repair_head
from warp_check.repair.metric import StepMetric
from warp_check.repair.records import CaseSet, RepairStatus
from warp_check.repair.settings import RepairSettings


@pytest.mark.parametrize(("activation", "classes"), [("relu", 2), ("tanh", 2), ("gelu", 2), ("relu", 3)])
def test_repair_reaches_both_margins_on_every_case(activation, classes):
    head, fix, keep = synthetic_problem(activation=activation, classes=classes, seed=classes)
    result = repair_head(head, fix, keep, settings=RepairSettings(rank=2))
    assert result.status is RepairStatus.CONVERGED, result.message
    # Recomputed here from the returned weights, not taken from the loop's bookkeeping.
    after = result.head_after
    gaps_fix, _ = after.gaps(fix.V, fix.labels)
    gaps_keep, _ = after.gaps(keep.V, keep.labels)
    assert np.all(gaps_fix >= 1.0)
    assert np.all(gaps_keep >= 0.3)
    assert np.array_equal(after.predict(keep.V), keep.labels)
    # Only W changed; it changed by a sum of rank-2 steps, and it is representable in float32.
    np.testing.assert_array_equal(after.b, head.b)
    np.testing.assert_array_equal(after.Wc, head.Wc)
    np.testing.assert_array_equal(after.W, after.W.astype(np.float32).astype(np.float64))
    assert result.iterations[-1].fix_met == len(fix) and result.iterations[-1].keep_met == len(keep)


@pytest.mark.parametrize("activation", ["relu", "tanh", "gelu", "sigmoid"])
@pytest.mark.parametrize("classes", [2, 4])
@pytest.mark.parametrize("seed", range(4))
def test_repair_converges_across_heads_and_seeds(activation, classes, seed):
    # A sweep, not a showcase: saturating σ (tanh, sigmoid), kinks (ReLU) and 4-class heads
    # all stalled or ended with a broken must_keep case in earlier versions of the loop.
    head, fix, keep = synthetic_problem(activation=activation, classes=classes, seed=100 + seed, n_keep=120)
    result = repair_head(head, fix, keep, settings=RepairSettings(rank=2))
    assert result.status is RepairStatus.CONVERGED, result.message
    gaps_fix, _ = result.head_after.gaps(fix.V, fix.labels)
    gaps_keep, _ = result.head_after.gaps(keep.V, keep.labels)
    assert gaps_fix.min() >= 1.0 and gaps_keep.min() >= 0.3


def test_loop_does_not_stop_before_must_keep_margins_hold():
    # The paper stops on must_fix alone; here the last iteration must have every margin met,
    # and no earlier iteration may have had both met (else it would have stopped there).
    head, fix, keep = synthetic_problem(seed=1, n_fix=12)
    result = repair_head(head, fix, keep)
    assert result.repaired
    for record in result.iterations[:-1]:
        assert record.fix_met < len(fix) or record.keep_met < len(keep)


def test_nothing_to_repair_is_reported_and_changes_nothing():
    head, fix, keep = synthetic_problem(seed=1)
    result = repair_head(head, CaseSet.empty(head.d_in), keep)
    assert result.status is RepairStatus.NOTHING_TO_REPAIR
    np.testing.assert_array_equal(result.head_after.W, head.W)
    assert result.iterations == ()


def test_non_convergence_names_the_cases_and_what_might_help():
    head, fix, keep = synthetic_problem(seed=2, n_fix=12)
    # mu = 10: at the default price this problem converges in one iteration.
    result = repair_head(head, fix, keep, settings=RepairSettings(max_iter=1, mu=10.0))
    assert result.status is RepairStatus.NOT_CONVERGED
    assert not result.repaired
    assert result.misses and all(m.short_by > 0 for m in result.misses)
    assert "max_iter (now 1)" in result.message and "rank" in result.message


def test_unreachable_must_keep_margin_is_reported_and_says_what_helps():
    # Every ReLU unit is dead near v = 0 (b = −100): the must_keep case sits at gap 0.1 < γ_h (lifted to it), and
    # its units could wake only by a change that moves the must_fix case's (v_f = −v_k) further
    # down, so it can never reach its margin. Its row is elastic (it misses now), so the QP stays
    # feasible and the loop reports the miss. (The must_fix case's units can be woken, by a change of
    # W thousands of times its size: linearise.wake_dead_units; whether the loop gets there is not
    # the point here.)
    rng = np.random.default_rng(0)
    head = DenseHead(
        rng.normal(size=(8, 8)), np.full(8, -100.0), rng.normal(size=(2, 8)), np.array([0.1, 0.0]), ACTIVATIONS["relu"]
    )
    keep = CaseSet(("k",), np.full((1, 8), 0.01), np.array([0]))
    fix = CaseSet(("f",), np.full((1, 8), -0.01), np.array([1]))
    result = repair_head(head, fix, keep, settings=RepairSettings(keep_margin="gamma_h"))  # lifted: out of reach
    assert result.status is RepairStatus.NOT_CONVERGED
    assert not result.repaired
    assert ("k", "must_keep") in [(m.id, m.kind) for m in result.misses]
    assert "lower gamma_h (now 0.3)" in result.message


def test_must_keep_cases_wrong_before_repair_are_excluded_and_listed():
    head, fix, keep = synthetic_problem(seed=4)
    wrong = CaseSet(("wrong",), keep.V[:1], 1 - keep.labels[:1])
    merged = CaseSet(keep.ids + wrong.ids, np.vstack([keep.V, wrong.V]), np.concatenate([keep.labels, wrong.labels]))
    result = repair_head(head, fix, merged)
    assert result.repaired
    assert result.excluded_keep == ("wrong",)


def test_non_finite_representations_fail_cleanly():
    head, fix, keep = synthetic_problem(seed=5)
    V = fix.V.copy()
    V[0, 0] = np.nan
    result = repair_head(head, CaseSet(fix.ids, V, fix.labels), keep)
    assert result.status is RepairStatus.INVALID_INPUT
    assert "NaN" in result.message


def test_rank_larger_than_the_layer_is_a_settings_error():
    head, fix, keep = synthetic_problem(d=16, seed=6)
    with pytest.raises(SettingsError, match="rank"):
        repair_head(head, fix, keep, settings=RepairSettings(rank=17))


def test_repair_is_deterministic():
    head, fix, keep = synthetic_problem(seed=8)
    a = repair_head(head, fix, keep)
    b = repair_head(head, fix, keep)
    np.testing.assert_array_equal(a.head_after.W, b.head_after.W)


def test_gsn_kappa_matches_its_definition():
    head, fix, _ = synthetic_problem(classes=3, seed=9)
    U = top_left_singular_vectors(head.W, 2)
    kappa = head.gsn_kappa(fix.V, fix.labels, U)
    i = 0
    v, y = fix.V[i], fix.labels[i]
    J = np.diag(head.activation.slope(head.W @ v + head.b))
    q = np.array([[(head.Wc[y] - head.Wc[k]) @ J @ U[:, j] for k in range(3) if k != y] for j in range(2)])
    assert kappa[i] == pytest.approx(np.linalg.norm(q), rel=1e-12)


def test_gsn_finetune_keeps_the_step_of_largest_kappa():
    head, fix, keep = synthetic_problem(activation="tanh", seed=10)
    aux = CaseSet(("x1", "x2", "x3", "x4"), keep.V[:4], keep.labels[:4])
    tuned, record = gsn_finetune(head, fix, aux, RepairSettings(gsn_ft_steps=10, gsn_ft_lr=1e-2))
    assert len(record.kappa_per_step) == 11
    assert record.kappa_per_step[record.chosen_step] == max(record.kappa_per_step)
    U = top_left_singular_vectors(tuned.W, 2)
    assert float(np.mean(tuned.gsn_kappa(fix.V, fix.labels, U))) == pytest.approx(max(record.kappa_per_step))


def test_gsn_ft_runs_only_below_threshold_and_with_aux():
    head, fix, keep = synthetic_problem(seed=11)
    aux = CaseSet(("x1", "x2"), keep.V[:2], keep.labels[:2])
    low = repair_head(head, fix, keep, aux, RepairSettings(gsn_threshold=0.0))
    assert not low.gsn_ft.applied and "gsn_threshold" in low.gsn_ft.reason
    high = repair_head(head, fix, keep, aux, RepairSettings(gsn_threshold=1e9, gsn_ft_steps=5))
    assert len(high.gsn_ft.kappa_per_step) == 6
    assert high.repaired


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("rank", 0),
        ("rank", 1.5),
        ("gamma_s", -1.0),
        ("gamma_h", float("nan")),
        ("lam", 0),
        ("rho", float("inf")),
        ("max_iter", 0),
        ("gsn_ft_steps", -1),
        ("aim_above", -1e-3),
    ],
)
def test_settings_errors_name_field_and_value(field, value):
    with pytest.raises(SettingsError, match=f"{field}={value!r}"):
        RepairSettings(**{field: value})


def test_settings_round_trip_through_a_dict():
    settings = RepairSettings(rank=4, gamma_s=0.8)
    assert RepairSettings.from_dict(settings.to_dict()) == settings


def test_a_failed_run_reports_its_best_iterate_not_its_last():
    # The misses and head_after of a run that does not converge describe the best state the
    # loop reached (lowest priced shortfall), so the advice is about that, not a worse last step.
    head, fix, keep = synthetic_problem(seed=2, n_fix=12)
    result = repair_head(head, fix, keep, settings=RepairSettings(max_iter=2, mu=10.0))  # mu: as above
    assert result.status is RepairStatus.NOT_CONVERGED
    gaps_fix, _ = result.head_after.gaps(fix.V, fix.labels)
    gaps_keep, _ = result.head_after.gaps(keep.V, keep.labels)
    expected = {i for i, g in zip(fix.ids, gaps_fix, strict=True) if g < 1.0}
    expected |= {i for i, g in zip(keep.ids, gaps_keep, strict=True) if g < 0.3}
    assert {m.id for m in result.misses} == expected

    def merit(head_: DenseHead) -> float:
        gf, _ = head_.gaps(fix.V, fix.labels)
        gk, _ = head_.gaps(keep.V, keep.labels)
        return 50 * np.maximum(1.0 - gf, 0).sum() + 500 * np.maximum(0.3 - gk, 0).sum()

    assert merit(result.head_after) <= merit(head)
    assert "at the best iterate" in result.message


def test_each_iteration_records_the_qp_promise_against_the_true_full_step(monkeypatch):
    # Recomputed here, iteration by iteration, from the QP's own problem and step: the
    # linearised gaps it promised and the true gaps of W + U B (the full step, before any
    # backtracking), then W advanced by the fraction the loop took. On this problem the first
    # full step breaks must_keep cases that the linear model kept; it still lowers the total
    # shortfall (the must_fix cases gain more), so the loop takes it and lifts them back after.
    import warp_check.repair.iterations as iterations

    head, fix, keep = synthetic_problem(seed=0, n_keep=400, n_fix=12)
    solved = []  # the step each iteration took (after any growth of its rank)
    linearise_and_solve = iterations.linearise_and_solve

    def recording(**given):
        trial = linearise_and_solve(**given)
        solved.append((trial.problem, trial.solution))
        return trial

    # internal: the QP each iteration solved (its problem and step) is not in the result, only the numbers checked here
    monkeypatch.setattr(iterations, "linearise_and_solve", recording)
    settings = RepairSettings(rank=2)
    result = repair_head(head, fix, keep, settings=settings)
    assert result.repaired and len(solved) == len(result.iterations)
    metric = StepMetric.of(settings.rho, settings.mu, keep.V)  # the QP's B is in whitened coordinates

    V = np.vstack([fix.V, keep.V])
    labels = np.concatenate([fix.labels, keep.labels])
    n_fix = len(fix)
    W = head.round_to_storage(head.W)
    for record, (problem, solution) in zip(result.iterations, solved, strict=True):
        U = top_left_singular_vectors(W, record.rank)
        gap_now, _ = head.with_weight(W).gaps(V, labels)
        promised = np.full(len(labels), np.inf)  # two classes: one row per case
        np.minimum.at(promised, problem.cases, gap_now[problem.cases] + problem.constraint_values(solution.B))
        full, _ = head.with_weight(W + U @ metric.step(solution.B)).gaps(V, labels)
        assert record.promised_fix_shortfall == pytest.approx(np.maximum(1.0 - promised[:n_fix], 0).sum(), abs=1e-6)
        assert record.full_step_fix_shortfall == pytest.approx(np.maximum(1.0 - full[:n_fix], 0).sum(), abs=1e-6)
        assert record.promised_keep_missed == int(np.sum(promised[n_fix:] < 0.3))
        assert record.full_step_keep_missed == int(np.sum(full[n_fix:] < 0.3))
        W = head.round_to_storage(W + record.step_fraction * (U @ metric.step(solution.B)))
    np.testing.assert_array_equal(W, result.head_after.W)
    first = result.iterations[0]
    assert first.promised_keep_missed == 0 < first.full_step_keep_missed and first.step_fraction == 1
    assert result.iterations[-1].keep_met == len(keep)


@pytest.mark.parametrize(("activation", "classes", "seed"), [("relu", 2, 20), ("tanh", 2, 21), ("relu", 3, 3)])
def test_lazy_must_keep_rows_give_the_same_repair_as_all_rows(activation, classes, seed):
    # Few must_keep rows enter each QP (window 0: only the ones a step breaks), yet every
    # iteration solves the same QP, so the loop takes the same path to the same head.
    head, fix, keep = synthetic_problem(activation=activation, classes=classes, seed=seed, n_keep=300)
    lazy_settings = RepairSettings(solver=SolverSettings(working_set_window=0.0, working_set_batch=5))
    full_settings = RepairSettings(solver=SolverSettings(working_set=False))
    lazy = repair_head(head, fix, keep, settings=lazy_settings)
    full = repair_head(head, fix, keep, settings=full_settings)
    assert lazy.status is full.status is RepairStatus.CONVERGED, (lazy.message, full.message)
    assert len(lazy.iterations) == len(full.iterations)
    np.testing.assert_allclose(lazy.head_after.W, full.head_after.W, atol=1e-6)
    assert any(r.qp_working_set < r.qp_rows for r in lazy.iterations)
    assert all(r.qp_working_set is None for r in full.iterations)
    # Cert 2 from the repaired weights, in float64, for every must_keep case.
    gaps_keep, _ = lazy.head_after.gaps(keep.V, keep.labels)
    assert gaps_keep.min() >= 0.3 and np.array_equal(lazy.head_after.predict(keep.V), keep.labels)


@pytest.mark.parametrize("backend", ["ipm", "active_set", "alm"])
@pytest.mark.parametrize(("activation", "classes", "seed"), [("relu", 2, 20), ("tanh", 3, 21)])
def test_the_other_backends_give_the_repair_osqp_gives(activation, classes, seed, backend):
    head, fix, keep = synthetic_problem(activation=activation, classes=classes, seed=seed, n_keep=300)
    other = repair_head(head, fix, keep, settings=RepairSettings(solver=SolverSettings(backend=backend)))
    osqp = repair_head(head, fix, keep, settings=RepairSettings(solver=SolverSettings(backend="osqp")))
    assert other.status is osqp.status is RepairStatus.CONVERGED, (other.message, osqp.message)
    assert {r.qp_backend for r in other.iterations} == {backend}
    assert {r.qp_backend for r in osqp.iterations} == {"osqp"}
    # All solve the same QPs to ~1e-6 or better, so the loops take the same path to nearly
    # the same head; every head meets every margin, recomputed in float64.
    for result in (other, osqp):
        gaps_fix, _ = result.head_after.gaps(fix.V, fix.labels)
        gaps_keep, _ = result.head_after.gaps(keep.V, keep.labels)
        assert gaps_fix.min() >= 1.0 and gaps_keep.min() >= 0.3  # γ_s, γ_h
    assert len(other.iterations) == len(osqp.iterations)
    np.testing.assert_allclose(other.head_after.W, osqp.head_after.W, atol=1e-3)


def test_settings_from_before_the_working_set_fields_still_load():
    old = RepairSettings().to_dict()
    for name in (
        "working_set_window",
        "working_set_batch",
        "backend",
        "ipm_min_rows",
        "ipm_max_unknowns",
        "ipm_tolerance",
        "ipm_max_iter",
        "active_set_tolerance",
        "active_set_max_iter",
    ):
        del old["solver"][name]
    assert RepairSettings.from_dict(old) == RepairSettings()
    tuned = RepairSettings(solver=SolverSettings(working_set_window=0.2, working_set_batch=50))
    assert RepairSettings.from_dict(tuned.to_dict()) == tuned


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_a_half_precision_repair_keeps_its_margins_with_v_rounded_apart(dtype, activation):
    # An audit on another device encodes v again, its entries a unit or two of the dtype apart
    # from the repair's: every margin must survive that, in float64 and in the saved arithmetic.
    head, fix, keep = synthetic_problem(activation=activation, seed=7, n_keep=100)
    head = replace(head, storage_dtype=dtype)
    head = head.with_weight(head.round_to_storage(head.W))
    result = repair_head(head, fix, keep, settings=RepairSettings(rank=2))
    assert result.status is RepairStatus.CONVERGED, result.message
    after = result.head_after
    rng = np.random.default_rng(0)
    for cases, margin in ((fix, 1.0), (keep, 0.3)):
        reach = after.gap_rounding_reach(cases.V, cases.labels)
        assert reach.min() > 0
        held = np.minimum(after.gaps(cases.V, cases.labels)[0], after.gaps_as_stored(cases.V, cases.labels))
        assert (held >= margin + reach).all()
        for _ in range(5):
            moved = cases.V * (1 + 2 * after.unit_roundoff * rng.uniform(-1, 1, size=cases.V.shape))
            assert after.gaps(moved, cases.labels)[0].min() >= margin
            assert after.gaps_as_stored(moved, cases.labels).min() >= margin


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_half_precision_repair_short_of_its_room_says_so_and_never_raises(dtype):
    # Every case can clear its margin in float64 while the room the dtype needs for an audit on
    # another device is still missing. Wherever the loop is stopped (max_iter), it reports those cases
    # with the room and the dtype, and what helps; it never raises and never ships them. Which
    # iterations end so depends on the BLAS: asserted over every stop of several problems.
    room_only = 0
    for activation, seed in (("tanh", 2), ("tanh", 5), ("relu", 4)):
        head, fix, keep = synthetic_problem(activation=activation, seed=seed, n_keep=100)
        head = replace(head, storage_dtype=dtype)
        head = head.with_weight(head.round_to_storage(head.W))
        full = repair_head(head, fix, keep, settings=RepairSettings(rank=2))
        assert full.status is RepairStatus.CONVERGED, full.message
        for max_iter in range(1, len(full.iterations)):
            stopped = RepairSettings(rank=2, max_iter=max_iter)
            result = repair_head(head, fix, keep, settings=stopped)
            assert result.status is RepairStatus.NOT_CONVERGED and result.misses, result.message
            if not all(m.room > 0 for m in result.misses):
                continue
            room_only += 1
            for miss in result.misses:
                assert miss.dtype == dtype and miss.gap < miss.target + miss.room
                assert miss.short_by == pytest.approx(miss.target + miss.room - miss.gap)
            worst = max(result.misses, key=lambda m: m.short_by)
            needs = f"{worst.target:g} + {worst.room:.3g} (room for v rounded apart in {dtype}"
            assert f"has gap {worst.gap:.4g} < {needs}" in result.message
            assert f"a higher max_iter (now {max_iter}), or repair a float32 copy" in result.message
            # Where the dense form is given up for the final layer, the clause that says how it ended
            # names the room too (a bare "gap 1.0003 < 1" would read as a contradiction).
            assert f"gap {worst.gap:.4g} < {needs}" in ladder._how_it_ended(result)
    assert room_only > 0, "no stop of these repairs met every margin in float64 while lacking the room"
