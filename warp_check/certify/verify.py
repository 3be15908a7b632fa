"""Re-check a certificate against a model folder from scratch: hashes, gaps, radii.

Nothing is taken from the certificate but its claims and the texts to run: the weights
are hashed from the files, v is recomputed by the encoder, gaps and radii are recomputed
in float64, and every claimed certificate must hold on what is there now.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from warp_check.cases import Case
from warp_check.certify.artefact import CERTIFICATE_NAME, folder_hashes, read_certificate
from warp_check.certify.bounds import lipschitz
from warp_check.certify.cases import certify_cases, summarise
from warp_check.certify.falsify import AttackSettings
from warp_check.errors import CertificateError
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.encode import encode_cases
from warp_check.model.specs import HeadSpec

GAP_TOLERANCE = 1e-4  # re-encoding in another process may differ in the last float32 bits
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
    certificate: dict
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
    progress: bool = False,
) -> Verification:
    model_dir = Path(model_dir)
    cert_path = Path(certificate) if certificate is not None else model_dir / CERTIFICATE_NAME
    data = read_certificate(cert_path)
    m = data["model"]
    checks: list[Check] = []
    layer_hash, frozen_hash = folder_hashes(model_dir, m["repair_layer"])
    checks.append(
        Check(
            "sha256_repair_layer",
            layer_hash == m["sha256_repair_layer"],
            "repair layer weights match the certificate"
            if layer_hash == m["sha256_repair_layer"]
            else f"repair layer '{m['repair_layer']}' differs from the certified weights "
            f"(hash {layer_hash[:12]}… ≠ {m['sha256_repair_layer'][:12]}…)",
        )
    )
    checks.append(
        Check(
            "sha256_frozen",
            frozen_hash == m["sha256_frozen"],
            "every other parameter matches the certificate"
            if frozen_hash == m["sha256_frozen"]
            else f"parameters outside '{m['repair_layer']}' differ from the certified model "
            f"(hash {frozen_hash[:12]}… ≠ {m['sha256_frozen'][:12]}…): the model was changed after repair",
        )
    )
    spec = HeadSpec(repair_layer=m["repair_layer"], activation=m["activation"], classifier=m["classifier"])
    adapter = ClassifierAdapter.from_pretrained(model_dir, layer=spec, max_length=int(m.get("max_length") or 128))
    settings = data["settings"]
    try:
        gamma_s, gamma_h = float(settings["gamma_s"]), float(settings["gamma_h"])
        cases = [
            Case(id=c["id"], text=c["text"], text_pair=c.get("text_pair"), label=int(c["label"]), kind=c["kind"])
            for c in data["cases"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise CertificateError(f"{cert_path}: malformed settings or cases ({exc})") from None
    encoded = encode_cases(adapter, cases, batch_size=batch_size, cache_dir=cache_dir, progress=progress, check=True)
    head = adapter.head()
    records, lip = certify_cases(
        head,
        ids=tuple(c.id for c in cases),
        kinds=tuple(c.kind.value for c in cases),
        V=encoded.V.astype(np.float64),
        labels=np.array([c.label for c in cases]),
        gaps_before=np.array([float(c.get("gap_before", np.nan)) for c in data["cases"]]),
        gamma_s=gamma_s,
        gamma_h=gamma_h,
        excluded=frozenset(c["id"] for c in data["cases"] if c.get("excluded")),
        attack=attack,
    )
    claimed_L = float(data["lipschitz"]["L"])
    checks.append(
        Check(
            "lipschitz",
            abs(lip.L - claimed_L) <= REL_TOLERANCE * max(1.0, claimed_L),
            f"L recomputed {lip.L:.6g}, certificate says {claimed_L:.6g}",
        )
    )
    # The summary is what people read: it must be what the cases, recomputed, give.
    summary = summarise(records)
    checks.append(
        Check(
            "summary",
            data["summary"] == summary,
            f"summary recomputed {summary}, certificate says {data['summary']}",
        )
    )
    for claim, record in zip(data["cases"], records, strict=True):
        cid = record.id
        gap_ok = abs(record.gap_after - float(claim["gap_after"])) <= GAP_TOLERANCE * max(1.0, abs(record.gap_after))
        checks.append(
            Check(
                "gap",
                gap_ok,
                f"gap recomputed {record.gap_after:.6g}, certificate says {float(claim['gap_after']):.6g}",
                cid,
            )
        )
        for name in ("cert1", "cert2", "cert3"):
            if claim.get(name):
                holds = bool(getattr(record, name))
                target = {
                    "cert1": f"gap ≥ γ_s = {gamma_s:g}",
                    "cert2": f"gap ≥ γ_h = {gamma_h:g} with the label kept",
                    "cert3": "no flip inside the certified ball",
                }[name]
                checks.append(
                    Check(
                        name,
                        holds,
                        f"{name}: {target}: {'holds' if holds else 'FAILS'} (gap {record.gap_after:.6g})",
                        cid,
                    )
                )
        if claim.get("eps_star") is not None and record.eps_star is not None:
            ok = record.eps_star >= float(claim["eps_star"]) * (1 - 1e-6) - 1e-12
            checks.append(
                Check(
                    "eps_star",
                    ok,
                    f"ε* recomputed {record.eps_star:.6g}, certificate claims {float(claim['eps_star']):.6g}",
                    cid,
                )
            )
    return Verification(model_dir, data, tuple(checks))


__all__ = ["Check", "Verification", "verify", "lipschitz"]
