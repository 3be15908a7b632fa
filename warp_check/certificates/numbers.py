"""What a case's verdict carries on a repaired (or audited, or certified) model: its label, its gap
before and after the repair, and each certificate's figures (:data:`~warp_check.certificates.CERTIFICATES`).

A :class:`CaseNumbers` becomes the verdict's properties (report columns and JUnit properties, by
name) through :meth:`CaseNumbers.properties`; :func:`certified_junit` says which of them a JUnit
record carries, in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from warp_check.certificates import CERTIFICATES
from warp_check.certificates.base import CertNumbers
from warp_check.certify.certificate import CaseCertificate


@dataclass(frozen=True, kw_only=True)
class CaseNumbers:
    """One case's figures: ``label`` (its name, where the suite gives one), the gaps, and each
    certificate's own (``certs``, in the table's order); ``restored``: a regression repaired back."""

    label: str | int
    gap_before: float | None
    gap_after: float | None
    certs: tuple[CertNumbers, ...] = ()
    # The further certificates' verdicts on the case, by name (Cert 1–3's are the gaps and radii).
    verdicts: tuple[tuple[str, bool | None], ...] = ()
    restored: bool = False

    @classmethod
    def of(cls, record: CaseCertificate, *, label: str | int, gap_before: float | None = None) -> CaseNumbers:
        """The figures of a case's certificate (``gap_before``: the repair's own, where it differs)."""
        figures = (cert.numbers(record) for cert in CERTIFICATES)
        return cls(
            label=label,
            gap_before=record.gap_before if gap_before is None else gap_before,
            gap_after=record.gap_after,
            certs=tuple(f for f in figures if f is not None),
            verdicts=tuple((claim.name, claim.holds) for claim in record.further),
            restored=record.restored,
        )

    def properties(self) -> dict[str, Any]:
        """The verdict's properties: ``gap`` is the gap after, ``restored`` shown only where true."""
        out: dict[str, Any] = {
            "label": self.label,
            "gap_before": self.gap_before,
            "gap_after": self.gap_after,
            "gap": self.gap_after,
        }
        out |= dict(self.verdicts)
        for figures in self.certs:
            out |= figures.properties()
        return out | ({"restored": True} if self.restored else {})


def certified_junit() -> tuple[str, ...]:
    """The JUnit properties of a certified case's record, in order: its kind, label and gaps, then
    each certificate's, then whether it was restored."""
    return ("kind", "label", "gap", "gap_before", "gap_after", *(n for c in CERTIFICATES for n in c.junit), "restored")


__all__ = ["CaseNumbers", "certified_junit"]
