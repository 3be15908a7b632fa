"""``verify --chain``: a repaired model's whole history, re-checked link by link.

Each certificate names the model it was repaired from (:class:`ParentRecord`: its weights'
hashes and, where it was itself a repaired model, its certificate's SHA-256). Following
``model.source`` back, every repaired model is verified from scratch (:func:`verify`), every
parent folder must hold the weights and the certificate its child names, until the first,
unrepaired model of the chain.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from warp_check.cache.fingerprint import file_sha256
from warp_check.certify.artefact import folder_hashes
from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.certify.verify import Check, Verification, verify

MAX_LINKS = 1000  # a chain longer than this is a loop in the folders' sources


@dataclass(frozen=True)
class Link:
    """One model of the chain: its verification (None for the first, unrepaired model) and the
    checks that tie it to its parent."""

    model_dir: Path
    verification: Verification | None
    checks: tuple[Check, ...] = ()

    @property
    def ok(self) -> bool:
        return (self.verification is None or self.verification.ok) and all(c.ok for c in self.checks)


@dataclass(frozen=True)
class ChainVerification:
    links: tuple[Link, ...]  # the newest model first, the first model of the chain last

    @property
    def ok(self) -> bool:
        return all(link.ok for link in self.links)

    @property
    def root(self) -> Path:
        return self.links[-1].model_dir


def verify_chain(model_dir: str | Path, *, cache_dir: str | Path | None = None) -> ChainVerification:
    links: list[Link] = []
    folder = Path(model_dir)
    seen: set[Path] = set()
    while len(links) < MAX_LINKS:
        verification = verify(folder, cache_dir=cache_dir)
        seen.add(folder.resolve())
        certificate = verification.certificate
        parent = certificate.parent
        if parent is None:
            why = "the certificate names no parent (written before warp-check recorded chains): the chain stops here"
            links.append(Link(folder, verification, (Check("parent", False, why),)))
            break
        source = Path(certificate.model.source) if certificate.model.source else None
        if source is None or not source.is_dir():
            why = f"the model it was repaired from, {str(source)!r}, is not there: the chain cannot be followed"
            links.append(Link(folder, verification, (Check("parent_folder", False, why),)))
            break
        layer, frozen = folder_hashes(source, certificate.model.repair_layer)
        same = (layer, frozen) == (parent.sha256_repair_layer, parent.sha256_frozen)
        checks = [
            Check(
                "parent_weights",
                same,
                f"{source} holds the weights this model was repaired from"
                if same
                else f"{source} does not hold the weights this model was repaired from (hashes differ)",
            )
        ]
        parent_certificate = source / CERTIFICATE_NAME
        if parent.certificate_sha256 is None:  # repaired from an unrepaired model: the first of the chain
            unchanged = not parent_certificate.is_file()
            checks.append(
                Check(
                    "parent_certificate",
                    unchanged,
                    f"{source} is the first model of the chain (no certificate)"
                    if unchanged
                    else f"{source} holds a certificate now, but had none when this model was repaired from it",
                )
            )
            links += [Link(folder, verification, tuple(checks)), Link(source, None)]
            break
        matches = parent_certificate.is_file() and file_sha256(parent_certificate) == parent.certificate_sha256
        checks.append(
            Check(
                "parent_certificate",
                matches,
                f"{parent_certificate} is the certificate this model's names "
                f"(SHA-256 {parent.certificate_sha256[:12]}…)"
                if matches
                else f"{parent_certificate} is not the certificate this model's names (SHA-256 differs or it is gone)",
            )
        )
        links.append(Link(folder, verification, tuple(checks)))
        if not matches or source.resolve() in seen:
            break
        folder = source
    return ChainVerification(tuple(links))


__all__ = ["ChainVerification", "Link", "verify_chain"]
