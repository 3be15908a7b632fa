"""The QP solver's settings, every tolerance and limit spelled out (no solver default is trusted)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from warp_check.errors import SettingsError
from warp_check.validation import require_integer, require_number

BACKEND_NAMES = ("auto", "osqp", "ipm", "active_set", "alm")


@dataclass(frozen=True, kw_only=True)
class SolverSettings:
    """QP solver settings, all spelled out (OSQP's defaults, eps 1e-3, are far too loose here)."""

    form: str = "auto"  # "auto" | "primal" | "dual"
    eps_abs: float = 1e-7
    eps_rel: float = 1e-7
    eps_infeasible: float = 1e-7
    max_iter: int = 20_000
    time_limit_s: float = 600.0  # per solve; a backstop, not a tuning knob
    polishing: bool = True
    polish_refine_iter: int = 10
    scaling: int = 10
    sigma: float = 1e-6
    # Lazy must_keep constraints (cutting planes): solve with the must_fix rows and the
    # must_keep rows that are violated or near-active now, add every row the solution
    # violates, repeat. The final answer is the optimum of the full problem; most must_keep
    # rows never enter. The window is in the units of the rows (gap units in the loop): a
    # hard row whose bound is within it of being violated at β = 0 starts in the set.
    working_set: bool = True
    working_set_rounds: int = 50
    working_set_window: float = 0.05
    # Rows added per round, most violated first. Adding every violated row at once grows the
    # set with rows that later rows make slack, and a dense QP's cost grows as rows³ (10k
    # must_keep, first QP: 8.5 s at 300 a round, 24 s with every violated row at once).
    working_set_batch: int = 300
    # Which solver (warp_check.qp.solve.BACKENDS). "auto": OSQP below ``ipm_min_rows`` rows;
    # from there the β-space interior point while β is small, else the augmented Lagrangian.
    # OSQP factors the working set's dense dual without BLAS: on real SST-2 repairs (MiniLM,
    # d_in 384, 1 BLAS thread) the whole loop took 2.4 s against 0.9 s at 2,000 must_keep rows
    # (ReLU head) and 8.1 s against 1.3 s (tanh head); at 500, 0.3–0.5 s against 0.6–0.7 s.
    backend: str = "auto"  # "auto" | "osqp" | "ipm" | "active_set" | "alm"
    ipm_min_rows: int = 1_000
    # The IPM only while β has at most this many unknowns (p = r·d_in): its normal matrix is
    # p×p. Past it the augmented Lagrangian, whose matrices are over the working set's rows.
    # Measured, one QP (1 BLAS thread): real SST-2 at rank 2 (p 768), IPM 0.5 s at 10k rows and
    # 1.1–1.7 s at 52k; at rank 8 (p 3,072), 10k: IPM 9.1 s, augmented Lagrangian 0.3 s.
    ipm_max_unknowns: int = 2048
    # Relative residuals (qp.ipm). Not OSQP's 1e-7: the reduced normal equations run out
    # of digits for the dual residual near 1e-7 (the 100k first QP bottoms out at 1.5e-7); the
    # objective is then within ~1e-10 of its optimum and every row holds to 1e-6·(1 + max |h|),
    # far inside the loop's aim_above.
    ipm_tolerance: float = 1e-6
    ipm_max_iter: int = 200
    # The active-set method (qp.active_set): every row's optimality condition to this,
    # relative to 1 + max |h|. It ends exactly on the optimum's face, so round-off (~1e-15)
    # is what it reaches; 1e-9 leaves room for ill-conditioned rows in play.
    active_set_tolerance: float = 1e-9
    active_set_max_iter: int = 100
    # The augmented-Lagrangian method (qp.alm): every row's optimality condition to this, relative
    # to 1 + max |h| (it ends on the optimum's face: round-off is what it reaches), and its Newton
    # steps (face solves included) over all rounds of one QP.
    alm_tolerance: float = 1e-9
    alm_max_iter: int = 2000

    def __post_init__(self) -> None:
        if self.form not in ("auto", "primal", "dual"):
            raise SettingsError("form", self.form, "must be 'auto', 'primal' or 'dual'")
        if self.backend not in BACKEND_NAMES:
            names = [f"'{name}'" for name in BACKEND_NAMES]
            raise SettingsError("backend", self.backend, f"must be {', '.join(names[:-1])} or {names[-1]}")
        if self.backend == "ipm" and self.form == "dual":
            raise SettingsError("form", self.form, "the 'ipm' backend solves in β space: use form 'auto' or 'primal'")
        if self.backend in ("active_set", "alm") and self.form == "primal":
            raise SettingsError(
                "form", self.form, f"the '{self.backend}' backend solves the dual: use form 'auto' or 'dual'"
            )
        for name, minimum in (
            ("max_iter", 1),
            ("polish_refine_iter", 0),
            ("scaling", 0),
            ("working_set_rounds", 1),
            ("working_set_batch", 1),
            ("ipm_min_rows", 1),
            ("ipm_max_unknowns", 1),
            ("ipm_max_iter", 1),
            ("active_set_max_iter", 1),
            ("alm_max_iter", 1),
        ):
            require_integer(name, getattr(self, name), minimum)
        tolerances = ("eps_abs", "eps_rel", "eps_infeasible", "sigma", "ipm_tolerance", "active_set_tolerance")
        for name in (*tolerances, "alm_tolerance"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 < value < 1):
                raise SettingsError(name, value, "must be a number in (0, 1)")
        require_number("time_limit_s", self.time_limit_s)
        require_number("working_set_window", self.working_set_window, allow_zero=True)

    def osqp_kwargs(self) -> dict[str, object]:
        return {
            "verbose": False,
            "eps_abs": self.eps_abs,
            "eps_rel": self.eps_rel,
            "eps_prim_inf": self.eps_infeasible,
            "eps_dual_inf": self.eps_infeasible,
            "max_iter": self.max_iter,
            "time_limit": self.time_limit_s,
            "polishing": self.polishing,
            "polish_refine_iter": self.polish_refine_iter,
            "scaling": self.scaling,
            "sigma": self.sigma,
            "warm_starting": False,
        }
