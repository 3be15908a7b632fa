"""The QP: primal and dual agree (hypothesis), infeasibility is reported as such, statuses map."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from testkit.qp_problems import (
    CASE_PROBLEM_SHAPE,
    contradictory_fix_problem,
    contradictory_keep_problem,
    problem_over_cases,
    random_problem,
)

from warp_check.errors import SettingsError
from warp_check.qp.backends.osqp import OsqpSettings
from warp_check.qp.osqp_backend import OSQP_STATUS
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.settings import SolverSettings
from warp_check.qp.solution import QPForm, QPStatus
from warp_check.qp.solve import solve


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**16),
    n_fix=st.integers(1, 12),
    n_keep=st.integers(0, 20),
    rank=st.integers(1, 4),
    d_in=st.integers(8, 40),
    working_set=st.booleans(),
)
# Found by a random run: 20 hard rows in 22 dimensions, near infeasible; |B| ~ 50 and the dual's rows
# hold to 2.4e-4, the solver's relative tolerance at that scale.
@example(seed=1000, n_fix=3, n_keep=20, rank=1, d_in=22, working_set=False)
def test_primal_and_dual_give_the_same_beta_and_objective(seed, n_fix, n_keep, rank, d_in, working_set):
    problem = random_problem(seed, n_fix, n_keep, rank, d_in)
    primal = solve(problem, SolverSettings(form="primal", working_set=working_set))
    dual = solve(problem, SolverSettings(form="dual", working_set=working_set))
    # Random keep sets are feasible with high probability when n_keep <= rank*d_in; if not,
    # both forms must agree that they are not.
    if not primal.status.has_solution or not dual.status.has_solution:
        assert primal.status.value.startswith("infeasible") and dual.status.value.startswith("infeasible")
        return
    assert primal.form is QPForm.PRIMAL
    assert dual.form is QPForm.DUAL or dual.fallback_from is QPForm.DUAL
    scale = max(1.0, float(np.abs(primal.B).max()))
    np.testing.assert_allclose(dual.B, primal.B, atol=1e-5 * scale)
    assert dual.objective == pytest.approx(primal.objective, rel=1e-4, abs=1e-6)
    # The must_keep rows hold at the solution (hard constraints), to solver tolerance.
    values = problem.constraint_values(dual.B)
    assert np.all(values[n_fix:] >= problem.rhs[n_fix:] - 1e-5 * scale)


def test_working_set_returns_the_full_problem_optimum():
    problem = random_problem(3, 20, 300, 2, 64)
    full = solve(problem, SolverSettings(form="dual", working_set=False))
    lazy = solve(problem, SolverSettings(form="dual", working_set=True))
    np.testing.assert_allclose(lazy.B, full.B, atol=1e-6)
    assert lazy.objective == pytest.approx(full.objective, rel=1e-7)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_keep=st.integers(1, 60), batch=st.sampled_from([4, 300]), **CASE_PROBLEM_SHAPE)
# Found by a random run: the lazy answer leaves a must_fix slack of 1.8e-7 (solver tolerance),
# which λ = 50 turns into an objective 9e-6 higher.
@example(seed=1173, n_fix=3, n_keep=13, rank=3, d_in=17, rows_per_case=2, batch=4, window=0.0)
def test_lazy_rows_give_the_full_problems_beta_and_objective(
    seed, n_fix, n_keep, rank, d_in, rows_per_case, batch, window
):
    # No more hard rows than r·d_in: random sets like that are feasible with high probability
    # (past it, near-infeasible draws make the two answers a matter of solver tolerance).
    n_keep = max(1, min(n_keep, rank * d_in // rows_per_case))
    problem = problem_over_cases(seed, n_fix, n_keep, rank, d_in, rows_per_case)
    full = solve(problem, SolverSettings(form="dual", working_set=False))
    lazy = solve(problem, SolverSettings(form="dual", working_set_batch=batch, working_set_window=window))
    if not full.status.has_solution or not lazy.status.has_solution:
        assert full.status.value.startswith("infeasible") and lazy.status.value.startswith("infeasible")
        return
    scale = max(1.0, float(np.abs(full.B).max()))
    np.testing.assert_allclose(lazy.B, full.B, atol=1e-5 * scale)
    # OSQP meets each row only to ~1e-7 (eps_abs, times the scale), and each must_fix slack is
    # priced λ: two solved answers may differ by λ·n_fix·1e-6·scale in objective, no more.
    slack_tolerance = problem.lam * n_fix * 1e-6 * scale
    assert lazy.objective == pytest.approx(full.objective, rel=1e-5, abs=slack_tolerance)
    # Every hard row holds at the lazy answer, the ones never added included.
    values = problem.constraint_values(lazy.B)
    assert np.all(values[n_fix:] >= problem.rhs[n_fix:] - 1e-5 * scale)
    if lazy.rows is not None:  # None: the rounds ran out and the whole problem was solved
        assert np.all(lazy.rows[:n_fix] == np.arange(n_fix))


def test_a_row_violated_only_after_the_step_is_added_and_held():
    # Row 2 is far from its bound at β = 0 (outside the window, so not in the first QP), but
    # it points against the must_fix row: the step that fixes row 0 breaks it unless added.
    v = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    C = np.array([[1.0], [1.0], [-1.0]])
    rhs = np.array([4.0, -5.0, -1.0])  # fix: ⟨a0,β⟩ ≥ 4; keep: ⟨a2,β⟩ = −β_0 ≥ −1
    problem = LinearisedProblem(C, v, rhs, n_fix=1, rho=2.0, lam=50.0)
    first = solve(problem.subset(np.array([0])), SolverSettings(working_set=False))
    assert problem.constraint_values(first.B)[2] < rhs[2] - 1.0  # the fix-only step breaks it
    lazy = solve(problem, SolverSettings(working_set_window=0.5))
    full = solve(problem, SolverSettings(working_set=False))
    assert lazy.rounds == 2 and 2 in lazy.rows and 1 not in lazy.rows
    assert problem.constraint_values(lazy.B)[2] >= rhs[2] - 1e-6
    np.testing.assert_allclose(lazy.B, full.B, atol=1e-7)
    assert lazy.objective == pytest.approx(full.objective, rel=1e-7)


def test_rows_over_cases_match_rows_with_their_own_copy_of_v():
    problem = problem_over_cases(5, 4, 30, 2, 12, 3)
    copied = LinearisedProblem(problem.C, problem.V[problem.cases], problem.rhs, problem.n_fix, 2.0, 50.0)
    B = np.random.default_rng(0).normal(size=(2, 12))
    np.testing.assert_allclose(problem.constraint_values(B), copied.constraint_values(B), rtol=1e-12)
    rows = np.array([0, 1, 2, 3, 7, 8, 20, 50])
    np.testing.assert_allclose(problem.subset(rows).gram(), copied.subset(rows).gram(), rtol=1e-12)
    cached = LinearisedProblem(
        problem.C, problem.V, problem.rhs, problem.n_fix, 2.0, 50.0, problem.V @ problem.V.T, cases=problem.cases
    )
    np.testing.assert_allclose(cached.subset(rows).gram(), copied.subset(rows).gram(), rtol=1e-12)
    for form in ("primal", "dual"):
        a = solve(problem, SolverSettings(form=form, working_set=False))
        b = solve(copied, SolverSettings(form=form, working_set=False))
        np.testing.assert_allclose(a.B, b.B, atol=1e-9)


def test_a_working_set_that_does_not_settle_fails_or_solves_whole(monkeypatch):
    import warp_check.qp.osqp_backend as qp_module

    problem = problem_over_cases(2, 6, 40, 2, 10, 1)
    slow = SolverSettings(form="dual", working_set_batch=1, working_set_rounds=1, working_set_window=0.0)
    whole = solve(problem, slow)  # small: solved whole after the rounds run out
    assert whole.status is QPStatus.SOLVED and whole.rows is None
    # internal: OSQP solves whole any QP up to 5,000 rows; a test-sized QP is past the limit only below it
    monkeypatch.setattr(qp_module, "FULL_SOLVE_MAX_ROWS", 10)
    failed = solve(problem, slow)  # large: no n×n fallback, a status that says why
    assert failed.status is QPStatus.MAX_ITER and failed.B is None
    assert failed.unsettled and failed.solver_status.startswith(qp_module.WORKING_SET_UNSETTLED)


@pytest.mark.parametrize("form", ["primal", "dual"])
@pytest.mark.parametrize("working_set", [True, False])
def test_contradictory_must_keep_set_is_infeasible_not_a_wrong_answer(form, working_set):
    result = solve(contradictory_keep_problem(), SolverSettings(form=form, working_set=working_set))
    assert result.status in (QPStatus.INFEASIBLE, QPStatus.INFEASIBLE_INACCURATE)
    assert result.B is None


def test_undecided_dual_falls_back_to_the_primal(monkeypatch):
    # Found by hypothesis in CI: on an infeasible problem the dual's ADMM can run out of
    # iterations before it detects the unbounded direction (how soon varies by machine);
    # the primal then says "infeasible". A starved dual makes that deterministic here.
    import warp_check.qp.osqp_backend as qp_module

    problem = random_problem(4, 1, 17, 1, 8)
    original = qp_module._solve_dual

    def starved_dual(problem, settings):
        B, result = original(
            problem,
            SolverSettings(backend_settings=(OsqpSettings(max_iter=50, eps_infeasible=1e-12, polishing=False),)),
        )
        assert qp_module._status(QPForm.DUAL, result) is QPStatus.MAX_ITER
        return B, result

    # internal: when the dual's ADMM detects infeasibility varies by machine; starving it makes it certain
    monkeypatch.setattr(qp_module, "_solve_dual", starved_dual)
    result = solve(problem, SolverSettings(form="dual", working_set=True))
    assert result.fallback_from is QPForm.DUAL and result.form is QPForm.PRIMAL
    assert result.status is QPStatus.INFEASIBLE and result.B is None


def test_infeasible_must_fix_rows_only_cost_slack():
    # The same contradiction among must_fix rows is soft: solved, with slack.
    result = solve(contradictory_fix_problem())
    assert result.status is QPStatus.SOLVED
    assert result.objective == pytest.approx(50.0 * 2.0, rel=1e-6)  # β = 0, both slacks = 1


def test_iteration_limit_is_its_own_outcome():
    problem = random_problem(1, 30, 200, 2, 50)
    result = solve(
        problem,
        SolverSettings(
            backend="osqp", working_set=False, backend_settings=(OsqpSettings(max_iter=1, polishing=False),)
        ),
    )
    assert result.status is QPStatus.MAX_ITER
    assert result.B is None


def test_status_table_covers_every_osqp_status():
    import osqp

    names = {status.name for status in osqp.SolverStatus}
    for form in QPForm:
        assert set(OSQP_STATUS[form]) == names
    assert OSQP_STATUS[QPForm.DUAL]["OSQP_DUAL_INFEASIBLE"] is QPStatus.INFEASIBLE  # dual unbounded ⇔ infeasible
    assert OSQP_STATUS[QPForm.PRIMAL]["OSQP_PRIMAL_INFEASIBLE"] is QPStatus.INFEASIBLE
    assert OSQP_STATUS[QPForm.PRIMAL]["OSQP_SOLVED_INACCURATE"] is QPStatus.SOLVED_INACCURATE


def test_form_is_picked_by_size():
    small_n = random_problem(0, 3, 3, 2, 50)
    assert small_n.pick_form() is QPForm.DUAL
    big_n = random_problem(0, 40, 200, 1, 8)
    assert big_n.pick_form() is QPForm.PRIMAL


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("form", "fast"),
        ("eps_abs", 0.0),
        ("eps_rel", float("nan")),
        ("max_iter", 0),
        ("max_iter", True),  # a bool is not a count
        ("time_limit_s", -1.0),
        ("time_limit_s", "60"),  # a SettingsError, not a TypeError from math.isfinite
        ("polish_refine_iter", -1),
        ("scaling", True),
        ("working_set_rounds", 0),
        ("working_set_batch", 0),
        ("working_set_window", -0.1),
        ("working_set_window", float("inf")),
    ],
)
def test_solver_settings_name_the_bad_field(field, value):
    with pytest.raises(SettingsError, match=field):
        SolverSettings.from_json({field: value})


def test_solving_prints_nothing(capsys):
    # OSQP's binding prints "Polishing not needed ..." through sys.stdout even with verbose
    # off; a test report (or a notebook) must not fill with it.
    problem = random_problem(0, 3, 40, 2, 16)
    for form in ("primal", "dual"):
        assert solve(problem, SolverSettings(form=form)).status is QPStatus.SOLVED
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
