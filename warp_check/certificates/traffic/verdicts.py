"""What a run says of Cert 4: the run's record (:class:`TrafficNote`, with :class:`BudgetFit` over a
budget), the verdict's words (passed or not, and why) and its JUnit properties.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from warp_check.certificates.traffic.sample import TrafficSample
from warp_check.certify.certificate import TrafficChange, TrafficRecord, change_sentence, percent
from warp_check.decisions import DECISIONS, SINGLE_LABEL
from warp_check.serial import Record, on_disk

NAMED_IN_MESSAGE = 10  # must_fix cases a failure message names (the costliest); the report and JUnit list all


@dataclass(frozen=True, kw_only=True)
class LeftOut(Record):
    """A must_fix case a traffic budget cannot buy, and the changes that name it."""

    id: str
    where: str  # the case file and line
    nearest: int  # changed tune-part texts nearest it among the cases pulling towards their new label


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

    def words(self, n: int, unit: str = "texts") -> tuple[str, str]:
        """The changes and their bound as a table shows them (a budget ``n`` texts cannot show, said)."""
        if self.aim < 0:
            return f"{n} {unit} cannot show it", "—"
        changed = "—" if self.changed is None else f"{self.changed} of {n}"
        return changed, "—" if self.bound is None else f"{100 * self.bound:.2f} %"


@dataclass(frozen=True, kw_only=True)
class PriceList(Record):
    """Every must_fix case's price and what each budget buys, on the traffic's tune part
    (:func:`warp_check.budget.price.price_list` measures it)."""

    n: int  # tune-part texts measured
    confidence: float
    floor: int | None  # changes of the repair with no must_fix case (None: not measured)
    prices: tuple[Price, ...]  # cheapest first; those with no price last
    bought: tuple[Bought, ...]  # one per budget, smallest first
    repairs: int
    seconds: float
    why: str | None = field(default=None, metadata=on_disk(omit_none=True))  # why nothing was measured
    # The tune part's texts held as must_keep guards by the repairs priced ([traffic] guards = "tune"):
    # measured on the rest of the tune part only.
    guards: int = field(default=0, metadata=on_disk(omit_default=True))
    unit: str = field(default="texts", metadata=on_disk(omit_default=True))  # a draw, as its kind calls it

    def at(self, budget: float) -> Bought | None:
        return next((b for b in self.bought if math.isclose(b.budget, budget)), None)

    def ids_bought(self, budget: float) -> tuple[str, ...]:
        """The ids of the cases ``budget`` buys, cheapest first (none where it was not priced)."""
        row = self.at(budget)
        return tuple(p.id for p in self.prices[: row.cases]) if row is not None else ()

    def table(self, mark: float | None = None) -> str:
        """The price list as a text table: budget, cases bought, tune-part changes and their bound (``mark``:
        the user's own max_change, marked)."""
        total = len(self.prices)
        lines = [f"{'budget':>8}  {'bought':>11}  {'changed (tune part)':>24}  {'bound':>8}"]
        for b in self.bought:
            changed, bound = b.words(self.n, self.unit)
            mine = "  <- max_change" if mark is not None and math.isclose(b.budget, mark) else ""
            lines.append(f"{100 * b.budget:>6g} %  {f'{b.cases} of {total}':>11}  {changed:>24}  {bound:>8}{mine}")
        return "\n".join(lines)

    def heading(self) -> str:
        """What the table is, in one line: where it was measured and what it cost."""
        guards = f", {self.guards:,} more held as guards" if self.guards else ""
        return (
            f"price list (each must_fix case priced by its own repair; the cheapest bought first; measured on "
            f"the traffic's tune part, {self.n:,} {self.unit}{guards}; {self.repairs} repair(s), {self.seconds:.1f} s):"
        )

    def fit(self, budget: float, *, deferrable: bool = True) -> BudgetFit:
        """A budget's purchase as the run's advice reads it (:class:`BudgetFit`): the cases it does not buy,
        dearest first, each with its price as the changes that name it (``deferrable``: whether
        ``warp-check defer`` takes them)."""
        done = {"budget": budget, "confidence": self.confidence, "repairs": self.repairs, "seconds": self.seconds}
        done.update(deferrable=deferrable, unit=self.unit)
        if self.why is not None:
            return BudgetFit(left_out=(), kept=0, n=self.n, changed=0, bound=1.0, within=False, why=self.why,
                             prices=self, **done)  # fmt: skip
        row = self.at(budget)
        if row is None:
            raise ValueError(f"budget {budget!r} was not priced (priced: {[b.budget for b in self.bought]})")
        if row.aim < 0:
            why = (
                f"the tune part's {self.n:,} texts cannot show a share of changes that Cert 4's sample would keep "
                f"within max_change = {percent(budget)}: give more traffic"
            )
            return BudgetFit(left_out=(), kept=0, n=self.n, changed=0, bound=1.0, within=False, why=why,
                             prices=self, **done)  # fmt: skip
        out = sorted(self.prices[row.cases :], key=lambda p: (p.changed is not None, -(p.changed or 0)))
        return BudgetFit(
            left_out=tuple(LeftOut(id=p.id, where=p.where, nearest=p.changed or 0) for p in out),
            kept=row.cases, n=self.n, changed=row.changed or 0,
            bound=row.bound if row.bound is not None else 1.0,
            within=row.changed is not None and 0 <= row.changed <= row.aim,
            floor=self.floor is not None and row.cases == 0 and self.floor > row.aim, prices=self, **done,
        )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class BudgetFit(Record):
    """Which must_fix cases a repair over its traffic budget cannot buy within it, measured on the
    traffic's *tune* part (an estimate: Cert 4's bound part is never used). From the price list
    (``prices``): the cases outside the cheapest prefix the budget buys, each named with its own price.
    From the leave-out search (no ``prices``; ``unpriced`` says why): the suite repaired again, the
    costliest must_fix cases left out until the changes keep within the budget; greedy, at most these
    cases, not the fewest."""

    budget: float
    confidence: float
    left_out: tuple[LeftOut, ...]  # costliest first (all of them: ``floor``)
    kept: int  # must_fix cases the last repair fixed
    n: int  # tune-part texts measured
    changed: int  # of them, changed by the last repair
    bound: float  # the Clopper–Pearson bound on that share
    within: bool  # whether the last repair keeps within the budget on the tune part
    repairs: int
    seconds: float
    why: str | None = field(default=None, metadata=on_disk(omit_none=True))  # why it stopped short of an answer
    # Even with no must_fix case the repair is over: the must_keep margins (γ_h) alone change too much.
    floor: bool = field(default=False, metadata=on_disk(omit_default=True))
    # The price list the advice reads (None: the leave-out search named the cases).
    prices: PriceList | None = field(default=None, metadata=on_disk(omit_none=True))
    # Why the cases were not priced and the leave-out search named them instead (too many to price).
    unpriced: str | None = field(default=None, metadata=on_disk(omit_none=True))
    # Whether warp-check defer moves these cases (a token classifier's sentences: not yet).
    deferrable: bool = field(default=True, metadata=on_disk(omit_default=True))
    unit: str = field(default="texts", metadata=on_disk(omit_default=True))  # what n counts (the kind's word)

    def _named(self, cases: tuple[LeftOut, ...]) -> str:
        if self.prices is not None:
            return ", ".join(
                f"'{c.id}' ({c.where}; its fix alone changes {c.nearest})" if c.nearest else f"'{c.id}' ({c.where})"
                for c in cases
            )
        return ", ".join(f"'{c.id}' ({c.where}; {c.nearest} change(s) nearest it)" for c in cases)

    def sentence(self) -> str:
        """The finding, as sentences of Cert 4's failure message."""
        if self.why is not None:
            return f"Which must_fix cases the budget cannot buy is not known: {self.why}."
        how = f" ({self.unpriced})" if self.unpriced else ""
        if self.floor:
            return (
                f"No must_fix case can be fixed within max_change = {percent(self.budget)}: even with none, the "
                f"repair of the must_keep cases short of their margin changes predictions on {self.changed} of "
                f"{self.n} {self.unit} of the traffic's tune part (at most {percent(self.bound)}). A larger "
                f'max_change, a smaller gamma_h, or keep_margin = "own" where it is "gamma_h".{how}'
            )
        costliest = sorted(self.left_out, key=lambda c: -c.nearest)[:NAMED_IN_MESSAGE]
        named = self._named(tuple(costliest))
        if len(self.left_out) > len(costliest):
            named += f" and {len(self.left_out) - len(costliest)} more (the report lists them all)"
        estimate = (
            f"changes predictions on {self.changed} of {self.n} {self.unit} of the traffic's tune part (at most "
            f"{percent(self.bound)}, {percent(self.confidence, digits=3)}; {self.repairs} repair(s), "
            f"{self.seconds:.1f} s)"
        )
        if not self.within:
            if self.prices is not None:
                return (
                    f"No set of the cheapest must_fix cases was measured within max_change = "
                    f"{percent(self.budget)}: the repair {estimate}."
                )
            return (
                f"After leaving out {len(self.left_out)} must_fix case(s) ({named}) the repair still "
                f"{estimate}, over max_change = {percent(self.budget)}.{how}"
            )
        if not self.left_out:  # the tune part is within where Cert 4's sample is not
            return (
                f"On the traffic's tune part the repair of every must_fix case {estimate}, within max_change = "
                f"{percent(self.budget)} where Cert 4's sample is not: more traffic (both parts grow) may show it."
            )
        if self.kept == 0:
            return (
                f"No must_fix case can be fixed within max_change = {percent(self.budget)}: only with all "
                f"{len(self.left_out)} left out does the repair keep within it (it {estimate}); the costliest: "
                f"{named}.{how}"
            )
        which = "cheapest" if self.prices is not None else "other"
        how_to_move = (
            "warp-check defer SUITE --from the run's report.json"
            if self.deferrable
            else "by hand: warp-check defer does not take a token classifier's sentences yet"
        )
        return (
            f"Within max_change = {percent(self.budget)}, a repair of the {which} {self.kept} must_fix case(s) "
            f"{estimate}; these {len(self.left_out)} cannot be fixed within it: {named}. Move them out of this "
            f"release's must_fix files ({how_to_move}), or raise max_change.{how}"
        )


@dataclass(frozen=True, kw_only=True)
class TrafficNote(Record):
    """Cert 4 as a run reports it: the sample's counts, the changes measured and the bound on their share."""

    source: str  # the traffic file
    rows: int  # rows read
    duplicates: int  # rows that repeated an earlier text
    in_suite: int  # texts that are suite cases: left out
    tune: int  # texts of the tune part (never measured here)
    no_text: int  # texts of the bound part the model sees as no text: left out
    sample_sha256: str
    n: int  # texts measured
    changed: int
    bound: float
    confidence: float
    max_change: float | None
    by_pair: dict[str, int]
    changes: tuple[TrafficChange, ...]
    seconds: float
    labels: dict[str, int] = field(default_factory=dict)  # the suite's label names, for the changes' classes
    # Over the budget: which must_fix cases it cannot buy (None: within it, or no budget).
    fit: BudgetFit | None = field(default=None, metadata=on_disk(omit_none=True))
    # The kind of decision the changes' predictions are of (their records hold each as one integer).
    decision: str = field(default=SINGLE_LABEL.name, metadata=on_disk(omit_default=True))
    # A token classifier's traffic (TrafficRecord's): the words measured and those whose tag changed;
    # n, changed and bound are then sentences, and max_change gates the sentence share.
    words: int | None = field(default=None, metadata=on_disk(omit_none=True))
    words_changed: int | None = field(default=None, metadata=on_disk(omit_none=True))

    @property
    def word_counts(self) -> tuple[int, int] | None:
        return None if self.words is None else (self.words_changed or 0, self.words)

    @property
    def within_budget(self) -> bool:
        return self.max_change is None or self.bound <= self.max_change

    def label_name(self, label: int) -> str:
        return next((name for name, index in self.labels.items() if index == label), str(label))

    def prediction_words(self, code: int) -> str:
        """A changed text's prediction, as its record holds it (:meth:`DecisionKind.code`), in words."""
        kind = DECISIONS.get(self.decision, SINGLE_LABEL)
        classes = max([*self.labels.values(), int(code).bit_length() - 1, 0]) + 1
        return kind.said(kind.decode([code], classes)[0], self.label_name)

    def __str__(self) -> str:
        budget = ""
        if self.max_change is not None:
            verdict = "within" if self.within_budget else "OVER"
            budget = f"; {verdict} the budget max_change = {percent(self.max_change)}"
        pairs = ", ".join(f"{pair}: {count}" for pair, count in self.by_pair.items())
        figures = change_sentence(self.bound, self.changed, self.n, self.confidence, words=self.word_counts)
        return f"{figures}{budget}" + (f" [{pairs}]" if pairs else "")

    def sample_line(self) -> str:
        """How the file became the sample: rows, duplicates and suite cases left out, the two parts."""
        left = f", {self.no_text:,} the model sees as no text" if self.no_text else ""
        return (
            f"{self.source}: {self.rows:,} rows, {self.duplicates:,} duplicate(s) merged, {self.in_suite:,} suite "
            f"case(s) left out; {self.n:,} texts measured (bound part{left}), {self.tune:,} kept for tuning; "
            f"{self.seconds:.2f} s"
        )


def traffic_note(
    record: TrafficRecord,
    sample: TrafficSample,
    labels: dict[str, int] | None = None,
    fit: BudgetFit | None = None,
    decision: str = SINGLE_LABEL.name,
) -> TrafficNote:
    """The run's record of Cert 4 (``labels``: the suite's names of the classes; ``fit``: over the
    budget, the must_fix cases it cannot buy)."""
    return TrafficNote(
        source=sample.source,
        rows=sample.rows,
        duplicates=sample.duplicates,
        in_suite=sample.in_suite,
        tune=len(sample.tune),
        no_text=record.no_text,
        sample_sha256=record.sample_sha256,
        n=record.n,
        changed=record.changed,
        bound=record.bound,
        confidence=record.confidence,
        max_change=record.max_change,
        by_pair=dict(record.by_pair),
        changes=record.changes,
        seconds=record.seconds,
        labels=dict(labels or {}),
        fit=fit,
        decision=decision,
        words=record.words,
        words_changed=record.words_changed,
    )


def properties(note: TrafficNote) -> dict[str, Any]:
    """Cert 4's figures, for JUnit and reports."""
    return {
        "n": note.n,
        "changed": note.changed,
        "bound": note.bound,
        "confidence": note.confidence,
        "max_change": note.max_change,
        "sample_sha256": note.sample_sha256,
        **({"words": note.words, "words changed": note.words_changed} if note.words is not None else {}),
        **{f"changed {pair}": count for pair, count in note.by_pair.items()},
        **({"cannot buy": " ".join(c.id for c in note.fit.left_out)} if note.fit and note.fit.left_out else {}),
    }


# What moves a repair along the curve of fixes against changes (docs: how-to/neighbourhoods, general accuracy).
ADVICE = (
    "fewer or looser must_fix cases (a smaller gamma_s), a larger mu (the price of moving the layer on kept "
    "inputs), more must_keep cases (`warp-check import --predicted` labels traffic by the model), or more "
    "traffic texts (a larger sample brings the bound down towards the share measured)"
)


def repaired(note: TrafficNote) -> tuple[bool, str]:
    """The verdict of a repair that converged, Cert 4 measured: whether it passes, and why."""
    figures = str(note)
    if note.within_budget:
        return True, f"Cert 4: the repair {figures}"
    assert note.max_change is not None
    pairs = ", ".join(f"{pair}: {count}" for pair, count in note.by_pair.items())
    message = (
        f"Cert 4 fails the budget: the repair "
        f"{change_sentence(note.bound, note.changed, note.n, note.confidence, words=note.word_counts)}, over "
        f"max_change = {percent(note.max_change)}{' (of sentences)' if note.words is not None else ''} by "
        f"{100 * (note.bound - note.max_change):.2g} points "
        f"({pairs}); nothing was written. "
    )
    message += f"Try {ADVICE}" if note.fit is None else f"{note.fit.sentence()} Other levers: {ADVICE}"
    return False, message


def unchanged(sample: TrafficSample) -> tuple[str, dict[str, Any]]:
    """Nothing needed repair: the model is unchanged, so are its predictions (the words, the figures)."""
    message = f"Cert 4: nothing was repaired, so no prediction changed on the {len(sample.bound):,} texts of the sample"
    return message, {"n": len(sample.bound), "changed": 0}


@dataclass(frozen=True, kw_only=True)
class RepairTraffic:
    """Cert 4 on a repair run: its record for the run's details (None: not measured), and its
    verdict (whether it passes, its words, its figures for reports and JUnit)."""

    note: TrafficNote | None
    passed: bool
    words: str
    figures: dict[str, Any] = field(default_factory=dict)


def on_repair(
    record: TrafficRecord | None,
    sample: TrafficSample,
    *,
    labels: dict[str, int],
    fit: BudgetFit | None,
    nothing_repaired: bool,
    why: str,
    decision: str = SINGLE_LABEL.name,
) -> RepairTraffic:
    """Cert 4's verdict on a repair given ``sample``: measured (``record``, on the repaired model), or
    no prediction changed (``nothing_repaired``), or not measured (``why``: how the repair ended)."""
    if record is not None:
        note = traffic_note(record, sample, labels, fit, decision)
        passed, words = repaired(note)
        return RepairTraffic(note=note, passed=passed, words=words, figures=properties(note))
    if nothing_repaired:
        words, figures = unchanged(sample)
        return RepairTraffic(note=None, passed=True, words=words, figures=figures)
    return RepairTraffic(note=None, passed=False, words=not_measured(why))


def not_measured(why: str) -> str:
    """The repair failed: there is no repaired model to measure."""
    return f"Cert 4 not measured: {why}"


def audited(failed: list[str], record: TrafficRecord | None) -> tuple[bool, str]:
    """Cert 4 on an audited model: every check of it held (``failed``: the details of those that did not)."""
    if failed:
        return False, "Cert 4 does not hold: " + "; ".join(failed)
    assert record is not None
    return True, f"Cert 4 holds: the repair {record.sentence()}"


__all__ = [
    "ADVICE", "NAMED_IN_MESSAGE", "Bought", "BudgetFit", "LeftOut", "Price", "PriceList", "RepairTraffic",
    "TrafficNote",
    "audited", "not_measured", "on_repair", "properties", "repaired", "traffic_note", "unchanged",
]  # fmt: skip
