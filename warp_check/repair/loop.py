"""The WARP repair loop (paper Algorithm 1) with GSN-FT, from cached representations.

Each iteration: the top-r left singular vectors U of the current W; the gaps linearised at W
(one row per case and competing class within reach); the QP over B (ΔW = U B); a step along
it, backtracked on the true gaps; W rounded to the model's dtype. Beyond the paper: the loop
stops only when every must_fix gap ≥ γ_s *and* every must_keep gap ≥ γ_h, measured on the
weights as they will be saved, and the QP aims a hair above the margins (``aim_above``) so
rounding cannot leave a true gap just under them. For real suites (settings.py): the step is
priced in function space (metric.py), a trust region re-solves a step the true gaps do not
follow, and the rank grows when an iteration stalls (step.py).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from warp_check.model.head import UNIT_ROUNDOFF, DenseHead, top_left_singular_vectors
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.solution import QPSolution
from warp_check.qp.solve import solve
from warp_check.repair import advice
from warp_check.repair.gsn import gsn_finetune
from warp_check.repair.linearise import (
    KEEP_WEIGHT,
    VVT_CACHE_MAX_CASES,
    blocks,
    gaps,
    gaps_after_step,
    gaps_from_pre_activation,
    linearised_problem,
)
from warp_check.repair.metric import StepMetric
from warp_check.repair.records import CaseSet, GsnFtRecord, IterationRecord, Miss, RepairResult, RepairStatus, mean
from warp_check.repair.settings import RepairSettings, check_rank
from warp_check.repair.step import (
    Merit,
    RankSchedule,
    TrustRegion,
    backtrack,
    raise_prices,
    shortfall,
    update_extra_aim,
)

# Z and the gaps are carried forward from step to step (a rank-r update each) and recomputed from
# the stored W this often, so that float32's rounding of W (~1e-7 of it) never accumulates.
EXACT_EVERY = 10
# A step the dtype's rounding shrank below this share of its length (W in half precision moves in
# steps of ~1e-3 of itself): the short cases ask for more (aim_past_rounding), as for a step of 0.
ROUNDED_AWAY = 0.5


def repair_head(
    head: DenseHead,
    fix: CaseSet,
    keep: CaseSet,
    aux: CaseSet | None = None,
    settings: RepairSettings | None = None,
) -> RepairResult:
    """Run GSN-FT (if needed) and the iterative QP repair once, with ``settings``; never raises for a
    failed repair (a rank past the layer's is a SettingsError, before any work).

    A result whose status is not CONVERGED says which cases miss their margin and by how much; its
    ``head_after`` must not be shipped (the artefact writer refuses it). What is tried after a loop
    that did not converge (the paper's loop, the final linear layer) is the repair ladder's
    (:mod:`warp_check.runs.ladder`).
    """
    settings = settings or RepairSettings()
    check_rank(settings.rank, head.W.shape)
    if settings.blas_threads is None:
        return _Repair(head, fix, keep, aux, settings).run()
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=settings.blas_threads, user_api="blas"):
        return _Repair(head, fix, keep, aux, settings).run()


class _Repair:
    """One repair: the cases, the head being repaired, and Algorithm 1's steps over them."""

    def __init__(self, head: DenseHead, fix: CaseSet, keep: CaseSet, aux: CaseSet | None, settings: RepairSettings):
        self.start = time.perf_counter()
        self.head, self.fix, self.keep, self.settings = head, fix, keep, settings
        self.aux = aux if aux is not None else CaseSet.empty(head.d_in)
        self.gaps_keep0 = gaps(head, keep.V, keep.labels)
        self.gaps_before = _by_id(fix.ids + keep.ids, np.concatenate([gaps(head, fix.V, fix.labels), self.gaps_keep0]))
        U0 = top_left_singular_vectors(head.W, settings.rank)
        self.kappa_before = dict(zip(fix.ids, head.gsn_kappa(fix.V, fix.labels, U0).tolist(), strict=True))
        self.records: list[IterationRecord] = []
        self.excluded: tuple[str, ...] = ()
        self.gsn = GsnFtRecord(False, "not run")

    def run(self) -> RepairResult:
        bad = self.non_finite()
        if bad:
            message = "non-finite values (NaN/Inf) in " + ", ".join(bad) + ": the model cannot be repaired"
            return self.finish(RepairStatus.INVALID_INPUT, message, self.head)
        kept = self.exclude_wrong_keep()
        work_head = self.gsn_finetune_if_needed()
        return _Iterations(self, work_head, kept).run()

    # -- before the loop -------------------------------------------------------------------------
    def non_finite(self) -> list[str]:
        head = self.head
        bad = [
            name
            for name, a in (("W", head.W), ("b", head.b), ("W_c", head.Wc), ("b_c", head.bc))
            if not np.all(np.isfinite(a))
        ]
        cases = (("must_fix", self.fix), ("must_keep", self.keep), ("aux", self.aux))
        return bad + [f"representations of {kind}" for kind, s in cases if not np.all(np.isfinite(s.V))]

    def exclude_wrong_keep(self) -> CaseSet:
        """must_keep cases the model already gets wrong cannot be "kept": they are left out."""
        right = self.gaps_keep0 > 0
        self.excluded = tuple(i for i, ok in zip(self.keep.ids, right, strict=True) if not ok)
        return self.keep if np.all(right) else self.keep.select(right)

    def gsn_finetune_if_needed(self) -> DenseHead:
        """GSN-FT when the must_fix cases' mean κ is below the threshold and there are aux cases."""
        mean_kappa, settings = mean(self.kappa_before.values()), self.settings
        self.gsn = GsnFtRecord(False, "no aux cases")
        if self.head.fixed_head:
            if len(self.aux):
                reason = "only the repair layer's weight may change in this head (final-linear form or a missing bias)"
                self.gsn = GsnFtRecord(False, reason)
            return self.head
        if len(self.aux) and len(self.fix) and mean_kappa < settings.gsn_threshold:
            work_head, self.gsn = gsn_finetune(self.head, self.fix, self.aux, settings)
            return work_head
        if len(self.aux):
            self.gsn = GsnFtRecord(False, f"mean κ {mean_kappa:.4g} ≥ gsn_threshold {settings.gsn_threshold:g}")
        return self.head

    # -- the result -------------------------------------------------------------------------------
    def finish(self, status: RepairStatus, message: str, head_after: DenseHead, misses=()) -> RepairResult:
        fix, keep, settings = self.fix, self.keep, self.settings
        gaps_after = np.concatenate([gaps(head_after, fix.V, fix.labels), gaps(head_after, keep.V, keep.labels)])
        U = top_left_singular_vectors(head_after.W, settings.rank)
        return RepairResult(
            status=status,
            message=message,
            head_before=self.head,
            head_after=head_after,
            settings=settings,
            iterations=tuple(self.records),
            gaps_before=self.gaps_before,
            gaps_after=_by_id(fix.ids + keep.ids, gaps_after),
            kappa_before=self.kappa_before,
            kappa_after=dict(zip(fix.ids, head_after.gsn_kappa(fix.V, fix.labels, U).tolist(), strict=True)),
            excluded_keep=self.excluded,
            misses=tuple(misses),
            gsn_ft=self.gsn,
            seconds=time.perf_counter() - self.start,
        )


@dataclass(frozen=True)
class _Trial:
    """One QP step of an iteration set against the truth: the problem solved (linearised at U,
    one row per case and competing class, ``row_case`` / ``row_margin``), its answer, V Bᵀ, and per
    case the gap the linear model promised and the true gap at the full step."""

    U: np.ndarray
    row_case: np.ndarray
    row_margin: np.ndarray
    problem: LinearisedProblem | None = None
    solution: QPSolution | None = None
    VB: np.ndarray | None = None
    predicted: np.ndarray | None = None
    full: np.ndarray | None = None


class _Iterations:
    """Algorithm 1's loop over the must_fix and the kept must_keep cases, stacked: W, its
    pre-activations Z = V Wᵀ + b and the true gaps, updated step by step."""

    def __init__(self, repair: _Repair, head: DenseHead, kept: CaseSet) -> None:
        self.repair, self.head, self.settings = repair, head, repair.settings
        fix, settings = repair.fix, repair.settings
        self.ids = fix.ids + kept.ids
        self.n_fix = len(fix)
        self.V = np.vstack([fix.V, kept.V])
        self.labels = np.concatenate([fix.labels, kept.labels])
        self.targets = np.concatenate([np.full(len(fix), settings.gamma_s), np.full(len(kept), settings.gamma_h)])
        self.metric = StepMetric.of(settings.rho, settings.mu, kept.V)
        self.V_qp = self.metric.whiten(self.V)  # the representations the QP sees
        # V Vᵀ is constant through the loop: cached for small sets. Larger ones get the Gram
        # matrix of each QP's working set only (must_keep rows join lazily): no n×n.
        self.VVt = self.V_qp @ self.V_qp.T if self.V.shape[0] <= VVT_CACHE_MAX_CASES else None
        self.trust = TrustRegion(settings.trust_region)
        # σ the identity (the final-linear form): the linearised gaps are the true gaps, so every row
        # is hard and the rank is the layer's whole smaller side (the number of classes, within
        # max_rank): one QP either meets every margin or proves that no change of the layer can.
        self.linear = head.activation.name == "identity"
        self.ranks = RankSchedule(settings, min(head.W.shape), start_at_limit=self.linear)
        self.W = head.round_to_storage(head.W)
        self.gap = gaps(head.with_weight(self.W), self.V, self.labels)
        self.merit = Merit(self.targets, settings.lam)
        # Per case: the price of its slack in the QP (λ, KEEP_WEIGHT·λ), raised for must_fix cases
        # the QP keeps leaving short (step.raise_prices).
        self.price = np.concatenate([np.full(self.n_fix, settings.lam), np.full(len(kept), KEEP_WEIGHT * settings.lam)])
        # Per case: extra aim of must_fix cases that creep toward their margin (step.update_extra_aim),
        # and of any short case after a step the dtype rounded away (aim_past_rounding).
        self.extra_aim = np.zeros_like(self.targets)
        # Per case: how far above its margin the saved model's own arithmetic needs it (holds_as_stored).
        self.stored_aim = np.zeros_like(self.targets)
        self.carried = None  # the last QP's rows and multipliers, where the next one may start
        self.rows_last = 0  # rows of the last QP solved
        self.exact = True  # Z and the gaps computed from the stored W itself (not carried forward)
        self.rounded_away = False  # the last step lost most of itself to the dtype's rounding

    def run(self) -> RepairResult:
        repair, settings = self.repair, self.settings
        if np.all(self.gap >= self.targets) and self.holds_as_stored():
            status = RepairStatus.CONVERGED if repair.gsn.applied else RepairStatus.NOTHING_TO_REPAIR
            message = "every case already meets its margin: nothing to repair"
            return repair.finish(status, message, self.head.with_weight(self.W))
        merit_now = self.merit(self.gap)
        best_merit, best_iteration, stalled = merit_now, 0, ""
        best_W, best_gap = self.W, self.gap  # a failed run reports its best iterate, not its last
        Z = self.head.with_weight(self.W).pre_activation(self.V)  # exact for the current W
        for t in range(1, settings.max_iter + 1):
            t_start = time.perf_counter()
            solved: list[QPSolution] = []  # every solve of this iteration (rank growth, trust region)
            trial = self.first_trial(Z, solved)
            attempt, ratio = 0, 1.0
            while trial is not None:
                ratio = TrustRegion.ratio(merit_now, self.merit(trial.predicted), self.merit(trial.full))
                if not self.trust.retry(ratio, attempt):
                    break
                attempt += 1  # the same linearisation, priced higher by the trust region
                dearer = replace(trial.problem, rho=self.metric.qp_rho(self.trust.kappa))
                trial = self.trial(dearer, trial, Z, solved, warm=trial.solution.warm)
            if trial is None:
                self.record(t, solved, self.rows_last, 1.0, 0.0, t_start)
                status, message = _solver_failure(t, solved[-1], settings, self.ranks if self.linear else None)
                misses = self.misses(self.gap)
                if self.linear and solved[-1].status.infeasible:
                    in_the_way = self.in_the_way(Z)
                    if in_the_way is not None:
                        misses = in_the_way
                        message += f"; a priced relaxation leaves short (the likeliest in the way): {_named(misses)}"
                return repair.finish(status, message, self.head.with_weight(self.W), misses)
            self.trust.adapt(ratio)
            fraction, gap_there, check = backtrack(
                self.head,
                Z,
                trial.VB,
                trial.U,
                self.labels,
                self.merit,
                merit_now,
                trial.predicted,
                trial.full,
                self.n_fix,
                settings,
            )
            shortfall_before = shortfall(self.gap, self.targets)
            step = self.take_step(Z, trial, fraction, gap_there, t)
            merit_now = self.merit(self.gap)
            self.record(t, solved, trial.problem.n, fraction, step, t_start, check, trial.U.shape[1], ratio)
            if self.converged(Z):
                message = f"converged in {t} iteration{'s' if t > 1 else ''}"
                return repair.finish(RepairStatus.CONVERGED, message, self.head.with_weight(self.W))
            # converged() may have raised the aims (the saved arithmetic's room): both measured anew
            merit_now, best_merit = self.merit(self.gap), self.merit(best_gap)
            if merit_now < best_merit * (1 - 1e-9):
                best_merit, best_iteration, best_W, best_gap = merit_now, t, self.W, self.gap
            if self.ranks.after(shortfall_before, shortfall(self.gap, self.targets)):
                continue  # more room: the next iteration decides whether the loop still goes nowhere
            if self.rounded_away and self.aim_past_rounding():
                continue  # the step was smaller than the weights' dtype can hold: ask for more
            if step == 0.0:
                stalled = "the QP step is zero: the linearised problem sees nothing to gain"
            elif t - best_iteration >= settings.patience:
                stalled = f"no progress for {settings.patience} iterations"
            if stalled:
                break
        return self.not_converged(best_W, best_gap, best_iteration, stalled)

    def linearised(self, Z: np.ndarray, U: np.ndarray, exact: bool | None = None):
        """The QP at Z and U; ``exact`` (default: the final-linear form's) makes every row hard."""
        return linearised_problem(
            self.head,
            Z,
            U,
            self.V_qp,
            self.VVt,
            self.labels,
            self.targets,
            self.extra_aim + self.stored_aim,
            self.n_fix,
            self.settings,
            self.metric.qp_rho(self.trust.kappa),
            self.price,
            exact=self.linear if exact is None else exact,
        )

    def first_trial(self, Z: np.ndarray, solved: list[QPSolution]) -> _Trial | None:
        """The QP step at the rank the loop is at; where the linear model itself leaves the must_fix
        cases short (the rank has no room for them), the rank grows and the step is solved again."""
        n_fix, targets = self.n_fix, self.targets
        while True:
            U = top_left_singular_vectors(self.W, self.ranks.rank)
            problem, row_case, row_margin = self.linearised(Z, U)
            trial = self.trial(problem, _Trial(U, row_case, row_margin), Z, solved, warm=self.carried)
            if trial is None:
                return None
            promised = shortfall(trial.predicted[:n_fix], targets[:n_fix])
            if not self.ranks.grow_for_promise(promised, shortfall(self.gap[:n_fix], targets[:n_fix])):
                return trial

    def trial(self, problem, base: _Trial, Z: np.ndarray, solved: list[QPSolution], warm=None) -> _Trial | None:
        """Solve ``problem`` (linearised at ``base``'s U) and set its step against the true gaps; None
        when the solver has no answer (the last of ``solved`` says why)."""
        solution = solve(problem, self.settings.solver, warm)
        solved.append(solution)
        self.rows_last = problem.n
        if not solution.status.has_solution:
            return None
        self.carried = solution.warm or self.carried
        # The linear model's gap for every case at the full step (its worst competitor row).
        predicted = np.full(len(self.targets), np.inf)
        np.minimum.at(predicted, base.row_case, base.row_margin + problem.constraint_values(solution.B))
        VB = self.V_qp @ solution.B.T  # = V ΔBᵀ: the whitening cancels
        full = gaps_after_step(self.head, Z, VB, base.U, 1.0, self.labels)
        return replace(base, problem=problem, solution=solution, VB=VB, predicted=predicted, full=full)

    def take_step(self, Z: np.ndarray, trial: _Trial, fraction: float, gap_there: np.ndarray, t: int) -> float:
        """W ← W + fraction·U B, as stored (rounded to the model's dtype); returns ‖ΔW‖_F.

        Z moves by fraction·(V Bᵀ) Uᵀ and the gaps are those backtracking found there: exact but for
        float32's rounding of W (~1e-6 of a gap, far inside ``aim_above``). Z and the gaps are
        recomputed exactly from the stored W every EXACT_EVERY iterations, after a step rounded to
        half precision (which moves W by ~1e-3), and before convergence is declared (converged)."""
        head, U, predicted = self.head, trial.U, trial.predicted
        wanted = fraction * (U @ self.metric.step(trial.solution.B))
        W_next = head.round_to_storage(self.W + wanted)
        step = float(np.linalg.norm(W_next - self.W))
        # Half precision holds ~3 digits of W: a step it mostly rounds away gains nothing either
        # (a step of 0, rounded away or never asked for, counts as rounded away, as it always did).
        self.rounded_away = step <= ROUNDED_AWAY * float(np.linalg.norm(wanted))
        if head.storage_dtype in ("float32", "float64") and t % EXACT_EVERY:
            moved = fraction * trial.VB
            for rows in blocks(Z.shape[0]):  # in place, a block at a time: no n × d_out temporary
                Z[rows] += moved[rows] @ U.T
            gap_next = gap_there
            self.exact = False
        else:
            gap_next = self.exact_gaps(Z, W_next)
        update_extra_aim(self.extra_aim, self.gap, gap_next, predicted, fraction, self.targets, self.n_fix)
        if fraction == 1.0:  # a backtracked step's shortfall is the curvature's, not the price's
            raise_prices(self.price, predicted, self.targets, self.n_fix, self.settings)
        self.W, self.gap = W_next, gap_next
        return step

    def exact_gaps(self, Z: np.ndarray, W: np.ndarray) -> np.ndarray:
        """Z = V Wᵀ + b (in place) and the gaps, exactly for W."""
        np.matmul(self.V, W.T, out=Z)
        Z += self.head.b
        self.exact = True
        return gaps_from_pre_activation(self.head, Z, self.labels)

    def converged(self, Z: np.ndarray) -> bool:
        """Every margin holds, on Z and gaps recomputed exactly from the stored W (and, where they
        were carried forward, the gaps are replaced by the exact ones) and in the saved model's arithmetic."""
        if not np.all(self.gap >= self.targets):
            return False
        if not self.exact:
            self.gap = self.exact_gaps(Z, self.W)
            if not np.all(self.gap >= self.targets):
                return False
        return self.holds_as_stored()

    def holds_as_stored(self) -> bool:
        """Every margin also holds in the saved model's own arithmetic (its dtype: half precision
        rounds each product), and in half precision with room for v rounded apart on another
        device, where an audit recomputes it (DenseHead.gap_rounding_reach; float32's reach, ~1e-6
        of a gap, is far inside aim_above). Where one does not, that case aims higher by what it
        lacked, so the aim above γ is measured on the cases, not guessed; the merit then counts
        that aim too, or a loop whose float64 gaps all clear γ would see nothing left to gain and
        stall with the room still unmet."""
        held, room = self.held(self.W, self.gap)
        short = np.maximum(self.targets + room - held, 0.0)
        if not short.any():
            return True
        self.stored_aim += np.where(short > 0, short + self.settings.aim_above, 0.0)
        self.merit = Merit(self.targets + self.stored_aim, self.settings.lam)
        return False

    def held(self, W: np.ndarray, gap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per case at W: the gap the stopping rule measures (the lower of the float64 ``gap`` and the
        gap in the saved arithmetic) and the room a half-precision model needs above its margin."""
        head = self.head.with_weight(W)
        held = np.minimum(gap, head.gaps_as_stored(self.V, self.labels))
        if head.unit_roundoff > UNIT_ROUNDOFF["float32"]:
            return held, head.gap_rounding_reach(self.V, self.labels)
        return held, np.zeros_like(held)

    def aim_past_rounding(self) -> bool:
        """After a step the storage dtype rounded away (bfloat16 holds ~3 digits): every case still
        short of its margin asks for its shortfall again on top, up to its margin; False when none
        can ask for more (then the loop has really stalled)."""
        short = np.maximum(self.targets - self.gap, 0.0)
        grows = (short > 0) & (self.extra_aim < self.targets)
        self.extra_aim[grows] = np.minimum(self.extra_aim[grows] + short[grows], self.targets[grows])
        return bool(grows.any())

    def record(self, t, solved, rows, fraction, step, t_start, check=None, rank=None, ratio=None) -> None:
        """``solved``: this iteration's QP solutions, the one whose step was taken last."""
        gap, targets, n_fix = self.gap, self.targets, self.n_fix
        solution = solved[-1]
        self.repair.records.append(
            IterationRecord(
                iteration=t,
                qp_status=solution.status,
                qp_form=solution.form,
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
                qp_rounds=sum(s.rounds for s in solved),
                qp_backend=solution.backend,
                qp_seconds=sum(s.seconds for s in solved),
                qp_iterations=sum(s.iterations for s in solved),
                rank=rank if rank is not None else self.ranks.rank,
                metric_scale=self.trust.kappa,
                model_ratio=ratio,
                **(check or {}),
            )
        )

    def in_the_way(self, Z: np.ndarray) -> list[Miss] | None:
        """Where the exact QP (every row hard) is infeasible: the cases its priced relaxation, the
        dense form's rows (must_fix and short must_keep rows elastic), leaves short: the cases it
        costs most to meet beside the others, those in the way among them. A neighbourhood then drops
        only its copies among these, not every copy short at the start. None where the relaxation has
        no answer either."""
        U = top_left_singular_vectors(self.W, self.ranks.rank)
        problem, row_case, row_margin = self.linearised(Z, U, exact=False)
        relaxed = self.trial(problem, _Trial(U, row_case, row_margin), Z, [])
        return self.misses(relaxed.full) if relaxed is not None else None

    def misses(self, gap: np.ndarray) -> list[Miss]:
        return [
            Miss(self.ids[i], "must_fix" if i < self.n_fix else "must_keep", float(gap[i]), float(self.targets[i]))
            for i in np.flatnonzero(gap < self.targets)
        ]

    def room_misses(self, W: np.ndarray, gap: np.ndarray) -> list[Miss]:
        """The cases at W that clear their margin in float64 but not in the saved arithmetic or not by
        the room a half-precision model needs: the rest of what the stopping rule still waits for."""
        held, room = self.held(W, gap)
        dtype = self.head.storage_dtype
        return [
            Miss(
                self.ids[i],
                "must_fix" if i < self.n_fix else "must_keep",
                float(held[i]),
                float(self.targets[i]),
                room=float(room[i]),
                dtype=dtype if room[i] > 0 else None,
            )
            for i in np.flatnonzero((gap >= self.targets) & (held < self.targets + room))
        ]

    def not_converged(self, W: np.ndarray, gap: np.ndarray, best_iteration: int, stalled: str) -> RepairResult:
        misses = self.misses(gap) + self.room_misses(W, gap)
        why = f"stalled ({stalled})" if stalled else "not converged"
        head = f"{why} after {len(self.repair.records)} iteration(s): at the best iterate ({best_iteration}), "
        if not misses:  # cannot happen while the stopping rule and these two agree; never a traceback
            return self.repair.finish(RepairStatus.NOT_CONVERGED, head + "no case is short", self.head.with_weight(W))
        worst = max(misses, key=lambda m: m.short_by)
        message = (
            f"{head}{len(misses)} case(s) miss their margin, worst '{worst.id}' ({worst.kind}) has gap "
            f"{worst.gap:.4g} < {worst.needs}; try "
            + advice.after_no_convergence(
                self.settings, (m.kind for m in misses), stalled=bool(stalled), room=_room_dtype(misses)
            )
        )
        return self.repair.finish(RepairStatus.NOT_CONVERGED, message, self.head.with_weight(W), misses)


def _room_dtype(misses: list[Miss]) -> str | None:
    """The half-precision dtype whose room every miss lacks (None: some case misses its margin itself)."""
    dtypes = {m.dtype for m in misses}
    return dtypes.pop() if len(dtypes) == 1 and None not in dtypes else None


def _named(misses: list[Miss], shown: int = 5) -> str:
    """The first ``shown`` ids of ``misses`` and how many there are."""
    names = ", ".join(repr(m.id) for m in misses[:shown])
    return f"{names} ({len(misses)} case{'s' if len(misses) != 1 else ''})" if misses else "none"


def _solver_failure(
    t: int, solution: QPSolution, settings: RepairSettings, linear: RankSchedule | None
) -> tuple[RepairStatus, str]:
    """``linear``: the final-linear form's ranks (None: the dense form). At full rank the QP was the
    whole problem and its infeasibility a proof; below it, every row was hard within too few directions."""
    if solution.status.infeasible and linear is not None and not linear.full:
        return RepairStatus.INFEASIBLE, (
            f"iteration {t}: no change of the final layer of rank {linear.rank} meets every margin (solver: "
            f"{solution.solver_status}); the layer has {linear.smallest_side} classes, so a change of full rank may: "
            f"raise max_rank (now {settings.max_rank}) to {linear.smallest_side}"
        )
    if solution.status.infeasible and linear is not None:
        return RepairStatus.INFEASIBLE, (
            f"iteration {t}: no change of the final layer meets every must_fix margin while every must_keep "
            f"case keeps its own (solver: {solution.solver_status}); the layer is linear, so this is a proof, "
            f"not a search that gave up; {advice.INFEASIBLE_EXACT}"
        )
    if solution.status.infeasible:
        return RepairStatus.INFEASIBLE, (
            f"iteration {t}: the must_keep constraints cannot all hold together "
            f"(solver: {solution.solver_status}); {advice.INFEASIBLE_KEEP}"
        )
    if solution.unsettled:
        return RepairStatus.SOLVER_FAILED, (
            f"iteration {t}: {solution.solver_status}; {advice.after_unsettled_working_set(settings)}"
        )
    return RepairStatus.SOLVER_FAILED, (
        f"iteration {t}: the QP solver ({solution.backend}) ended with '{solution.solver_status}' "
        f"and no usable solution; {advice.after_solver_failure(settings, solution.backend)}"
    )


def _by_id(ids: tuple[str, ...], values: np.ndarray) -> dict[str, float]:
    return dict(zip(ids, values.tolist(), strict=True))


def _min(values: np.ndarray) -> float:
    return float(np.min(values)) if values.size else math.inf
