"""Cert 1 and Cert 2 of a benchmark's repair, recomputed in float64 from the repaired weights.

Independent of the loop's own view of its gaps (the project's rule for assertions): must_fix
gaps ≥ γ_s, and must_keep gaps ≥ γ_h with the label unchanged, as "passed/total". The
must_keep cases are read a block at a time, so 100k of them add no n × d_out temporaries.
"""

from __future__ import annotations

import numpy as np

from warp_check.model.head import DenseHead
from warp_check.repair.records import CaseSet

BLOCK = 8192  # must_keep rows at a time


def recomputed_certificates(
    head_after: DenseHead, fix: CaseSet, keep: CaseSet, *, gamma_s: float, gamma_h: float
) -> dict[str, object]:
    """``cert1``, ``cert2`` ("passed/total"), ``cert2_all`` and the smallest gap of each kind."""
    gap_fix, _ = head_after.gaps(fix.V, fix.labels)
    keep_ok = 0
    min_keep = np.inf
    for lo in range(0, len(keep), BLOCK):
        V, labels = keep.V[lo : lo + BLOCK], keep.labels[lo : lo + BLOCK]
        logits = head_after.logits(V)
        decision = head_after.decision
        gap = decision.margins(logits, labels).gap
        keep_ok += int(np.sum((gap >= gamma_h) & decision.right(decision.predict(logits), labels)))
        min_keep = min(min_keep, float(gap.min()))
    return {
        "cert1": f"{int(np.sum(gap_fix >= gamma_s))}/{len(fix)}",
        "cert2": f"{keep_ok}/{len(keep)}",
        "cert2_all": keep_ok == len(keep),
        "min_gap_fix": float(gap_fix.min()),
        "min_gap_keep": min_keep,
    }
