"""The backend contract, run on every registered backend (a new one is tested without a test of its
own), and a toy backend that registers with one call and passes the same contract."""

from __future__ import annotations

import dataclasses
import inspect
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from testkit.qp_problems import contradictory_keep_problem, random_problem

import warp_check.qp.active_set as qp_active_set
from warp_check.errors import SettingsError
from warp_check.qp import registry
from warp_check.qp.registry import AutoPlace, Backend, register_backend, unregister_backend
from warp_check.qp.settings import SolverSettings
from warp_check.qp.solution import QPForm, QPStatus, answer_or_hand_over
from warp_check.qp.solve import after_decider, pick_backend, solve
from warp_check.repair import advice
from warp_check.repair.settings import RepairSettings

BUILT_IN = [backend.name for backend in registry.registered()]


def check_contract(name: str) -> None:
    """What every backend owes: the one signature, its settings record, OSQP's answer on a small
    feasible QP, a warm re-solve that agrees, infeasibility decided (by it or the decider it hands
    over to), statuses from the one table, and advice that names its settings."""
    backend = registry.backend(name)
    assert list(inspect.signature(backend.solve.load()).parameters) == ["problem", "settings", "warm"]
    params = backend.settings.__dataclass_params__
    assert params.frozen and all(f.kw_only for f in dataclasses.fields(backend.settings)), name
    form = backend.forms[0]
    settings = SolverSettings(backend=name)
    assert SolverSettings.from_json(settings.to_json()) == settings

    feasible = random_problem(2, 3, 12, 2, 16)  # fewer rows than unknowns: no backend needs a hand-over
    reference = solve(feasible, SolverSettings(backend="osqp", working_set=False))
    solution = backend.solve(feasible, settings, None)
    assert solution.status is QPStatus.SOLVED and solution.backend == name, solution.solver_status
    assert solution.objective == pytest.approx(reference.objective, rel=1e-5)
    scale = 1 + np.abs(feasible.rhs).max()
    assert np.all(
        feasible.constraint_values(solution.B)[feasible.n_fix :] >= feasible.rhs[feasible.n_fix :] - 1e-5 * scale
    )
    again = backend.solve(feasible, settings, solution.warm)  # where it keeps a warm start, from it
    np.testing.assert_allclose(again.B, solution.B, atol=1e-5 * scale)

    infeasible = solve(contradictory_keep_problem(), settings)
    assert infeasible.status.infeasible and infeasible.B is None, infeasible.solver_status
    assert infeasible.backend == name or infeasible.handed_over_from == name
    for result in (solution, again, infeasible):
        assert isinstance(result.status, QPStatus) and (result.B is not None) == result.status.has_solution
        assert isinstance(result.form, QPForm) and result.solver_status

    words = advice.after_solver_failure(RepairSettings(solver=settings), name)
    assert "max_iter" in words, words
    if len(backend.forms) == 1:
        other = "dual" if form == "primal" else "primal"
        with pytest.raises(SettingsError, match=f"the '{name}' backend solves"):
            SolverSettings(backend=name, form=other)


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_registered_backend_keeps_the_contract(name):
    check_contract(name)


def test_auto_picks_as_measured_and_the_backend_names_come_from_the_registry():
    assert BUILT_IN == ["osqp", "ipm", "active_set", "alm"]
    with pytest.raises(SettingsError, match="must be 'auto', 'osqp', 'ipm', 'active_set' or 'alm'"):
        SolverSettings(backend="cvxpy")
    problem = random_problem(0, 5, 50, 2, 16)  # 55 rows, r·d_in = 32
    assert registry.decider().name == "osqp"
    small_beta, large_beta = (
        SolverSettings(newton_min_rows=55),
        SolverSettings.from_json({"ipm_min_rows": 55, "ipm_max_unknowns": 31}),
    )
    assert [b.name for b in after_decider(problem, small_beta)] == ["ipm", "alm"]
    assert [b.name for b in after_decider(problem, large_beta)] == ["alm"]


# -- a toy backend, registered the way a backend's file registers itself --------------------------


@dataclass(frozen=True, kw_only=True)
class ToySettings:
    """The dual active set on the whole problem, named otherwise: enough to be a backend of its own."""

    tolerance: float = 1e-9  # every row's optimality condition, relative to 1 + max |h|
    max_iter: int = 100
    max_rows: int = 60  # auto gives it problems of at most this many rows (its place in the rule)

    def __post_init__(self) -> None:
        if not 0 < self.tolerance < 1:
            raise SettingsError("tolerance", self.tolerance, "must be a number in (0, 1)")
        if self.max_iter < 1:
            raise SettingsError("max_iter", self.max_iter, "must be an integer >= 1")


def toy_solve(problem, settings, warm):
    own = settings.of(ToySettings)
    start = time.perf_counter()
    run = qp_active_set.run(problem, tolerance=own.tolerance, max_iter=own.max_iter, time_limit_s=settings.time_limit_s)
    return answer_or_hand_over(problem, settings, start, run, backend=Backend("toy"), words="toy", form=QPForm.DUAL)


def toy_advice(own: ToySettings, hand_over: str) -> str:
    return f"raise [repair.solver.toy] max_iter (now {own.max_iter}) and {hand_over}"


@pytest.fixture
def toy() -> Iterator[str]:
    place = AutoPlace(rank=0, fits=lambda problem, own: problem.n <= own.max_rows)
    register_backend(name="toy", settings=ToySettings, solve=toy_solve, advice=toy_advice, forms=("dual",), auto=place)
    try:
        yield "toy"
    finally:
        unregister_backend("toy")


def test_a_toy_backend_registers_with_one_call_and_keeps_the_contract(toy):
    check_contract(toy)
    # Its place in auto's rule: first among the Newton backends, for problems of at most max_rows rows.
    problem = random_problem(0, 5, 50, 2, 16)
    assert pick_backend(problem, SolverSettings(newton_min_rows=55)) == "toy"
    narrow = SolverSettings.from_json({"ipm_min_rows": 55, "toy": {"max_rows": 54}})
    assert pick_backend(problem, narrow) == "ipm"
    assert pick_backend(problem, SolverSettings(newton_min_rows=55, form="primal")) == "ipm"  # it solves the dual
    # Its settings: nested under its name on disk, a misspelt key refused naming it.
    tuned = SolverSettings(backend="toy", backend_settings=(ToySettings(max_iter=7),))
    assert tuned.to_json()["toy"] == {"tolerance": 1e-9, "max_iter": 7, "max_rows": 60}
    assert SolverSettings.from_json(tuned.to_json()) == tuned
    with pytest.raises(SettingsError, match=r"toy\.max_iters=7: is not a setting of the 'toy' backend"):
        SolverSettings.from_json({"toy": {"max_iters": 7}})
    with pytest.raises(SettingsError, match=r"toy\.max_iter=0: must be an integer >= 1"):
        SolverSettings.from_json({"toy": {"max_iter": 0}})
    assert advice.after_solver_failure(RepairSettings(solver=tuned), "toy").startswith(
        "raise [repair.solver.toy] max_iter (now 7) and max_iter (now 20000; OSQP's"
    )
    with pytest.raises(SettingsError, match="registered already"):
        register_backend(name="toy", settings=ToySettings, solve=toy_solve, advice=toy_advice, forms=("dual",))


def test_a_toy_backend_gone_is_refused_by_name():
    with pytest.raises(SettingsError, match="backend='toy'"):
        SolverSettings(backend="toy")
    with pytest.raises(SettingsError, match="toy=.*is not a solver setting"):
        SolverSettings.from_json({"toy": {"max_iter": 7}})


def test_a_second_decider_is_refused():
    decides = registry.decider().decides
    with pytest.raises(SettingsError, match="'osqp' decides undecided runs already"):
        register_backend(
            name="rival", settings=ToySettings, solve=toy_solve, advice=toy_advice, forms=("dual",), decides=decides
        )
    assert "rival" not in [b.name for b in registry.registered()]


def test_a_backend_names_its_solve_as_module_and_function_imported_when_first_called():
    # The built-in backends' files name their numerics: reading settings never imports them.
    assert registry.backend("ipm").solve.target == "warp_check.qp.ipm:solve"
    assert registry.decider().decides.solve_from.target == "warp_check.qp.osqp_backend:solve_from_rows"
    named = register_backend(
        name="named", settings=ToySettings, solve="warp_check.qp.active_set:solve", advice=toy_advice, forms=("dual",)
    )
    try:
        assert named.solve.load() is qp_active_set.solve
    finally:
        unregister_backend("named")
    for wrong in ("warp_check.qp.active_set", "warp_check.qp.active set:solve", "warp_check.qp.active_set:"):
        with pytest.raises(SettingsError, match="must be a function or 'module:function'"):
            register_backend(name="wrong", settings=ToySettings, solve=wrong, advice=toy_advice, forms=("dual",))
    assert "wrong" not in [b.name for b in registry.registered()]
