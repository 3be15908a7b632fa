"""The dual active-set backend: OSQP's optimum to round-off, rows joining lazily, its outcomes mapped."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testkit.qp_problems import (
    CASE_PROBLEM_SHAPE,
    contradictory_fix_problem,
    contradictory_keep_problem,
    kkt_violation,
    problem_over_cases,
    random_problem,
)

import warp_check.qp.active_set as qp_active_set
from warp_check.errors import SettingsError
from warp_check.qp.backends.active_set import ActiveSetSettings
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.settings import SolverSettings
from warp_check.qp.solution import Outcome, QPForm, QPStatus
from warp_check.qp.solve import solve

ACTIVE_SET = SolverSettings(backend="active_set")
EXACT = {"tolerance": 1e-9, "max_iter": 100, "time_limit_s": 60.0}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_keep=st.integers(1, 80), **CASE_PROBLEM_SHAPE)
def test_active_set_finds_osqps_optimum_with_rows_joining_lazily(
    seed, n_fix, n_keep, rank, d_in, rows_per_case, window
):
    # No more rows than β has unknowns and (rank ≥ rows per case) a case's rows c_i ⊗ v not
    # parallel: the rows in play are independent and the method settles by itself. Otherwise
    # it may hand its rows to OSQP; the optimum is the same. (The window does not apply to
    # it: every row is a candidate.)
    n_keep = max(1, min(n_keep, rank * d_in // rows_per_case - n_fix))
    problem = problem_over_cases(seed, n_fix, n_keep, rank, d_in, rows_per_case)
    osqp = solve(problem, SolverSettings(backend="osqp", working_set=False))
    active = solve(problem, ACTIVE_SET)
    assert osqp.status is QPStatus.SOLVED
    assert active.status is QPStatus.SOLVED, active.solver_status
    if rank >= rows_per_case and problem.n <= rank * d_in:
        assert active.backend == "active_set" and active.form is QPForm.DUAL, active.solver_status
    scale = max(1.0, float(np.abs(osqp.B).max()))
    # OSQP stops at its tolerance (1e-7); this method on the optimum's face.
    assert active.objective <= osqp.objective + 1e-6 * scale * max(1.0, abs(osqp.objective))
    np.testing.assert_allclose(active.B, osqp.B, atol=1e-4 * scale)
    values = problem.constraint_values(active.B)
    assert np.all(values[problem.n_fix :] >= problem.rhs[problem.n_fix :] - 1e-9 * (1 + np.abs(problem.rhs).max()))


def test_the_answer_meets_every_rows_optimality_condition_to_round_off():
    problem = random_problem(3, 10, 80, 3, 30)
    result = qp_active_set.run(problem, **EXACT)
    assert result.outcome is Outcome.SOLVED
    assert kkt_violation(problem, result.B) < 1e-10
    # The rows it reports in play hold every soft row and every row with a multiplier.
    assert set(range(problem.n_fix)) <= set(result.rows.tolist())


@pytest.mark.parametrize("join_at_most", [1, 7, None])
def test_how_many_rows_join_at_a_time_changes_the_path_not_the_answer(join_at_most):
    problem = random_problem(5, 8, 60, 2, 40)
    lines: list[str] = []
    reference = qp_active_set.run(problem, **EXACT)
    result = qp_active_set.run(problem, **EXACT, join_at_most=join_at_most, stall_after=100, trace=lines.append)
    assert result.outcome is Outcome.SOLVED
    np.testing.assert_allclose(result.B, reference.B, atol=1e-9)
    assert len(lines) == result.iterations + 1 and "worst" in lines[-1]
    if join_at_most == 1:  # one row a step: at least as many iterations as multipliers
        assert result.iterations >= np.count_nonzero(np.abs(problem.constraint_values(result.B) - problem.rhs) < 1e-9)


def test_a_target_outside_the_box_is_clamped_at_the_bound_it_crosses():
    # Two hard rows pull β_0 apart; the Newton step on both would make one multiplier
    # negative: it is clamped at 0 and the other row alone decides β.
    v = np.array([[1.0, 0.0], [1.0, 0.1]])
    problem = LinearisedProblem(np.ones((2, 1)), v, np.array([1.0, 0.5]), 0, 2.0, 50.0)
    result = qp_active_set.run(problem, **EXACT, join_at_most=None)
    assert result.outcome is Outcome.SOLVED
    np.testing.assert_allclose(result.B, [[1.0, 0.0]], atol=1e-12)  # row 1 holds at it: 1.0 ≥ 0.5


@pytest.mark.parametrize("bound", [0.5, 1.0])
def test_contradictory_must_keep_rows_are_infeasible(bound):
    result = solve(contradictory_keep_problem(bound), ACTIVE_SET)
    assert result.status in (QPStatus.INFEASIBLE, QPStatus.INFEASIBLE_INACCURATE) and result.B is None
    assert result.backend == "active_set" and "Farkas" in result.solver_status


def test_soft_rows_in_contradiction_are_paid_for_not_infeasible():
    result = solve(contradictory_fix_problem(), ACTIVE_SET)
    assert result.status is QPStatus.SOLVED and result.backend == "active_set"
    assert result.objective == pytest.approx(100.0, rel=1e-9)


def test_crowded_rows_in_play_are_settled_by_osqp_from_them():
    # More hard rows than β has unknowns: some draws infeasible, the rows in play of a feasible
    # one dependent. Whatever the method cannot settle, OSQP's working set does from its rows.
    verdicts, handed = [], 0
    for seed in range(30):
        problem = random_problem(seed, 2, 40, 1, 8)
        osqp = solve(problem, SolverSettings(backend="osqp", working_set=False))
        active = solve(problem, ACTIVE_SET)
        verdicts.append(osqp.status.value)
        handed += active.backend == "osqp"
        if osqp.status is QPStatus.INFEASIBLE:
            # Never an answer, and a named status; which one (infeasible, or a stall on the crowded
            # rows) turns on the last bits of the arithmetic (a stall under OpenBLAS's Sandybridge kernels).
            assert active.status is not QPStatus.SOLVED and active.B is None, (seed, active.solver_status)
            assert active.status in (QPStatus.INFEASIBLE, QPStatus.INFEASIBLE_INACCURATE, QPStatus.STALLED), seed
        else:
            assert osqp.status is QPStatus.SOLVED and active.status is QPStatus.SOLVED, (seed, active.solver_status)
            assert active.objective == pytest.approx(osqp.objective, rel=1e-5)
    assert verdicts.count("infeasible") >= 5 and verdicts.count("solved") >= 5  # both kinds were drawn
    assert handed >= 1  # the hand-over was exercised


def test_limits_are_their_own_outcomes_and_go_to_osqp(monkeypatch):
    import warp_check.qp.osqp_backend as qp_module

    problem = random_problem(1, 30, 200, 2, 50)
    starved = solve(problem, SolverSettings(backend="active_set", backend_settings=(ActiveSetSettings(max_iter=1),)))
    assert starved.status is QPStatus.SOLVED and starved.backend == "osqp"
    assert "active set: iteration limit" in starved.solver_status
    out_of_time = qp_active_set.run(problem, tolerance=1e-9, max_iter=100, time_limit_s=1e-12)
    assert out_of_time.outcome is Outcome.TIME_LIMIT and out_of_time.iterations == 0
    # internal: OSQP rescues any QP up to 5,000 rows; the method's own outcome shows only without it
    monkeypatch.setattr(qp_module, "FULL_SOLVE_MAX_ROWS", 0)  # no OSQP rescue: the method's own outcome
    alone = solve(problem, SolverSettings(backend="active_set", backend_settings=(ActiveSetSettings(max_iter=1),)))
    assert alone.status is QPStatus.MAX_ITER and alone.B is None and alone.backend == "active_set"


@pytest.mark.parametrize(
    ("field", "value"),
    [("active_set_tolerance", 0.0), ("active_set_tolerance", 1.5), ("active_set_max_iter", 0), ("backend", "newton")],
)
def test_active_set_settings_name_the_bad_field(field, value):
    with pytest.raises(SettingsError, match=field):
        SolverSettings.from_json({field: value})


def test_the_active_set_cannot_be_asked_for_the_primal_form():
    with pytest.raises(SettingsError, match="form"):
        SolverSettings(backend="active_set", form="primal")
