"""A toy Cert 5, the whole of it: every must_keep case keeps at least half its gap through the repair
(its gap after ≥ half its gap before, both in float64 from the weights). Registering it is one line:
``warp_check.certificates.register(HALF_GAP)``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from warp_check.cases import Kind
from warp_check.certificates import Cert, CertNumbers
from warp_check.certify.certificate import CaseCertificate
from warp_check.repair.settings import RepairSettings


@dataclass(frozen=True, kw_only=True)
class HalfGapNumbers(CertNumbers):
    gap_share: float | None  # its gap after over its gap before


class HalfGapKept(Cert):
    name = "half_gap"
    title = "Cert 5"
    claim = "every must_keep case keeps at least half its gap"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.MUST_KEEP})
    numbers_type = HalfGapNumbers

    def measure(self, record: CaseCertificate, settings: RepairSettings) -> tuple[bool, HalfGapNumbers] | None:
        if record.kind is not Kind.MUST_KEEP or record.excluded or record.restored or record.gap_before <= 0:
            return None
        holds = record.gap_after >= 0.5 * record.gap_before
        return holds, HalfGapNumbers(gap_share=record.gap_after / record.gap_before)


HALF_GAP = HalfGapKept()
