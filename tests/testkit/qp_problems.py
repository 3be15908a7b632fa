"""Random linearised problems shared by the QP tests (both backends)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from warp_check.qp.problem import LinearisedProblem


def random_problem(seed: int, n_fix: int, n_keep: int, rank: int, d_in: int) -> LinearisedProblem:
    rng = np.random.default_rng(seed)
    n = n_fix + n_keep
    C = rng.normal(size=(n, rank))
    V = rng.normal(size=(n, d_in))
    rhs = np.concatenate([rng.uniform(0.2, 2.0, n_fix), rng.uniform(-2.0, 0.3, n_keep)])
    return LinearisedProblem(C, V, rhs, n_fix, rho=2.0, lam=50.0)


def problem_over_cases(seed: int, n_fix: int, n_keep: int, rank: int, d_in: int, rows_per_case: int):
    """Rows that share cases (one per competing class), V per case: the loop's layout."""
    rng = np.random.default_rng(seed)
    n_cases = n_fix + n_keep
    cases = np.concatenate(
        [np.arange(n_fix), n_fix + np.repeat(np.arange(n_keep), rows_per_case)]
    )  # must_fix rows first, as the loop orders them
    n = cases.size
    C = rng.normal(size=(n, rank))
    V = rng.normal(size=(n_cases, d_in))
    # Hard rows: most far from their bound at β = 0 (outside the window), a few close.
    rhs = np.concatenate([rng.uniform(0.2, 2.0, n_fix), -rng.exponential(0.6, n - n_fix)])
    return LinearisedProblem(C, V, rhs, n_fix, rho=2.0, lam=50.0, cases=cases)


def contradictory_keep_problem(bound: float = 1.0) -> LinearisedProblem:
    """Two must_keep rows ask for ⟨a, β⟩ ≥ bound and ⟨−a, β⟩ ≥ bound: no β satisfies both."""
    rng = np.random.default_rng(0)
    v = rng.normal(size=(1, 10))
    C = np.array([[1.0, 0.5], [1.0, 0.5], [0.3, 0.2]])
    V = np.vstack([v, -v, rng.normal(size=(1, 10))])
    return LinearisedProblem(C, V, np.array([bound, bound, 0.5]), n_fix=0, rho=2.0, lam=50.0)


def contradictory_fix_problem() -> LinearisedProblem:
    """The same contradiction between two must_fix rows: soft, so β = 0 with both slacks 1."""
    v = np.random.default_rng(0).normal(size=(1, 10))
    return LinearisedProblem(np.ones((2, 1)), np.vstack([v, -v]), np.array([1.0, 1.0]), n_fix=2, rho=2.0, lam=50.0)


# The shape of a problem over cases, for @given (n_keep and solver options are the test's).
CASE_PROBLEM_SHAPE = {
    "seed": st.integers(0, 2**16),
    "n_fix": st.integers(1, 10),
    "rank": st.integers(1, 3),
    "d_in": st.integers(8, 30),
    "rows_per_case": st.integers(1, 3),
    "window": st.sampled_from([0.0, 0.05, 1.0]),
}


def kkt_violation(problem: LinearisedProblem, B: np.ndarray) -> float:
    """How far B is from the optimum, from B alone: the dual multipliers are recovered from
    B = Σ z_i a_i / ρ on the tight rows by least squares and checked against the box."""
    slack = problem.constraint_values(B) - problem.rhs
    tight = np.flatnonzero(np.abs(slack) <= 1e-7 * (1 + np.abs(problem.rhs).max()))
    K = np.einsum("ij,ik->ijk", problem.C[tight], problem.row_representations()[tight]).reshape(tight.size, -1)
    z, *_ = np.linalg.lstsq(K.T, problem.rho * B.ravel(), rcond=None)
    stationarity = np.linalg.norm(K.T @ z - problem.rho * B.ravel())
    upper = np.where(tight < problem.n_fix, np.broadcast_to(problem.lam, (problem.n,))[tight], np.inf)
    box = max(float(np.max(-z, initial=0.0)), float(np.max(z - upper, initial=0.0)))
    # Soft rows that miss their bound must be priced at λ: their multiplier is λ, not free.
    short = np.flatnonzero(slack[: problem.n_fix] < -1e-7)
    return max(stationarity, box, float(np.max(-slack[problem.n_fix :], initial=0.0))) if short.size == 0 else np.nan
