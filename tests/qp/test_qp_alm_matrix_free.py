"""The augmented Lagrangian without a Gram matrix: where a working set would pass MAX_ROWS, the QP is
settled over every row at once, to the optimum the working set's method finds on the whole problem."""

from __future__ import annotations

import time
import weakref
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_qp_alm import correlated_problem, reference_answer
from testkit.qp_problems import (
    CASE_PROBLEM_SHAPE,
    contradictory_keep_problem,
    problem_over_cases,
    random_problem,
)

import warp_check.qp.alm as qp_alm
import warp_check.qp.alm_matrix_free as matrix_free
import warp_check.qp.osqp_backend as qp_module
from warp_check.qp.alm_matrix_free import Budget, RowProducts, box_violation, solve_box
from warp_check.qp.gram_preconditioner import LowRankPlusDiagonal, ServedFace
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.settings import SolverSettings
from warp_check.qp.solution import Outcome, QPStatus
from warp_check.qp.solve import solve

ALM = SolverSettings(backend="alm")


def box_of(problem):
    upper = np.full(problem.n, np.inf)
    upper[: problem.n_fix] = problem.prices()
    return upper, matrix_free.TOLERANCE * (1.0 + float(np.max(np.abs(problem.rhs))))


def assert_at_optimum(result, reference, problem, z: np.ndarray) -> None:
    """The optimum to the method's tolerance: every hard row holds to it, the objective is within the
    duality gap that conditions met to ``limit`` leave (Σ z_i·|s_i| + Σ_soft λ_i·max(−s_i, 0)), and B
    within what that gap allows: the objective is ρ-strongly convex, so ρ/2‖B − B*‖² ≤ its excess."""
    assert result.status is QPStatus.SOLVED, result.solver_status
    _, limit = box_of(problem)
    gap = limit * (1.0 + float(np.sum(z)) + float(np.sum(problem.prices())))
    scale = max(1.0, float(np.abs(reference.B).max()))
    allowed = max(1e-4 * scale, float(np.sqrt(2 * 2 * gap / problem.rho)))
    assert float(np.linalg.norm(result.B - reference.B)) <= allowed
    assert result.objective <= reference.objective + 2 * gap
    values = problem.constraint_values(result.B)
    assert np.all(values[problem.n_fix :] >= problem.rhs[problem.n_fix :] - 2 * limit)


def assert_rows_of_k(rows: RowProducts, K: np.ndarray, seed: int) -> None:
    rng = np.random.default_rng(seed)
    B, y = rng.normal(size=(rows.C.shape[1], rows.V.shape[1])), rng.normal(size=rows.n)
    np.testing.assert_allclose(rows.K(B), K @ B.ravel(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rows.KT(y).ravel(), K.T @ y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rows.norms2(), np.sum(K**2, axis=1), rtol=1e-12)
    S = np.unique(rng.choice(rows.n, size=max(1, rows.n // 3)))
    np.testing.assert_allclose(rows.columns(S), K @ K[S].T, rtol=1e-10, atol=1e-10)
    a = rng.permutation(rows.n)[: max(1, rows.n // 2)]
    np.testing.assert_allclose(rows.block(a, S), K[a] @ K[S].T, rtol=1e-10, atol=1e-10)
    A = K.reshape(rows.n, rows.C.shape[1], rows.V.shape[1])
    v = A[:, 0, :] / rows.C[:, :1]  # each row's v, back from c ⊗ v (c_0 ≠ 0 almost surely)
    np.testing.assert_allclose(rows.v_moment(), v.T @ v, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("shape", ["rows per case", "a row per case, permuted", "a row per case, in order"])
def test_row_products_are_the_rows_of_k_and_read_the_loops_v_where_it_lies(shape):
    if shape == "rows per case":  # several classes: a case's rows share its v
        problem = problem_over_cases(0, 3, 20, 3, 7, 2)
    else:
        problem = random_problem(0, 3, 20, 3, 7)
        if shape == "a row per case, permuted":  # the loop orders its rows soft first
            order = np.random.default_rng(1).permutation(problem.n)
            problem = replace(problem, V=problem.V[np.argsort(order)], cases=order)
    K = np.einsum("ij,ik->ijk", problem.C, problem.row_representations()).reshape(problem.n, -1)
    rows = RowProducts.of(problem)
    assert rows.V is problem.V  # never gathered whole (400 MB at 131k cases of d = 384)
    assert rows.V.dtype == np.float64  # float32 v computes in float64, as everywhere in the loop
    assert_rows_of_k(rows, K, 0)
    for size in (problem.n // 4, (3 * problem.n) // 4):  # a few rows gathered, most read in place
        chosen = np.sort(np.random.default_rng(size).choice(problem.n, size=size, replace=False))
        part = rows.subset(chosen)
        assert (part.V is problem.V) == (2 * size > problem.V.shape[0])
        assert_rows_of_k(part, K[chosen], size)


def test_the_preconditioner_inverts_the_kronecker_product_of_the_rows_second_moments():
    problem = problem_over_cases(1, 4, 30, 3, 5, 1)
    rows = RowProducts.of(problem)
    rho, sigma = 2.0, 7.0
    V = problem.row_representations()
    S_c, S_v = rows.C.T @ rows.C / rows.n, V.T @ V
    M = rho * np.eye(15) + sigma * np.kron(S_c, S_v)  # β = vec(B), B (r, d_in) row-major
    X = np.random.default_rng(1).normal(size=(3, 5))
    np.testing.assert_allclose(matrix_free.kronecker(rows, rho, sigma)(X).ravel(), np.linalg.solve(M, X.ravel()))
    # ... which is Σ_A (c cᵀ) ⊗ (v vᵀ) itself where every row shares one c.
    one_c = RowProducts(np.ones((rows.n, 3)), V)
    K = np.einsum("ij,ik->ijk", one_c.C, one_c.V).reshape(rows.n, -1)
    exact = rho * np.eye(15) + sigma * K.T @ K
    np.testing.assert_allclose(matrix_free.kronecker(one_c, rho, sigma)(X).ravel(), np.linalg.solve(exact, X.ravel()))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_keep=st.integers(1, 120), **CASE_PROBLEM_SHAPE)
def test_every_row_at_once_reaches_the_whole_problems_optimum(seed, n_fix, n_keep, rank, d_in, rows_per_case, window):
    problem = problem_over_cases(seed, n_fix, n_keep, rank, d_in, rows_per_case)
    reference = reference_answer(problem)
    if reference.status.infeasible:
        return  # infeasible problems are the working set's to decide (its Farkas ray)
    upper, limit = box_of(problem)
    result = solve_box(RowProducts.of(problem), problem.rhs, upper, problem.rho, limit, np.zeros(problem.n),
                       Budget(newton_left=5000, deadline=time.perf_counter() + 60))  # fmt: skip
    assert result.outcome.value == "solved", result.detail
    assert np.all(result.z >= 0) and np.all(result.z <= upper)
    answer = replace(reference, B=result.B, objective=problem.primal_objective(result.B), status=QPStatus.SOLVED)
    assert_at_optimum(answer, reference, problem, result.z)


def test_a_working_set_at_its_limit_goes_on_over_every_row_to_the_optimum(monkeypatch):
    for seed in range(3):
        problem = correlated_problem(seed, 8, 400, 2, 24)  # 408 rows, 48 unknowns
        whole = solve(problem, ALM)
        assert whole.status is QPStatus.SOLVED and whole.rows.size > problem.n_fix + 10
        with monkeypatch.context() as patched:
            # internal: the working set holds 5,000 rows (a 200 MB Gram matrix); a test reaches it only by lowering it
            patched.setattr(qp_alm, "MAX_ROWS", problem.n_fix + 10)  # too few for the rows that bind
            crowded = solve(problem, ALM)
        assert crowded.backend == "alm" and "matrix-free" in crowded.solver_status, crowded.solver_status
        assert "every row in play" in crowded.solver_status and crowded.rows is None
        # Its warm start keeps no Gram matrix, and a re-solve of moved bounds goes over every row at once.
        assert crowded.warm is not None and crowded.warm.gram is None
        assert_at_optimum(crowded, whole, problem, crowded.warm.z)
        moved = replace(problem, rhs=problem.rhs + np.linspace(0.0, 0.05, problem.n))
        again = solve(moved, ALM, crowded.warm)
        assert "matrix-free" in again.solver_status
        assert_at_optimum(again, solve(moved, ALM), moved, again.warm.z)


def test_where_every_row_at_once_cannot_settle_it_the_working_sets_answer_stands_and_says_so(monkeypatch):
    problem = random_problem(1, 30, 200, 2, 50)
    room = problem.rows_near_bound(0.0).size  # the first round's rows fit, the rows joining do not
    # internal: the working set holds 5,000 rows (a 200 MB Gram matrix); a test reaches it only by lowering it
    monkeypatch.setattr(qp_alm, "MAX_ROWS", room)
    # internal: no small QP keeps the matrix-free method from settling within its 60 outer iterations
    monkeypatch.setattr(matrix_free, "OUTER_MAX", 1)  # one outer iteration: far from the 1e-6 it needs
    crowded = solve(problem, SolverSettings(backend="alm", working_set_window=0.0))
    assert crowded.status is QPStatus.SOLVED_PARTIAL and crowded.status.has_solution and crowded.backend == "alm"
    assert "working set full" in crowded.solver_status and "over every row: worst row" in crowded.solver_status
    assert crowded.rows.size <= room
    slack = problem.constraint_values(crowded.B) - problem.rhs
    hard = crowded.rows[crowded.rows >= problem.n_fix]
    assert np.all(slack[hard] >= -1e-6)  # every hard row it holds holds
    assert np.min(slack[problem.n_fix :]) < -1e-6  # and the answer says it is partial for a reason


def test_a_first_working_set_past_its_limit_is_never_built_every_row_goes_at_once(monkeypatch):
    # A million cases near their margin have ~12,000 rows near their bound before the first round:
    # their Gram matrix alone would be 1.2 GB. The QP goes over every row from the start instead, and
    # a Gram matrix is only ever built over the rows of a face within the limit.
    problem = correlated_problem(0, 8, 400, 2, 24)
    whole = solve(problem, ALM)
    first = problem.rows_near_bound(SolverSettings().working_set_window).size
    # internal: the working set holds 5,000 rows (a 200 MB Gram matrix); a test reaches it only by lowering it
    monkeypatch.setattr(qp_alm, "MAX_ROWS", first - 1)
    built = []
    gram = type(problem).cross_gram
    # internal: the size of the Gram matrices built (1.2 GB at real scale) is in no result
    monkeypatch.setattr(type(problem), "cross_gram", lambda self, a, b: built.append(a.size) or gram(self, a, b))
    crowded = solve(problem, ALM)
    assert crowded.backend == "alm" and "matrix-free" in crowded.solver_status
    assert all(size < first for size in built)
    assert crowded.warm.gram is None or crowded.warm.gram.shape[0] < first
    assert_at_optimum(crowded, whole, problem, crowded.warm.z)


def test_more_soft_rows_than_the_working_set_holds_settle_on_the_gram_matrix_of_the_face_they_reach(monkeypatch):
    # Real suites at scale: 300k SST-2 sentences and their perturbations leave 13,500 rows short of
    # their margin (soft), past the working set's 5,000, while ~4,900 hold multipliers at the optimum;
    # the face by CG missed on rows that correlated until the QP's time limit. Here 150 soft rows and
    # a limit of 130: the solve starts over every row, and where the rows holding multipliers fit,
    # the working set takes them, soft rows joining again where its answer violates them.
    built, on_gram = [], 0
    gram = LinearisedProblem.cross_gram

    def recorded(self, a, b):
        built.append(a.size)
        return gram(self, a, b)

    for seed in range(8):
        problem = correlated_problem(seed, 150, 400, 2, 24)
        whole = solve(problem, ALM)
        with monkeypatch.context() as patched:
            # internal: the working set holds 5,000 rows (a 200 MB Gram matrix); a test reaches it only by lowering it
            patched.setattr(qp_alm, "MAX_ROWS", 130)
            # internal: the size of the Gram matrices built (1.2 GB at real scale) is in no result
            patched.setattr(LinearisedProblem, "cross_gram", recorded)
            crowded = solve(problem, ALM)
        assert crowded.backend == "alm" and "matrix-free" in crowded.solver_status, crowded.solver_status
        assert_at_optimum(crowded, whole, problem, crowded.warm.z)
        if crowded.warm.gram is None:  # settled over every row (the face past the limit)
            assert crowded.rows is None and "every row in play" in crowded.solver_status
            continue
        on_gram += 1
        # every row's optimality condition, soft ones out of the set too, to the working set's own
        # tolerance (1e-9), not the matrix-free method's 1e-6
        assert "rows' face" in crowded.solver_status and crowded.warm.gram.shape[0] <= 130
        z = np.zeros(problem.n)
        z[crowded.warm.rows] = crowded.warm.z
        upper, limit = box_of(problem)
        slack = problem.constraint_values(crowded.B) - problem.rhs
        assert box_violation(z, slack, upper) <= 1e-3 * limit
    assert max(built) <= 130
    # Most of these optima are held by fewer rows than the limit (7 of 8; seed 4's by 135)
    assert on_gram >= 4, on_gram


def test_a_face_the_working_set_cannot_settle_goes_back_over_every_row_not_to_osqp(monkeypatch):
    # A face handed over whose box QP stalls: at real scale OSQP would get every soft row (13,500) and
    # as many hard ones; the solve goes on over every row from the set's multipliers instead.
    problem = correlated_problem(0, 150, 400, 2, 24)
    whole = solve(problem, ALM)
    # internal: the working set holds 5,000 rows (a 200 MB Gram matrix); a test reaches it only by lowering it
    monkeypatch.setattr(qp_alm, "MAX_ROWS", 130)
    # internal: no input makes the working set's box QP stall on demand
    monkeypatch.setattr(qp_alm._BoxQP, "solve", lambda self, z0, budget: (Outcome.STALLED, "held back by the test"))
    crowded = solve(problem, ALM)
    assert crowded.backend == "alm" and crowded.handed_over_from is None, crowded.solver_status
    assert "every row in play; first matrix-free" in crowded.solver_status and "rows' face" in crowded.solver_status
    assert crowded.rows is None and crowded.warm.gram is None
    assert_at_optimum(crowded, whole, problem, crowded.warm.z)


def test_contradicting_must_keep_rows_past_the_working_set_are_infeasible(monkeypatch):
    problem = contradictory_keep_problem(1.0)
    # internal: the working set holds 5,000 rows (a 200 MB Gram matrix); a test reaches it only by lowering it
    monkeypatch.setattr(qp_alm, "MAX_ROWS", 0)  # no room: every row at once, from the start
    # internal: OSQP rescues any QP up to 5,000 rows; the method's own outcome shows only without it
    monkeypatch.setattr(qp_module, "FULL_SOLVE_MAX_ROWS", 0)  # no OSQP rescue: the method's own outcome
    result = solve(problem, ALM)
    assert result.status in (QPStatus.INFEASIBLE, QPStatus.INFEASIBLE_INACCURATE), result.solver_status
    assert result.B is None and result.backend == "alm"


@pytest.mark.parametrize("start", [0.0, 1e6])
def test_a_face_whose_system_has_no_solution_ends_its_cg_finite(start):
    # Contradicting rows a and −a asked ⟨a, β⟩ ≥ 1 and ⟨−a, β⟩ ≥ 1 hold on a face whose G_FF z = ρh has
    # no solution: CG must stop where G_FF has no curvature, not grow z until it overflows (seen under
    # another BLAS core type, from the last round's growing multipliers)
    problem = contradictory_keep_problem(1.0)
    rows = RowProducts.of(problem).subset(np.array([0, 1]))
    upper, limit = box_of(problem)
    method = matrix_free._Method(
        rows, problem.rhs[:2], upper[:2], problem.rho, limit, Budget(100, time.perf_counter() + 60), None
    )
    face = np.array([0, 1])
    x = method.gram_solve(
        rows, problem.rho * problem.rhs[:2], np.full(2, start), matrix_free.FACE_CG_TOLERANCE,
        method.preconditioner(face, rows, rows.norms2()),
    )  # fmt: skip
    assert np.all(np.isfinite(x)) and method.cg <= 3


@pytest.mark.parametrize("seed", range(4))
def test_a_face_round_that_meets_the_same_set_again_tightens_its_cg_instead_of_giving_up(monkeypatch, seed):
    # By CG a round's face is solved only to its tolerance (the first round's loose): meeting the same
    # free set again is no fixed point, as it is for an exact solve; the next round goes on from this
    # z, tighter, to the optimum
    problem = correlated_problem(seed, 6, 60, 2, 12)
    rows = RowProducts.of(problem)
    upper, limit = box_of(problem)
    optimum = solve_box(
        rows, problem.rhs, upper, problem.rho, limit, np.zeros(problem.n), Budget(10_000, time.perf_counter() + 60)
    )
    assert optimum.outcome is Outcome.SOLVED
    near = optimum.z * (1.0 + 1e-3 * np.random.default_rng(seed).uniform(-1, 1, problem.n))
    # internal: a face's CG tolerance is no setting; loosened, a test-sized face takes several rounds
    monkeypatch.setattr(matrix_free, "FACE_CG_LOOSEST", 0.5)  # the first round stops far from its face
    # internal: a face's patience is no setting; at 1, any round that does not improve ends the try
    monkeypatch.setattr(matrix_free, "FACE_PATIENCE", 1)  # any round that does not improve ends the try
    method = matrix_free._Method(
        rows, problem.rhs, upper, problem.rho, limit, Budget(10_000, time.perf_counter() + 60), None
    )
    rounds = []
    solve_face = method.gram_solve
    # internal: the rounds on a face are in no result
    monkeypatch.setattr(
        method, "gram_solve", lambda on_face, *a: rounds.append(on_face.C.copy()) or solve_face(on_face, *a)
    )
    done = method.face(near, 1)
    assert done is not None and done.outcome is Outcome.SOLVED, f"{len(rounds)} rounds"
    assert len(rounds) >= 2 and all(np.array_equal(r, rounds[0]) for r in rounds)  # one set, met again
    assert box_violation(done.z, rows.K(done.B) - problem.rhs, upper) <= limit


@pytest.mark.parametrize("rebuild_share", [matrix_free.FACE_REBUILD_SHARE, -1.0])
def test_a_faces_rounds_share_one_preconditioner_while_the_face_moves_little(monkeypatch, rebuild_share):
    # G is one matrix through a face's rounds, and a round moves few rows: one build (its rank-2,000 form
    # costs 5 s at 18,000 rows) serves them all, to the same optimum as a build each round
    problem = correlated_problem(0, 6, 60, 2, 12)
    rows = RowProducts.of(problem)
    upper, limit = box_of(problem)
    optimum = solve_box(
        rows, problem.rhs, upper, problem.rho, limit, np.zeros(problem.n), Budget(10_000, time.perf_counter() + 60)
    )
    near = optimum.z * (1.0 + 1e-3 * np.random.default_rng(0).uniform(-1, 1, problem.n))
    # internal: a face's CG tolerance is no setting; loosened, a test-sized face takes several rounds
    monkeypatch.setattr(matrix_free, "FACE_CG_LOOSEST", 0.5)  # several rounds on (nearly) one face
    # internal: when a face's preconditioner is rebuilt is no setting; -1 rebuilds it every round
    monkeypatch.setattr(matrix_free, "FACE_REBUILD_SHARE", rebuild_share)
    builds, alive_at_build = [], []
    build = matrix_free.LowRankPlusDiagonal

    def counted(*args):
        # a face's build holds rows × 2,000 × 8 bytes (288 MB at 18,000 rows): never two at once
        alive_at_build.append(sum(ref() is not None for ref in builds))
        built = build(*args)
        builds.append(weakref.ref(built))
        return built

    # internal: the preconditioners alive at once (288 MB each at real scale) are in no result
    monkeypatch.setattr(matrix_free, "LowRankPlusDiagonal", counted)
    method = matrix_free._Method(
        rows, problem.rhs, upper, problem.rho, limit, Budget(10_000, time.perf_counter() + 60), None
    )
    rounds = []
    solve_face = method.gram_solve
    # internal: the rounds on a face are in no result
    monkeypatch.setattr(method, "gram_solve", lambda *a: rounds.append(1) or solve_face(*a))
    done = method.face(near, 1)
    assert done is not None and done.outcome is Outcome.SOLVED
    assert box_violation(done.z, rows.K(done.B) - problem.rhs, upper) <= limit
    assert len(rounds) >= 2
    assert len(builds) == (1 if rebuild_share >= 0 else len(rounds)), (len(builds), len(rounds))
    assert alive_at_build == [0] * len(builds)
    assert method.built is None  # its memory is not held past the face


def test_a_face_that_moved_little_is_served_by_the_last_builds_pivots_and_one_that_moved_far_is_built_again():
    problem = correlated_problem(1, 10, 200, 2, 12)
    rows = RowProducts.of(problem)
    upper, limit = box_of(problem)
    method = matrix_free._Method(
        rows, problem.rhs, upper, problem.rho, limit, Budget(100, time.perf_counter() + 60), None
    )
    rng = np.random.default_rng(0)
    first = np.sort(rng.choice(problem.n, size=80, replace=False))
    build = method.preconditioner(first, rows.subset(first), rows.subset(first).norms2())
    others = np.setdiff1d(np.arange(problem.n), first)
    # 10 rows departed and 10 came: 20 ≤ FACE_REBUILD_SHARE × 80
    later = np.sort(np.concatenate([rng.permutation(first)[10:], rng.choice(others, size=10, replace=False)]))
    face = method.preconditioner(later, rows.subset(later), rows.subset(later).norms2())
    assert isinstance(face, ServedFace) and method.built.preconditioner is build
    # on the rows both faces hold, M is the build's own, row for row
    both = np.intersect1d(first, later)
    M_first = np.linalg.inv(np.column_stack([build(e) for e in np.eye(first.size)]))
    M_later = np.linalg.inv(np.column_stack([face(e) for e in np.eye(later.size)]))
    i, j = np.searchsorted(first, both), np.searchsorted(later, both)
    np.testing.assert_allclose(
        M_later[np.ix_(j, j)], M_first[np.ix_(i, i)], rtol=1e-6, atol=1e-7 * float(M_first.max())
    )
    far = np.sort(np.concatenate([first[:50], others[:30]]))
    again = method.preconditioner(far, rows.subset(far), rows.subset(far).norms2())
    assert isinstance(again, LowRankPlusDiagonal) and method.built.rows is far
