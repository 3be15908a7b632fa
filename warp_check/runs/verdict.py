"""A run's verdict, worded once: what happened (fixed N of M, kept, restored, changed on traffic),
whether anything was written and why not, and what to do next.

Every front end renders this one record, :class:`RunVerdict` (made by :func:`run_verdict`): pytest's
summary and JUnit, the command's result, report.md and index.html. So a repair over its traffic
budget reads the same everywhere: it fixed its cases on a model that was never written, and the
next step is the budget's advice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from warp_check.cases import Kind
from warp_check.certificates.traffic.verdicts import ADVICE, TrafficNote
from warp_check.certify.certificate import percent
from warp_check.runs.deferred import defer_command
from warp_check.runs.details import AuditDetails, CertificateDetails, CheckDetails, RepairDetails, traffic_of
from warp_check.runs.modes import Mode, RunStatus
from warp_check.runs.result import RunResult, Verdict

NOTHING_WRITTEN = "nothing"


@dataclass(frozen=True, kw_only=True)
class RunVerdict:
    """A run's verdict in words. ``happened``: what the run found, a clause (no final stop);
    ``written``: the folder the run wrote (None: nothing, or a mode that writes none); ``why_not``:
    where a repair wrote nothing, why; ``next``: what to do next ("" where nothing is to be done)."""

    passed: bool
    happened: str
    written: str | None = None
    why_not: str = ""
    next: str = ""
    deferred: str = ""  # the suite's deferred cases: how many, known failures, those now right ("": none)
    # Over a traffic budget: what each budget buys (the price list's heading, then its table's rows).
    prices: tuple[str, ...] = ()

    @property
    def word(self) -> str:
        return "PASSED" if self.passed else "FAILED"

    @property
    def sentence(self) -> str:
        """The verdict as one sentence, a report's headline: "Failed: the repair fixes ..."."""
        return f"{'Passed' if self.passed else 'Failed'}: {self.happened}."

    @property
    def written_words(self) -> str:
        """What was written, in words ("" where the mode writes nothing and says nothing of it)."""
        if self.written is not None:
            return self.written
        return f"{NOTHING_WRITTEN}: {self.why_not}" if self.why_not else ""

    def lines(self) -> list[str]:
        """The verdict as the terminal shows it: the verdict, what was written, what to do next."""
        out = [f"verdict: {self.word}: {self.happened}"]
        if self.written_words:
            out.append(f"written: {self.written_words}")
        if self.deferred:
            out.append(f"deferred: {self.deferred}")
        if self.next:
            out.append(f"next: {self.next}")
        return out + [*self.prices[:1], *(f"  {row}" for row in self.prices[1:])]

    def properties(self) -> list[tuple[str, str]]:
        """The verdict as JUnit properties of the suite."""
        named = [
            ("verdict", f"{self.word}: {self.happened}"),
            ("written", self.written_words),
            ("deferred", self.deferred),
            ("next", self.next),
        ]
        return [(name, value) for name, value in named if value]


def run_verdict(run: RunResult, verdicts: Sequence[Verdict] | None = None) -> RunVerdict:
    """The verdict of ``run``; ``verdicts``: its cases' verdicts where the run travels without them
    (pytest's summary holds them apart), else the run's own."""
    every = run.verdicts if verdicts is None else verdicts
    cases = [v for v in every if v.kind not in (Kind.AUX, Kind.DEFERRED)]
    verdict = _run_verdict(run, cases)
    return _with_deferred(verdict, run, [v for v in every if v.kind is Kind.DEFERRED])


def _run_verdict(run: RunResult, cases: Sequence[Verdict]) -> RunVerdict:
    passed = (
        run.ok
        and all(v.passed or v.expected_failure is not None for v in cases)
        and (run.traffic is None or run.traffic.passed)
    )
    if run.status is RunStatus.ERROR:
        return RunVerdict(
            passed=False,
            happened=f"the run could not finish: {run.message}",
            why_not="the run stopped before its work" if run.mode is Mode.REPAIR else "",
            next="correct what the message names, then run again",
        )
    if run.mode is Mode.REPAIR:
        return _repair(run, cases, passed)
    if run.mode is Mode.AUDIT:
        return _audit(run, cases, passed)
    paired = run.details.paired_test if isinstance(run.details, CheckDetails) else None
    if paired is not None and not paired.passed:
        passed = False
    if any("baseline_gap" in v.properties for v in cases):
        return _baseline(run, cases, passed)
    return _check(cases, passed)


def _with_deferred(verdict: RunVerdict, run: RunResult, deferred: Sequence[Verdict]) -> RunVerdict:
    """``verdict`` with the suite's deferred cases: known failures (a run that checks them), the ones the
    model now gets right and how to put them back; a run that does not check them (a repair never sees
    them) counts them from the suite."""
    listed = max(run.details.counts.get(Kind.DEFERRED, 0), len(deferred))
    if not listed:
        return verdict
    if run.mode is not Mode.CHECK:
        words = f"{listed} deferred case(s), not checked by a {run.mode.value} run ({DEFERRED_CHECKED_BY})"
        return dataclasses.replace(verdict, deferred=words)
    right = [v.case_id for v in deferred if v.passed]
    words = f"{len(deferred) - len(right)} deferred case(s), run as known failures (each names why it was deferred)"
    if not right:
        return dataclasses.replace(verdict, deferred=words)
    back = defer_command(run.suite, restore=right)
    words += f"; {len(right)} now right: {back} puts {'it' if len(right) == 1 else 'them'} back into must_fix"
    step = f"put back the deferred case(s) the model now gets right ({back})"
    return dataclasses.replace(verdict, deferred=words, next="; ".join(s for s in (verdict.next, step) if s))


# A run that does not check the suite's deferred cases says which does.
DEFERRED_CHECKED_BY = "a check runs them: warp-check check, or pytest without --warp-repair"


def _of(cases: Sequence[Verdict], kind: Kind, *, passed: bool | None = None) -> int:
    return sum(1 for v in cases if v.kind is kind and (passed is None or v.passed is passed))


def restored_ids(run: RunResult, cases: Sequence[Verdict]) -> set[str]:
    """must_keep cases the repair put back (wrong on the model under repair, right on its baseline):
    those the run's details list, and the verdicts marked ``restored`` (an audit's)."""
    marked = {v.case_id for v in cases if v.properties.get("restored") is True}
    if isinstance(run.details, RepairDetails):
        marked |= set(run.details.restored)
    return marked


def repair_figures(run: RunResult, cases: Sequence[Verdict]) -> str:
    """What a repair did to the cases: "fixes 9 of 9 must_fix cases, keeps 40 of 40 must_keep cases"."""
    restored = restored_ids(run, cases)
    kept_cases = [v for v in cases if v.case_id not in restored]
    fix_total, fixed = _of(cases, Kind.MUST_FIX), _of(cases, Kind.MUST_FIX, passed=True)
    keep_total, kept = _of(kept_cases, Kind.MUST_KEEP), _of(kept_cases, Kind.MUST_KEEP, passed=True)
    parts = [f"fixes {fixed} of {fix_total} must_fix cases", f"keeps {kept} of {keep_total} must_keep cases"]
    if restored:
        back = sum(1 for v in cases if v.case_id in restored and v.passed)
        parts.append(f"restores {back} of {len(restored)} regressions")
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def traffic_words(note: TrafficNote) -> str:
    """The traffic's figure in a verdict: "changes at most 3.1% of predictions on traffic like the sample"."""
    budget = "" if note.max_change is None else f" (max_change = {percent(note.max_change)})"
    return f"changes at most {percent(note.bound)} of predictions on traffic like its sample{budget}"


def _repair(run: RunResult, cases: Sequence[Verdict], passed: bool) -> RunVerdict:
    details = run.details
    artefact = details.artefact if isinstance(details, (RepairDetails, CertificateDetails)) else None
    note = traffic_of(details)
    if run.status is RunStatus.NOTHING_TO_REPAIR and passed:
        return RunVerdict(
            passed=True,
            happened=f"nothing needed repair: the model already gets all {len(cases)} cases right with their margins",
            why_not="nothing to repair",
        )
    if not run.status.settled:
        why = details.repair_message if isinstance(details, RepairDetails) and details.repair_message else run.message
        return RunVerdict(
            passed=False,
            happened=f"the repair did not succeed ({run.status.value}): {why}",
            why_not="the repair did not converge, so there is no repaired model",
            next="follow the advice above (fewer or looser must_fix cases, more iterations, a higher rank), then "
            "repair again",
        )
    figures = repair_figures(run, cases)
    if note is not None and not note.within_budget:
        assert note.max_change is not None
        return RunVerdict(
            passed=False,
            happened=f"the repair {figures}, but it changes up to {percent(note.bound)} of predictions on traffic "
            f"like its sample, over max_change = {percent(note.max_change)}",
            why_not="a repair over its traffic budget is never written",
            next=_budget_advice(note, run.suite),
            prices=price_lines(note),
        )
    traffic = f", and {traffic_words(note)}" if note is not None else ""
    failing = [v for v in cases if not v.passed and v.expected_failure is None]
    excluded = details.excluded if isinstance(details, (RepairDetails, CertificateDetails)) else ()
    written = artefact or None
    if passed:
        happened = f"the repair {figures}{traffic}; each claim is certified from the saved weights"
        suite = Path(run.suite).parent.as_posix() if run.suite else "SUITE"
        next_step = (
            f"promote the fixed cases into must_keep so they stay fixed (warp-check promote {suite} --from "
            f"{written}), and gate the next release on this one"
            if written
            else ""
        )
    else:
        left_out = f"; {len(excluded)} must_keep case(s) the model already got wrong were left out" if excluded else ""
        happened = f"the repair {figures}{traffic}{left_out}: {len(failing)} of {len(cases)} cases fail"
        next_step = (
            "make the cases left out must_fix cases (or give the baseline that got them right, which restores "
            "them), or remove them"
            if excluded
            else "read the failing cases' messages"
        )
    return RunVerdict(
        passed=passed, happened=happened, written=written, why_not="" if written else run.message, next=next_step
    )


def price_lines(note: TrafficNote) -> tuple[str, ...]:
    """The price list of a repair over its budget, as the terminal prints it: a heading, then what each
    budget buys, the user's own marked (none where the cases were not priced)."""
    fit = note.fit
    prices = fit.prices if fit is not None else None
    if prices is None or not prices.bought:
        return ()
    return (prices.heading(), *prices.table(mark=note.max_change).splitlines())


def _budget_advice(note: TrafficNote, suite: str) -> str:
    fit = note.fit
    if fit is None or fit.why is not None:
        return f"try {ADVICE}"
    if fit.floor:
        return (
            'raise max_change, lower gamma_h, or keep_margin = "own" where it is "gamma_h": even with no must_fix '
            "case the repair is over the budget"
        )
    if fit.within and fit.left_out and fit.kept:
        listed = (
            "listed in the report; the price list below says what other budgets buy"
            if fit.prices
            else "listed in the report"
        )
        if not fit.deferrable:
            return (
                f"move the {len(fit.left_out)} must_fix case(s) the budget cannot buy ({listed}) out of this "
                "release's must_fix files by hand (warp-check defer does not take them yet), or raise max_change"
            )
        return (
            f"defer the {len(fit.left_out)} must_fix case(s) the budget cannot buy ({listed}): "
            f"{defer_command(suite or 'SUITE')} moves them out of this release's must_fix files into the suite's "
            f"deferred file, where every check still runs them; or raise max_change; other levers: {ADVICE}"
        )
    if fit.prices is not None and fit.prices.bought:
        return f"choose a max_change from the price list below, or try {ADVICE}"
    return f"raise max_change, or try {ADVICE}"


def _audit(run: RunResult, cases: Sequence[Verdict], passed: bool) -> RunVerdict:
    if passed:
        return RunVerdict(
            passed=True,
            happened="the certificate holds on this model; every claim was checked again from its weights",
        )
    held = sum(1 for v in cases if v.passed)
    checks = ""
    if isinstance(run.details, AuditDetails) and run.details.failed_checks:
        checks = f"; {len(run.details.failed_checks)} check(s) of the file fail"
    return RunVerdict(
        passed=False,
        happened=f"the certificate does not hold on this model ({held} of {len(cases)} cases hold{checks}): "
        f"{run.message}",
        next="do not ship this model: repair the model the certificate names again, or find what changed it",
    )


def _baseline(run: RunResult, cases: Sequence[Verdict], passed: bool) -> RunVerdict:
    """Against the last release: the regressions, and where they were measured, the changes on traffic
    (Cert 4 between the two models) and the paired test's gate."""
    regressions = sum(1 for v in cases if not v.passed and v.expected_failure is None)
    found = [
        f"{regressions} regressions against the baseline (right before, wrong now)"
        if regressions
        else f"no regression against the baseline in {len(cases)} cases"
    ]
    steps = []
    if regressions:
        steps.append(
            "repair them back: a repair with the baseline (--warp-baseline, or warp-check repair --baseline) "
            "restores the must_keep cases it got right"
        )
    note = traffic_of(run.details)
    if note is not None:
        over = not note.within_budget
        found.append(f"{traffic_words(note).replace('changes', 'it changes', 1)}{', over budget' if over else ''}")
        if over:
            steps.append("look at the changed traffic texts before shipping, or raise max_change if they are meant")
    paired = run.details.paired_test if isinstance(run.details, CheckDetails) else None
    if paired is not None and paired.worse_p is not None:
        found.append(
            f"the paired test gives p = {paired.p_worse:.3g} that it is worse "
            f"({'below' if not paired.passed else 'within'} worse_p = {paired.worse_p:g})"
        )
    happened = found[0] if len(found) == 1 else "; ".join(found)
    return RunVerdict(passed=passed, happened=happened, next="; ".join(steps) if not passed else "")


def _check(cases: Sequence[Verdict], passed: bool) -> RunVerdict:
    if passed:
        return RunVerdict(passed=True, happened=f"the model answers all {len(cases)} cases right")
    wrong = sum(1 for v in cases if not v.passed and v.expected_failure is None)
    fix_wrong = sum(1 for v in cases if v.kind is Kind.MUST_FIX and not v.passed and v.expected_failure is None)
    return RunVerdict(
        passed=False,
        happened=f"the model answers {wrong} of {len(cases)} cases wrong ({fix_wrong} must_fix, "
        f"{wrong - fix_wrong} must_keep)",
        next="repair it (pytest --warp-repair, or warp-check repair) to fix the must_fix cases"
        if fix_wrong
        else "find what broke the must_keep cases, or repair with the last release as baseline to restore them",
    )


__all__ = [
    "DEFERRED_CHECKED_BY", "RunVerdict", "price_lines", "repair_figures", "restored_ids", "run_verdict",
    "traffic_words",
]  # fmt: skip
