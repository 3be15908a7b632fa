"""Which must_fix cases a traffic budget cannot buy, by leaving the costliest out (the leave-out search).

The run names them from the price list (:mod:`warp_check.budget.price`) where it prices the suite, and
by this search where the suite has more must_fix cases than it prices (:data:`~warp_check.budget.price.MAX_PRICED`).

A repair whose Cert 4 bound exceeds ``max_change`` fails; the user's next question is which fixes
cost the changes. Every lever measured moves a repair along one curve of fixes against changes
(issue 41), and what a repair must fix is the lever that moves it furthest: so the suite is
repaired again with its costliest must_fix cases left out, until its changes keep within the
budget, and those cases are named.

- **Measured on the tune part** of the traffic only: Cert 4's bound part is never used, so the
  final bound of a repair that follows this advice is still a fresh sample.
- **A case is what is fixed or deferred whole**: a text, or a token classifier's sentence (its
  kind's ``group``: its words' rows go together), and a change is counted as Cert 4 counts it (its
  kind's ``traffic_count``: a sentence changes where any word's tag does).
- **The cost of a case** is the changed texts it stands nearest to: each text the repair changed
  is given to the must_fix case (still in the repair) whose v is closest in angle among those
  labelled with the text's new class (the fix that pulled it over), or among all where none is.
- **The floor first.** The suite with no must_fix case at all is repaired too: the must_keep cases
  short of their margin (γ_h) move the layer on their own, and no leaving out goes below what they
  change. Where even that is over, the answer is that no must_fix case fits, and why. Changes the
  floor makes are given to no case.
- **Each round** leaves out the costliest cases until the changes they stand for cover the excess,
  then repairs again, as the run repairs (the same ladder, its neighbourhood less the copies of the
  cases left out, on the head the run settled on). A round covers the excess generously (as much
  more as the last round's cases removed less than they stood for), and the round that reaches the
  aim is then cut back by bisection to the fewest of its cases, in their order. Greedy: the cases
  named are enough, not the fewest; :data:`MAX_REPAIRS` bounds the time.
- **What it aims at** is not the edge of the budget: Cert 4 is measured afterwards on the other
  part, a fresh sample, and a share of changes right at the edge would fail it half the time. The
  search stops at a count after which a sample the size of Cert 4's keeps within the budget
  :data:`PASS_CHANCE` of the time, the change rate taken as uncertain as the tune part leaves it
  (:func:`changes_to_aim_at`). The cases left out are chosen on the same part, so its count is a
  little optimistic: the chance is a target, measured in the benchmark, not a guarantee.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from warp_check.cases import Case, Kind
from warp_check.certificates.traffic.changes import TrafficInputs, traffic_inputs
from warp_check.certificates.traffic.sample import Part, TrafficSample
from warp_check.certificates.traffic.verdicts import BudgetFit, LeftOut
from warp_check.certify.binomial import change_bound
from warp_check.decisions import DecisionKind
from warp_check.model.head import DenseHead
from warp_check.pipeline.ladder import Ladder, climb
from warp_check.pipeline.neighbourhood import drawn_from
from warp_check.progress import Progress, as_progress
from warp_check.repair.records import RepairStatus

MAX_REPAIRS = 12  # repairs a search may run (the suite's own and the one with no must_fix case among them)
# A round covers the excess over what leaving out the last round's cases actually removed for each change
# they stood for (cases still in absorb part of it); never more than this many times the excess.
EFFICIENCY_AT_LEAST = 0.25
# The search stops where a fresh sample the size of Cert 4's would keep within the budget this often, at
# the share of changes seen on the tune part: a share right at the budget's edge fails it half the time.
PASS_CHANCE = 0.95


def most_changes_within(n: int, confidence: float, budget: float) -> int:
    """The most changes of ``n`` texts whose bound is within ``budget`` (-1: not even none is)."""
    return _last(n, lambda k: change_bound(k, n, confidence) <= budget)


def changes_to_aim_at(n: int, n_bound: int, confidence: float, budget: float, chance: float = PASS_CHANCE) -> int:
    """The most changes of ``n`` tune-part texts whose own bound is within ``budget`` and after which a
    sample of ``n_bound`` texts keeps within it with probability ``chance`` (-1: not even none does).

    The chance is the posterior predictive one: the change rate as the tune part leaves it uncertain
    (Jeffreys' Beta(k + ½, n − k + ½)), then the count a fresh sample of ``n_bound`` draws from it (a
    beta-binomial); a point estimate would ignore the first of the two draws and aim too high.
    """
    from scipy import stats  # a dependency already; only when a search runs

    allowed = most_changes_within(n_bound, confidence, budget)
    if allowed < 0:
        return -1
    # The tune part's own bound must show the budget too: a few texts with no change show nothing.
    shown = most_changes_within(n, confidence, budget)
    return min(shown, _last(n, lambda k: float(stats.betabinom.cdf(allowed, n_bound, k + 0.5, n - k + 0.5)) >= chance))


def _last(n: int, holds) -> int:
    """The largest k in [0, n] for which ``holds(k)``, where it holds up to some k and not beyond (-1: none)."""
    low, high = -1, n
    while low < high:
        mid = (low + high + 1) // 2
        if holds(mid):
            low = mid
        else:
            high = mid - 1
    return low


def fit_to_budget(
    ladder: Ladder,
    sample: TrafficSample,
    budget: float,
    *,
    max_repairs: int = MAX_REPAIRS,
    progress: bool | Progress = False,
    repaired: DenseHead | None = None,
) -> BudgetFit:
    """The must_fix cases of ``ladder``'s suite to leave out for its repair to keep within ``budget``
    on ``sample``'s tune part (the ladder climbs without the final-layer fallback: its head is the one
    the run settled on). ``repaired``: the run's own repair of the whole suite on that head, where
    the caller has it (the search's first round, not repeated)."""
    started = time.perf_counter()
    confidence = sample.confidence
    evaluation = ladder.evaluation
    fix_rows = [i for i, c in enumerate(evaluation.cases) if c.kind is Kind.MUST_FIX]
    fixes = must_fix_units(ladder)
    left: list[LeftOut] = []
    repairs = 0

    def ended(changed: int, within: bool, why: str | None = None, floor: bool = False) -> BudgetFit:
        return BudgetFit(
            budget=budget, confidence=confidence, left_out=tuple(left), kept=len(fixes) - len(left), n=n,
            changed=changed, bound=change_bound(changed, n, confidence) if n else 1.0, within=within,
            repairs=repairs, seconds=time.perf_counter() - started, why=why, floor=floor,
            deferrable=deferrable(ladder), unit=ladder.adapter.decision.text_nouns,
        )  # fmt: skip

    inputs = traffic_inputs(
        ladder.adapter, sample, part=Part.TUNE, batch_size=ladder.batch_size, cache_dir=ladder.cache_dir
    )
    n = len(inputs.texts)
    if n == 0:
        return ended(0, False, "the traffic's tune part has no text to estimate on: give more traffic")
    aim = changes_to_aim_at(n, max(len(sample.bound), 1), confidence, budget)
    if aim < 0:
        why = (
            f"the tune part's {n:,} texts cannot show a share of changes that Cert 4's {len(sample.bound):,} would "
            f"keep within max_change = {budget:.3%}: give more traffic"
        )
        return ended(0, False, why)
    start = ladder.adapter.head()
    was, decision = start.predict(inputs.V), start.decision
    draw_of = draws_of(inputs)

    def count(moved: np.ndarray) -> int:
        return draws_changed(decision, moved, draw_of)

    def predicted(out: set[str]) -> np.ndarray | str:
        """The tune part's classes after the repair without the cases ``out`` (a message: it did not
        converge)."""
        nonlocal repairs
        if not out and repaired is not None:
            return repaired.predict(inputs.V)
        repairs += 1
        climbed = climb(ladder_without(ladder, rows_of(fixes, out)))
        if climbed.result.status is RepairStatus.NOTHING_TO_REPAIR:
            return was
        if not climbed.result.repaired:
            return f"the repair without {len(out)} must_fix case(s) did not converge ({climbed.result.message})"
        return climbed.result.head_after.predict(inputs.V)

    everything = set(fixes)
    position = {case_id: k for k, case_id in enumerate(fixes)}
    case_of = np.array([position[decision.group(evaluation.cases[i].id)] for i in fix_rows], dtype=np.int64)
    units = _unit_rows(inputs.V)
    fix_units = _unit_rows(evaluation.encoded.V[fix_rows].astype(np.float64))
    fix_labels = np.array([evaluation.cases[i].label for i in fix_rows], dtype=np.int64)
    with as_progress(progress).step("budget: must_fix cases it cannot buy", total=max_repairs, unit="repair") as step:
        # What the must_keep margins alone change, with no must_fix case: no leaving out goes below it.
        floor = predicted(everything)
        if isinstance(floor, str):
            return ended(0, False, floor)
        floor = decision.changed(was, floor)
        step.advance(note=f"no must_fix case: {count(floor)} of {n} changed (aim: at most {aim})")
        if count(floor) > aim:
            left[:] = [_left_out(case_id, rows[0], 0) for case_id, rows in fixes.items()]
            return ended(count(floor), False, floor=True)

        def trimmed(batch: int, changed: int) -> int:
            """The last round's ``batch`` cases cut to the fewest of them, in their order, that keep within
            the aim (bisection, while repairs are left): a round covers the excess generously."""
            fewest, kept_out = batch, len(left) - batch  # all of the batch keeps within; none of it did not
            low = 0
            while fewest - low > 1 and repairs < max_repairs:
                middle = (low + fewest) // 2
                now = predicted({c.id for c in left[: kept_out + middle]})
                if isinstance(now, str):
                    break
                measured = count(decision.changed(was, now))
                step.advance(note=f"{kept_out + middle} left out: {measured} of {n} changed (aim: at most {aim})")
                if measured <= aim:
                    fewest, changed = middle, measured
                else:
                    low = middle
            del left[kept_out + fewest :]
            return changed

        changed, promised, efficiency, batch = 0, 0, 1.0, 0
        while repairs < max_repairs:
            out = {c.id for c in left}
            now = predicted(out)
            if isinstance(now, str):
                return ended(changed, False, now)
            moved = decision.changed(was, now)
            if promised:  # the cases still in absorb part of what those left out stood for: cover more next time
                efficiency = min(1.0, max(EFFICIENCY_AT_LEAST, (changed - count(moved)) / promised))
            changed = count(moved)
            step.advance(note=f"{len(out)} left out: {changed} of {n} changed (aim: at most {aim})")
            if changed <= aim:
                changed = trimmed(batch, changed)
                return ended(changed, True)
            # The changes beyond the floor are the must_fix cases' doing: each to the nearest that pulls it,
            # a changed draw (text, sentence) counted once for each case nearest one of its changed rows.
            theirs = np.flatnonzero(moved & ~floor)
            inside_case = np.array([case_id not in out for case_id in fixes])
            nearest = case_of[_nearest(units[theirs], now[theirs], fix_units, fix_labels, inside_case[case_of])]
            pairs = np.unique(np.stack([nearest, draw_of[theirs]]), axis=1)[0] if len(theirs) else nearest
            counts = np.bincount(pairs, minlength=len(fixes))
            excess, covered, batch = (changed - aim) / efficiency, 0, len(left)
            names = list(fixes)
            for j in sorted(np.flatnonzero((counts > 0) & inside_case).tolist(), key=lambda j: (-counts[j], j)):
                left.append(_left_out(names[j], fixes[names[j]][0], int(counts[j])))
                covered += int(counts[j])
                if covered >= excess:
                    break
            else:
                if not covered:  # nothing attributable left: the rest of the excess is the floor's
                    return ended(changed, False)
            promised, batch = covered, len(left) - batch
    return ended(changed, False)


def _left_out(case_id: str, first: Case, nearest: int) -> LeftOut:
    return LeftOut(id=case_id, where=first.origin or "", nearest=nearest)


def must_fix_units(ladder: Ladder) -> dict[str, list[Case]]:
    """The suite's must_fix cases as a budget buys them, each with its rows, in suite order: a text is
    one row; a token classifier's sentence is its words' rows, fixed or deferred together (the kind's
    ``group``, as the run names its verdicts)."""
    decision = ladder.adapter.decision
    units: dict[str, list[Case]] = {}
    for case in ladder.evaluation.cases:
        if case.kind is Kind.MUST_FIX:
            units.setdefault(decision.group(case.id), []).append(case)
    return units


def rows_of(units: dict[str, list[Case]], ids: set[str] | frozenset[str]) -> set[str]:
    """The ids of the rows of the must_fix cases ``ids`` (a case of :func:`must_fix_units`)."""
    return {row.id for case_id in ids for row in units[case_id]}


def draws_of(inputs: TrafficInputs) -> np.ndarray:
    """Per row of the traffic's V, the index of its draw (its text): a text is one row, or a sentence is
    its words' rows."""
    return inputs.sentence_of if inputs.sentence_of is not None else np.arange(len(inputs.V), dtype=np.int64)


def draws_changed(decision: DecisionKind, moved: np.ndarray, draw_of: np.ndarray) -> int:
    """How many draws a repair changed, from its changed rows (``moved``), as Cert 4 counts them (the
    kind's ``traffic_count``: a token classifier's sentence changes where any word's tag does)."""
    return decision.traffic_count(np.flatnonzero(moved), draw_of).draws_changed


def deferrable(ladder: Ladder) -> bool:
    """Whether ``warp-check defer`` moves this suite's must_fix cases (it refuses a suite deciding per
    word: :meth:`~warp_check.suite.loader.Suite.refuse_per_word`), so the advice names it only where it does."""
    return not ladder.adapter.decision.per_word


def _unit_rows(V: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(V, axis=1, keepdims=True)
    return V / np.where(norms > 0, norms, 1.0)


def _nearest(
    texts: np.ndarray, labels: np.ndarray, fix: np.ndarray, fix_labels: np.ndarray, inside: np.ndarray
) -> np.ndarray:
    """For each changed text, the must_fix case (still repaired) closest in angle among those labelled
    with its new class, or among all of them where none is."""
    cosine = texts @ fix.T
    cosine[:, ~inside] = -np.inf
    pulling = np.where(fix_labels[None, :] == labels[:, None], cosine, -np.inf)
    none = ~np.isfinite(pulling).any(axis=1)
    pulling[none] = cosine[none]
    return np.argmax(pulling, axis=1)


def ladder_without(ladder: Ladder, out: set[str]) -> Ladder:
    """``ladder`` without the must_fix cases ``out`` and the neighbourhood's copies drawn from them."""
    if not out:
        return replace(ladder, fallback=False, progress=False)
    evaluation = ladder.evaluation
    kept = [i for i, c in enumerate(evaluation.cases) if c.id not in out]
    hood = ladder.hood
    if hood is not None:
        copies = {c.id for c in hood.cases if drawn_from(c.id) in out}
        hood = replace(hood.without(copies), dropped=hood.dropped) if copies else hood
    return replace(ladder, evaluation=evaluation.subset(kept), hood=hood, fallback=False, progress=False)


__all__ = [
    "MAX_REPAIRS",
    "PASS_CHANCE",
    "changes_to_aim_at",
    "deferrable",
    "draws_changed",
    "draws_of",
    "fit_to_budget",
    "ladder_without",
    "most_changes_within",
    "must_fix_units",
    "rows_of",
]
