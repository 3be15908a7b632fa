"""Repair mode: repair on every case of the suite, save the certified model, and give each case
its certificate's verdict, recomputed from the repaired weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from warp_check.cases import Case, Kind
from warp_check.certificates.kept import CERT2
from warp_check.certificates.margins import CERT1
from warp_check.certificates.numbers import CaseNumbers
from warp_check.certificates.radius import CERT3
from warp_check.certificates.traffic import verdicts as cert4
from warp_check.certificates.traffic.sample import TrafficSample
from warp_check.certificates.words import named, num
from warp_check.certify.artefact import Destination, claim_destination
from warp_check.certify.certificate import CaseCertificate, Lipschitz, Summary
from warp_check.certify.falsify import AttackSettings
from warp_check.decisions import DecisionKind
from warp_check.errors import SettingsError, SuiteError, WarpError
from warp_check.model.blocks import blocks
from warp_check.pipeline.evaluation import Evaluation, evaluate
from warp_check.progress import Progress
from warp_check.releases.restore import Reference, wrong_keep
from warp_check.repair import advice
from warp_check.repair.records import Miss, RepairResult, RepairStatus
from warp_check.repair.settings import RepairSettings, check_rank
from warp_check.runs.details import GsnFtNote, IterationSummary, NeighbourhoodNote, RepairDetails, RunDetails
from warp_check.runs.modes import Mode, RunStatus
from warp_check.runs.repair_cases import RepairOutcome, certify_result, repair_cases
from warp_check.runs.result import Answered, PartVerdict, RunResult, TrafficVerdict, Verdict, part_verdicts
from warp_check.suite.loader import Suite

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter

UNCHANGED = " (nothing needed repair: checked on the original weights)"
HOW_TO_RESTORE = (
    "To have it repaired back where the last release got it right, name that release as the baseline "
    "(pytest --warp-baseline DIR, warp-check repair --baseline DIR), or repair a model whose certificate chain "
    "starts from it"
)


@dataclass(frozen=True, kw_only=True)
class SuiteFacts:
    """What a repair takes from its suite, once, before its work: the cases, the names of the
    classes, the batch size, where its [repair] settings are written (for errors naming them) and
    what the run's details say of the suite. Below :func:`repair`, nothing reads the suite."""

    toml: Path
    name: str
    cases: tuple[Case, ...]
    labels: Mapping[str, int]  # name -> class, as warp.toml gives them
    decision: str  # the name of the kind of decision its cases state
    batch_size: int
    settings: RepairSettings  # the suite's own [repair] values
    key_lines: Mapping[str, int]  # "repair.rank" -> its line in warp.toml
    about: RunDetails  # the suite's model, digest and counts

    @classmethod
    def of(cls, suite: Suite) -> SuiteFacts:
        return cls(
            toml=suite.toml,
            name=suite.name,
            cases=tuple(suite.cases),
            labels=dict(suite.labels),
            decision=suite.decision.name,
            batch_size=suite.model.batch_size,
            settings=suite.repair,
            key_lines=dict(suite.key_lines),
            about=RunDetails.of(suite),
        )

    def label_name(self, label: int) -> str:
        """A class's name in the suite (its number where the suite names none)."""
        return next((name for name, index in self.labels.items() if index == label), str(label))


@dataclass(frozen=True, kw_only=True)
class Restoring:
    """A repair that restores regressions, before it runs: the model's own answers on the suite
    (``evaluation``, which names the must_keep cases it gets ``wrong``), the out folder as found
    before that pass, and the baseline with the cases to restore (``reference``, judged on the
    baseline's answers by the caller: :func:`warp_check.releases.restore.judged`)."""

    evaluation: Evaluation
    destination: Destination
    reference: Reference | None = None

    @property
    def wrong(self) -> tuple[str, ...]:
        return wrong_keep(self.evaluation.cases, self.evaluation.gaps)


def model_answers(
    suite: Suite,
    adapter: ClassifierAdapter,
    settings: RepairSettings,
    *,
    out_dir: str | Path,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = False,
    flags: Mapping[str, str] | None = None,
) -> Restoring:
    """The model's answers first, where a baseline may restore regressions: which must_keep cases
    it gets wrong. A rank its layer cannot take and an out folder that cannot be written are refused
    before the encoder pass."""
    try:
        layer = adapter.repair_layer
        check_rank(settings.rank, (layer.out_features, layer.in_features), adapter.spec.repair_layer)
    except SettingsError as exc:
        raise _where_given(SuiteFacts.of(suite), exc, flags) from None
    destination = claim_destination(out_dir, adapter.source)
    evaluation = evaluate(
        adapter, suite.cases, batch_size=suite.model.batch_size, cache_dir=cache_dir, progress=progress
    )
    return Restoring(evaluation=evaluation, destination=destination)


def repair(
    suite: Suite,
    adapter: ClassifierAdapter,
    settings: RepairSettings,
    *,
    out_dir: str | Path,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = False,
    attack: AttackSettings | None = None,
    flags: Mapping[str, str] | None = None,
    traffic: TrafficSample | None = None,
    restoring: Restoring | None = None,
) -> RunResult:
    """Repair on every case of the suite, save the artefact into ``out_dir`` when it converged,
    and give each case its certificate verdict, computed from the repaired weights.

    With ``traffic`` (:func:`warp_check.certificates.traffic.reading.load_traffic`), Cert 4 is measured before
    anything is written and the run carries its verdict (the suite's ``traffic`` item); a repair
    whose bound exceeds the budget writes nothing.

    ``flags`` names, per setting, how the user changes it (for advice in failure messages).
    ``restoring``: the baseline's judgement of the must_keep cases the model gets wrong (data: this
    function loads no other model nor suite); those it got right are restored
    (:mod:`warp_check.releases.restore`). Raises ArtefactError when ``out_dir`` may not be written
    (before any work is done).
    """
    facts = SuiteFacts.of(suite)
    reference = restoring.reference if restoring is not None else None
    try:
        outcome = repair_cases(
            adapter,
            facts.cases,
            settings,
            out_dir=out_dir,
            batch_size=facts.batch_size,
            cache_dir=cache_dir,
            attack=attack,
            progress=progress,
            evaluation=restoring.evaluation if restoring is not None else None,
            destination=restoring.destination if restoring is not None else None,
            traffic=traffic,
            label_name=facts.label_name,
            reference=reference,
        )
    except SettingsError as exc:  # a value this model cannot take (a rank past its layer's)
        raise _where_given(facts, exc, flags) from None
    result = outcome.result
    status = RunStatus.of_repair(result.status)
    records, lip = _certified(facts.cases, outcome, attack)
    by_id = {r.id: r for r in records}
    misses = {m.id: m for m in result.misses}
    parts, answered = _answers(facts, outcome, adapter.decision)
    verdicts = tuple(
        replace(
            _verdict(facts, case, result, by_id.get(case.id), misses.get(case.id), dict(flags or {}), reference),
            parts=parts.get(case.id, ()),
            answered=answered.get(case.id),
        )
        for case in facts.cases
        if case.kind is not Kind.AUX
    )
    details = _details(facts.about, outcome, records, lip, reference)
    message = _run_message(result, status)
    cert4_run = (
        cert4.on_repair(
            outcome.traffic,
            traffic,
            labels=dict(facts.labels),
            decision=facts.decision,
            fit=outcome.budget_fit,
            nothing_repaired=result.status is RepairStatus.NOTHING_TO_REPAIR,
            why=message,
        )
        if traffic is not None
        else None
    )
    note = cert4_run.note if cert4_run is not None else None
    if note is not None and not note.within_budget:
        message += f"; but it {note}: nothing was written"
    return RunResult(
        suite=str(facts.toml),
        name=facts.name,
        mode=Mode.REPAIR,
        ok=status.settled,
        status=status,
        message=message,
        verdicts=verdicts,
        details=replace(details, traffic=note),
        traffic=None
        if cert4_run is None
        else TrafficVerdict(passed=cert4_run.passed, message=cert4_run.words, properties=cert4_run.figures),
    )


def _answers(
    facts: SuiteFacts, outcome: RepairOutcome, kind: DecisionKind
) -> tuple[dict[str, tuple[PartVerdict, ...]], dict[str, Answered]]:
    """Per case id, what the model answered before repair and after it, and its answer's parts before
    and after where its kind decides several things at once (after: the repaired head's logits, in
    float64, where the repair settled)."""
    evaluation = outcome.evaluation
    rows = {c.id: i for i, c in enumerate(evaluation.cases)}
    own = [c for c in facts.cases if c.kind is not Kind.AUX and c.id in rows]
    answered = {c.id: Answered(before=kind.said(evaluation.predictions[rows[c.id]], facts.label_name)) for c in own}
    parts: dict[str, tuple[PartVerdict, ...]] = {}
    if not RunStatus.of_repair(outcome.result.status).settled:
        return parts, answered
    for block in blocks(len(own)):  # v in float64 a block at a time: a whole suite's would not fit at scale
        cases = own[block]
        V = np.asarray(evaluation.encoded.rows([c.id for c in cases]), np.float64)
        after = outcome.result.head_after.logits(V)
        for c, logits, predicted in zip(cases, after, kind.predict(after), strict=True):
            answered[c.id] = replace(answered[c.id], after=kind.said(predicted, facts.label_name))
            if kind.part_word is not None:
                before = evaluation.logits[rows[c.id]]
                parts[c.id] = part_verdicts(kind, c.label, logits, facts.label_name, before=before)
    return parts, answered


def _where_given(suite: SuiteFacts, exc: SettingsError, flags: Mapping[str, str] | None) -> WarpError:
    """A setting the model cannot take, named where the user gave it: the flag that overrode the
    suite's value, or else the suite's warp.toml line."""
    flag = (flags or {}).get(exc.field)
    if flag is not None and getattr(suite.settings, exc.field, None) != exc.value:
        return SettingsError(flag, exc.value, exc.why)
    key = f"repair.{exc.field}"
    line = suite.key_lines.get(key)
    if line is None:  # the default: written nowhere
        return SettingsError(exc.field, exc.value, f"{exc.why} (the default: set [repair] {exc.field} in warp.toml)")
    return SuiteError(exc.of_key, path=suite.toml, line=line, field=key)


def _certified(
    cases: Sequence[Case], outcome: RepairOutcome, attack: AttackSettings | None
) -> tuple[list[CaseCertificate], Lipschitz | None]:
    """Cert 1–3 per case: of the repaired model, or of the unchanged one when nothing needed
    repair (so the items still assert)."""
    if outcome.result.status is RepairStatus.NOTHING_TO_REPAIR:
        own = [c for c in cases if c.kind is not Kind.AUX]
        return certify_result(own, outcome.evaluation, outcome.result, attack)
    return list(outcome.certificates), outcome.lipschitz


def _run_message(result: RepairResult, status: RunStatus) -> str:
    if status is RunStatus.NOTHING_TO_REPAIR:
        return "nothing to repair: every case already meets its margin; nothing was written"
    if not status.settled:
        return f"repair failed ({status.value}): {result.message}; nothing was written"
    left_out = sorted(result.excluded_keep)
    if left_out:  # said with the result, not only in the verdicts: the run does not pass with them
        shown = ", ".join(map(repr, left_out[:5])) + (f" and {len(left_out) - 5} more" if len(left_out) > 5 else "")
        return (
            f"{result.message}; {len(left_out)} must_keep case(s) left out, which fail: the input model gets them "
            f"wrong and nothing certifies them ({shown}; each verdict says why and what helps)"
        )
    return result.message


def _details(
    about: RunDetails,
    outcome: RepairOutcome,
    records: list[CaseCertificate],
    lip: Lipschitz | None,
    reference: Reference | None,
) -> RepairDetails:
    result, encoded = outcome.result, outcome.evaluation.encoded
    return RepairDetails.beside(
        about,
        head=outcome.spec.chain,
        found_by=outcome.spec.found_by,
        encoded=encoded.encoded,
        from_cache=encoded.from_cache,
        encode_seconds=outcome.evaluation.seconds,
        status=RunStatus.of_repair(result.status),
        repair_message=result.message,
        iterations=len(result.iterations),
        repair_seconds=result.seconds,
        kappa_before=result.mean_kappa_before,
        kappa_after=result.mean_kappa_after,
        gsn_ft=GsnFtNote(applied=result.gsn_ft.applied, reason=result.gsn_ft.reason),
        certs=Summary.of(records) if records else None,
        excluded=tuple(result.excluded_keep),
        artefact=str(outcome.artefact) if outcome.artefact is not None else None,
        history=tuple(IterationSummary.of(r) for r in result.iterations),
        settings=result.settings,
        gamma_s=result.settings.gamma_s,
        gamma_h=result.settings.gamma_h,
        lipschitz=lip.L if lip is not None else None,
        neighbourhood=NeighbourhoodNote.of(outcome.neighbourhood),
        identical=encoded.identical,
        merged=result.merged,
        restored=reference.restored if reference is not None else (),
        baseline=f"{reference.model_dir} ({reference.chosen_by})" if reference is not None else None,
    )


# -- one case's verdict ------------------------------------------------------------------------


def _verdict(
    suite: SuiteFacts,
    case: Case,
    result: RepairResult,
    record: CaseCertificate | None,
    miss: Miss | None,
    flags: Mapping[str, str],
    reference: Reference | None,
) -> Verdict:
    """The case's verdict: its certificate on the repaired model (or on the unchanged one when
    nothing needed repair), or why there is none."""

    def verdict(passed: bool, message: str) -> Verdict:
        return Verdict.of(case, passed=passed, message=message, properties=_properties(suite, case, result, record))

    status = RunStatus.of_repair(result.status)
    if case.id in result.excluded_keep:
        return verdict(False, _excluded(suite, case, result, reference))
    if not status.settled:
        return verdict(False, _not_repaired(case, result, miss, flags))
    unchanged = UNCHANGED if status is RunStatus.NOTHING_TO_REPAIR else ""
    if record is None:
        return verdict(False, f"no certificate was computed for this case{unchanged}")
    if case.kind is Kind.MUST_FIX:
        return verdict(*_fixed(record, result.settings, unchanged))
    if record.restored:
        passed, message = _fixed(record, result.settings, unchanged)
        assert reference is not None  # a case is restored only against a baseline
        was = f"gap {num(result.gaps_before.get(case.id))} before repair"
        return verdict(passed, f"restored: a regression against the baseline {reference.model_dir} ({was}); {message}")
    passed, message = CERT2.verdict(
        record, result.settings, label=suite.label_name(case.label), gap_before=result.gaps_before.get(case.id)
    )
    return verdict(passed, message + unchanged)


def _properties(suite: SuiteFacts, case: Case, result: RepairResult, record: CaseCertificate | None) -> dict[str, Any]:
    """The case's numbers for reports and JUnit: its certificate's, or the repair's gaps where it has none."""
    label, gap_before = suite.label_name(case.label), result.gaps_before.get(case.id)
    if record is None:
        return CaseNumbers(label=label, gap_before=gap_before, gap_after=result.gaps_after.get(case.id)).properties()
    return CaseNumbers.of(record, label=label, gap_before=gap_before).properties()


def _excluded(suite: SuiteFacts, case: Case, result: RepairResult, reference: Reference | None) -> str:
    after = f"; after repair its gap is {num(result.gaps_after.get(case.id))}" if result.repaired else ""
    wrong = (
        f"the original model already got this must_keep case wrong (gap {num(result.gaps_before.get(case.id))} "
        f"before repair, labelled {named(suite.label_name(case.label))})"
    )
    if not result.settings.restore_regressions:
        return (
            f"{wrong}, and [repair] restore_regressions = false, so it was left out of the repair's constraints"
            f"{after}. Set restore_regressions = true to have it repaired back where the baseline got it right"
        )
    if reference is not None:
        return (
            f"{wrong}, and so did the baseline {reference.model_dir}: not a regression, so it was left out of "
            f"the repair's constraints{after}. Check its label, or move it to a must_fix file to have it repaired"
        )
    return (
        f"{wrong}, and no baseline says whether it is a regression, so it was left out of the repair's "
        f"constraints{after}. {HOW_TO_RESTORE}; otherwise check its label, or move it to a must_fix file"
    )


def _not_repaired(case: Case, result: RepairResult, miss: Miss | None, flags: Mapping[str, str]) -> str:
    status = result.status.value
    margin = "γ_s" if case.kind is Kind.MUST_FIX else "γ_h"
    if miss is not None:
        return (
            f"repair failed ({status}), nothing was written: this {case.kind.value} case's gap "
            f"{num(miss.gap)} misses its margin {margin} = {miss.needs} by {num(miss.short_by)}; "
            + advice.for_failed_case(result.settings, case.kind.value, status, flags)
        )
    return (
        f"repair failed ({status}), nothing was written: {result.message}. This case met its margin "
        f"{margin} at the last iterate (gap {num(result.gaps_after.get(case.id))}), but there is no repaired "
        "model to check"
    )


def _fixed(record: CaseCertificate, settings: RepairSettings, unchanged: str) -> tuple[bool, str]:
    """Cert 1 and Cert 3 of a must_fix case: the words of those that fail, or of both."""
    said = (CERT1.verdict(record, settings), CERT3.verdict(record))
    problems = [words for holds, words in said if not holds]
    if problems:
        return False, "; ".join(problems) + unchanged
    return True, "; ".join(words for _, words in said) + unchanged
