"""The WARP repair loop (paper Algorithm 1) with GSN and GSN-FT, from cached representations.

Beyond the paper: the loop stops only when every must_fix gap ≥ γ_s *and* every must_keep
gap ≥ γ_h, the QP aims a hair above the margins (``aim_above``) so the true gap clears them
despite rounding, and the repaired weight is rounded to the model's dtype at every step so
the gaps checked are those of the weights that will be saved.
"""

from __future__ import annotations

import enum
import math
import time
from dataclasses import dataclass, replace

import numpy as np

import warp_check.qp.solve as qp
from warp_check import advice
from warp_check.errors import SettingsError
from warp_check.model.activations import torch_activation
from warp_check.model.head import DenseHead, gaps_from_logits, top_left_singular_vectors
from warp_check.repair.settings import RepairSettings


@dataclass(frozen=True)
class CaseSet:
    """Cases of one kind as the loop sees them: ids, representations (n, d_in), labels."""

    ids: tuple[str, ...]
    V: np.ndarray
    labels: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "ids", tuple(self.ids))
        object.__setattr__(self, "V", np.asarray(self.V, dtype=np.float64))
        object.__setattr__(self, "labels", np.asarray(self.labels, dtype=np.int64))
        if self.V.ndim != 2 or self.V.shape[0] != len(self.ids) or self.labels.shape != (len(self.ids),):
            raise ValueError(
                f"CaseSet shapes disagree: {len(self.ids)} ids, V {self.V.shape}, labels {self.labels.shape}"
            )

    @classmethod
    def empty(cls, d_in: int) -> CaseSet:
        return cls((), np.zeros((0, d_in)), np.zeros(0, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, mask: np.ndarray) -> CaseSet:
        ids = tuple(i for i, keep in zip(self.ids, mask, strict=True) if keep)
        return CaseSet(ids, self.V[mask], self.labels[mask])


class RepairStatus(str, enum.Enum):
    CONVERGED = "converged"
    NOTHING_TO_REPAIR = "nothing_to_repair"
    NOT_CONVERGED = "not_converged"  # T iterations used up, or no progress possible
    INFEASIBLE = "infeasible"  # the must_keep constraints cannot all hold
    SOLVER_FAILED = "solver_failed"
    INVALID_INPUT = "invalid_input"  # NaN/Inf in weights or representations

    @property
    def repaired(self) -> bool:
        return self is RepairStatus.CONVERGED


@dataclass(frozen=True)
class IterationRecord:
    iteration: int
    qp_status: str
    qp_form: str
    qp_rows: int
    qp_objective: float
    step_norm: float  # ‖ΔW‖_F
    min_gap_fix: float
    min_gap_keep: float
    fix_met: int
    keep_met: int
    seconds: float
    step_fraction: float = 1.0  # of the QP step taken (< 1: backtracked)
    qp_working_set: int | None = None  # rows in the last QP solved (lazy must_keep rows); None: all qp_rows
    qp_rounds: int = 1  # QPs solved this iteration (working-set rounds)
    qp_backend: str = "osqp"  # "osqp" | "ipm" (qp.SolverSettings.backend)
    # The linear model against the true gaps at the full QP step (before any backtracking):
    # what the QP promised and what the step would really give. Where they part, the
    # activations switched or saturated under the step; the loop then cut it (step_fraction).
    # None where no step was solved.
    promised_fix_shortfall: float | None = None  # Σ max(γ_s − linearised gap, 0) over must_fix
    full_step_fix_shortfall: float | None = None  # the same from the true gaps
    promised_keep_missed: int | None = None  # must_keep cases the linearised step leaves below γ_h
    full_step_keep_missed: int | None = None  # must_keep cases below γ_h at the true full step


@dataclass(frozen=True)
class Miss:
    """A case that misses its margin: what it needs and by how much it falls short."""

    id: str
    kind: str
    gap: float
    target: float

    @property
    def short_by(self) -> float:
        return self.target - self.gap


@dataclass(frozen=True)
class GsnFtRecord:
    applied: bool
    reason: str
    kappa_per_step: tuple[float, ...] = ()
    chosen_step: int = 0


@dataclass(frozen=True)
class RepairResult:
    status: RepairStatus
    message: str
    head_before: DenseHead
    head_after: DenseHead  # equals head_before (plus GSN-FT) unless converged
    settings: RepairSettings
    iterations: tuple[IterationRecord, ...]
    gaps_before: dict[str, float]
    gaps_after: dict[str, float]
    kappa_before: dict[str, float]
    kappa_after: dict[str, float]
    excluded_keep: tuple[str, ...]  # must_keep cases wrong before repair: not constrained
    misses: tuple[Miss, ...]
    gsn_ft: GsnFtRecord
    seconds: float

    @property
    def repaired(self) -> bool:
        return self.status.repaired

    @property
    def mean_kappa_before(self) -> float:
        return _mean(self.kappa_before.values())

    @property
    def mean_kappa_after(self) -> float:
        return _mean(self.kappa_after.values())


def _mean(values) -> float:
    values = list(values)
    return float(np.mean(values)) if values else math.nan


def repair_head(
    head: DenseHead,
    fix: CaseSet,
    keep: CaseSet,
    aux: CaseSet | None = None,
    settings: RepairSettings | None = None,
) -> RepairResult:
    """Run GSN-FT (if needed) and the iterative QP repair; never raises for a failed repair.

    A result whose status is not CONVERGED says which cases miss their margin and by how
    much; its ``head_after`` must not be shipped (the artefact writer refuses it).
    """
    settings = settings or RepairSettings()
    if settings.blas_threads is None:
        return _repair(head, fix, keep, aux, settings)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=settings.blas_threads, user_api="blas"):
        return _repair(head, fix, keep, aux, settings)


def _repair(head: DenseHead, fix: CaseSet, keep: CaseSet, aux: CaseSet | None, settings: RepairSettings):
    start = time.perf_counter()
    if settings.rank > min(head.W.shape):
        raise SettingsError("rank", settings.rank, f"exceeds the repair layer's smallest dimension {min(head.W.shape)}")
    aux = aux if aux is not None else CaseSet.empty(head.d_in)
    gaps_fix0 = _gaps(head, fix.V, fix.labels)
    gaps_keep0 = _gaps(head, keep.V, keep.labels)
    gaps_before = _by_id(fix.ids + keep.ids, np.concatenate([gaps_fix0, gaps_keep0]))
    U0 = top_left_singular_vectors(head.W, settings.rank)
    kappa_before = dict(zip(fix.ids, head.gsn_kappa(fix.V, fix.labels, U0).tolist(), strict=True))

    def finish(status, message, head_after, records, gsn, misses=(), excluded=()):
        g_fix = _gaps(head_after, fix.V, fix.labels)
        g_keep = _gaps(head_after, keep.V, keep.labels)
        U = top_left_singular_vectors(head_after.W, settings.rank)
        return RepairResult(
            status=status,
            message=message,
            head_before=head,
            head_after=head_after,
            settings=settings,
            iterations=tuple(records),
            gaps_before=gaps_before,
            gaps_after=_by_id(fix.ids + keep.ids, np.concatenate([g_fix, g_keep])),
            kappa_before=kappa_before,
            kappa_after=dict(zip(fix.ids, head_after.gsn_kappa(fix.V, fix.labels, U).tolist(), strict=True)),
            excluded_keep=tuple(excluded),
            misses=tuple(misses),
            gsn_ft=gsn,
            seconds=time.perf_counter() - start,
        )

    bad = [
        name
        for name, arr in (("W", head.W), ("b", head.b), ("W_c", head.Wc), ("b_c", head.bc))
        if not np.all(np.isfinite(arr))
    ]
    bad += [
        f"representations of {kind}"
        for kind, s in (("must_fix", fix), ("must_keep", keep), ("aux", aux))
        if not np.all(np.isfinite(s.V))
    ]
    if bad:
        msg = "non-finite values (NaN/Inf) in " + ", ".join(bad) + ": the model cannot be repaired"
        return finish(RepairStatus.INVALID_INPUT, msg, head, [], GsnFtRecord(False, "not run"))

    # must_keep cases the model already gets wrong cannot be "kept": leave them out.
    right = gaps_keep0 > 0
    excluded = tuple(i for i, ok in zip(keep.ids, right, strict=True) if not ok)
    kept = keep if np.all(right) else keep.select(right)

    mean_kappa = _mean(kappa_before.values())
    work_head, gsn = head, GsnFtRecord(False, "no aux cases")
    if len(aux) and len(fix) and mean_kappa < settings.gsn_threshold:
        work_head, gsn = gsn_finetune(head, fix, aux, settings)
    elif len(aux):
        gsn = GsnFtRecord(False, f"mean κ {mean_kappa:.4g} ≥ gsn_threshold {settings.gsn_threshold:g}")

    V = np.vstack([fix.V, kept.V])
    labels = np.concatenate([fix.labels, kept.labels])
    targets = np.concatenate([np.full(len(fix), settings.gamma_s), np.full(len(kept), settings.gamma_h)])
    # V Vᵀ is constant through the loop: cached for small sets. Larger ones get the Gram
    # matrix of each QP's working set only (qp.solve adds must_keep rows lazily): no n×n.
    VVt = V @ V.T if V.shape[0] <= VVT_CACHE_MAX_CASES else None
    n_fix = len(fix)
    W = work_head.round_to_storage(work_head.W)
    records: list[IterationRecord] = []

    def misses_of(gaps: np.ndarray) -> list[Miss]:
        ids = fix.ids + kept.ids
        return [
            Miss(ids[i], "must_fix" if i < n_fix else "must_keep", float(gaps[i]), float(targets[i]))
            for i in np.flatnonzero(gaps < targets)
        ]

    gap_now = _gaps(work_head.with_weight(W), V, labels)
    if np.all(gap_now >= targets):
        status = RepairStatus.NOTHING_TO_REPAIR if not gsn.applied else RepairStatus.CONVERGED
        msg = "every case already meets its margin: nothing to repair"
        return finish(status, msg, work_head.with_weight(W), records, gsn, excluded=excluded)

    weights = np.concatenate([np.full(n_fix, settings.lam), np.full(len(kept), KEEP_WEIGHT * settings.lam)])

    def merit(gaps: np.ndarray) -> float:
        return float(weights @ np.maximum(targets - gaps, 0.0))

    gap = gap_now
    merit_now = merit(gap)
    best_merit, best_iteration, stalled = merit_now, 0, ""
    best_W, best_gap = W, gap  # a failed run reports its best iterate, not its last
    # Per-case extra aim: a must_fix case that a step moves by less than half of what the
    # linear model promised (it sits on a kink of σ) asks for its shortfall again on top,
    # next time, instead of creeping up on its margin geometrically.
    extra_aim = np.zeros_like(targets)
    Z = work_head.with_weight(W).pre_activation(V)  # exact for the current W, one product per step
    solver = settings.solver
    for t in range(1, settings.max_iter + 1):
        t_start = time.perf_counter()
        U = top_left_singular_vectors(W, settings.rank)
        problem, row_case, row_margin = _linearised_problem(
            work_head, Z, U, V, VVt, labels, targets, extra_aim, n_fix, settings
        )
        solution = qp.solve(problem, solver)
        if solution.handed_over_from == "active_set" and solver.backend == "auto":
            # Rows this correlated stall it in every QP (real representations): OSQP from here on.
            solver = replace(solver, backend="osqp")
        if not solution.status.has_solution:
            records.append(_record(t, solution, problem.n, 1.0, 0.0, gap, targets, n_fix, t_start))
            status, msg = _solver_failure(t, solution, settings)
            return finish(status, msg, work_head.with_weight(W), records, gsn, misses_of(gap), excluded)
        values = problem.constraint_values(solution.B)
        predicted = np.full(len(targets), np.inf)
        np.minimum.at(predicted, row_case, row_margin + values)

        # Backtracking on the true merit: the linearisation can overshoot where activations
        # switch (ReLU) or saturate (tanh); a shorter step along the same QP direction is
        # tried before a step that makes things worse. If none is better, the full step is
        # taken anyway (as in the paper) and patience ends a loop that goes nowhere.
        # ΔW = f·U B changes Z by f·(V Bᵀ) Uᵀ: rank r, ~d_out/r times cheaper than V Wᵀ.
        VB = V @ solution.B.T
        tries = []
        for fraction in step_fractions(settings):
            gap_try = _gaps_after_step(work_head, Z, VB, U, fraction, labels)
            if fraction == 1.0:
                linear_check = _linear_check(predicted, gap_try, targets, n_fix)
            tries.append((fraction, merit(gap_try)))
            if tries[-1][1] < merit_now:
                break
        fraction = tries[-1][0] if tries[-1][1] < merit_now else 1.0
        # What is kept is the weight as stored; its gaps are recomputed exactly from it.
        W_next = work_head.round_to_storage(W + fraction * (U @ solution.B))
        np.matmul(V, W_next.T, out=Z)  # in place: the old Z is not needed any more
        Z += work_head.b
        gap_next = _gaps_from_pre_activation(work_head, Z, labels)
        merit_next = merit(gap_next)
        step = float(np.linalg.norm(W_next - W))
        short = np.maximum(targets[:n_fix] - gap_next[:n_fix], 0.0)
        promised = fraction * (predicted[:n_fix] - gap[:n_fix])
        creeping = (short > 0) & (gap_next[:n_fix] - gap[:n_fix] < 0.5 * promised)
        extra_aim[:n_fix] = np.where(
            short > 0,
            np.where(creeping, np.minimum(extra_aim[:n_fix] + short, targets[:n_fix]), extra_aim[:n_fix]),
            0.0,
        )
        W, gap, merit_now = W_next, gap_next, merit_next
        records.append(_record(t, solution, problem.n, fraction, step, gap, targets, n_fix, t_start, linear_check))
        if np.all(gap >= targets):
            msg = f"converged in {t} iteration{'s' if t > 1 else ''}"
            return finish(RepairStatus.CONVERGED, msg, work_head.with_weight(W), records, gsn, excluded=excluded)
        if merit_now < best_merit * (1 - 1e-9):
            best_merit, best_iteration, best_W, best_gap = merit_now, t, W, gap
        if step == 0.0:
            stalled = "the QP step is zero: the linearised problem sees nothing to gain"
        elif t - best_iteration >= settings.patience:
            stalled = f"no progress for {settings.patience} iterations"
        if stalled:
            break
    W, gap = best_W, best_gap
    misses = misses_of(gap)
    worst = max(misses, key=lambda m: m.short_by)
    why = f"stalled ({stalled})" if stalled else "not converged"
    msg = (
        f"{why} after {len(records)} iteration(s): at the best iterate ({best_iteration}), "
        f"{len(misses)} case(s) miss their margin, "
        f"worst '{worst.id}' ({worst.kind}) has gap {worst.gap:.4g} < {worst.target:g}; try "
        + advice.after_no_convergence(settings, (m.kind for m in misses), stalled=bool(stalled))
    )
    return finish(RepairStatus.NOT_CONVERGED, msg, work_head.with_weight(W), records, gsn, misses, excluded)


# Merit price of a must_keep shortfall, in units of λ: must_keep rows are hard in the QP, so
# a step that breaks one must cost more than the must_fix progress it buys.
KEEP_WEIGHT = 10.0


def _linear_check(predicted, gap_full, targets, n_fix) -> dict[str, float | int]:
    """The IterationRecord fields that set the QP's promise against the true full step."""
    return {
        "promised_fix_shortfall": _shortfall(predicted[:n_fix], targets[:n_fix]),
        "full_step_fix_shortfall": _shortfall(gap_full[:n_fix], targets[:n_fix]),
        "promised_keep_missed": int(np.sum(predicted[n_fix:] < targets[n_fix:])),
        "full_step_keep_missed": int(np.sum(gap_full[n_fix:] < targets[n_fix:])),
    }


def _record(t, solution, rows, fraction, step, gap, targets, n_fix, t_start, linear_check=None) -> IterationRecord:
    return IterationRecord(
        iteration=t,
        qp_status=solution.status.value,
        qp_form=solution.form.value,
        qp_rows=rows,
        qp_objective=solution.objective,
        step_norm=step,
        min_gap_fix=_min(gap[:n_fix]),
        min_gap_keep=_min(gap[n_fix:]),
        fix_met=int(np.sum(gap[:n_fix] >= targets[:n_fix])),
        keep_met=int(np.sum(gap[n_fix:] >= targets[n_fix:])),
        seconds=time.perf_counter() - t_start,
        step_fraction=fraction,
        qp_working_set=solution.working_set_size,
        qp_rounds=solution.rounds,
        qp_backend=solution.backend,
        **(linear_check or {}),
    )


def _solver_failure(t: int, solution: qp.QPSolution, settings: RepairSettings) -> tuple[RepairStatus, str]:
    if solution.status in (qp.QPStatus.INFEASIBLE, qp.QPStatus.INFEASIBLE_INACCURATE):
        return RepairStatus.INFEASIBLE, (
            f"iteration {t}: the must_keep constraints cannot all hold together "
            f"(solver: {solution.solver_status}); {advice.INFEASIBLE_KEEP}"
        )
    if solution.solver_status.startswith(qp.WORKING_SET_UNSETTLED):
        return RepairStatus.SOLVER_FAILED, (
            f"iteration {t}: {solution.solver_status}; {advice.after_unsettled_working_set(settings)}"
        )
    return RepairStatus.SOLVER_FAILED, (
        f"iteration {t}: the QP solver ({solution.backend}) ended with '{solution.solver_status}' "
        f"and no usable solution; {advice.after_solver_failure(settings, solution.backend)}"
    )


# Cases up to which V Vᵀ is cached for the whole loop (32 MB); beyond, no n×n matrix is made.
VVT_CACHE_MAX_CASES = 2048

# Rows per block wherever a (cases × d_out) array would otherwise be built: the loop's
# temporaries stay O(block·d_out) however many must_keep cases there are.
BLOCK_ROWS = 4096


def _blocks(n: int):
    return (slice(lo, min(lo + BLOCK_ROWS, n)) for lo in range(0, n, BLOCK_ROWS))


def _gaps(head: DenseHead, V: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """head.gaps(V, labels)[0], a block of rows at a time."""
    gap = np.empty(V.shape[0])
    for rows in _blocks(V.shape[0]):
        gap[rows] = head.gaps(V[rows], labels[rows])[0]
    return gap


def _gaps_from_pre_activation(head: DenseHead, Z: np.ndarray, labels: np.ndarray) -> np.ndarray:
    gap = np.empty(Z.shape[0])
    for rows in _blocks(Z.shape[0]):
        gap[rows] = head.gaps_from_pre_activation(Z[rows], labels[rows])
    return gap


def _gaps_after_step(head, Z, VB, U, fraction, labels) -> np.ndarray:
    """Gaps at Z + fraction·(V Bᵀ) Uᵀ, a block at a time (never the full n×d_out update)."""
    gap = np.empty(Z.shape[0])
    for rows in _blocks(Z.shape[0]):
        gap[rows] = head.gaps_from_pre_activation(Z[rows] + fraction * (VB[rows] @ U.T), labels[rows])
    return gap


# A competing class enters the QP when its gap is within this much of the target: the
# strongest competitor always does; others could overtake it within one step.
COMPETITOR_WINDOW = 1.0


def _linearised_problem(head, Z, U, V, VVt, labels, targets, extra_aim, n_fix, settings):
    """One row per (case, competing class within reach); soft rows first.

    The paper linearises against the strongest competitor only; with more than two
    classes a step can then lift another class above the label, and the loop oscillates.
    Constraining every class near the margin removes that (binary heads: one row a case).

    Soft rows: every must_fix row (price λ) and every must_keep row that misses its margin
    now (elastic, price KEEP_WEIGHT·λ). A must_keep row that holds now stays hard, so B = 0
    is always feasible: a must_keep case whose gradient vanishes (dead ReLU units, saturated
    tanh) cannot make the whole step infeasible, it is lifted as far as the price allows.
    """
    n = V.shape[0]
    logits = np.empty((n, head.num_classes))
    for rows in _blocks(n):
        logits[rows] = head.activation.fn(Z[rows]) @ head.Wc.T + head.bc
    gap, competitor = gaps_from_logits(logits, labels)
    per_class = logits[np.arange(n), labels][:, None] - logits  # (n, C)
    near = per_class < (targets + settings.aim_above + COMPETITOR_WINDOW)[:, None]
    near[np.arange(n), competitor] = True
    near[np.arange(n), labels] = False
    case_idx, class_idx = np.nonzero(near)
    rhs = targets[case_idx] + settings.aim_above + extra_aim[case_idx] - per_class[case_idx, class_idx]
    soft = (case_idx < n_fix) | (rhs > 0)
    order = np.concatenate([np.flatnonzero(soft), np.flatnonzero(~soft)])
    case_idx, class_idx, rhs = case_idx[order], class_idx[order], rhs[order]
    prices = np.where(case_idx[: int(soft.sum())] < n_fix, settings.lam, KEEP_WEIGHT * settings.lam)
    C = np.empty((case_idx.size, U.shape[1]))
    for rows in _blocks(case_idx.size):
        cases = case_idx[rows]
        slope = head.activation.slope(Z[cases])
        C[rows] = (slope * (head.Wc[labels[cases]] - head.Wc[class_idx[rows]])) @ U
    # Rows index the cases' V (and V Vᵀ): no (rows × d_in) copy of the representations.
    problem = qp.LinearisedProblem(C, V, rhs, int(soft.sum()), settings.rho, prices, VVt, cases=case_idx)
    return problem, case_idx, per_class[case_idx, class_idx]


def _by_id(ids: tuple[str, ...], values: np.ndarray) -> dict[str, float]:
    return dict(zip(ids, values.tolist(), strict=True))


def _shortfall(gaps: np.ndarray, targets: np.ndarray) -> float:
    return float(np.sum(np.maximum(targets - gaps, 0.0)))


def step_fractions(settings: RepairSettings) -> tuple[float, ...]:
    """Fractions of the QP step tried in order: the full step, then halvings."""
    return tuple(0.5**k for k in range(settings.backtracking + 1))


def _min(values: np.ndarray) -> float:
    return float(np.min(values)) if values.size else math.inf


def gsn_finetune(
    head: DenseHead, fix: CaseSet, aux: CaseSet, settings: RepairSettings
) -> tuple[DenseHead, GsnFtRecord]:
    """Fine-tune W, b, W_c, b_c on aux cases; keep the step of largest mean κ over must_fix.

    Step 0 (no change) is a candidate, so GSN-FT never lowers κ (paper eq. 7).
    """
    import torch

    generator = torch.Generator().manual_seed(settings.seed)
    params = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (head.W, head.b, head.Wc, head.bc)]
    act = torch_activation(head.activation.torch_name)
    optimiser = torch.optim.Adam(params, lr=settings.gsn_ft_lr)
    Va = torch.tensor(aux.V)
    ya = torch.tensor(aux.labels)

    def snapshot() -> DenseHead:
        W, b, Wc, bc = (p.detach().numpy().copy() for p in params)
        W = head.round_to_storage(W)
        return DenseHead(
            W,
            head.round_to_storage(b),
            head.round_to_storage(Wc),
            head.round_to_storage(bc),
            head.activation,
            head.storage_dtype,
        )

    def mean_kappa(candidate: DenseHead) -> float:
        U = top_left_singular_vectors(candidate.W, settings.rank)
        return float(np.mean(candidate.gsn_kappa(fix.V, fix.labels, U)))

    best, kappas = head, [mean_kappa(head)]
    best_step = 0
    for step in range(1, settings.gsn_ft_steps + 1):
        batch = torch.randperm(len(aux), generator=generator)[: settings.gsn_ft_batch_size]
        W, b, Wc, bc = params
        logits = act(Va[batch] @ W.T + b) @ Wc.T + bc
        loss = torch.nn.functional.cross_entropy(logits, ya[batch])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        candidate = snapshot()
        kappas.append(mean_kappa(candidate))
        if kappas[-1] > kappas[best_step]:
            best, best_step = candidate, step
    reason = f"mean κ {kappas[0]:.4g} < gsn_threshold {settings.gsn_threshold:g}"
    return best, GsnFtRecord(best_step > 0, reason, tuple(kappas), best_step)


