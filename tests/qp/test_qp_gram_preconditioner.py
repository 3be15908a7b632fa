"""The low-rank-plus-diagonal preconditioner of a Gram matrix never formed: an SPD M = F Fᵀ + D whose
F Fᵀ is a Nyström approximation of G (G − F Fᵀ ⪰ 0), inverted exactly, and a CG on rows that share a
dominant direction (as real representations do) needs far fewer steps with it than with Jacobi. A build
serves another face of the same G (rows gone, rows come) as the same pivots' approximation there."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from warp_check.qp import gram_preconditioner
from warp_check.qp.alm_matrix_free import RowProducts
from warp_check.qp.gram_preconditioner import LowRankPlusDiagonal, ServedFace, positions


def rows_sharing_a_direction(seed: int, n: int, rank: int, d_in: int, spread: float) -> RowProducts:
    """Rows whose v are one common direction plus ``spread`` of noise, several rows to a case."""
    rng = np.random.default_rng(seed)
    n_cases = max(1, n // 2)
    V = rng.normal(size=d_in) + spread * rng.normal(size=(n_cases, d_in))
    cases = rng.integers(0, n_cases, size=n)
    return RowProducts(rng.normal(size=(n, rank)) + 1.0, V, cases)


def gram_of(rows: RowProducts) -> np.ndarray:
    return rows.columns(np.arange(rows.n))


def cg_steps(rows: RowProducts, precondition, tolerance: float = 1e-8, most: int = 2000) -> int:
    """Steps of preconditioned CG on G x = G 1 (consistent) to ‖residual‖ ≤ tolerance·‖rhs‖."""
    G = gram_of(rows)
    rhs = G @ np.ones(rows.n)
    x, residual = np.zeros(rows.n), rhs.copy()
    preconditioned = precondition(residual)
    direction, product = preconditioned.copy(), float(residual @ preconditioned)
    for step in range(most):
        if np.linalg.norm(residual) <= tolerance * np.linalg.norm(rhs):
            return step
        Ad = G @ direction
        alpha = product / float(direction @ Ad)
        x += alpha * direction
        residual -= alpha * Ad
        preconditioned = precondition(residual)
        following = float(residual @ preconditioned)
        direction, product = preconditioned + (following / product) * direction, following
    return most


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(2, 120),
    rank=st.integers(1, 4),
    d_in=st.integers(1, 12),
    spread=st.sampled_from([0.01, 0.3, 3.0]),
    budget=st.integers(1, 80),
)
def test_it_inverts_an_spd_m_whose_low_rank_part_never_overshoots_g(seed, n, rank, d_in, spread, budget):
    rows = rows_sharing_a_direction(seed, n, rank, d_in, spread)
    G = gram_of(rows)
    M_inverse = LowRankPlusDiagonal(rows.norms2(), rows.columns, budget)
    assert M_inverse.rank <= min(budget, n // 2)
    F = M_inverse.scaled * M_inverse.D[:, None]
    M = F @ F.T + np.diag(M_inverse.D)
    assert np.all(M_inverse.D > 0)
    X = np.random.default_rng(seed).normal(size=(n, 3))
    applied = np.column_stack([M_inverse(X[:, j]) for j in range(3)])
    np.testing.assert_allclose(M @ applied, X, rtol=1e-6, atol=1e-6 * float(np.abs(X).max()))
    # a Nyström approximation: what it leaves, G − F Fᵀ, is positive semidefinite
    scale = max(float(np.trace(G)), 1e-300)
    assert float(np.linalg.eigvalsh(G - F @ F.T)[0]) >= -1e-8 * scale


def test_a_gram_matrix_of_low_rank_is_held_whole_and_cg_ends_in_a_few_steps():
    rows = rows_sharing_a_direction(0, 200, 2, 3, 0.3)  # G: 200 × 200 of rank ≤ 6
    M_inverse = LowRankPlusDiagonal(rows.norms2(), rows.columns, 50)
    assert M_inverse.rank <= 6
    assert cg_steps(rows, M_inverse) <= 8


def test_rows_sharing_a_direction_need_far_fewer_cg_steps_than_with_jacobi():
    rows = rows_sharing_a_direction(1, 600, 6, 120, 0.05)  # 720 unknowns: G (600 × 600) full rank
    diagonal = rows.norms2()
    jacobi = cg_steps(rows, lambda r: r / diagonal)
    ours = cg_steps(rows, LowRankPlusDiagonal(diagonal, rows.columns, 200))
    assert jacobi >= 100  # the problem the preconditioner exists for
    assert ours <= jacobi / 3, (ours, jacobi)


def test_the_same_rows_give_the_same_preconditioner():
    rows = rows_sharing_a_direction(2, 300, 3, 20, 0.3)
    r = np.random.default_rng(0).normal(size=rows.n)
    first = LowRankPlusDiagonal(rows.norms2(), rows.columns, 100)(r)
    again = LowRankPlusDiagonal(rows.norms2(), rows.columns, 100)(r)
    np.testing.assert_array_equal(first, again)


def moved_face(seed: int, n: int, share: float) -> tuple[np.ndarray, np.ndarray]:
    """A build's rows (a face) and a later face: ``share`` of the rows departed and as many others came."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    first = np.sort(order[: 2 * n // 3])
    moved = int(share * first.size)
    later = np.sort(np.concatenate([rng.permutation(first)[moved:], order[2 * n // 3 :][:moved]]))
    return first, later


def served(rows: RowProducts, first: np.ndarray, later: np.ndarray, rank: int):
    """A build on the rows ``first``, and what it serves on ``later`` (positions in ``rows``)."""
    build = LowRankPlusDiagonal(rows.subset(first).norms2(), rows.subset(first).columns, rank)
    at = positions(first, later)
    came = later[at < 0]
    return build, build.serving(at, rows.subset(later).norms2(), lambda S: rows.block(came, first[S]))


def served_factor(build: LowRankPlusDiagonal, face: ServedFace, size: int) -> np.ndarray:
    """F on the served face: the build's rows where it held them, their replayed rows where they came."""
    F = np.zeros((size, build.rank))
    F[face.held] = build.scaled[face.at] * build.D[face.at][:, None]
    F[face.came] = face.scaled_came * face.D_came[:, None]
    return F


def test_positions_of_rows_in_a_build():
    np.testing.assert_array_equal(positions(np.array([2, 5, 9]), np.array([1, 2, 9, 10])), [-1, 0, 2, -1])
    np.testing.assert_array_equal(positions(np.array([], dtype=int), np.array([3])), [-1])


def test_a_builds_steps_replayed_on_its_own_rows_give_its_own_factor(monkeypatch):
    # internal: a build draws 100 pivots a step; a test-sized one takes several steps only below that
    monkeypatch.setattr(gram_preconditioner, "BLOCK", 7)  # several steps: each replay couples to the last
    rows = rows_sharing_a_direction(3, 150, 3, 30, 3.0)
    build = LowRankPlusDiagonal(rows.norms2(), rows.columns, 40)
    assert build.rank == 40 and len(build.steps) >= 5
    some = np.array([0, 5, 17, 60, 149])
    F = build.scaled * build.D[:, None]
    np.testing.assert_allclose(build.factor_rows(lambda S: rows.block(some, S)), F[some], atol=1e-8)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(6, 120),
    d_in=st.integers(1, 12),
    spread=st.sampled_from([0.01, 0.3, 3.0]),
    share=st.sampled_from([0.0, 0.1, 0.4]),
    budget=st.integers(1, 40),
)
def test_a_build_serves_a_moved_face_as_an_spd_m_whose_low_rank_part_never_overshoots_g(
    seed, n, d_in, spread, share, budget
):
    rows = rows_sharing_a_direction(seed, n, 2, d_in, spread)
    first, later = moved_face(seed, n, share)
    build, face = served(rows, first, later, budget)
    applied = np.column_stack([face(e) for e in np.eye(later.size)])  # M⁻¹ on the later face
    np.testing.assert_allclose(applied, applied.T, rtol=1e-7, atol=1e-9 * float(np.abs(applied).max()))
    M = np.linalg.inv(applied)
    G = rows.subset(later).columns(np.arange(later.size))
    # M = F Fᵀ + D: the build's F and D where it held the rows, the replayed F where they came, with what
    # F leaves of G's diagonal as their D (floored as the build's); F Fᵀ never overshoots G
    F = served_factor(build, face, later.size)
    D = np.diag(G)[face.came] - np.sum(F[face.came] ** 2, axis=1)
    np.testing.assert_allclose(face.D_came, np.maximum(D, build.floor), rtol=1e-9, atol=1e-12 * build.floor)
    expected = F @ F.T
    expected[np.diag_indices(later.size)] += np.concatenate([build.D[face.at], face.D_came])[
        np.argsort(np.concatenate([face.held, face.came]))
    ]
    np.testing.assert_allclose(M, expected, atol=1e-6 * float(np.abs(M).max()))
    assert float(np.linalg.eigvalsh(G - F @ F.T)[0]) >= -1e-8 * max(float(np.trace(G)), 1e-300)


def test_a_served_face_is_its_builds_pivots_nystrom_approximation(monkeypatch):
    # Off the diagonal, M on the later face is G[:, S] G[S, S]⁻¹ G[S, :], S the build's pivots: the rows
    # that stayed and the rows that came alike (the replay couples each step to the ones before it)
    # internal: a build draws 100 pivots a step; a test-sized one takes several steps only below that
    monkeypatch.setattr(gram_preconditioner, "BLOCK", 6)
    rows = rows_sharing_a_direction(5, 240, 3, 30, 3.0)  # G of rank 90: 30 pivots well apart
    first, later = moved_face(5, 240, 0.2)
    build, face = served(rows, first, later, 30)
    assert build.rank == 30 and face.came.size and face.held.size < first.size
    S = first[np.concatenate([step.pivots for step in build.steps])]
    nystrom = rows.block(later, S) @ np.linalg.solve(rows.block(S, S), rows.block(S, later))
    M = np.linalg.inv(np.column_stack([face(e) for e in np.eye(later.size)]))
    off = ~np.eye(later.size, dtype=bool)
    np.testing.assert_allclose(M[off], nystrom[off], atol=1e-7 * float(np.abs(nystrom).max()))


def test_a_served_face_needs_about_the_cg_steps_of_its_own_build():
    rows = rows_sharing_a_direction(1, 900, 6, 120, 0.05)
    first, later = moved_face(1, 900, 0.2)
    on_later = rows.subset(later)
    diagonal = on_later.norms2()
    jacobi = cg_steps(on_later, lambda r: r / diagonal)
    own = cg_steps(on_later, LowRankPlusDiagonal(diagonal, on_later.columns, 200))
    _, face = served(rows, first, later, 200)
    assert cg_steps(on_later, face) <= max(1.5 * own, own + 5), (own, jacobi)
    assert cg_steps(on_later, face) <= jacobi / 3, (own, jacobi)
