"""The interior-point backend: the same optimum as OSQP, lazily joined rows, its outcomes mapped."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testkit.qp_problems import (
    CASE_PROBLEM_SHAPE,
    contradictory_fix_problem,
    contradictory_keep_problem,
    problem_over_cases,
    random_problem,
)

import warp_check.qp.ipm as qp_ipm
from warp_check.errors import SettingsError
from warp_check.qp.backends.ipm import IpmSettings
from warp_check.qp.backends.osqp import OsqpSettings
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.registry import Backend
from warp_check.qp.settings import SolverSettings
from warp_check.qp.solution import OUTCOME_STATUS, Outcome, QPForm, QPSolution, QPStatus
from warp_check.qp.solve import pick_backend, solve

IPM = SolverSettings(backend="ipm")


def assert_same_optimum(problem: LinearisedProblem, ipm, osqp) -> None:
    # Both meet their residuals to ~1e-7 relative: the objectives agree to that, and the
    # objective's strong convexity (ρ/2‖β‖²) puts each B within √(2·excess/ρ) of the optimum's, so
    # within twice that of each other (an explored seed: objectives 1.3e-7 apart, B 2.0e-3 apart).
    scale = max(1.0, float(np.abs(osqp.B).max()))
    assert ipm.objective == pytest.approx(osqp.objective, rel=1e-6, abs=problem.lam * problem.n_fix * 1e-6 * scale)
    excess = max(1e-6 * abs(osqp.objective), problem.lam * problem.n_fix * 1e-6 * scale)
    assert float(np.linalg.norm(ipm.B - osqp.B)) <= max(2e-3 * scale, 2 * np.sqrt(2 * excess / problem.rho))
    values = problem.constraint_values(ipm.B)
    # The backend's contract (SolverSettings.ipm_tolerance): every hard row within 1e-6·(1 + max |h|).
    held = 1e-6 * max(scale, 1.0 + float(np.abs(problem.rhs).max()))
    assert np.all(values[problem.n_fix :] >= problem.rhs[problem.n_fix :] - held)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_keep=st.integers(1, 80), **CASE_PROBLEM_SHAPE)
def test_ipm_finds_osqps_optimum_with_rows_joining_lazily(seed, n_fix, n_keep, rank, d_in, rows_per_case, window):
    n_keep = max(1, min(n_keep, rank * d_in // rows_per_case))
    problem = problem_over_cases(seed, n_fix, n_keep, rank, d_in, rows_per_case)
    osqp = solve(problem, SolverSettings(backend="osqp", working_set=False))
    ipm = solve(problem, SolverSettings(backend="ipm", working_set_window=window))
    if not osqp.status.has_solution:
        assert osqp.status.value.startswith("infeasible")
        assert ipm.status.value.startswith("infeasible"), ipm.solver_status
        return
    assert ipm.status is QPStatus.SOLVED, ipm.solver_status
    assert ipm.backend == "ipm" and ipm.form is QPForm.PRIMAL
    assert_same_optimum(problem, ipm, osqp)


def test_ipm_with_every_row_in_play_matches_osqp_on_the_papers_shape():
    problem = random_problem(7, 30, 400, 2, 64)
    osqp = solve(problem, SolverSettings(backend="osqp", working_set=False))
    ipm = solve(problem, SolverSettings(backend="ipm", working_set=False))
    assert ipm.status is QPStatus.SOLVED and ipm.rows is None
    assert_same_optimum(problem, ipm, osqp)


def test_a_row_violated_only_after_the_step_joins_and_holds():
    # Row 2 is outside the window at β = 0, but the step that fixes row 0 breaks it.
    v = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    problem = LinearisedProblem(np.array([[1.0], [1.0], [-1.0]]), v, np.array([4.0, -5.0, -1.0]), 1, 2.0, 50.0)
    result = solve(problem, SolverSettings(backend="ipm", working_set_window=0.5))
    assert result.status is QPStatus.SOLVED
    assert 2 in result.rows and 1 not in result.rows
    np.testing.assert_allclose(result.B, [[1.0, 0.0, 0.0]], atol=1e-6)  # β_0 = 1: row 2 at its bound


# (seed, n_fix, n_keep, rank, d_in, rows per case, window): draws on which re-centring, instead
# of a fresh start, stalled when rows joined only at convergence (found by a random probe).
AT_CONVERGENCE = [
    (25639, 9, 136, 2, 17, 2, 0.05),
    (11326, 8, 149, 3, 29, 3, 0.0),
    (42503, 7, 456, 3, 27, 1, 0.0),
    (5954, 7, 211, 2, 19, 3, 0.0),
    (53182, 1, 62, 1, 13, 1, 0.05),
    (38152, 1, 56, 1, 15, 2, 0.0),
]


@pytest.mark.parametrize(("seed", "n_fix", "n_keep", "rank", "d_in", "per_case", "window"), AT_CONVERGENCE)
def test_rows_joining_only_at_convergence_still_reach_the_optimum(
    seed, n_fix, n_keep, rank, d_in, per_case, window, monkeypatch
):
    # Rows that join once the residuals meet the tolerance find every pair near 0 or ∞; the
    # solver starts afresh from its B there.
    # internal: rows joining only at convergence come from no input on demand; checking only at the end forces it
    monkeypatch.setattr(qp_ipm, "CHECK_EVERY", 10**9)
    problem = problem_over_cases(seed, n_fix, n_keep, rank, d_in, per_case)
    osqp = solve(problem, SolverSettings(backend="osqp", working_set=False))
    ipm = solve(problem, SolverSettings(backend="ipm", working_set_window=window))
    if osqp.status.value.startswith("infeasible"):
        assert ipm.status.value.startswith("infeasible"), ipm.solver_status
    else:
        assert ipm.status is QPStatus.SOLVED, ipm.solver_status
        assert_same_optimum(problem, ipm, osqp)


def test_start_rows_are_cleaned_and_checked():
    # Duplicates must not turn a soft row into a second, hard copy of itself.
    problem = random_problem(0, 2, 10, 1, 8)
    osqp = solve(problem, SolverSettings(backend="osqp", working_set=False))
    twice = qp_ipm.run(problem, np.array([0, 0, 1, 1, 2]), tolerance=1e-7, max_iter=100, time_limit_s=10.0)
    assert twice.outcome is Outcome.SOLVED
    assert problem.primal_objective(twice.B) == pytest.approx(osqp.objective, rel=1e-5)
    for bad in ([0, 1, -1], [0, 1, problem.n]):
        with pytest.raises(ValueError, match="rows of the problem"):
            qp_ipm.run(problem, np.array(bad), tolerance=1e-7, max_iter=10, time_limit_s=10.0)


def test_no_row_near_its_bound_and_no_soft_row():
    # Every hard row holds at β = 0 and none is near its bound: β = 0, no iteration at all.
    far = LinearisedProblem(np.ones((3, 1)), np.eye(3), np.array([-5.0, -6.0, -7.0]), 0, 2.0, 50.0)
    result = solve(far, IPM)
    assert result.status is QPStatus.SOLVED and result.iterations == 0
    np.testing.assert_array_equal(result.B, np.zeros((1, 3)))
    # A hard row violated at β = 0 but outside the window still gets in play.
    pushed = LinearisedProblem(np.ones((2, 1)), np.eye(2), np.array([2.0, -6.0]), 0, 2.0, 50.0)
    result = solve(pushed, SolverSettings(backend="ipm", working_set_window=0.0))
    assert result.status is QPStatus.SOLVED
    np.testing.assert_allclose(result.B, [[2.0, 0.0]], atol=1e-5)


@pytest.mark.parametrize("bound", [0.5, 1.0])
@pytest.mark.parametrize("working_set", [True, False])
def test_contradictory_must_keep_rows_are_infeasible(working_set, bound):
    result = solve(contradictory_keep_problem(bound), SolverSettings(backend="ipm", working_set=working_set))
    assert result.status in (QPStatus.INFEASIBLE, QPStatus.INFEASIBLE_INACCURATE) and result.B is None
    assert "Farkas" in result.solver_status


def test_ipm_and_osqp_agree_on_which_crowded_must_keep_sets_are_infeasible():
    # More hard rows than β has dimensions, some asking for a push: some draws infeasible.
    verdicts = []
    for seed in range(30):
        problem = random_problem(seed, 2, 40, 1, 8)
        osqp = solve(problem, SolverSettings(backend="osqp", working_set=False))
        ipm = solve(problem, IPM)
        verdicts.append(osqp.status.value)
        if osqp.status is QPStatus.INFEASIBLE:
            assert ipm.status in (QPStatus.INFEASIBLE, QPStatus.INFEASIBLE_INACCURATE), (seed, ipm.solver_status)
        else:
            assert osqp.status is QPStatus.SOLVED and ipm.status is QPStatus.SOLVED, (seed, ipm.solver_status)
            assert ipm.objective == pytest.approx(osqp.objective, rel=1e-5)
    assert verdicts.count("infeasible") >= 5 and verdicts.count("solved") >= 5  # both kinds were drawn


def test_soft_rows_in_contradiction_are_paid_for_not_infeasible():
    result = solve(contradictory_fix_problem(), IPM)
    assert result.status is QPStatus.SOLVED
    assert result.objective == pytest.approx(100.0, rel=1e-6)


def test_iteration_limit_is_its_own_outcome_and_near_misses_are_inaccurate(monkeypatch):
    import warp_check.qp.osqp_backend as qp_module

    # internal: OSQP rescues any QP up to 5,000 rows; the method's own outcome shows only without it
    monkeypatch.setattr(qp_module, "FULL_SOLVE_MAX_ROWS", 0)  # no OSQP rescue: the IPM's own outcome
    problem = random_problem(1, 30, 200, 2, 50)
    starved = solve(problem, SolverSettings(backend="ipm", backend_settings=(IpmSettings(max_iter=2),)))
    assert starved.status is QPStatus.MAX_ITER and starved.B is None
    assert "iteration limit" in starved.solver_status
    # Stopped one iteration short, the best iterate meets the tolerance only 10× looser.
    full = solve(problem, IPM)
    near = solve(problem, SolverSettings(backend="ipm", backend_settings=(IpmSettings(max_iter=full.iterations - 1),)))
    assert near.status is QPStatus.SOLVED_INACCURATE, near.solver_status
    values = problem.constraint_values(near.B)
    assert np.all(values[problem.n_fix :] >= problem.rhs[problem.n_fix :] - 1e-5 * (1 + np.abs(problem.rhs).max()))


def test_an_undecided_ipm_hands_its_rows_to_osqp():
    # Found by a random probe: a small degenerate problem the IPM stalls on short of 1e-6.
    problem = problem_over_cases(22306, 2, 18, 1, 9, 2)
    result = solve(problem, SolverSettings(backend="ipm", working_set_window=0.0))
    assert result.status is QPStatus.SOLVED and result.backend == "osqp"
    assert result.solver_status.startswith("OSQP from the") and "interior point: stalled" in result.solver_status
    osqp = solve(problem, SolverSettings(backend="osqp", working_set=False))
    assert result.objective == pytest.approx(osqp.objective, rel=1e-6)


def test_a_breakdown_of_the_normal_matrix_is_stalled(monkeypatch):
    import warp_check.qp.osqp_backend as qp_module

    def breaks(M):
        raise np.linalg.LinAlgError("planted")

    # internal: a breakdown of the normal matrix's Cholesky comes from no input on demand
    monkeypatch.setattr(qp_ipm, "shifted_cholesky", breaks)
    problem = random_problem(2, 5, 40, 2, 16)
    # Every row in play, and few of them: OSQP answers instead.
    rescued = solve(problem, SolverSettings(backend="ipm", working_set=False))
    assert rescued.status is QPStatus.SOLVED and rescued.backend == "osqp" and "Cholesky" in rescued.solver_status
    # Rows in play whose OSQP answer breaks a row outside them: OSQP's working set adds it.
    grown = solve(problem, IPM)
    assert grown.status is QPStatus.SOLVED and grown.backend == "osqp" and grown.rounds > 1
    assert grown.objective == pytest.approx(rescued.objective, rel=1e-6)
    # internal: OSQP rescues any QP up to 5,000 rows; the method's own outcome shows only without it
    monkeypatch.setattr(qp_module, "FULL_SOLVE_MAX_ROWS", 0)
    result = solve(problem, IPM)
    assert result.status is QPStatus.STALLED and result.B is None
    assert "Cholesky" in result.solver_status


def test_every_method_outcome_has_a_status():
    assert set(OUTCOME_STATUS) == set(Outcome)
    assert OUTCOME_STATUS[Outcome.INFEASIBLE_INACCURATE] is QPStatus.INFEASIBLE_INACCURATE
    assert OUTCOME_STATUS[Outcome.SOLVED_INACCURATE] is QPStatus.SOLVED_INACCURATE
    assert not OUTCOME_STATUS[Outcome.STALLED].has_solution


def test_auto_picks_the_ipm_from_ipm_min_rows_rows_up_to_ipm_max_unknowns():
    problem = random_problem(0, 5, 50, 2, 16)  # 5 soft rows and 50 hard: every row counts
    assert pick_backend(problem, SolverSettings(newton_min_rows=56)) == "osqp"
    assert pick_backend(problem, SolverSettings(newton_min_rows=55)) == "ipm"
    # Soft rows count as much as hard ones (a neighbourhood brings a thousand must_fix rows).
    assert pick_backend(random_problem(0, 50, 5, 2, 16), SolverSettings(newton_min_rows=55)) == "ipm"
    assert pick_backend(problem, SolverSettings(backend="ipm")) == "ipm"
    assert solve(problem, SolverSettings(newton_min_rows=55)).backend == "ipm"
    assert pick_backend(problem, SolverSettings(newton_min_rows=55, form="dual")) == "osqp"  # only OSQP has it
    # ... and only while β (r·d_in = 2·16 unknowns here) keeps the IPM's p×p normal matrix small.
    assert problem.rank * problem.d_in == 32
    within = SolverSettings(newton_min_rows=55, backend_settings=(IpmSettings(max_unknowns=32),))
    assert pick_backend(problem, within) == "ipm"
    # Past it, the augmented Lagrangian (unless a form is named: the IPM's is the primal).
    past = replace(within, backend_settings=(IpmSettings(max_unknowns=31),))
    assert pick_backend(problem, past) == "alm"
    assert pick_backend(problem, replace(past, form="primal")) == "osqp"
    assert pick_backend(problem, replace(past, backend="ipm")) == "ipm"  # asked for


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("backend", "cvxpy"),
        ("ipm_min_rows", 0),
        ("ipm_max_unknowns", 0),
        ("ipm_max_iter", True),
        ("ipm_tolerance", 2.0),
    ],
)
def test_ipm_settings_name_the_bad_field(field, value):
    with pytest.raises(SettingsError, match=field):
        SolverSettings.from_json({field: value})


def test_the_ipm_cannot_be_asked_for_the_dual_form():
    with pytest.raises(SettingsError, match="form"):
        SolverSettings(backend="ipm", form="dual")


def test_start_rows_must_hold_every_soft_row():
    problem = random_problem(0, 3, 10, 1, 8)
    with pytest.raises(ValueError, match="soft row"):
        qp_ipm.run(problem, np.array([0, 1]), tolerance=1e-7, max_iter=10, time_limit_s=10.0)


def test_a_qp_neither_osqp_nor_the_interior_point_decides_goes_on_to_the_augmented_lagrangian(monkeypatch):
    # Which backend settles an ill-conditioned exact QP can turn on the last bits of v (a tiny
    # MPNet's final layer: the interior point stalled under one CPU's kernels only). Under `auto` a
    # stall of the second backend is not the end: the augmented Lagrangian gets the QP next.
    problem = random_problem(3, 5, 40, 2, 16)
    assert pick_backend(problem, SolverSettings(newton_min_rows=1000)) == "osqp"

    def stalls(problem, settings, warm):
        planted = "planted: stalled"
        return QPSolution(None, QPStatus.STALLED, QPForm.PRIMAL, float("nan"), 6, 0.0, planted, backend=Backend("ipm"))

    # internal: whether the interior point stalls turns on the CPU's kernels; no input makes it stall on demand
    monkeypatch.setattr(qp_ipm, "solve", stalls)  # what the registered backend's solve runs
    # OSQP stopped after one iteration cannot decide it; the interior point (planted) stalls.
    undecided = SolverSettings(
        newton_min_rows=1000, working_set=False, backend_settings=(OsqpSettings(max_iter=1, polishing=False),)
    )
    result = solve(problem, undecided)
    assert result.status.has_solution and result.backend == "alm" and result.handed_over_from == "osqp"
    assert "OSQP's 'maximum iterations reached'" in result.solver_status and "planted: stalled" in result.solver_status
    values = problem.constraint_values(result.B)
    assert np.all(values[problem.n_fix :] >= problem.rhs[problem.n_fix :] - 1e-5 * (1 + np.abs(problem.rhs).max()))
    exact = solve(problem, SolverSettings(backend="alm"))
    assert result.objective == pytest.approx(exact.objective, rel=1e-6)
    # Named, not auto: the backend's own answer, whatever it is.
    named = solve(
        problem,
        SolverSettings(
            backend="osqp", working_set=False, backend_settings=(OsqpSettings(max_iter=1, polishing=False),)
        ),
    )
    assert not named.status.has_solution and named.handed_over_from is None


def test_a_qp_auto_gave_the_interior_point_that_it_leaves_undecided_goes_on_to_the_augmented_lagrangian(monkeypatch):
    # The first QP of a later round of a million must_keep cases (7,640 soft rows, 33,003 in play):
    # the interior point stalled, OSQP's working set cannot take that many rows, and the repair
    # ended there. Under `auto` the augmented Lagrangian gets it next.
    problem = random_problem(3, 5, 40, 2, 16)
    within = SolverSettings(newton_min_rows=10)
    assert pick_backend(problem, within) == "ipm"

    def stalls(problem, settings, warm):
        planted = "planted: stalled"
        return QPSolution(None, QPStatus.STALLED, QPForm.PRIMAL, float("nan"), 6, 0.0, planted, backend=Backend("ipm"))

    # internal: whether the interior point stalls turns on the CPU's kernels; no input makes it stall on demand
    monkeypatch.setattr(qp_ipm, "solve", stalls)
    result = solve(problem, within)
    assert result.status is QPStatus.SOLVED and result.backend == "alm" and result.handed_over_from == "ipm"
    assert "after the ipm's 'planted: stalled'" in result.solver_status
    assert result.objective == pytest.approx(solve(problem, SolverSettings(backend="alm")).objective, rel=1e-6)
    # Named, not auto: the backend's own answer.
    assert solve(problem, SolverSettings(backend="ipm")).status is QPStatus.STALLED
