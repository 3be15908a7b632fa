"""The WARP loop itself (paper Algorithm 1) over the stacked cases, and the additions to it, each a
named function.

Algorithm 1, per iteration t: linearise the gaps at W (U = the top-r left singular vectors of W),
solve the QP for B (ΔW = U B), take the step, stop when every margin holds. :func:`run` reads so,
with these additions for real suites:

* the step is backtracked on the true gaps (:func:`~warp_check.repair.step.backtrack`) and W is
  rounded to the model's dtype (:func:`take_step`);
* the rank grows where the QP's own promise leaves the must_fix cases short (:func:`linearise_and_solve`)
  and where an iteration stalls (``RankSchedule.after``);
* the trust region κ re-solves a step the true gaps do not follow (:func:`within_trust_region`);
* the stopping rule asks every must_keep gap ≥ γ_h too, on the weights as they will be saved, with the
  room a half-precision model needs (:func:`converged`, :func:`holds_as_stored`), and a step the dtype
  rounds away asks for more (:func:`aim_past_rounding`);
* the QP's must_keep rows join lazily (the working set, in ``qp.solve``) and start from the last QP's
  rows (``state.carried``);
* a failed run reports its best iterate (:func:`keep_best`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from warp_check.model.blocks import blocks
from warp_check.model.head import DenseHead, top_left_singular_vectors
from warp_check.progress import Step
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.solution import QPSolution, WarmStart
from warp_check.qp.solve import solve
from warp_check.repair.controls import Merit, RankSchedule, TrustRegion, shortfall
from warp_check.repair.endings import misses, named, not_converged, solver_failure
from warp_check.repair.linearise import (
    KEEP_WEIGHT,
    VVT_CACHE_MAX_CASES,
    gaps,
    gaps_after_step,
    gaps_from_pre_activation,
    linearised_problem,
)
from warp_check.repair.metric import StepMetric
from warp_check.repair.records import CaseSet, IterationRecord, Miss, RepairStatus
from warp_check.repair.settings import RepairSettings
from warp_check.repair.state import Best, Ending, LoopState, Stacked, Trial
from warp_check.repair.step import backtrack, raise_prices, update_extra_aim

# Z and the gaps are carried forward from step to step (a rank-r update each) and recomputed from
# the stored W this often, so that float32's rounding of W (~1e-7 of it) never accumulates.
EXACT_EVERY = 10
# A step the dtype's rounding shrank below this share of its length (W in half precision moves in
# steps of ~1e-3 of itself): the short cases ask for more (aim_past_rounding), as for a step of 0.
ROUNDED_AWAY = 0.5


def stack(
    *,
    head: DenseHead,
    fix: CaseSet,
    kept: CaseSet,
    settings: RepairSettings,
    metric: StepMetric | None = None,
    held_outside: int = 0,
    keep_bars: np.ndarray | None = None,
) -> Stacked:
    """The must_fix and kept must_keep cases stacked (must_fix first; float32 as given, whitened in
    float64), each case's margin, and the step's price: ``metric``, or the one of ``kept`` (the
    cases held outside the loop, where there are, are in the metric the caller gives: repair.screen).
    ``keep_bars``: the margin of each of ``kept`` (RepairSettings.keep_bars; None: γ_h each)."""
    fix_V = fix.V
    if kept.V.dtype == np.float32 and np.array_equal(np.asarray(fix_V, np.float32).astype(fix_V.dtype), fix_V):
        fix_V = np.asarray(fix_V, np.float32)  # float32 values held as float64: the same numbers
    given = np.vstack([fix_V, kept.V])
    V = given.astype(np.float64, copy=False)
    if metric is None:
        metric = StepMetric.of(settings.rho, settings.mu, np.asarray(head.repaired_input(kept.V), dtype=np.float64))
    V_qp = metric.whiten(head.repaired_input(V))
    if given.dtype == np.float32 and V_qp is not V:
        # v as the model gave it, exact: each product casts it to float64 whole, as before, and the
        # loop holds it in half the bytes beside V_qp (200 MB of 131k cases of d = 384)
        V = given
    return Stacked(
        head=head,
        settings=settings,
        ids=fix.ids + kept.ids,
        n_fix=len(fix),
        V=V,
        labels=np.concatenate([fix.labels, kept.labels]),
        targets=np.concatenate([np.full(len(fix), settings.gamma_s), _bars(kept, keep_bars, settings)]),
        metric=metric,
        V_qp=V_qp,
        VVt=V_qp @ V_qp.T if V.shape[0] <= VVT_CACHE_MAX_CASES else None,
        linear=head.exact_linear,
        copies=np.concatenate([fix.copies, kept.copies]),
        held_outside=held_outside,
    )


def start(*, stacked: Stacked, rank: int | None = None) -> LoopState:
    """W as stored and its true gaps, every aim 0 and every price the settings' λ; the step's rank from
    ``rank`` where given (a later round of repair.screen starts at the rank the last one needed)."""
    head, settings, n_fix = stacked.head, stacked.settings, stacked.n_fix
    W = head.round_to_storage(head.W)
    n_keep = len(stacked.targets) - n_fix
    return LoopState(
        W=W,
        gap=gaps(head.with_weight(W), stacked.V, stacked.labels),
        Z=head.with_weight(W).pre_activation(stacked.V),
        merit=Merit(stacked.targets, settings.lam),
        price=np.concatenate([np.full(n_fix, settings.lam), np.full(n_keep, KEEP_WEIGHT * settings.lam)]),
        extra_aim=np.zeros_like(stacked.targets),
        stored_aim=np.zeros_like(stacked.targets),
        trust=TrustRegion(settings.trust_region),
        ranks=RankSchedule(settings, min(head.W.shape), start_at_limit=stacked.linear, start_at=rank),
    )


def _bars(kept: CaseSet, bars: np.ndarray | None, settings: RepairSettings) -> np.ndarray:
    return np.full(len(kept), settings.gamma_h) if bars is None else np.asarray(bars, dtype=np.float64)


def join(
    *, stacked: Stacked, state: LoopState, kept: CaseSet, held_outside: int, keep_bars: np.ndarray | None = None
) -> Stacked:
    """``kept`` must_keep cases join the loop between two steps (repair.screen's cases held outside it
    that the last step left short): their rows go after the rows held, so every row keeps its
    position (the QP's carried multipliers go by it); their Z and gaps are exact at state.W, their
    prices and aims a new case's. ``state`` grows in place; the Stacked that holds them is returned."""
    head, settings = stacked.head, stacked.settings
    given = np.asarray(kept.V, dtype=stacked.V.dtype)  # exact: the same CaseSet's v (see stack)
    V = np.concatenate([stacked.V, given])
    if stacked.V_qp is stacked.V:  # the metric whitens nothing (stack)
        V_qp = V
    else:
        whitened = stacked.metric.whiten(head.repaired_input(given.astype(np.float64, copy=False)))
        V_qp = np.concatenate([stacked.V_qp, whitened])
    grown = replace(
        stacked,
        ids=stacked.ids + kept.ids,
        V=V,
        labels=np.concatenate([stacked.labels, kept.labels]),
        targets=np.concatenate([stacked.targets, _bars(kept, keep_bars, settings)]),
        V_qp=V_qp,
        VVt=V_qp @ V_qp.T if V.shape[0] <= VVT_CACHE_MAX_CASES else None,
        copies=np.concatenate([stacked.copies, kept.copies]),
        held_outside=held_outside,
    )
    n = len(kept)
    Z = head.with_weight(state.W).pre_activation(given)
    gap = gaps_from_pre_activation(head, Z, kept.labels)
    state.Z = np.concatenate([state.Z, Z])
    state.gap = np.concatenate([state.gap, gap])
    state.price = np.concatenate([state.price, np.full(n, KEEP_WEIGHT * settings.lam)])
    state.extra_aim = np.concatenate([state.extra_aim, np.zeros(n)])
    state.stored_aim = np.concatenate([state.stored_aim, np.zeros(n)])
    if isinstance(state.carried, WarmStart):
        state.carried = state.carried.over(V_qp)
    state.merit = Merit(grown.targets + state.stored_aim, settings.lam)
    state.merit_now = state.merit(state.gap)
    if state.best is not None:
        at_best = gap if state.best.W is state.W else gaps(head.with_weight(state.best.W), given, kept.labels)
        state.best = replace(state.best, gap=np.concatenate([state.best.gap, at_best]))
    return grown


def run(
    *,
    stacked: Stacked,
    state: LoopState,
    shown: Step | None = None,
    first: int = 1,
    between: Callable[[Stacked, LoopState], Stacked] | None = None,
) -> Ending:
    """Algorithm 1 from ``state`` (its W as stored), with the additions named in the module; ``shown``
    counts the iterations for the user, with how many cases are still short. ``first``: the number of
    the first iteration (a later round of repair.screen goes on counting; max_iter bounds them all).
    ``between``: called before every iteration but the first, with the loop's cases and state; the
    cases it returns are the loop's from then on (repair.screen's cases that join between steps)."""
    settings = stacked.settings
    if np.all(state.gap >= stacked.targets) and holds_as_stored(stacked=stacked, state=state):
        return Ending(
            status=RepairStatus.NOTHING_TO_REPAIR,
            message="every case already meets its margin: nothing to repair",
            W=state.W,
        )
    state.merit_now = state.merit(state.gap)
    state.best = Best(W=state.W, gap=state.gap, iteration=first - 1)
    stalled = ""
    for t in range(first, settings.max_iter + 1):
        t_start = time.perf_counter()
        solved: list[QPSolution] = []  # every solve of this iteration (rank growth, trust region)
        if between is not None and t > first:
            trial = None  # the last step's problem holds the cases' arrays from before a join
            stacked = between(stacked, state)
        # Algorithm 1: U from W's SVD, the gaps linearised at W, the QP solved for B.
        trial = linearise_and_solve(stacked=stacked, state=state, solved=solved)
        trial, ratio = within_trust_region(stacked=stacked, state=state, trial=trial, solved=solved)
        if trial is None:
            record(stacked=stacked, state=state, t=t, solved=solved, t_start=t_start)
            return solver_failed(stacked=stacked, state=state, t=t, solution=solved[-1])
        # Algorithm 1: W ← W + U B (here backtracked on the true gaps, and as stored).
        fraction, gap_there, check = backtrack(stacked=stacked, state=state, trial=trial)
        shortfall_before = shortfall(state.gap, stacked.targets)
        step = take_step(stacked=stacked, state=state, trial=trial, fraction=fraction, gap_there=gap_there, t=t)
        state.merit_now = state.merit(state.gap)
        record(
            stacked=stacked, state=state, t=t, solved=solved, t_start=t_start,
            trial=trial, fraction=fraction, step=step, check=check, ratio=ratio,
        )  # fmt: skip
        if shown is not None:
            shown.advance(1, note=f"{int(np.sum(state.gap < stacked.targets))} case(s) short of their margin")
        # Algorithm 1: stop when the margins hold (here every one, and as the model will be saved).
        if converged(stacked=stacked, state=state):
            message = f"converged in {t} iteration{'s' if t > 1 else ''}"
            return Ending(status=RepairStatus.CONVERGED, message=message, W=state.W)
        keep_best(state=state, t=t)
        if state.ranks.after(shortfall_before, shortfall(state.gap, stacked.targets)):
            continue  # more room: the next iteration decides whether the loop still goes nowhere
        if state.rounded_away and aim_past_rounding(stacked=stacked, state=state):
            continue  # the step was smaller than the weights' dtype can hold: ask for more
        stalled = why_stalled(settings=settings, state=state, t=t, step=step)
        if stalled:
            break
    return not_converged(stacked=stacked, state=state, stalled=stalled)


def linearise_and_solve(*, stacked: Stacked, state: LoopState, solved: list[QPSolution]) -> Trial | None:
    """The QP step at the rank the loop is at; where the linear model itself leaves the must_fix cases
    short (the rank has no room for them), the rank grows and the step is solved again."""
    n_fix, targets = stacked.n_fix, stacked.targets
    while True:
        U = top_left_singular_vectors(state.W, state.ranks.rank)
        problem, row_case, row_margin = linearised_problem(stacked=stacked, state=state, U=U, exact=stacked.linear)
        base = Trial(U=U, row_case=row_case, row_margin=row_margin)
        trial = solve_trial(stacked=stacked, state=state, problem=problem, base=base, solved=solved, warm=state.carried)
        if trial is None:
            return None
        promised = shortfall(trial.predicted[:n_fix], targets[:n_fix])
        if not state.ranks.grow_for_promise(promised, shortfall(state.gap[:n_fix], targets[:n_fix])):
            return trial


def solve_trial(
    *,
    stacked: Stacked,
    state: LoopState,
    problem: LinearisedProblem,
    base: Trial,
    solved: list[QPSolution],
    warm: object | None = None,
) -> Trial | None:
    """Solve ``problem`` (linearised at ``base``'s U) and set its step against the true gaps; None when
    the solver has no answer (the last of ``solved`` says why)."""
    solution = solve(problem, stacked.settings.solver, warm)
    solved.append(solution)
    state.rows_last = problem.n
    if not solution.status.has_solution:
        return None
    state.carried = solution.warm or state.carried
    # The linear model's gap for every case at the full step (its worst competitor row).
    predicted = np.full(len(stacked.targets), np.inf)
    np.minimum.at(predicted, base.row_case, base.row_margin + problem.constraint_values(solution.B))
    VB = stacked.V_qp @ solution.B.T  # = V ΔBᵀ: the whitening cancels
    full = gaps_after_step(stacked.head, state.Z, VB, base.U, 1.0, stacked.labels)
    return replace(base, problem=problem, solution=solution, VB=VB, predicted=predicted, full=full)


def within_trust_region(
    *, stacked: Stacked, state: LoopState, trial: Trial | None, solved: list[QPSolution]
) -> tuple[Trial | None, float]:
    """``trial``, re-solved with a dearer step while the true gaps do not follow its promise (the
    trust region's κ; off, the first step stands), and the ratio of the last: true / promised decrease.
    None (the solver had no answer) leaves κ as it was."""
    attempt, ratio = 0, 1.0
    while trial is not None:
        ratio = TrustRegion.ratio(state.merit_now, state.merit(trial.predicted), state.merit(trial.full))
        if not state.trust.retry(ratio, attempt):
            break
        attempt += 1  # the same linearisation, priced higher by the trust region
        dearer = replace(trial.problem, rho=stacked.metric.qp_rho(state.trust.kappa))
        trial = solve_trial(
            stacked=stacked, state=state, problem=dearer, base=trial, solved=solved, warm=trial.solution.warm
        )
    if trial is not None:  # κ for the next iteration: halved where the model was good, doubled where poor
        state.trust.adapt(ratio)
    return trial, ratio


def take_step(
    *, stacked: Stacked, state: LoopState, trial: Trial, fraction: float, gap_there: np.ndarray, t: int
) -> float:
    """W ← W + fraction·U B, as stored (rounded to the model's dtype); returns ‖ΔW‖_F.

    Z moves by fraction·(V Bᵀ) Uᵀ and the gaps are those backtracking found there: exact but for
    float32's rounding of W (~1e-6 of a gap, far inside ``aim_above``). Z and the gaps are
    recomputed exactly from the stored W every EXACT_EVERY iterations, after a step rounded to
    half precision (which moves W by ~1e-3), and before convergence is declared (converged)."""
    head, U, predicted, Z = stacked.head, trial.U, trial.predicted, state.Z
    wanted = fraction * (U @ stacked.metric.step(trial.solution.B))
    W_next = head.round_to_storage(state.W + wanted)
    step = float(np.linalg.norm(W_next - state.W))
    # Half precision holds ~3 digits of W: a step it mostly rounds away gains nothing either
    # (a step of 0, rounded away or never asked for, counts as rounded away, as it always did).
    state.rounded_away = step <= ROUNDED_AWAY * float(np.linalg.norm(wanted))
    if head.storage_dtype in ("float32", "float64") and t % EXACT_EVERY:
        moved = fraction * trial.VB
        for rows in blocks(Z.shape[0]):  # in place, a block at a time: no n × d_out temporary
            Z[rows] += moved[rows] @ U.T
        gap_next = gap_there
        state.exact = False
    else:
        gap_next = exact_gaps(stacked=stacked, state=state, W=W_next)
    targets, n_fix = stacked.targets, stacked.n_fix
    update_extra_aim(state.extra_aim, state.gap, gap_next, predicted, fraction, targets, n_fix)
    if fraction == 1.0:  # a backtracked step's shortfall is the curvature's, not the price's
        raise_prices(state.price, predicted, targets, n_fix, stacked.settings)
    state.W, state.gap = W_next, gap_next
    return step


def exact_gaps(*, stacked: Stacked, state: LoopState, W: np.ndarray) -> np.ndarray:
    """Z = V Wᵀ + b (in place; the FFN-output form's u, with its residual) and the gaps, exactly for W."""
    head = stacked.head
    if head.width == head.d_in:
        np.matmul(stacked.V, W.T, out=state.Z)
        state.Z += head.b
    else:
        for rows in blocks(state.Z.shape[0]):
            state.Z[rows] = head.with_weight(W).pre_activation(stacked.V[rows])
    state.exact = True
    return gaps_from_pre_activation(stacked.head, state.Z, stacked.labels)


def converged(*, stacked: Stacked, state: LoopState) -> bool:
    """Every margin holds, on Z and gaps recomputed exactly from the stored W (and, where they were
    carried forward, the gaps are replaced by the exact ones) and in the saved model's arithmetic."""
    if not np.all(state.gap >= stacked.targets):
        return False
    if not state.exact:
        state.gap = exact_gaps(stacked=stacked, state=state, W=state.W)
        if not np.all(state.gap >= stacked.targets):
            return False
    return holds_as_stored(stacked=stacked, state=state)


def holds_as_stored(*, stacked: Stacked, state: LoopState) -> bool:
    """Every margin also holds in the saved model's own arithmetic (its dtype: half precision rounds
    each product), and in half precision with room for v rounded apart on another device, where an
    audit recomputes it (DenseHead.gap_rounding_reach; float32's reach, ~1e-6 of a gap, is far inside
    aim_above). Where one does not, that case aims higher by what it lacked, so the aim above γ is
    measured on the cases, not guessed; the merit then counts that aim too, or a loop whose float64
    gaps all clear γ would see nothing left to gain and stall with the room still unmet."""
    held, room = stacked.held(state.W, state.gap)
    short = np.maximum(stacked.targets + room - held, 0.0)
    if not short.any():
        return True
    state.stored_aim += np.where(short > 0, short + stacked.settings.aim_above, 0.0)
    state.merit = Merit(stacked.targets + state.stored_aim, stacked.settings.lam)
    return False


def keep_best(*, state: LoopState, t: int) -> None:
    """W at ``t`` becomes the best iterate where it lowers the merit. converged() may have raised the
    aims (the saved arithmetic's room): both are measured anew."""
    state.merit_now, best_merit = state.merit(state.gap), state.merit(state.best.gap)
    if state.merit_now < best_merit * (1 - 1e-9):
        state.best = Best(W=state.W, gap=state.gap, iteration=t)


def aim_past_rounding(*, stacked: Stacked, state: LoopState) -> bool:
    """After a step the storage dtype rounded away (bfloat16 holds ~3 digits): every case still short
    of its margin asks for its shortfall again on top, up to its margin; False when none can ask for
    more (then the loop has really stalled)."""
    targets, extra_aim = stacked.targets, state.extra_aim
    short = np.maximum(targets - state.gap, 0.0)
    grows = (short > 0) & (extra_aim < targets)
    extra_aim[grows] = np.minimum(extra_aim[grows] + short[grows], targets[grows])
    return bool(grows.any())


def why_stalled(*, settings: RepairSettings, state: LoopState, t: int, step: float) -> str:
    """Why the loop stops before max_iter ('' while it goes on)."""
    if step == 0.0:
        return "the QP step is zero: the linearised problem sees nothing to gain"
    if t - state.best.iteration >= settings.patience:
        return f"no progress for {settings.patience} iterations"
    return ""


def record(
    *,
    stacked: Stacked,
    state: LoopState,
    t: int,
    solved: list[QPSolution],
    t_start: float,
    trial: Trial | None = None,
    fraction: float = 1.0,
    step: float = 0.0,
    check: dict[str, float | int] | None = None,
    ratio: float | None = None,
) -> None:
    """Iteration ``t``'s record; ``solved``: its QP solutions, the one whose step was taken last
    (``trial``; None: the solver had no answer and no step was taken)."""
    gap, targets, n_fix = state.gap, stacked.targets, stacked.n_fix
    fix_rows = np.arange(len(gap)) < n_fix
    solution = solved[-1]
    state.records.append(
        IterationRecord(
            iteration=t,
            qp_status=solution.status,
            qp_form=solution.form,
            qp_rows=trial.problem.n if trial is not None else state.rows_last,
            qp_objective=solution.objective,
            step_norm=step,
            min_gap_fix=_min(gap[:n_fix]),
            min_gap_keep=_min(gap[n_fix:]),
            fix_met=stacked.count(fix_rows & (gap >= targets)),
            keep_met=stacked.count(~fix_rows & (gap >= targets)) + stacked.held_outside,
            seconds=time.perf_counter() - t_start,
            step_fraction=fraction,
            qp_working_set=solution.working_set_size,
            qp_rounds=sum(s.rounds for s in solved),
            qp_backend=solution.backend,
            qp_seconds=sum(s.seconds for s in solved),
            qp_iterations=sum(s.iterations for s in solved),
            rank=trial.U.shape[1] if trial is not None else state.ranks.rank,
            metric_scale=state.trust.kappa,
            model_ratio=ratio,
            **(check or {}),
        )
    )


def solver_failed(*, stacked: Stacked, state: LoopState, t: int, solution: QPSolution) -> Ending:
    """The QP of iteration ``t`` has no answer: W as it is, and why; an infeasible final-linear QP names
    the cases likeliest in the way (:func:`in_the_way`)."""
    linear = state.ranks if stacked.linear else None
    status, message = solver_failure(t=t, solution=solution, settings=stacked.settings, linear=linear)
    missed = misses(stacked=stacked, gap=state.gap)
    if stacked.linear and solution.status.infeasible:
        short = in_the_way(stacked=stacked, state=state)
        if short is not None:
            missed = short
            message += f"; a priced relaxation leaves short (the likeliest in the way): {named(missed)}"
    return Ending(status=status, message=message, W=state.W, misses=tuple(missed))


def in_the_way(*, stacked: Stacked, state: LoopState) -> list[Miss] | None:
    """Where the exact QP (every row hard) is infeasible: the cases its priced relaxation, the dense
    form's rows (must_fix and short must_keep rows elastic), leaves short: the cases it costs most to
    meet beside the others, those in the way among them. A neighbourhood then drops only its copies
    among these, not every copy short at the start. None where the relaxation has no answer either."""
    U = top_left_singular_vectors(state.W, state.ranks.rank)
    problem, row_case, row_margin = linearised_problem(stacked=stacked, state=state, U=U, exact=False)
    base = Trial(U=U, row_case=row_case, row_margin=row_margin)
    relaxed = solve_trial(stacked=stacked, state=state, problem=problem, base=base, solved=[])
    return misses(stacked=stacked, gap=relaxed.full) if relaxed is not None else None


def _min(values: np.ndarray) -> float:
    return float(np.min(values)) if values.size else math.inf
