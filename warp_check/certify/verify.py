"""Re-check a certificate against a model folder from scratch: hashes, gaps, radii.

Nothing is taken from the certificate but its claims and the texts to run: the weights
are hashed from the files, v is recomputed by the encoder, gaps and radii are recomputed
in float64, and every claimed certificate must hold on what is there now.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from warp_check.cases import NEIGHBOUR, Case
from warp_check.certify.artefact import folder_weights
from warp_check.certify.bounds import lipschitz
from warp_check.certify.cases import certify_cases
from warp_check.certify.certificate import (
    CERTIFICATE_NAME,
    CaseCertificate,
    CaseRecord,
    Certificate,
    ModelRecord,
    Summary,
    read_json,
)
from warp_check.certify.falsify import AttackSettings
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.encode import encode_cases
from warp_check.model.hashing import parameter_hashes
from warp_check.model.head import DenseHead
from warp_check.model.specs import HeadSpec
from warp_check.progress import Progress

# How far a recomputed gap may sit from the certificate's: v encoded on another device (a GPU's
# differs from the CPU's by ~1e-6 relative) or in another process moves gaps by up to ~1e-4; the
# QP aims 1e-3 above every margin, so a difference inside this cannot turn a certified case. The
# guarantees themselves (Cert 1–3) are checked on the recomputed values, and the weights by hash.
# A half-precision upstream rounds v to ~3 digits, and another device's kernels round it apart:
# there a gap may move by more (gap_tolerances).
GAP_TOLERANCE = 1e-3
REL_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    case_id: str | None = None


@dataclass(frozen=True)
class Verification:
    model_dir: Path
    certificate: Certificate
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

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
) -> Verification:
    model_dir = Path(model_dir)
    cert_path = Path(certificate) if certificate is not None else model_dir / CERTIFICATE_NAME
    data = read_json(cert_path)
    # The weights before the claims: a folder without safetensors weights is refused as such.
    weights = folder_weights(model_dir)
    claimed = Certificate.from_json(data, path=cert_path)
    m = claimed.model
    checks = _hash_checks(weights, m)
    spec = HeadSpec(repair_layer=m.repair_layer, activation=m.activation, classifier=m.classifier)
    adapter = ClassifierAdapter.from_pretrained(model_dir, layer=spec, max_length=m.max_length)
    cases = [claim.case() for claim in claimed.cases]
    labels = np.array([c.label for c in cases])
    # Encoded as the repair encoded them: the suite's cases, then its neighbourhood's apart.
    V = np.zeros((len(cases), adapter.repair_layer.in_features), dtype=np.float32)
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
        V=V.astype(np.float64),
        labels=labels,
        gaps_before=np.array([claim.gap_before for claim in claimed.cases]),
        gamma_s=claimed.settings.gamma_s,
        gamma_h=claimed.settings.gamma_h,
        excluded=frozenset(claim.id for claim in claimed.cases if claim.excluded),
        attack=attack,
    )
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
    return Verification(model_dir, claimed, tuple(checks))


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
    targets = {
        "cert1": f"gap ≥ γ_s = {settings.gamma_s:g}",
        "cert2": f"gap ≥ γ_h = {settings.gamma_h:g} with the label kept",
        "cert3": "no flip inside the certified ball",
    }
    for name, target in targets.items():
        if getattr(claim, name):
            holds = bool(getattr(record, name))
            checks.append(
                Check(
                    name,
                    holds,
                    f"{name}: {target}: {'holds' if holds else 'FAILS'} (gap {record.held_gap:.6g})",
                    cid,
                )
            )
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
    return checks


def _groups(cases: list[Case]) -> list[list[int]]:
    """Positions of the suite's own cases, then of the neighbourhood's (each list non-empty)."""
    own = [i for i, c in enumerate(cases) if c.source != NEIGHBOUR]
    drawn = [i for i, c in enumerate(cases) if c.source == NEIGHBOUR]
    return [rows for rows in (own, drawn) if rows]


__all__ = ["Check", "Verification", "gap_tolerances", "verify", "lipschitz"]
