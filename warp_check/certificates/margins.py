"""Cert 1: every must_fix case's gap on the saved weights is at least γ_s."""

from __future__ import annotations

from typing import ClassVar

from warp_check.cases import Kind
from warp_check.certificates.base import Cert
from warp_check.certificates.words import num
from warp_check.certify.certificate import CaseCertificate
from warp_check.certify.measured import Bars, CaseGaps, Measured
from warp_check.repair.settings import RepairSettings


class MustFixMargins(Cert):
    name = "cert1"
    title = "Cert 1"
    claim = "every must_fix case's gap is at least γ_s on the saved weights"
    further = False
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.MUST_FIX})

    def measure_cases(self, gaps: CaseGaps, bars: Bars) -> Measured:
        return Measured(rows=gaps.fix, columns={"cert1": gaps.held >= bars.gamma_s})

    def verdict(self, record: CaseCertificate, settings: RepairSettings) -> tuple[bool, str]:
        """Whether it holds for the must_fix case, and its words."""
        if not record.cert1:
            return False, (
                f"Cert 1 fails: gap {num(record.held_gap)} < γ_s = {num(settings.gamma_s)} "
                f"(short by {num(settings.gamma_s - record.held_gap)}; float64 {num(record.gap_after)}, "
                f"as saved {num(record.gap_as_saved)})"
            )
        return True, f"Cert 1: gap {num(record.gap_after)} ≥ γ_s = {num(settings.gamma_s)}"

    def audit_target(self, settings: RepairSettings) -> str:
        return f"gap ≥ γ_s = {settings.gamma_s:g}"


CERT1 = MustFixMargins()

__all__ = ["CERT1", "MustFixMargins"]
