"""Cert 3: no perturbation of v within a must_fix case's certified radius changes its prediction
(ε* = gap / 2L, paper Thm 3, or the tighter local radius), and the v-space attack finds no flip
inside it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from warp_check.cases import Kind
from warp_check.certificates.base import Cert, CertNumbers
from warp_check.certificates.words import num
from warp_check.certify.certificate import CaseCertificate
from warp_check.certify.measured import Bars, CaseGaps, Measured
from warp_check.repair.settings import RepairSettings


@dataclass(frozen=True, kw_only=True)
class RadiusNumbers(CertNumbers):
    """A fixed case's radii: how far in v its fix holds, and what the attacks found."""

    JUNIT: ClassVar[tuple[str, ...]] = ("radius", "eps_star", "eps_local")

    eps_star: float | None
    eps_local: float | None
    radius: float | None  # the certified one: the larger of ε* and the local radius
    attack_min_gap: float | None  # the smallest gap the attack found inside the certified ball
    flip_radius: float | None  # the smallest flipping radius the min-norm attack found


class RobustnessRadius(Cert):
    name = "cert3"
    title = "Cert 3"
    claim = "no perturbation of v within a must_fix case's certified radius changes its prediction"
    further = False
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.MUST_FIX})
    numbers_type = RadiusNumbers

    def measure_cases(self, gaps: CaseGaps, bars: Bars) -> Measured:
        # Loaded here, not with the module: front ends read this module for its words alone.
        import numpy as np

        from warp_check.certify.bounds import eps_star, local_radius
        from warp_check.certify.falsify import flip_radius, pgd_worst_gap

        fix = gaps.fix
        eps_s = eps_star(gaps.gaps, gaps.lipschitz.L)
        eps_l = np.zeros_like(gaps.gaps)
        worst = np.full_like(gaps.gaps, np.nan)
        flips = np.full_like(gaps.gaps, np.nan)
        if fix.any():
            head, labels = gaps.head, gaps.labels[fix]
            V_fix = np.asarray(gaps.V[fix], dtype=np.float64)
            eps_l[fix] = local_radius(head, V_fix, labels)
            radius = np.maximum(eps_s[fix], eps_l[fix])
            worst[fix] = pgd_worst_gap(head, V_fix, labels, radius, bars.attack)
            flips[fix] = flip_radius(head, V_fix, labels, bars.attack)
        return Measured(
            rows=fix,
            columns={
                "cert3": (eps_s > 0) & (worst > 0),
                "eps_star": eps_s,
                "eps_local": eps_l,
                "attack_min_gap": worst,
                "flip_radius": flips,
            },
        )

    def numbers(self, record: CaseCertificate) -> RadiusNumbers | None:
        if record.eps_star is None and record.eps_local is None:
            return None
        return RadiusNumbers(
            eps_star=record.eps_star,
            eps_local=record.eps_local,
            radius=record.certified_radius,
            attack_min_gap=record.attack_min_gap,
            flip_radius=record.flip_radius,
        )

    def verdict(self, record: CaseCertificate) -> tuple[bool, str]:
        """Whether it holds for the must_fix case, and its words."""
        if record.cert3:
            return True, (
                f"Cert 3: no flip within radius {num(record.certified_radius)} (ε* {num(record.eps_star)}, "
                f"local {num(record.eps_local)}; attack's smallest gap {num(record.attack_min_gap)})"
            )
        if not (record.eps_star or 0) > 0:
            return False, f"Cert 3 fails: the certified radius ε* = {num(record.eps_star)} is not positive"
        return False, (
            f"Cert 3 fails: the v-space attack found gap {num(record.attack_min_gap)} ≤ 0 inside the "
            f"certified ball of radius {num(record.certified_radius)}"
        )

    def audit_target(self, settings: RepairSettings) -> str:
        return "no flip inside the certified ball"


CERT3 = RobustnessRadius()

__all__ = ["CERT3", "RadiusNumbers", "RobustnessRadius"]
