"""Cert 2: every must_keep case keeps its label with a gap of at least its bar: γ_h, or under
``keep_margin = "own"`` its own gap before the repair up to γ_h (never below KEEP_FLOOR), recomputed
here from the gap before and recorded per case (``keep_bar``)."""

from __future__ import annotations

from typing import ClassVar

from warp_check.cases import Kind
from warp_check.certificates.base import Cert
from warp_check.certificates.words import named, num
from warp_check.certify.certificate import CaseCertificate
from warp_check.certify.measured import Bars, CaseGaps, Measured
from warp_check.repair.settings import KeepMargin, RepairSettings


class MustKeepKept(Cert):
    name = "cert2"
    title = "Cert 2"
    claim = "every must_keep case keeps its label with a gap of at least γ_h (or its own gap before, below γ_h)"
    further = False
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.MUST_KEEP})

    def measure_cases(self, gaps: CaseGaps, bars: Bars) -> Measured:
        # Kept: right before the repair, and right with a margin of its bar after it.
        if bars.keep_margin is KeepMargin.GAMMA_H:
            return Measured(rows=gaps.kept, columns={"cert2": (gaps.held >= bars.gamma_h) & (gaps.gaps_before > 0)})
        bar = bars.keep_bars(gaps.gaps_before)
        return Measured(rows=gaps.kept, columns={"cert2": (gaps.held >= bar) & (gaps.gaps_before > 0), "keep_bar": bar})

    def verdict(
        self, record: CaseCertificate, settings: RepairSettings, *, label: str | int, gap_before: float | None
    ) -> tuple[bool, str]:
        """Whether it holds for the must_keep case (``label``: its class's name; ``gap_before``: the
        repair's gap before), and its words."""
        bar = f"γ_h = {num(settings.gamma_h)}" if record.keep_bar is None else _own(record.keep_bar, settings)
        need = settings.gamma_h if record.keep_bar is None else record.keep_bar
        if record.cert2:
            return (
                True,
                f"Cert 2: label {named(label)} kept with gap {num(record.gap_after)} ≥ {bar} (was {num(gap_before)})",
            )
        if record.held_gap <= 0:
            what = f"the label changed: gap {num(record.held_gap)} ≤ 0 after repair (was {num(gap_before)})"
        else:
            what = (
                f"gap {num(record.held_gap)} < {bar} "
                f"(short by {num(need - record.held_gap)}; as saved {num(record.gap_as_saved)})"
            )
        return False, f"Cert 2 fails: {what}"

    def audit_target(self, settings: RepairSettings) -> str:
        if settings.keep_margin is KeepMargin.OWN:
            return f"gap ≥ min(γ_h = {settings.gamma_h:g}, its own gap before) with the label kept"
        return f"gap ≥ γ_h = {settings.gamma_h:g} with the label kept"


def _own(bar: float, settings: RepairSettings) -> str:
    """A case's own bar in words: γ_h where it is held there, else its own margin."""
    return f"γ_h = {num(settings.gamma_h)}" if bar >= settings.gamma_h else f"its own margin {num(bar)} (< γ_h)"


CERT2 = MustKeepKept()

__all__ = ["CERT2", "MustKeepKept"]
