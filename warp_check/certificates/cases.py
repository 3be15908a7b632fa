"""Every case's certificates, recomputed from the repaired weights in float64 and the cached v:
the gaps every certificate reads (:func:`~warp_check.certify.cases.measure_gaps`), then each
registered certificate's own measure of all the cases at once (Cert 1–3 in their modules)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from warp_check.cases import Kind
from warp_check.certificates import CERTIFICATES
from warp_check.certify.cases import case_records, measure_gaps
from warp_check.certify.certificate import CaseCertificate, Lipschitz
from warp_check.certify.falsify import AttackSettings
from warp_check.certify.measured import Bars
from warp_check.model.head import DenseHead
from warp_check.repair.settings import KeepMargin


def certify_cases(
    head: DenseHead,
    *,
    ids: tuple[str, ...],
    kinds: Sequence[Kind],
    V: np.ndarray,
    labels: np.ndarray,
    gaps_before: np.ndarray,
    gamma_s: float,
    gamma_h: float,
    excluded: frozenset[str] = frozenset(),
    restored: frozenset[str] = frozenset(),
    attack: AttackSettings | None = None,
    keep_margin: KeepMargin = KeepMargin.GAMMA_H,
) -> tuple[list[CaseCertificate], Lipschitz]:
    """Cert 1–3 (every certificate kept in the case records' own keys) for every case from ``head``
    (the repaired weights) in float64; ``restored`` must_keep cases are certified as must_fix cases
    (Cert 1 and 3), their kind kept; ``excluded`` must_keep cases are recorded as left out;
    ``keep_margin``: the bar a must_keep case is held to (γ_h, or its own gap before up to γ_h)."""
    gaps = measure_gaps(
        head, ids=ids, kinds=kinds, V=V, labels=labels, gaps_before=gaps_before, excluded=excluded, restored=restored
    )
    bars = Bars(gamma_s=gamma_s, gamma_h=gamma_h, attack=attack, keep_margin=keep_margin)
    measured = [m for cert in CERTIFICATES if (m := cert.measure_cases(gaps, bars)) is not None]
    return case_records(gaps, measured), gaps.lipschitz


__all__ = ["certify_cases"]
