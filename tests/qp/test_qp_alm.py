"""The augmented-Lagrangian backend: OSQP's optimum, on rows as correlated as real representations,
re-solves that start from the last answer, and its outcomes mapped."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from testkit.qp_problems import (
    CASE_PROBLEM_SHAPE,
    contradictory_fix_problem,
    contradictory_keep_problem,
    kkt_violation,
    problem_over_cases,
    random_problem,
)

from warp_check.errors import SettingsError
from warp_check.qp.backends.alm import AlmSettings
from warp_check.qp.backends.ipm import IpmSettings
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.settings import SolverSettings
from warp_check.qp.solution import QPForm, QPStatus
from warp_check.qp.solve import pick_backend, solve

ALM = SolverSettings(backend="alm")
OSQP_ALL_ROWS = SolverSettings(backend="osqp", working_set=False)
IPM_TIGHT = SolverSettings(backend="ipm", backend_settings=(IpmSettings(tolerance=1e-10),))


def reference_answer(problem: LinearisedProblem):
    """OSQP's answer over every row; where OSQP runs out of iterations on rows this dependent,
    the interior point's (both are checked against each other in their own tests), to a tighter
    residual than its default: on rows this dependent, 1e-6 leaves B 1e-4 off."""
    answer = solve(problem, OSQP_ALL_ROWS)
    return answer if answer.status is not QPStatus.MAX_ITER else solve(problem, IPM_TIGHT)


def correlated_problem(seed: int, n_fix: int, n_keep: int, rank: int, d_in: int) -> LinearisedProblem:
    """Rows shaped like real sentence representations: every v shares one large direction
    (‖mean v‖ ≈ 0.8‖v‖ on MiniLM), so the rows in play are nearly dependent; more hard rows
    than β has unknowns."""
    rng = np.random.default_rng(seed)
    n = n_fix + n_keep
    common = rng.normal(size=d_in)
    V = 3.0 * common / np.linalg.norm(common) + 0.4 * rng.normal(size=(n, d_in)) / np.sqrt(d_in)
    C = rng.normal(size=(n, rank)) + 1.0
    rhs = np.concatenate([rng.uniform(0.5, 2.0, n_fix), -rng.exponential(0.3, n_keep)])
    return LinearisedProblem(C, V, rhs, n_fix, rho=2.0, lam=50.0)


def assert_same_optimum(result, reference, problem) -> None:
    assert result.status is QPStatus.SOLVED, result.solver_status
    scale = max(1.0, float(np.abs(reference.B).max()))
    assert result.objective <= reference.objective + 1e-6 * scale * max(1.0, abs(reference.objective))
    np.testing.assert_allclose(result.B, reference.B, atol=1e-4 * scale)
    values = problem.constraint_values(result.B)
    tolerance = 1e-8 * (1 + np.abs(problem.rhs).max())
    assert np.all(values[problem.n_fix :] >= problem.rhs[problem.n_fix :] - tolerance)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_keep=st.integers(1, 150), **CASE_PROBLEM_SHAPE)
# Found by a random run: OSQP runs out of iterations and the interior point, at its default 1e-6,
# left B 1.7e-4 from the optimum the augmented Lagrangian had found (its objective 1e-7 lower).
@example(seed=65536, n_fix=1, n_keep=85, rank=1, d_in=24, rows_per_case=2, window=0.0)
def test_the_augmented_lagrangian_finds_osqps_optimum_with_rows_joining_lazily(
    seed, n_fix, n_keep, rank, d_in, rows_per_case, window
):
    # Up to five times more rows than β has unknowns: the rows in play are then dependent, which
    # the regularised Newton systems do not mind. It settles every feasible draw by itself.
    problem = problem_over_cases(seed, n_fix, n_keep, rank, d_in, rows_per_case)
    reference = reference_answer(problem)
    result = solve(problem, replace(ALM, working_set_window=window))
    if reference.status.infeasible:
        assert result.status.infeasible, result.solver_status
        return
    assert result.backend == "alm" and result.form is QPForm.DUAL, result.solver_status
    assert_same_optimum(result, reference, problem)


def test_rows_as_correlated_as_real_ones_are_settled_where_the_active_set_hands_over():
    handed = 0
    for seed in range(6):
        problem = correlated_problem(seed, 8, 400, 2, 24)  # 408 rows, 48 unknowns
        handed += solve(problem, SolverSettings(backend="active_set")).handed_over_from == "active_set"
        result = solve(problem, ALM)
        assert result.backend == "alm" and result.handed_over_from is None, (seed, result.solver_status)
        assert_same_optimum(result, reference_answer(problem), problem)
    assert handed >= 2  # the active set stalls on such rows and hands them to OSQP


def test_the_answer_meets_every_rows_optimality_condition_to_round_off():
    problem = random_problem(3, 10, 80, 3, 30)
    result = solve(problem, ALM)
    assert result.status is QPStatus.SOLVED and result.backend == "alm"
    assert kkt_violation(problem, result.B) < 1e-8
    # Its warm start covers every soft row, and the multipliers of the rows in its working set.
    warm = result.warm
    assert warm is not None and set(range(problem.n_fix)) <= set(warm.rows.tolist())
    assert warm.z.shape == warm.rows.shape and warm.gram.shape == (warm.rows.size,) * 2
    assert np.all(warm.z >= 0) and np.all(warm.z[warm.rows < problem.n_fix] <= 50.0 + 1e-12)


def test_a_re_solve_with_moved_bounds_starts_from_the_last_answer_and_reuses_its_gram(monkeypatch):
    problem = correlated_problem(1, 6, 300, 3, 20)
    first = solve(problem, ALM)
    moved = replace(problem, rhs=problem.rhs + np.linspace(0.0, 0.05, problem.n))
    cold = solve(moved, ALM)
    grams = []
    cross_gram = LinearisedProblem.cross_gram
    # internal: the Gram blocks a warm start spares show in no result, only in time
    monkeypatch.setattr(
        LinearisedProblem, "cross_gram", lambda self, a, b: grams.append(a.size) or cross_gram(self, a, b)
    )
    warm = solve(moved, ALM, first.warm)
    assert first.warm.reusable_for(moved) and first.warm.reusable_for(replace(problem, rho=5.0, lam=80.0))
    assert not first.warm.reusable_for(replace(problem, C=problem.C.copy()))
    assert_same_optimum(warm, cold, moved)
    assert sum(grams) < first.warm.rows.size  # only rows that joined got Gram blocks
    assert warm.iterations < cold.iterations


def test_a_new_linearisation_starts_from_the_rows_and_multipliers_of_the_last_by_case():
    problem = problem_over_cases(4, 5, 200, 2, 16, 2)
    first = solve(problem, ALM)
    relinearised = replace(problem, C=problem.C * 1.05 + 0.01, rhs=problem.rhs - 0.02)
    assert not first.warm.reusable_for(relinearised)
    warm = solve(relinearised, ALM, first.warm)
    assert_same_optimum(warm, reference_answer(relinearised), relinearised)
    held = np.unique(problem.cases[first.warm.rows[first.warm.z > 0]])
    assert set(held) <= set(relinearised.cases[warm.warm.rows].tolist()) | set(held)


@pytest.mark.parametrize("bound", [0.5, 1.0])
def test_contradictory_must_keep_rows_are_infeasible(bound):
    result = solve(contradictory_keep_problem(bound), ALM)
    assert result.status in (QPStatus.INFEASIBLE, QPStatus.INFEASIBLE_INACCURATE) and result.B is None


def test_soft_rows_in_contradiction_are_paid_for_not_infeasible():
    result = solve(contradictory_fix_problem(), ALM)
    assert result.status is QPStatus.SOLVED and result.backend == "alm"
    assert result.objective == pytest.approx(100.0, rel=1e-9)


def test_limits_are_their_own_outcomes_and_go_to_osqp(monkeypatch):
    import warp_check.qp.osqp_backend as qp_module

    problem = random_problem(1, 30, 200, 2, 50)
    starved = solve(problem, SolverSettings(backend="alm", backend_settings=(AlmSettings(max_iter=1),)))
    assert starved.status is QPStatus.SOLVED and starved.backend == "osqp"
    assert starved.handed_over_from == "alm" and "augmented Lagrangian: iteration limit" in starved.solver_status
    # internal: OSQP rescues any QP up to 5,000 rows; the method's own outcome shows only without it
    monkeypatch.setattr(qp_module, "FULL_SOLVE_MAX_ROWS", 0)  # no OSQP rescue: the method's own outcome
    alone = solve(problem, SolverSettings(backend="alm", backend_settings=(AlmSettings(max_iter=1),)))
    assert alone.status is QPStatus.MAX_ITER and alone.B is None and alone.backend == "alm"


def test_auto_picks_the_augmented_lagrangian_past_ipm_max_unknowns():
    problem = random_problem(0, 5, 50, 2, 16)  # 55 rows, p = 32
    past = SolverSettings(newton_min_rows=55, backend_settings=(IpmSettings(max_unknowns=31),))
    assert pick_backend(problem, past) == "alm"
    assert pick_backend(problem, replace(past, newton_min_rows=56)) == "osqp"
    assert pick_backend(problem, replace(past, form="dual")) == "osqp"
    result = solve(problem, past)
    assert result.backend == "alm" and result.status is QPStatus.SOLVED


@pytest.mark.parametrize(
    ("field", "value"),
    [("alm_tolerance", 0.0), ("alm_tolerance", 1.5), ("alm_max_iter", 0), ("alm_max_iter", 2.5), ("backend", "newton")],
)
def test_its_settings_are_validated_naming_field_and_value(field, value):
    with pytest.raises(SettingsError, match=field):
        SolverSettings.from_json({field: value})
    with pytest.raises(SettingsError, match="form"):
        SolverSettings(backend="alm", form="primal")
