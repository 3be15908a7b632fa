"""What a report says about a run, in words a release manager reads: the verdict, the figures,
each case's answers before and after, and what each plot shows.

The Markdown and the HTML report both render these records, so the two say the same thing.
Figures another part of a run may carry (restored regressions, a traffic bound) are read where
the run has them; a run without them simply has no such line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from warp_check.cases import Kind
from warp_check.certificates import CERTIFICATES
from warp_check.certificates.traffic.verdicts import TrafficNote
from warp_check.runs.details import AuditDetails, CertificateDetails, CheckDetails, RepairDetails, traffic_of
from warp_check.runs.modes import Mode, RunStatus
from warp_check.runs.result import Outcome, RunResult, Verdict
from warp_check.runs.verdict import RunVerdict, run_verdict
from warp_check.runs.verdict import restored_ids as verdict_restored_ids


@dataclass(frozen=True, kw_only=True)
class Fact:
    """One figure of a run: what it counts, its value, and (where it helps) what it means."""

    name: str
    value: str
    detail: str = ""
    good: bool | None = None  # None: neither good nor bad news


@dataclass(frozen=True, kw_only=True)
class Headline:
    """The verdict of a run in words (``said``: the one every front end renders), and the figures behind it."""

    said: RunVerdict
    facts: tuple[Fact, ...]

    @property
    def passed(self) -> bool:
        return self.said.passed

    @property
    def verdict(self) -> str:
        """One sentence, starting with what happened."""
        return self.said.sentence


@dataclass(frozen=True, kw_only=True)
class CaseRow:
    """One case as the report's table shows it: the model's answer before and after."""

    case_id: str
    kind: Kind
    text: str  # "" where the run did not record it
    text_pair: str | None
    label: str
    predicted_before: str | None
    gap_before: float | None
    predicted_after: str | None
    gap_after: float | None
    radius: float | None
    outcome: Outcome
    why: str  # the verdict's sentence; "" for a case that passed


@dataclass(frozen=True, kw_only=True)
class Caption:
    """What a plot shows, in plain words, with the technical definition on a second line."""

    title: str
    plain: str
    technical: str


CAPTIONS: dict[str, Caption] = {
    "gaps": Caption(
        title="How sure the model is, case by case",
        plain=(
            "Each line is one kind of case, sorted from the least to the most confident answer. A case is "
            "answered right when its line is above zero; the higher, the more the model would have to change "
            "before it answers otherwise. After a repair, every fixed case should sit above the fix margin and "
            "every kept case above the keep margin (dashed)."
        ),
        technical=(
            "gap = logit of the case's label − the largest other logit; margins γ_s (must_fix) and γ_h "
            "(must_keep). Dashed and faint: before repair (or on the baseline); solid: after."
        ),
    ),
    "radius": Caption(
        title="How firmly each fix holds",
        plain=(
            "For each fixed case, how far the sentence's internal representation may move before the fix could "
            "be undone. Larger is safer: a case near zero is fixed by a hair, and a slightly different wording "
            "may fail again. Add its variants to the suite (warp-check neighbours) to make such fixes hold."
        ),
        technical=(
            "certified radius = max(ε* = gap / 2L, the local radius): an L2 distance in the space of v, the "
            "input of the repaired layer; it is not a number of edited words or characters."
        ),
    ),
    "convergence": Caption(
        title="How the repair got there",
        plain=(
            "The weakest fixed case and the weakest kept case after each step of the repair. The repair stops "
            "when both lines are above their dashed margins; a line that stays flat below its margin is what "
            "makes a repair fail."
        ),
        technical="smallest must_fix gap and smallest must_keep gap per iteration of the repair loop.",
    ),
}


def _finite(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def is_baseline_run(run: RunResult) -> bool:
    """A check judged against a baseline model: its verdicts carry the baseline's answers."""
    return run.mode is Mode.CHECK and any("baseline_gap" in v.properties for v in run.verdicts)


def when_words(run: RunResult) -> tuple[str, str]:
    """What 'before' and 'after' mean in this run's tables ("", "" for a check with nothing before)."""
    if run.mode is Mode.CHECK:
        return ("on the baseline", "now") if is_baseline_run(run) else ("", "")
    return "before repair", "after repair"


def _answer(label: str, gap: float | None, *, predicted: object = None, other: str | None = None) -> str | None:
    """The prediction, in plain words: the label where it is right, else what it predicted and what
    it should be ("negative, should be positive"). ``predicted``: where the run recorded it;
    ``other``: where it did not, the label a wrong answer must be (a suite of two labels)."""
    if gap is None and predicted is None:
        return None
    if gap is None:
        return str(predicted)
    if gap > 0:
        return label if predicted is None else str(predicted)
    said = predicted if predicted is not None else other
    return f"{said}, should be {label}" if said is not None else f"wrong, should be {label}"


def _other_labels(run: RunResult) -> dict[str, str]:
    """For a run whose cases name exactly two labels (one answer each), each label's other one: what a
    wrong answer predicted."""
    if any(v.parts for v in run.verdicts):
        return {}
    labels = sorted({str(v.properties["label"]) for v in run.verdicts if "label" in v.properties})
    return {labels[0]: labels[1], labels[1]: labels[0]} if len(labels) == 2 else {}


def case_row(run: RunResult, verdict: Verdict, others: dict[str, str] | None = None) -> CaseRow:
    """``verdict`` as a row: before is the baseline's answer (baseline mode) or the model's before
    repair; after is the model's answer now (a check) or after repair. ``others``: see :func:`_other_labels`."""
    p = verdict.properties
    label = str(p.get("label", ""))
    other = (others or {}).get(label)
    if run.mode is Mode.CHECK:
        before_gap, after_gap = _finite(p.get("baseline_gap")), _finite(p.get("gap"))
        before = _answer(label, before_gap, predicted=p.get("baseline_predicted"), other=other)
        after = _answer(label, after_gap, predicted=p.get("predicted"), other=other)
    else:
        before_gap, after_gap = _finite(p.get("gap_before")), _finite(p.get("gap_after"))
        before, after = _answer(label, before_gap, other=other), _answer(label, after_gap, other=other)
    outcome = verdict.reported
    return CaseRow(
        case_id=verdict.case_id,
        kind=verdict.kind,
        text=verdict.text or "",
        text_pair=verdict.text_pair,
        label=label,
        predicted_before=before,
        gap_before=before_gap,
        predicted_after=after,
        gap_after=after_gap,
        radius=_finite(p.get("radius")),
        outcome=outcome,
        why="" if outcome is Outcome.PASSED else verdict.message,
    )


def case_rows(run: RunResult) -> list[CaseRow]:
    """Every case of the run, failures first, then by kind and id."""
    others = _other_labels(run)
    rows = [case_row(run, v, others) for v in run.verdicts if v.kind is not Kind.AUX]
    return sorted(rows, key=lambda r: (r.outcome is Outcome.PASSED, r.kind.value, r.case_id))


# -- figures other parts of a run may carry ----------------------------------------------------


def restored_ids(run: RunResult) -> set[str]:
    """must_keep cases the repair put back (wrong on the model under repair, right on its baseline)."""
    return verdict_restored_ids(run, run.verdicts)


def traffic_fact(run: RunResult) -> Fact | None:
    """The bound on how many predictions the repair changes on traffic like the suite's sample
    (Cert 4), where the run measured one."""
    traffic = traffic_of(run.details)
    if traffic is None:
        return None
    limit = traffic.max_change
    return Fact(
        name="traffic",
        value=f"changes at most {traffic.bound:.2%} of predictions on traffic like this",
        detail=f"{traffic.changed} of {traffic.n} sampled texts changed prediction; {traffic.confidence:.0%} confidence"
        + (f"; budget {limit:.2%}" if limit is not None else ""),
        good=None if limit is None else traffic.within_budget,
    )


# -- the headline -------------------------------------------------------------------------------


# -- what a traffic budget buys ---------------------------------------------------------------------

PRICE_CAPTION = Caption(
    title="What each traffic budget buys",
    plain=(
        "Each point is one repair measured on the traffic's tune part: the cheapest must_fix cases bought (up) "
        "and the share of predictions their repair changes (across). The dashed line is this run's max_change: "
        "the cases to its left are what it buys; a larger budget buys more. The final check of any repair is "
        "still Cert 4 on the other part of the sample."
    ),
    technical=(
        "each must_fix case priced by its own repair (every must_keep case guarding); the cases bought cheapest "
        "first, the longest prefix per budget found by bisection; the count aimed at keeps a fresh sample the "
        "size of Cert 4's within the budget 95 % of the time."
    ),
)


@dataclass(frozen=True, kw_only=True)
class PriceRow:
    """One budget of the price list, in words: what it buys and what that changes."""

    budget: str
    bought: str
    changed: str
    bound: str
    mine: bool  # the run's own max_change


def price_rows(note: TrafficNote) -> tuple[PriceRow, ...]:
    """The price list of a repair over its budget, row by row (none where the cases were not priced)."""
    prices = note.fit.prices if note.fit is not None else None
    if prices is None:
        return ()
    total = len(prices.prices)
    rows = []
    for b in prices.bought:
        changed, bound = b.words(prices.n)
        rows.append(
            PriceRow(
                budget=f"{100 * b.budget:g} %",
                bought=f"{b.cases} of {total}",
                changed=changed,
                bound=bound,
                mine=note.max_change is not None and math.isclose(b.budget, note.max_change),
            )  # fmt: skip
        )
    return tuple(rows)


def price_points(note: TrafficNote) -> list[tuple[float, int]]:
    """The price list's measured repairs as (share of the tune part changed, cases bought): the floor, then
    what each budget buys."""
    prices = note.fit.prices if note.fit is not None else None
    if prices is None or not prices.n:
        return []
    points = {(b.changed / prices.n, b.cases) for b in prices.bought if b.changed is not None and b.aim >= 0}
    if prices.floor is not None:
        points.add((prices.floor / prices.n, 0))
    return sorted(points, key=lambda p: (p[1], p[0]))


def budget_markdown(note: TrafficNote) -> list[str]:
    """report.md's part of a repair over its budget: what each budget buys, then the cases it cannot buy."""
    fit, out = note.fit, []
    if fit is None:
        return out
    rows = price_rows(note)
    if rows and fit.prices is not None:
        out += [f"What each budget buys ({fit.prices.heading().removesuffix(':')}):", ""]
        out += ["| max_change | must_fix bought | changed (tune part) | bound |", "|---|---|---|---|"]
        for row in rows:
            budget = f"**{row.budget}** (this run)" if row.mine else row.budget
            out.append(f"| {budget} | {row.bought} | {row.changed} | {row.bound} |")
        out.append("")
    if fit.unpriced:
        out += [f"_Not priced: {fit.unpriced}._", ""]
    if fit.left_out:
        column = "its fix alone changes" if fit.prices is not None else "changes nearest it"
        out += ["Must_fix cases the budget cannot buy:", "", f"| case | where | {column} |", "|---|---|---|"]
        out += [f"| {c.id} | {c.where} | {c.nearest} |" for c in fit.left_out]
        out.append("")
    return out


def _count(rows: Sequence[CaseRow], kind: Kind, outcome: Outcome | None = None) -> int:
    return sum(1 for r in rows if r.kind is kind and (outcome is None or r.outcome is outcome))


def _of(part: int, whole: int) -> str:
    return f"{part} of {whole}"


def headline(run: RunResult) -> Headline:
    """The run's verdict in words and the figures a release manager needs."""
    rows, said = case_rows(run), run_verdict(run)
    if run.status is RunStatus.ERROR:
        return Headline(said=said, facts=())
    deferred = _deferred_facts(run, rows)
    tested = [r for r in rows if r.kind is not Kind.DEFERRED]
    if run.mode is Mode.REPAIR:
        return Headline(said=said, facts=_repair_headline(run, tested, said) + deferred)
    if run.mode is Mode.AUDIT:
        return Headline(said=said, facts=_audit_facts(run, tested) + deferred)
    if is_baseline_run(run):
        return Headline(said=said, facts=_baseline_facts(tested) + deferred)
    return Headline(said=said, facts=_check_facts(run, tested) + deferred)


def _deferred_facts(run: RunResult, rows: Sequence[CaseRow]) -> tuple[Fact, ...]:
    """The suite's deferred cases: known failures where the run checked them, those now right, or
    how many a run that does not check them left aside."""
    checked = [r for r in rows if r.kind is Kind.DEFERRED] if run.mode is Mode.CHECK else []
    listed = max(run.details.counts.get(Kind.DEFERRED, 0), len(checked))
    if not listed:
        return ()
    if not checked:
        return (Fact(name="deferred", value=f"{listed} cases", detail="not checked by this run: a check runs them"),)
    right = _count(checked, Kind.DEFERRED, Outcome.PASSED)
    detail = "known failures a traffic budget could not buy, never repaired"
    if right:
        detail += f"; {right} now right: they can be put back (warp-check defer SUITE --restore)"
    return (Fact(name="deferred", value=f"{len(checked) - right} known failures", detail=detail, good=None),)


def _failed(rows: Sequence[CaseRow]) -> int:
    return sum(1 for r in rows if r.outcome is Outcome.FAILED)


def _repair_headline(run: RunResult, rows: list[CaseRow], said: RunVerdict) -> tuple[Fact, ...]:
    """A repair's figures. Where nothing was written (over its traffic budget), they are of a repair
    that exists nowhere: neither good nor bad news, so they do not contradict the verdict."""
    written = said.written is not None or said.passed
    unsaved = "" if written else "on the repaired weights, which were not written"
    restored = restored_ids(run)
    fix_total, keep_rows = _count(rows, Kind.MUST_FIX), [r for r in rows if r.case_id not in restored]
    fixed = _count(rows, Kind.MUST_FIX, Outcome.PASSED)
    keep_total, kept = _count(keep_rows, Kind.MUST_KEEP), _count(keep_rows, Kind.MUST_KEEP, Outcome.PASSED)
    facts = [
        Fact(
            name="fixed",
            value=f"{_of(fixed, fix_total)} must_fix cases",
            detail=unsaved,
            good=fixed == fix_total if written else None,
        ),
        Fact(
            name="kept",
            value=f"{_of(kept, keep_total)} must_keep cases",
            detail=unsaved,
            good=kept == keep_total if written else None,
        ),
    ]
    if restored:
        back = sum(1 for r in rows if r.case_id in restored and r.outcome is Outcome.PASSED)
        facts.append(
            Fact(
                name="restored",
                value=f"{_of(back, len(restored))} regressions restored",
                detail="must_keep cases this model got wrong and its baseline right, repaired back",
                good=back == len(restored) if written else None,
            )
        )
    details = run.details
    excluded = details.excluded if isinstance(details, (RepairDetails, CertificateDetails)) else ()
    if excluded:
        facts.append(
            Fact(
                name="left out",
                value=f"{len(excluded)} must_keep cases",
                detail="the model under repair already got them wrong, so the repair did not try to keep them",
                good=False,
            )
        )
    return tuple(facts + _repair_facts(run))


def certificate_facts(run: RunResult) -> list[Fact]:
    """A line per certificate of the table that has one to say of the run's cases (Cert 1–3 are the
    repair's own figures: held / claimed)."""
    cases = [v.properties for v in run.verdicts]
    facts = []
    for cert in CERTIFICATES:
        line = cert.report_line(cases)
        if line is not None:
            value, held = line
            facts.append(Fact(name=cert.title, value=value, detail=cert.claim, good=held))
    return facts


def _repair_facts(run: RunResult) -> list[Fact]:
    details, facts = run.details, certificate_facts(run)
    traffic = traffic_fact(run)
    if traffic is not None:
        facts.append(traffic)
    if isinstance(details, (RepairDetails, CertificateDetails)):
        if details.certs is not None:
            facts.append(
                Fact(
                    name="certificates",
                    value=str(details.certs),
                    detail="held / claimed: Cert 1 fixed cases clear γ_s, Cert 2 kept cases clear γ_h, Cert 3 "
                    "no flip within the certified radius",
                )
            )
        seconds = _finite(details.repair_seconds)
        took = f" in {seconds:.1f} s" if seconds is not None else ""
        facts.append(Fact(name="repair", value=f"{details.iterations} iteration(s){took}"))
        if details.artefact:
            facts.append(Fact(name="repaired model", value=details.artefact))
    return facts


def _audit_facts(run: RunResult, rows: list[CaseRow]) -> tuple[Fact, ...]:
    details = run.details
    facts = [
        Fact(name="cases", value=f"{_of(len(rows) - _failed(rows), len(rows))} hold", good=not _failed(rows)),
    ]
    if isinstance(details, AuditDetails):
        failed = len(details.failed_checks)
        facts.append(
            Fact(
                name="checks",
                value=f"{_of(details.checks - failed, details.checks)} checks of the certificate hold",
                detail="; ".join(details.failed_checks),
                good=not failed,
            )
        )
        facts.append(Fact(name="certificate", value=details.certificate))
    facts += certificate_facts(run)
    traffic = traffic_fact(run)
    if traffic is not None:
        facts.append(traffic)
    return tuple(facts)


def _baseline_facts(rows: list[CaseRow]) -> tuple[Fact, ...]:
    regressions = _failed(rows)
    expected = sum(1 for r in rows if r.outcome is Outcome.XFAILED)
    fixed_since = sum(1 for r in rows if r.outcome is Outcome.PASSED and r.gap_before is not None and r.gap_before <= 0)
    return (
        Fact(
            name="regressions",
            value=f"{regressions} cases",
            detail="right on the baseline, wrong on this model",
            good=not regressions,
        ),
        Fact(name="still wrong", value=f"{expected} cases", detail="wrong on the baseline too: expected failures"),
        Fact(name="fixed since", value=f"{fixed_since} cases", detail="wrong on the baseline, right now"),
        Fact(name="right", value=f"{_of(len(rows) - regressions - expected, len(rows))} cases"),
    )


def _check_facts(run: RunResult, rows: list[CaseRow]) -> tuple[Fact, ...]:
    facts = []
    for kind in (Kind.MUST_FIX, Kind.MUST_KEEP):
        total = _count(rows, kind)
        if total:
            right = _count(rows, kind, Outcome.PASSED)
            facts.append(Fact(name=f"{kind.value} right", value=_of(right, total), good=right == total))
    if isinstance(run.details, CheckDetails):
        facts.append(Fact(name="head", value=run.details.head))
    return tuple(facts)
