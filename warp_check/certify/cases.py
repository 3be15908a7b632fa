"""Cert 1–3 of every case, recomputed from the repaired weights in float64 and the cached v.

Cert 1: a must_fix case's gap ≥ γ_s (and a restored must_keep case's: one the input model got
wrong and the suite's baseline right, repaired back as a must_fix case is). Cert 2: a must_keep
case's gap ≥ γ_h with its label kept.
Cert 3: no perturbation of v within the certified radius flips a must_fix case, and an attack
inside that ball finds none. Radii live in the space of v, not of texts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from warp_check.cases import Kind
from warp_check.certify.bounds import eps_star, lipschitz, local_radius
from warp_check.certify.certificate import CaseCertificate, Lipschitz, Summary
from warp_check.certify.falsify import AttackSettings, flip_radius, pgd_worst_gap
from warp_check.model.blocks import blocks
from warp_check.model.head import DenseHead


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
) -> tuple[list[CaseCertificate], Lipschitz]:
    """Cert 1–3 for every case from ``head`` (the repaired weights) in float64; ``restored`` must_keep
    cases are certified as must_fix cases (Cert 1 and 3), their kind kept."""
    labels = np.asarray(labels)  # the answers, a row per case, as head.decision holds them
    kinds = tuple(Kind(k) for k in kinds)
    gaps, stored = gaps_in_both(head, V, labels)
    lip = lipschitz(head)
    back = [k is Kind.MUST_KEEP and case_id in restored for k, case_id in zip(kinds, ids, strict=True)]
    fix = np.array([k is Kind.MUST_FIX or again for k, again in zip(kinds, back, strict=True)], dtype=bool)
    eps_s = eps_star(gaps, lip.L)
    eps_l = np.zeros_like(gaps)
    worst = np.full_like(gaps, np.nan)
    flips = np.full_like(gaps, np.nan)
    if fix.any():
        V_fix = np.asarray(V[fix], dtype=np.float64)
        eps_l[fix] = local_radius(head, V_fix, labels[fix])
        radius = np.maximum(eps_s[fix], eps_l[fix])
        worst[fix] = pgd_worst_gap(head, V_fix, labels[fix], radius, attack)
        flips[fix] = flip_radius(head, V_fix, labels[fix], attack)
    out = []
    for i, case_id in enumerate(ids):
        kind = kinds[i]
        common = dict(
            id=case_id,
            kind=kind,
            label=head.decision.answer(labels, i),
            gap_before=float(gaps_before[i]),
            gap_after=float(gaps[i]),
            gap_as_saved=float(stored[i]),
        )
        held = min(gaps[i], stored[i])
        if fix[i]:
            ok3 = bool(eps_s[i] > 0 and worst[i] > 0)
            out.append(
                CaseCertificate(
                    **common,
                    restored=back[i],
                    cert1=bool(held >= gamma_s),
                    cert3=ok3,
                    eps_star=float(eps_s[i]),
                    eps_local=float(eps_l[i]),
                    attack_min_gap=float(worst[i]),
                    flip_radius=float(flips[i]),
                )
            )
        elif kind is Kind.MUST_KEEP:
            if case_id in excluded:
                out.append(CaseCertificate(**common, excluded=True))
            else:
                kept = bool(held >= gamma_h and gaps_before[i] > 0)
                out.append(CaseCertificate(**common, cert2=kept))
        else:
            out.append(CaseCertificate(**common))
    return out, lip


def gaps_in_both(head: DenseHead, V: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every case's gap in float64 and in the saved model's own arithmetic (its dtype: a margin must
    hold there too), a block of cases at a time: a million must_keep cases' v are read from float32
    (memory-mapped where they lie on disk), never as one float64 copy."""
    gaps, stored = np.empty(len(labels)), np.empty(len(labels))
    for rows in blocks(len(labels)):
        block = np.asarray(V[rows], dtype=np.float64)
        gaps[rows] = head.gaps(block, labels[rows])[0]
        stored[rows] = head.gaps_as_stored(block, labels[rows])
    return gaps, stored


def summarise(records: Sequence[CaseCertificate]) -> dict[str, str]:
    """Cert 1/2/3 as 'held/total', as JSON (the certificate's ``summary``)."""
    return Summary.of(records).to_json()
