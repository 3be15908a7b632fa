"""Audit mode: a certificate's claims recomputed on a model folder, for the suite's cases."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from warp_check.cases import NEIGHBOUR, Case, Kind
from warp_check.certificates.numbers import CaseNumbers
from warp_check.certificates.traffic import verdicts as cert4
from warp_check.certificates.traffic.sample import TrafficSample
from warp_check.certificates.verify import Check, Verification, verify
from warp_check.certify.certificate import CaseRecord
from warp_check.certify.falsify import AttackSettings
from warp_check.progress import Progress
from warp_check.runs.details import AuditDetails
from warp_check.runs.messages import num
from warp_check.runs.modes import Mode, RunStatus
from warp_check.runs.result import RunResult, TrafficVerdict, Verdict
from warp_check.suite.loader import Suite


def audit(
    suite: Suite,
    model_dir: str | Path,
    certificate: str | Path,
    *,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = False,
    attack: AttackSettings | None = None,
    traffic: TrafficSample | None = None,
) -> RunResult:
    """Recompute a certificate's claims on ``model_dir`` (hashes, gaps, radii) for the suite's cases;
    with ``traffic``, Cert 4 too (the run's traffic verdict)."""
    verification = verify(
        model_dir,
        certificate,
        batch_size=suite.model.batch_size,
        cache_dir=cache_dir,
        attack=attack,
        progress=progress,
        traffic=traffic,
    )
    claims = {c.id: c for c in verification.certificate.cases}
    failures = [c.detail for c in verification.checks if c.case_id is None and not c.ok]  # the whole model's
    checks: dict[str | None, list[Check]] = {}
    for check in verification.checks:
        checks.setdefault(check.case_id, []).append(check)
    verdicts = tuple(
        _verdict(suite, case, claims.get(case.id), checks.get(case.id, []), failures, Path(certificate).name)
        for case in suite.cases
        if case.kind is not Kind.AUX
    )
    ok = not failures
    message = (
        f"certificate checked on {model_dir}: {len(verification.checks)} checks, {len(verification.failures())} failed"
        if ok
        else "certificate does not hold: " + "; ".join(failures)
    )
    return RunResult(
        suite=str(suite.toml),
        name=suite.name,
        mode=Mode.AUDIT,
        ok=ok,
        status=RunStatus.VERIFIED if verification.holds else RunStatus.FAILED,  # a case left out: its verdict fails
        message=message,
        verdicts=verdicts,
        details=_details(suite, model_dir, certificate, verification, traffic),
        traffic=_traffic_verdict(verification, traffic) if traffic is not None else None,
    )


def _traffic_verdict(verification: Verification, traffic: TrafficSample) -> TrafficVerdict:
    """Cert 4 on the audited model: every traffic check held, or what did not."""
    record = verification.traffic_record
    figures = {} if record is None else cert4.properties(cert4.traffic_note(record, traffic))
    passed, words = cert4.audited([c.detail for c in verification.traffic if not c.ok], record)
    return TrafficVerdict(passed=passed, message=words, properties=figures)


def _details(
    suite: Suite,
    model_dir: str | Path,
    certificate: str | Path,
    verification: Verification,
    traffic: TrafficSample | None,
) -> AuditDetails:
    certified = verification.certificate
    record = verification.traffic_record
    suite_ids = {c.id for c in suite.cases}
    return AuditDetails.of(
        suite,
        model=str(Path(model_dir).resolve()),
        certificate=str(Path(certificate).resolve()),
        checks=len(verification.checks),
        failed_checks=tuple(c.detail for c in verification.checks if not c.ok),
        not_in_suite=tuple(sorted({c.id for c in certified.cases if c.source != NEIGHBOUR} - suite_ids)),
        neighbours=sum(c.source == NEIGHBOUR for c in certified.cases),
        gamma_s=certified.settings.gamma_s,
        gamma_h=certified.settings.gamma_h,
        traffic=cert4.traffic_note(record, traffic, suite.labels, decision=suite.decision.name)
        if record is not None and traffic is not None
        else None,
    )


def _verdict(
    suite: Suite,
    case: Case,
    claim: CaseRecord | None,
    checks: Sequence[Check],
    failures: Sequence[str],
    certificate_name: str,
) -> Verdict:
    """The case's verdict: every check of the model and of its claim held, and the claim is about this case."""
    if claim is None:
        message = f"case {case.id!r} is not in the certificate {certificate_name}: nothing certifies it"
        return Verdict.of(case, passed=False, message=message)
    properties = CaseNumbers.of(claim, label=suite.label_name(case.label)).properties()
    problems = [*failures, *_differences(case, claim), *(c.detail for c in checks if not c.ok)]
    if claim.excluded:
        problems.append("the certificate left this must_keep case out (the original model got it wrong)")
    if problems:
        message = "certificate does not hold: " + "; ".join(problems)
    else:
        held = ", ".join(c.name for c in checks)
        message = f"certificate holds on this model ({held}); gap {num(claim.gap_after)}"
        if claim.restored:
            message += " (a regression the repair restored)"
    return Verdict.of(case, passed=not problems, message=message, properties=properties)


def _differences(case: Case, claim: CaseRecord) -> list[str]:
    """The suite's case against the certified one: a certificate about another text certifies nothing here."""
    differs = [
        name
        for name, ours, theirs in (
            ("text", case.text, claim.text),
            ("text_pair", case.text_pair, claim.text_pair),
            ("label", case.label, claim.label),
            ("kind", case.kind, claim.kind),
        )
        if ours != theirs
    ]
    return [f"the suite's case differs from the certified one in {', '.join(differs)}"] if differs else []
