"""Re-check a certificate against a model folder from scratch: hashes, gaps, radii.

Nothing is taken from the certificate but its claims and the texts to run: the weights
are hashed from the files, v is recomputed by the encoder, gaps and radii are recomputed
in float64, and every claimed certificate must hold on what is there now.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from warp_check.cases import NEIGHBOUR, Case
from warp_check.certificates import CERTIFICATES, judged
from warp_check.certificates.cases import certify_cases
from warp_check.certificates.traffic.changes import changes_record, predictions, traffic_inputs
from warp_check.certificates.traffic.sample import TrafficSample
from warp_check.certify.artefact import folder_weights
from warp_check.certify.binomial import change_bound
from warp_check.certify.bounds import lipschitz
from warp_check.certify.certificate import (
    CERTIFICATE_NAME,
    CaseCertificate,
    CaseRecord,
    Certificate,
    ModelRecord,
    Summary,
    TrafficRecord,
    percent,
    read_json,
)
from warp_check.certify.falsify import AttackSettings
from warp_check.decisions import DecisionKind, decision
from warp_check.errors import CertificateError, SuiteError
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.encode import encode_cases
from warp_check.model.hashing import parameter_hashes
from warp_check.model.head import DenseHead
from warp_check.model.specs import recorded_head
from warp_check.progress import Progress

# How far a recomputed gap may sit from the certificate's: v encoded on another device (a GPU's
# differs from the CPU's by ~1e-6 relative) or in another process moves gaps by up to ~1e-4; the
# QP aims 1e-3 above every margin, so a difference inside this cannot turn a certified case. The
# guarantees themselves (Cert 1–3) are checked on the recomputed values, and the weights by hash.
# A half-precision upstream rounds v to ~3 digits, and another device's kernels round it apart:
# there a gap may move by more (gap_tolerances).
GAP_TOLERANCE = 1e-3
REL_TOLERANCE = 1e-6


LEFT_OUT = "left_out"  # the check a case the certificate left out fails
LEFT_OUT_WORDS = (
    "the certificate left this must_keep case out: the input model got it wrong, so nothing certifies it "
    "(repair it back from a baseline, move it to a must_fix file, or check its label)"
)


@dataclass(frozen=True)
class Check:
    """One claim of a certificate, checked (``case_id``: the case it is about, None: the model's)."""

    name: str
    ok: bool
    detail: str
    case_id: str | None = None


@dataclass(frozen=True)
class Verification:
    model_dir: Path
    certificate: Certificate
    checks: tuple[Check, ...] = field(default_factory=tuple)
    # Cert 4's checks, where traffic was given: apart from the cases' and the model's, as a suite's
    # ``traffic`` item is apart from its cases.
    traffic: tuple[Check, ...] = field(default_factory=tuple)
    traffic_record: TrafficRecord | None = None  # Cert 4 as recomputed on this model

    @property
    def ok(self) -> bool:
        """What a gate asks: every claim holds and no case was left out (the audit fails those too)."""
        return all(c.ok for c in self.checks + self.traffic)

    @property
    def holds(self) -> bool:
        """Every claim of the certificate holds (a case it left out claims nothing: see ``left_out``)."""
        return not self.failed_claims()

    def failed_claims(self) -> list[Check]:
        """The certificate's claims that do not hold (not the cases it left out)."""
        return [c for c in self.failures() if c.name != LEFT_OUT]

    @property
    def left_out(self) -> tuple[str, ...]:
        """The must_keep cases the certificate left out: the input model got them wrong."""
        return tuple(c.case_id for c in self.checks if c.name == LEFT_OUT and c.case_id is not None)

    def failures(self) -> list[Check]:
        return [c for c in self.checks + self.traffic if not c.ok]

    def for_case(self, case_id: str) -> list[Check]:
        return [c for c in self.checks if c.case_id == case_id]


def verify(
    model_dir: str | Path,
    certificate: str | Path | None = None,
    *,
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
    attack: AttackSettings | None = None,
    progress: bool | Progress = False,
    traffic: TrafficSample | None = None,
) -> Verification:
    """Every claim of the certificate recomputed on ``model_dir``; with ``traffic``, Cert 4 too: the
    sample must be the one the repair measured (by digest: another is a SuiteError), and the
    repaired model's predictions on it must change exactly the texts the certificate says.
    Every certificate registered (:data:`warp_check.certificates.CERTIFICATES`) is re-checked: a
    further one on the recomputed cases (:func:`warp_check.certificates.judged`); a further claim no
    registered certificate re-checks fails."""
    model_dir = Path(model_dir)
    cert_path = Path(certificate) if certificate is not None else model_dir / CERTIFICATE_NAME
    data = read_json(cert_path)
    # The weights before the claims: a folder without safetensors weights is refused as such.
    weights = folder_weights(model_dir)
    claimed = Certificate.from_json(data, path=cert_path)
    m = claimed.model
    checks = _hash_checks(weights, m)
    spec = recorded_head(repair_layer=m.repair_layer, activation=m.activation, classifier=m.classifier, form=m.form)
    adapter = ClassifierAdapter.from_pretrained(
        model_dir, layer=spec, max_length=m.max_length, decision=_decision_of(m.decision, m.thresholds, cert_path)
    )
    cases = [claim.case() for claim in claimed.cases]
    labels = adapter.decision.answers([c.label for c in cases], adapter.num_classes)
    # Encoded as the repair encoded them: the suite's cases, then its neighbourhood's apart.
    V = np.zeros((len(cases), adapter.width), dtype=np.float32)
    for rows in _groups(cases):
        part = encode_cases(
            adapter, [cases[i] for i in rows], batch_size=batch_size, cache_dir=cache_dir, progress=progress, check=True
        )
        V[rows] = part.V
    head = adapter.head()
    records, lip = certify_cases(
        head,
        ids=tuple(c.id for c in cases),
        kinds=tuple(c.kind for c in cases),
        V=V,  # float32 as encoded: certify_cases reads it in float64 a block at a time
        labels=labels,
        gaps_before=np.array([claim.gap_before for claim in claimed.cases]),
        gamma_s=claimed.settings.gamma_s,
        gamma_h=claimed.settings.gamma_h,
        keep_margin=claimed.settings.keep_margin,
        excluded=frozenset(claim.id for claim in claimed.cases if claim.excluded),
        restored=frozenset(claim.id for claim in claimed.cases if claim.restored),
        attack=attack,
    )
    records = judged(records, claimed.settings)
    claimed_L = claimed.lipschitz.L
    checks.append(
        Check(
            "lipschitz",
            abs(lip.L - claimed_L) <= REL_TOLERANCE * max(1.0, claimed_L),
            f"L recomputed {lip.L:.6g}, certificate says {claimed_L:.6g}",
        )
    )
    # The summary is what people read: it must be what the cases, recomputed, give.
    summary = Summary.of(records)
    checks.append(
        Check(
            "summary",
            claimed.summary == summary,
            f"summary recomputed {summary.to_json()}, certificate says {claimed.summary.to_json()}",
        )
    )
    tolerances = gap_tolerances(head, V, labels)
    devices = (
        ""
        if m.device in (None, adapter.device)
        else f"; v was encoded on {m.device} for the certificate and on {adapter.device} here"
    )
    for claim, record, tolerance in zip(claimed.cases, records, tolerances, strict=True):
        checks += _case_checks(claim, record, claimed, float(tolerance), devices)
    if traffic is None:
        return Verification(model_dir, claimed, tuple(checks))
    traffic_checks, recomputed = _traffic_checks(adapter, head, claimed, cases, traffic, batch_size, cache_dir)
    return Verification(model_dir, claimed, tuple(checks), traffic_checks, recomputed)


def _decision_of(name: str, thresholds: dict[str, float] | None, cert_path: Path) -> DecisionKind:
    """The kind of decision a certificate's claims are of, with the thresholds it decided by; one this
    process has not registered is refused."""
    try:
        kind = decision(name)
    except ValueError as exc:
        raise CertificateError(f"{cert_path}: model.{exc}: register it before the audit") from None
    if not thresholds:
        return kind
    try:
        return kind.bound({int(k): float(v) for k, v in thresholds.items()})
    except ValueError as exc:
        raise CertificateError(f"{cert_path}: model.thresholds: {exc}") from None


def _traffic_checks(
    adapter: ClassifierAdapter,
    head: DenseHead,
    claimed: Certificate,
    cases: list[Case],
    traffic: TrafficSample,
    batch_size: int,
    cache_dir: str | Path | None,
) -> tuple[tuple[Check, ...], TrafficRecord | None]:
    """Cert 4 recomputed: the saved model's predictions on the certificate's sample, counted against
    the input model's predictions the certificate recorded."""
    claim = claimed.traffic
    if claim is None:
        why = "the certificate has no Cert 4: its repair was given no traffic (repair again with the traffic)"
        return (Check("traffic", False, why),), None
    # The suite's cases at repair time are the certificate's own (the neighbourhood's copies are not cases).
    sample = traffic.excluding(c for c in cases if c.source != NEIGHBOUR)
    if sample.digest != claim.sample_sha256:
        # The same name: most likely the file was edited (rows added, changed or removed) since the repair.
        changed = " (it has changed since the repair)" if Path(sample.source).name == claim.source else ""
        raise SuiteError(
            f"this traffic is not the sample the certificate's Cert 4 was measured on{changed}: SHA-256 of its "
            f"{len(sample.bound):,} texts {sample.digest[:12]}…, the certificate's {claim.sample_sha256[:12]}… of "
            f"{claim.n + claim.no_text:,} texts from {claim.source}; give the traffic file as the repair read it "
            "(Cert 4 is not re-checked on another sample)",
            path=sample.source,
        )
    budget = traffic.max_change if traffic.max_change is not None else claim.max_change
    sample = replace(sample, confidence=claim.confidence, max_change=budget)
    inputs = traffic_inputs(adapter, sample, batch_size=batch_size, cache_dir=cache_dir)
    if len(inputs.texts) != claim.n or len(claim.predicted_before) != len(inputs.V):
        why = f"Cert 4: {len(inputs.texts):,} texts measured here, the certificate measured {claim.n:,}"
        return (Check("traffic_n", False, why),), None
    was = head.decision.decode(claim.predicted_before, head.num_classes)
    recomputed = changes_record(
        sample,
        inputs,
        was,
        predictions(head, inputs.V),
        label_name=adapter.label_name,
        seconds=inputs.seconds,
        decision=head.decision,
    )
    claimed_changed = [c.index for c in claim.changes]
    found_changed = [c.index for c in recomputed.changes]
    same = recomputed.changed == claim.changed and found_changed == claimed_changed
    differ = sorted(set(found_changed) ^ set(claimed_changed))
    shown = ", ".join(f"#{i} {inputs.row_text(i)[:40]!r}" for i in differ[:5])
    checks = [
        Check(
            "traffic_changed",
            same,
            f"Cert 4: {recomputed.changed} of {recomputed.n} predictions changed, as the certificate says"
            if same
            else f"Cert 4: {recomputed.changed} of {recomputed.n} predictions changed on this model, the certificate "
            f"says {claim.changed}; the texts that differ: {shown}",
        )
    ]
    exact = change_bound(claim.changed, claim.n, claim.confidence)
    bound_ok = math.isclose(exact, claim.bound, rel_tol=1e-9, abs_tol=1e-15)
    checks.append(
        Check(
            "traffic_bound",
            bound_ok,
            f"Cert 4: the bound {claim.bound:.6g} is the exact bound of {claim.changed} in {claim.n} at "
            f"{percent(claim.confidence, digits=3)} ({exact:.6g})",
        )
    )
    if budget is not None:
        within = recomputed.bound <= budget
        checks.append(
            Check(
                "traffic_budget",
                within,
                f"Cert 4: the bound {percent(recomputed.bound)} is {'within' if within else 'OVER'} the budget "
                f"max_change = {percent(budget)}",
            )
        )
    return tuple(checks), recomputed


def gap_tolerances(head: DenseHead, V: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per case, how far its recomputed gap may sit from the certificate's: GAP_TOLERANCE (relative
    above 1), or, where more, what v rounded apart by the head's dtype may move it
    (DenseHead.gap_rounding_reach: half precision, encoded on another device)."""
    gaps, _ = head.gaps(V, labels)
    return np.maximum(GAP_TOLERANCE * np.maximum(1.0, np.abs(gaps)), head.gap_rounding_reach(V, labels))


def _hash_checks(weights: dict, claimed: ModelRecord) -> list[Check]:
    """The files' hashes against the certificate's: the repair layer, then every other parameter."""
    repair_layer = claimed.repair_layer
    layer_hash, frozen_hash = parameter_hashes(weights, repair_layer)
    layer_claim, frozen_claim = claimed.sha256_repair_layer or "", claimed.sha256_frozen or ""
    return [
        Check(
            "sha256_repair_layer",
            layer_hash == layer_claim,
            "repair layer weights match the certificate"
            if layer_hash == layer_claim
            else f"repair layer '{repair_layer}' differs from the certified weights "
            f"(hash {layer_hash[:12]}… ≠ {layer_claim[:12]}…)",
        ),
        Check(
            "sha256_frozen",
            frozen_hash == frozen_claim,
            "every other parameter matches the certificate"
            if frozen_hash == frozen_claim
            else f"parameters outside '{repair_layer}' differ from the certified model "
            f"(hash {frozen_hash[:12]}… ≠ {frozen_claim[:12]}…): the model was changed after repair",
        ),
    ]


def _case_checks(
    claim: CaseRecord, record: CaseCertificate, claimed: Certificate, tolerance: float, devices: str
) -> list[Check]:
    """One case's claims (gap, Cert 1–3, ε*) against what the files give now. ``tolerance``: how far
    the gaps may differ (gap_tolerances); ``devices``: where v was encoded, when that differs."""
    cid = record.id
    settings = claimed.settings
    gap_ok = abs(record.gap_after - claim.gap_after) <= tolerance
    checks = [
        Check(
            "gap",
            gap_ok,
            f"gap recomputed {record.gap_after:.6g}, certificate says {claim.gap_after:.6g} "
            f"(they may differ by {tolerance:.3g}{'' if gap_ok else devices})",
            cid,
        )
    ]
    for cert in CERTIFICATES:
        audited = cert.audited(record, settings)
        if audited is not None and getattr(claim, cert.name):
            holds, words = audited
            checks.append(Check(cert.name, holds, words, cid))
    for further in claim.further:
        again = record.claim(further.name)
        said = "holds" if further.holds else "fails"
        if again is None:
            found = "was not re-checked (no certificate of that name is registered here)"
        else:
            found = "holds" if again.holds else "FAILS"
        same = again is not None and again.holds == further.holds
        detail = (
            f"{further.name}: {found}, as the certificate says"
            if same
            else f"{further.name}: {found}; the certificate says it {said}"
        )
        checks.append(Check(further.name, same, detail, cid))
    if claim.eps_star is not None and record.eps_star is not None:
        # ε* = gap / (2L): it may fall short of the claim by what the gap tolerance allows.
        slack = tolerance / (2 * claimed.lipschitz.L)
        ok = record.eps_star >= claim.eps_star - slack
        checks.append(
            Check(
                "eps_star",
                ok,
                f"ε* recomputed {record.eps_star:.6g}, certificate claims {claim.eps_star:.6g}",
                cid,
            )
        )
    if claim.excluded:  # one input, one verdict: the audit and pytest fail such a case too
        checks.append(Check(LEFT_OUT, False, LEFT_OUT_WORDS, cid))
    return checks


def _groups(cases: list[Case]) -> list[list[int]]:
    """Positions of the suite's own cases, then of the neighbourhood's (each list non-empty)."""
    own = [i for i, c in enumerate(cases) if c.source != NEIGHBOUR]
    drawn = [i for i, c in enumerate(cases) if c.source == NEIGHBOUR]
    return [rows for rows in (own, drawn) if rows]


__all__ = ["Check", "Verification", "gap_tolerances", "verify", "lipschitz"]
