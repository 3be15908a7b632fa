"""The price of each fix, and the most must_fix cases a traffic budget buys.

:mod:`warp_check.budget.fit` leaves out the cases nearest the changes until the repair keeps within
the budget: enough cases, not the fewest, so the first few percent of a budget go unspent (issue 60).
Here each must_fix case is priced, and the cases are bought cheapest first:

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
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from warp_check.budget.fit import changes_to_aim_at, ladder_without
from warp_check.cases import Kind
from warp_check.certificates.traffic.changes import traffic_inputs
from warp_check.certificates.traffic.sample import Part, TrafficSample
from warp_check.certificates.traffic.verdicts import BudgetFit, LeftOut
from warp_check.certify.binomial import change_bound
from warp_check.pipeline.ladder import Ladder, climb
from warp_check.progress import Progress, as_progress
from warp_check.repair.records import RepairStatus
from warp_check.serial import Record, on_disk

# The budgets a price list shows: what a release manager chooses among.
PRICE_BUDGETS = (0.01, 0.02, 0.05, 0.10)


@dataclass(frozen=True, kw_only=True)
class Price(Record):
    """One must_fix case's price: the tune-part predictions the repair of it alone changes."""

    id: str
    where: str  # the case file and line
    changed: int | None  # None: its repair alone did not converge (never bought)


@dataclass(frozen=True, kw_only=True)
class Bought(Record):
    """What one budget buys: the cheapest cases whose repair keeps within the count aimed at."""

    budget: float
    aim: int  # the most tune-part changes after which Cert 4's sample keeps within the budget (-1: none does)
    cases: int  # must_fix cases bought (the cheapest first)
    changed: int | None  # tune-part predictions their repair changes (None: nothing could be measured)
    bound: float | None  # the Clopper–Pearson bound on that share


@dataclass(frozen=True, kw_only=True)
class PriceList(Record):
    """Every must_fix case's price and what each budget buys, on the traffic's tune part."""

    n: int  # tune-part texts measured
    confidence: float
    floor: int | None  # changes of the repair with no must_fix case (None: not measured)
    prices: tuple[Price, ...]  # cheapest first; those with no price last
    bought: tuple[Bought, ...]  # one per budget, in the order asked
    repairs: int
    seconds: float
    why: str | None = field(default=None, metadata=on_disk(omit_none=True))  # why nothing was measured

    def at(self, budget: float) -> Bought | None:
        return next((b for b in self.bought if math.isclose(b.budget, budget)), None)

    def ids_bought(self, budget: float) -> tuple[str, ...]:
        """The ids of the cases ``budget`` buys, cheapest first (none where it was not priced)."""
        row = self.at(budget)
        return tuple(p.id for p in self.prices[: row.cases]) if row is not None else ()

    def table(self) -> str:
        """The price list as a text table: budget, cases bought, tune-part changes and their bound."""
        total = len(self.prices)
        lines = [f"{'budget':>7}  {'bought':>9}  {'changed (tune part)':>22}  {'bound':>7}"]
        for b in self.bought:
            changed = "—" if b.changed is None else f"{b.changed} of {self.n}"
            bound = "—" if b.bound is None else f"{100 * b.bound:.2f} %"
            lines.append(f"{100 * b.budget:>6g} %  {f'{b.cases} of {total}':>9}  {changed:>22}  {bound:>7}")
        return "\n".join(lines)

    def fit(self, budget: float) -> BudgetFit:
        """A budget's purchase as the run's advice reads it (:class:`BudgetFit`): the cases it does not buy,
        dearest first, each with its price as the changes that name it."""
        row = self.at(budget)
        if row is None:
            raise ValueError(f"budget {budget!r} was not priced (priced: {[b.budget for b in self.bought]})")
        out = sorted(self.prices[row.cases :], key=lambda p: (p.changed is not None, -(p.changed or 0)))
        changed = row.changed or 0
        return BudgetFit(
            budget=budget, confidence=self.confidence,
            left_out=tuple(LeftOut(id=p.id, where=p.where, nearest=p.changed or 0) for p in out),
            kept=row.cases, n=self.n, changed=changed,
            bound=row.bound if row.bound is not None else 1.0,
            within=row.changed is not None and 0 <= row.changed <= row.aim,
            repairs=self.repairs, seconds=self.seconds, why=self.why,
            floor=self.floor is not None and row.cases == 0 and self.floor > row.aim,
        )  # fmt: skip


def price_list(
    ladder: Ladder,
    sample: TrafficSample,
    budgets: tuple[float, ...] = PRICE_BUDGETS,
    *,
    progress: bool | Progress = False,
) -> PriceList:
    """Each must_fix case of ``ladder``'s suite priced on ``sample``'s tune part, and the most cases each
    of ``budgets`` buys, cheapest first (the ladder climbs without the final-layer fallback: its head is
    the one the run settled on)."""
    started = time.perf_counter()
    evaluation = ladder.evaluation
    fix = [c for c in evaluation.cases if c.kind is Kind.MUST_FIX]
    everything = frozenset(c.id for c in fix)
    repairs = 0

    def ended(n: int, floor: int | None, prices: tuple[Price, ...], bought: tuple[Bought, ...], why=None):
        return PriceList(
            n=n, confidence=sample.confidence, floor=floor, prices=prices, bought=bought, repairs=repairs,
            seconds=time.perf_counter() - started, why=why,
        )  # fmt: skip

    unpriced = tuple(Price(id=c.id, where=c.origin or "", changed=None) for c in fix)
    if ladder.adapter.decision.per_word:
        why = "it is not priced for a token classifier, whose traffic is bounded per sentence"
        return ended(0, None, unpriced, (), why)
    inputs = traffic_inputs(
        ladder.adapter, sample, part=Part.TUNE, batch_size=ladder.batch_size, cache_dir=ladder.cache_dir
    )
    n = len(inputs.texts)
    if n == 0:
        return ended(0, None, unpriced, (), "the traffic's tune part has no text to price on: give more traffic")
    start = ladder.adapter.head()
    was, decision = start.predict(inputs.V), start.decision
    counted: dict[frozenset[str], int | None] = {}

    def changes(bought: frozenset[str]) -> int | None:
        """Tune-part changes of the repair that fixes ``bought`` (None: it did not converge)."""
        nonlocal repairs
        if bought not in counted:
            repairs += 1
            climbed = climb(ladder_without(ladder, set(everything - bought)))
            if climbed.result.status is RepairStatus.NOTHING_TO_REPAIR:
                counted[bought] = 0
            elif not climbed.result.repaired:
                counted[bought] = None
            else:
                counted[bought] = int(np.sum(decision.changed(was, climbed.result.head_after.predict(inputs.V))))
        return counted[bought]

    with as_progress(progress).step("budget: the price of each fix", total=len(fix) + 1, unit="repair") as step:
        floor = changes(frozenset())
        step.advance(note=f"no must_fix case: {floor} of {n} changed")
        prices = []
        for case in fix:
            prices.append(Price(id=case.id, where=case.origin or "", changed=changes(frozenset({case.id}))))
            step.advance(note=f"'{case.id}': {prices[-1].changed} of {n} changed")
    prices.sort(key=lambda p: (p.changed is None, p.changed or 0, p.id))
    order = [p.id for p in prices if p.changed is not None]

    def prefix(k: int) -> int | None:
        return changes(frozenset(order[:k]))

    bought = []
    with as_progress(progress).step("budget: what each budget buys", unit="repair") as step:
        for budget in budgets:
            aim = changes_to_aim_at(n, max(len(sample.bound), 1), sample.confidence, budget)
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


__all__ = ["PRICE_BUDGETS", "Bought", "Price", "PriceList", "price_list"]
