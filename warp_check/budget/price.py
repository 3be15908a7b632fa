"""The price of each fix, and the most must_fix cases a traffic budget buys.

:mod:`warp_check.budget.fit` leaves out the cases nearest the changes until the repair keeps within
the budget: enough cases, not the fewest, so the first few percent of a budget go unspent (issue 60).
Here each must_fix case is priced, and the cases are bought cheapest first:

- **A case is what is fixed or deferred whole**: a text, or a token classifier's sentence (its words'
  rows together, as the run names its verdicts); a change is counted as Cert 4 counts it (its kind's
  ``traffic_count``: a sentence changes where any word's tag does), and the table says which.
- **The price of a case** is measured, not attributed: the suite repaired with that must_fix case
  alone (every must_keep case guarding, as the run repairs), and the predictions that repair changes
  on the traffic's *tune* part counted. A case whose repair alone does not converge has no price
  and is never bought.
- **The floor**: the repair with no must_fix case (the must_keep cases short of their margin) changes
  some predictions whatever is bought; a budget it is over buys nothing.
- **Buying**: the cases in order of price (cheapest first; the case id breaks a tie), and for each
  budget the longest such prefix whose own repair changes at most the count to aim at
  (:func:`~warp_check.budget.fit.changes_to_aim_at`: a fresh sample the size of Cert 4's keeps
  within the budget 95 % of the time), found by bisection over the prefix's length, every length
  tried once for all the budgets. Changes grow with what is bought, but not strictly: the prefix is
  an estimate on the tune part, and the final check is Cert 4 on the bound part, as for every repair.
- **The price list**: what 1, 2, 5 and 10 % buy, so a user sees it before choosing a budget.

Measured on the tune part only: Cert 4's bound part is never used, so the bound of a repair of the
cases bought is still a fresh sample.

**The run** over its budget calls :func:`budget_advice`: up to :data:`MAX_PRICED` must_fix cases it
prices them (the budgets above and the user's ``max_change``), names those outside the prefix the
budget buys and carries the list (``BudgetFit.prices``), which the terminal, report.md and index.html
show; beyond, the leave-out search names them instead, and the advice says so (``BudgetFit.unpriced``).
Progress is reported one repair at a time.
"""

from __future__ import annotations

import time
from dataclasses import replace

from warp_check.budget.fit import (
    changes_to_aim_at,
    deferrable,
    draws_changed,
    draws_of,
    fit_to_budget,
    ladder_without,
    must_fix_units,
    rows_of,
)
from warp_check.certificates.traffic.changes import traffic_inputs
from warp_check.certificates.traffic.sample import Part, TrafficSample
from warp_check.certificates.traffic.verdicts import Bought, BudgetFit, Price, PriceList
from warp_check.certify.binomial import change_bound
from warp_check.model.head import DenseHead
from warp_check.pipeline.ladder import Ladder, climb
from warp_check.progress import Progress, as_progress
from warp_check.repair.records import RepairStatus

# The budgets a price list shows: what a release manager chooses among.
PRICE_BUDGETS = (0.01, 0.02, 0.05, 0.10)
# The most must_fix cases a run over its budget prices (one repair each, then log2 of them per budget).
MAX_PRICED = 200


def price_list(
    ladder: Ladder,
    sample: TrafficSample,
    budgets: tuple[float, ...] = PRICE_BUDGETS,
    *,
    progress: bool | Progress = False,
    repaired: DenseHead | None = None,
) -> PriceList:
    """Each must_fix case of ``ladder``'s suite priced on ``sample``'s tune part, and the most cases each
    of ``budgets`` buys, cheapest first (the ladder climbs without the final-layer fallback: its head is
    the one the run settled on). ``repaired``: the run's own repair of every must_fix case on that head,
    where the caller has it (not repeated)."""
    started = time.perf_counter()
    fix = must_fix_units(ladder)
    everything = frozenset(fix)
    unit = ladder.adapter.decision.text_nouns
    repairs = 0

    def ended(n: int, floor: int | None, prices: tuple[Price, ...], bought: tuple[Bought, ...], why=None):
        return PriceList(
            n=n, confidence=sample.confidence, floor=floor, prices=prices, bought=bought, repairs=repairs,
            seconds=time.perf_counter() - started, why=why, unit=unit,
        )  # fmt: skip

    unpriced = tuple(Price(id=case_id, where=rows[0].origin or "", changed=None) for case_id, rows in fix.items())
    inputs = traffic_inputs(
        ladder.adapter, sample, part=Part.TUNE, batch_size=ladder.batch_size, cache_dir=ladder.cache_dir
    )
    n = len(inputs.texts)
    if n == 0:
        return ended(0, None, unpriced, (), "the traffic's tune part has no text to price on: give more traffic")
    aims = [changes_to_aim_at(n, max(len(sample.bound), 1), sample.confidence, budget) for budget in budgets]
    if all(aim < 0 for aim in aims):
        why = (
            f"the tune part's {n:,} {unit} cannot show a share of changes that Cert 4's {len(sample.bound):,} would "
            f"keep within {' or '.join(f'{b:.3%}' for b in budgets)}: give more traffic"
        )
        return ended(n, None, unpriced, (), why)
    start = ladder.adapter.head()
    was, decision = start.predict(inputs.V), start.decision
    draw_of = draws_of(inputs)
    counted: dict[frozenset[str], int | None] = {}
    if repaired is not None:
        counted[everything] = draws_changed(decision, decision.changed(was, repaired.predict(inputs.V)), draw_of)

    def changes(bought: frozenset[str]) -> int | None:
        """Tune-part changes of the repair that fixes ``bought`` (None: it did not converge)."""
        nonlocal repairs
        if bought not in counted:
            repairs += 1
            climbed = climb(ladder_without(ladder, rows_of(fix, everything - bought)))
            if climbed.result.status is RepairStatus.NOTHING_TO_REPAIR:
                counted[bought] = 0
            elif not climbed.result.repaired:
                counted[bought] = None
            else:
                after = climbed.result.head_after.predict(inputs.V)
                counted[bought] = draws_changed(decision, decision.changed(was, after), draw_of)
        return counted[bought]

    with as_progress(progress).step("budget: the price of each fix", total=len(fix) + 1, unit="repair") as step:
        floor = changes(frozenset())
        step.advance(note=f"no must_fix case: {floor} of {n} changed")
        prices = []
        for case_id, rows in fix.items():
            prices.append(Price(id=case_id, where=rows[0].origin or "", changed=changes(frozenset({case_id}))))
            step.advance(note=f"'{case_id}': {prices[-1].changed} of {n} changed")
    prices.sort(key=lambda p: (p.changed is None, p.changed or 0, p.id))
    order = [p.id for p in prices if p.changed is not None]

    def prefix(k: int) -> int | None:
        return changes(frozenset(order[:k]))

    bought = []
    with as_progress(progress).step("budget: what each budget buys", unit="repair") as step:
        for budget, aim in zip(budgets, aims, strict=True):
            k = _longest(len(order), aim, prefix) if floor is not None and 0 <= floor <= aim else 0
            changed = prefix(k) if k else floor
            bound = change_bound(changed, n, sample.confidence) if changed is not None else None
            bought.append(Bought(budget=budget, aim=aim, cases=k, changed=changed, bound=bound))
            step.advance(note=f"{budget:.0%}: {k} of {len(fix)} case(s), {changed} of {n} changed (aim {aim})")
    return ended(n, floor, tuple(prices), tuple(bought))


def _longest(count: int, aim: int, prefix) -> int:
    """The longest prefix of the cases in price order whose repair changes at most ``aim`` (by bisection:
    changes grow with the prefix, not strictly; a prefix that does not converge counts as over)."""

    def within(k: int) -> bool:
        changed = prefix(k)
        return changed is not None and changed <= aim

    if count and within(count):
        return count
    low, high = 0, count  # within at low (the floor), not at high
    while high - low > 1:
        middle = (low + high) // 2
        if within(middle):
            low = middle
        else:
            high = middle
    return low


def budget_advice(
    ladder: Ladder,
    sample: TrafficSample,
    budget: float,
    *,
    progress: bool | Progress = False,
    repaired: DenseHead | None = None,
    max_priced: int = MAX_PRICED,
) -> BudgetFit:
    """The run's advice over ``budget``: the must_fix cases of ``ladder``'s suite the budget cannot buy.

    Up to ``max_priced`` must_fix cases, from the price list (:func:`price_list`, at :data:`PRICE_BUDGETS`
    and ``budget``: the advice carries it, so the user sees what each budget buys). Beyond, pricing (one
    repair per case) would take hours on a large model, so the leave-out search names the cases instead
    (:func:`~warp_check.budget.fit.fit_to_budget`, at most :data:`~warp_check.budget.fit.MAX_REPAIRS`
    repairs; ``repaired``: the run's own repair, its first round), and the advice says so.
    """
    fix = len(must_fix_units(ladder))
    if fix <= max_priced:
        budgets = tuple(sorted({*PRICE_BUDGETS, budget}))
        priced = price_list(ladder, sample, budgets, progress=progress, repaired=repaired)
        return priced.fit(budget, deferrable=deferrable(ladder))
    fit = fit_to_budget(ladder, sample, budget, progress=progress, repaired=repaired)
    unpriced = (
        f"{fix:,} must_fix cases are more than the {max_priced:,} the run prices, one repair each: the leave-out "
        "search named these instead, enough cases and not the fewest; price_list() in Python prices them all"
    )
    return replace(fit, unpriced=unpriced)


__all__ = ["MAX_PRICED", "PRICE_BUDGETS", "Bought", "Price", "PriceList", "budget_advice", "price_list"]
