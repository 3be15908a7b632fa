"""The linearised repair QP of one loop iteration (paper eq. 5–8), built from cached v.

Rows are a_i = vec(c_i v_iᵀ), c_i ∈ R^r, v_i ∈ R^{d_in}; the unknown is β = vec(B), B ∈ R^{r×d_in}.
The first ``n_fix`` rows are soft (a slack ξ_i ≥ 0 priced λ_i), the rest hard:

    primal:  min ρ/2‖β‖² + Σ λ_i ξ_i   s.t.  ⟨a_i, β⟩ + ξ_i ≥ h_i (soft),  ⟨a_p, β⟩ ≥ h_p (hard),  ξ ≥ 0
    dual:    min 1/(2ρ) zᵀGz − hᵀz      s.t.  0 ≤ z_i ≤ λ_i (soft),  z_p ≥ 0 (hard)

with G = (C Cᵀ) ⊙ (V Vᵀ) and B = Σ z_i c_i v_iᵀ / ρ: the dual never forms K, and its size is
the number of rows, not r·d_in.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np


class Named(str, enum.Enum):
    """A str enum that prints as its value (in messages and f-strings, on every Python)."""

    def __str__(self) -> str:
        return self.value


class QPForm(Named):
    """Which form of the QP a backend solves: the primal in β or the dual in the rows' multipliers."""

    PRIMAL = "primal"
    DUAL = "dual"


# The largest dual the form choice picks past r·d_in rows: its dense Gram is 288 MB there.
DUAL_MAX_ROWS = 6_000
# Hard rows a lazy solve starts from at most (rows_near_bound). Real suites of 52k must_keep cases
# start from ≤ 2,760; a million isotropic ones have ~10k within the window, most never binding, and
# the working set of the dual backends must stay within ~10k rows (its Gram matrix: rows² × 8 bytes).
NEAR_BOUND_AT_MOST = 5_000


@dataclass(frozen=True)
class LinearisedProblem:
    """One QP of the repair loop, built only from cached representations.

    ``C`` (n, r): the per-case coefficients c_i = Uᵀ J_i (w_y − w_ĉ);
    ``V`` (n, d_in): the representations; ``rhs`` (n,): h_i = target_i − gap_i;
    rows [0, n_fix) are soft (must_fix; the loop also makes must_keep rows that are short
    now elastic, at a higher price), the rest hard. ``lam`` prices a unit of slack: one
    number for every soft row (the paper's λ) or one per soft row.

    Rows index cases: row i is the case ``cases[i]`` of ``V`` (n_cases, d_in), so several rows
    (one per competing class) share a representation and no (rows, d_in) copy of V is made —
    with 100k must_keep cases that copy alone would be 600 MB. ``cases`` None means one row per
    case, in order. ``VVt``, if given, is V Vᵀ over the cases (constant through the loop).
    """

    C: np.ndarray
    V: np.ndarray
    rhs: np.ndarray
    n_fix: int
    rho: float
    lam: float | np.ndarray
    VVt: np.ndarray | None = field(default=None, repr=False)  # cached V Vᵀ over the cases
    cases: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]  # row → case

    def __post_init__(self) -> None:
        rows = self.C.shape[0]
        if self.cases is None:
            if self.V.ndim == 2 and self.V.shape[0] != rows:
                raise ValueError(f"LinearisedProblem: V has {self.V.shape[0]} rows for {rows} constraint rows")
            object.__setattr__(self, "cases", np.arange(rows))
        if self.V.ndim != 2 or self.rhs.shape != (rows,) or self.cases.shape != (rows,):
            raise ValueError(
                f"LinearisedProblem shapes disagree: C {self.C.shape}, V {self.V.shape}, rhs {self.rhs.shape}, "
                f"cases {self.cases.shape}"
            )

    @property
    def n(self) -> int:
        return int(self.C.shape[0])

    @property
    def rank(self) -> int:
        return int(self.C.shape[1])

    @property
    def d_in(self) -> int:
        return int(self.V.shape[1])

    def prices(self) -> np.ndarray:
        """λ per soft row."""
        lam = np.asarray(self.lam, dtype=np.float64)
        return np.broadcast_to(lam, (self.n_fix,)) if lam.ndim == 0 else lam

    def row_representations(self) -> np.ndarray:
        """(n, d_in): v of every row, a copy (only the primal form needs it)."""
        return self.V[self.cases]

    def constraint_values(self, B: np.ndarray) -> np.ndarray:
        """⟨a_i, β⟩ = c_iᵀ B v_i for every row: O(n·r·d_in), through V Bᵀ (cases × r)."""
        VB = (self.V @ B.T)[self.cases]
        return np.einsum("ij,ij->i", self.C, VB)

    def weighted_sum(self, weights: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Kᵀw = Σ_i w_i c_i v_iᵀ over ``rows`` (every row when None), as an (r, d_in) matrix.

        Rows that share a case are summed first: one product per distinct case.
        """
        rows = np.arange(self.n) if rows is None else rows
        weighted = self.C[rows] * weights[:, None]
        distinct, row_of = np.unique(self.cases[rows], return_inverse=True)
        per_case = np.zeros((distinct.size, self.rank))
        np.add.at(per_case, row_of, weighted)
        return per_case.T @ self.V[distinct]

    def primal_objective(self, B: np.ndarray) -> float:
        slack = np.maximum(self.rhs[: self.n_fix] - self.constraint_values(B)[: self.n_fix], 0.0)
        return 0.5 * self.rho * float(np.sum(B * B)) + float(self.prices() @ slack)

    def subset(self, rows: np.ndarray) -> LinearisedProblem:
        """The problem restricted to ``rows`` (sorted; must_fix rows first, as here)."""
        n_fix = int(np.count_nonzero(rows < self.n_fix))
        lam = self.lam if np.ndim(self.lam) == 0 else np.asarray(self.lam)[rows[:n_fix]]
        # V stays shared: only the row → case map is cut
        return LinearisedProblem(
            self.C[rows], self.V, self.rhs[rows], n_fix, self.rho, lam, self.VVt, cases=self.cases[rows]
        )

    def gram(self) -> np.ndarray:
        """(n, n): G = (C Cᵀ) ⊙ (V Vᵀ) over this problem's rows (call it on a working set)."""
        rows = np.arange(self.n)
        return self.cross_gram(rows, rows)

    def cross_gram(self, rows_a: np.ndarray, rows_b: np.ndarray) -> np.ndarray:
        """(len(rows_a), len(rows_b)): ⟨a_i, a_j⟩ = (c_iᵀc_j)(v_iᵀv_j) between two sets of rows; one
        product per distinct case, spread to the rows that share it. The same rows twice give an
        exactly symmetric matrix (BLAS's A Aᵀ), which the solvers' factorisations rely on."""
        same = rows_a is rows_b
        cases_a, cases_b = self.cases[rows_a], self.cases[rows_b]
        if self.VVt is not None:
            VVt = self.VVt[np.ix_(cases_a, cases_b)]
        else:
            (distinct_a, of_a), (distinct_b, of_b) = _distinct(cases_a), _distinct(cases_b)
            Va = self.V[distinct_a]
            VVt = Va @ Va.T if same else Va @ self.V[distinct_b].T
            if of_a is not None or of_b is not None:
                VVt = VVt[np.ix_(_all_or(of_a, cases_a.size), _all_or(of_b, cases_b.size))]
        Ca = self.C[rows_a]
        gram = Ca @ Ca.T if same else Ca @ self.C[rows_b].T
        gram *= VVt  # in place: at 10,000 rows each of these is 800 MB
        return gram

    def rows_near_bound(self, window: float) -> np.ndarray:
        """Soft rows and the hard rows within ``window`` of violation at β = 0 (sorted): where a
        lazy solve starts. In the loop a must_keep row's bound is −(gap − γ_h − aim), so these are
        the rows a step is most likely to break."""
        hard = self.n_fix + np.flatnonzero(self.rhs[self.n_fix :] > -window)
        if hard.size > NEAR_BOUND_AT_MOST:  # the nearest: the rounds add any row the answer violates
            hard = np.sort(hard[np.argsort(-self.rhs[hard], kind="stable")[:NEAR_BOUND_AT_MOST]])
        return np.concatenate([np.arange(self.n_fix), hard])

    def pick_form(self) -> QPForm:
        """Dual up to 4·r·d_in rows (at most DUAL_MAX_ROWS), else primal.

        The n² vs n·r·d_in count of non-zeros undersells the dual: OSQP needs ~100 ADMM
        iterations on it and thousands on the primal. Measured (d_in = 768, r = 2, 1,606 rows,
        a working set of 10k must_keep): dual 2.6 s, primal 45 s. Past 4·r·d_in rows, or when
        the Gram matrix would be large, the primal's size no longer grows as n².
        """
        rows = min(4 * self.rank * self.d_in, DUAL_MAX_ROWS)
        return QPForm.DUAL if self.n <= max(rows, self.rank * self.d_in) else QPForm.PRIMAL


def _distinct(cases: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The distinct cases and each row's index among them; (cases, None) when none repeats."""
    distinct, of = np.unique(cases, return_inverse=True)
    return (cases, None) if distinct.size == cases.size else (distinct, of)


def _all_or(index: np.ndarray | None, size: int) -> np.ndarray:
    return np.arange(size) if index is None else index
