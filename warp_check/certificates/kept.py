"""Cert 2: every must_keep case keeps its label with a gap of at least γ_h."""

from __future__ import annotations

from typing import ClassVar

from warp_check.cases import Kind
from warp_check.certificates.base import Cert
from warp_check.certificates.words import named, num
from warp_check.certify.certificate import CaseCertificate
from warp_check.certify.measured import Bars, CaseGaps, Measured
from warp_check.repair.settings import RepairSettings


class MustKeepKept(Cert):
    name = "cert2"
    title = "Cert 2"
    claim = "every must_keep case keeps its label with a gap of at least γ_h"
    further = False
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.MUST_KEEP})

    def measure_cases(self, gaps: CaseGaps, bars: Bars) -> Measured:
        # Kept: right before the repair, and right with a margin of γ_h after it.
        return Measured(rows=gaps.kept, columns={"cert2": (gaps.held >= bars.gamma_h) & (gaps.gaps_before > 0)})

    def verdict(
        self, record: CaseCertificate, settings: RepairSettings, *, label: str | int, gap_before: float | None
    ) -> tuple[bool, str]:
        """Whether it holds for the must_keep case (``label``: its class's name; ``gap_before``: the
        repair's gap before), and its words."""
        if record.cert2:
            return True, (
                f"Cert 2: label {named(label)} kept with gap {num(record.gap_after)} ≥ γ_h = "
                f"{num(settings.gamma_h)} (was {num(gap_before)})"
            )
        if record.held_gap <= 0:
            what = f"the label changed: gap {num(record.held_gap)} ≤ 0 after repair (was {num(gap_before)})"
        else:
            what = (
                f"gap {num(record.held_gap)} < γ_h = {num(settings.gamma_h)} "
                f"(short by {num(settings.gamma_h - record.held_gap)}; as saved {num(record.gap_as_saved)})"
            )
        return False, f"Cert 2 fails: {what}"

    def audit_target(self, settings: RepairSettings) -> str:
        return f"gap ≥ γ_h = {settings.gamma_h:g} with the label kept"


CERT2 = MustKeepKept()

__all__ = ["CERT2", "MustKeepKept"]
