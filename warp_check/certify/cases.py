"""What every certificate of a case reads, recomputed from the repaired weights in float64 and the
cached v (:func:`measure_gaps`), and the case records made from what each certificate measured on
them (:func:`case_records`).

A certificate measures its own verdicts and figures (:mod:`warp_check.certificates`: Cert 1 in
``margins``, Cert 2 in ``kept``, Cert 3 in ``radius``), as columns over the cases
(:class:`~warp_check.certify.measured.Measured`); :func:`case_records` puts them into one
:class:`CaseCertificate` per case.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from warp_check.cases import Kind
from warp_check.certify.bounds import lipschitz
from warp_check.certify.certificate import CaseCertificate, Summary
from warp_check.certify.measured import CaseGaps, Measured
from warp_check.model.blocks import blocks
from warp_check.model.head import DenseHead


def measure_gaps(
    head: DenseHead,
    *,
    ids: tuple[str, ...],
    kinds: Sequence[Kind],
    V: np.ndarray,
    labels: np.ndarray,
    gaps_before: np.ndarray,
    excluded: frozenset[str] = frozenset(),
    restored: frozenset[str] = frozenset(),
) -> CaseGaps:
    """The cases' gaps on ``head`` (the repaired weights) in float64 and as saved; ``restored``
    must_keep cases are certified as must_fix cases, their kind kept."""
    labels = np.asarray(labels)
    kinds = tuple(Kind(k) for k in kinds)
    gaps, stored = gaps_in_both(head, V, labels)
    back = np.array([k is Kind.MUST_KEEP and i in restored for k, i in zip(kinds, ids, strict=True)], dtype=bool)
    fix = np.array([k is Kind.MUST_FIX for k in kinds], dtype=bool) | back
    left_out = np.array([i in excluded for i in ids], dtype=bool)
    keep = np.array([k is Kind.MUST_KEEP for k in kinds], dtype=bool)
    return CaseGaps(
        head=head,
        ids=ids,
        kinds=kinds,
        V=V,
        labels=labels,
        gaps_before=np.asarray(gaps_before),
        gaps=gaps,
        stored=stored,
        fix=fix,
        restored=back,
        excluded=left_out,
        held=np.minimum(gaps, stored),
        kept=keep & ~fix & ~left_out,
        lipschitz=lipschitz(head),
    )


def case_records(gaps: CaseGaps, measured: Sequence[Measured]) -> list[CaseCertificate]:
    """One record per case: its gaps, then what each certificate measured on it."""
    fix, back, excluded = gaps.fix.tolist(), gaps.restored.tolist(), gaps.excluded.tolist()
    before, after, stored = gaps.gaps_before.tolist(), gaps.gaps.tolist(), gaps.stored.tolist()
    # Plain Python values, read once: a million must_keep cases are read case by case.
    columns = [(m.rows.tolist(), {name: column.tolist() for name, column in m.columns.items()}) for m in measured]
    out = []
    for i, case_id in enumerate(gaps.ids):
        kind = gaps.kinds[i]
        fields = dict(
            id=case_id,
            kind=kind,
            label=gaps.head.decision.answer(gaps.labels, i),
            gap_before=float(before[i]),
            gap_after=after[i],
            gap_as_saved=stored[i],
        )
        if fix[i]:
            fields["restored"] = back[i]
        elif kind is Kind.MUST_KEEP and excluded[i]:
            fields["excluded"] = True
        for rows, values in columns:
            if rows[i]:
                fields.update((name, column[i]) for name, column in values.items())
        out.append(CaseCertificate(**fields))
    return out


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
