"""Cert 1–3 each measure every case in their own module; the records they make together say what each
certificate promises, case by case, on the gaps recomputed in float64 (and as the model stores them)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warp_check.cases import Kind
from warp_check.certificates import CERTIFICATES, Cert
from warp_check.certificates.cases import certify_cases
from warp_check.certify.bounds import eps_star, lipschitz
from warp_check.certify.cases import gaps_in_both
from warp_check.certify.falsify import AttackSettings
from warp_check.certify.measured import Measured
from warp_check.model.activations import ACTIVATIONS
from warp_check.model.head import DenseHead

ATTACK = AttackSettings(pgd_steps=5, pgd_restarts=1, flip_steps=5)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(1, 12), gamma_s=st.floats(0.0, 0.5), gamma_h=st.floats(0.0, 0.5))
def test_each_case_carries_exactly_the_certificates_claimed_for_it(seed, n, gamma_s, gamma_h):
    rng = np.random.default_rng(seed)
    head = DenseHead(rng.normal(size=(6, 5)), rng.normal(size=6), rng.normal(size=(3, 6)), rng.normal(size=3),
                     ACTIVATIONS["tanh"])  # fmt: skip
    V = rng.normal(size=(n, 5)).astype(np.float32)
    labels = rng.integers(0, 3, size=n)
    kinds = tuple(Kind.MUST_FIX if fix else Kind.MUST_KEEP for fix in rng.random(n) < 0.5)
    ids = tuple(f"c{i}" for i in range(n))
    before = rng.normal(size=n)
    keep_ids = [i for i, k in zip(ids, kinds, strict=True) if k is Kind.MUST_KEEP]
    excluded = frozenset(keep_ids[::3])
    restored = frozenset(keep_ids[1::3])
    records, lip = certify_cases(head, ids=ids, kinds=kinds, V=V, labels=labels, gaps_before=before,
                                 gamma_s=gamma_s, gamma_h=gamma_h, excluded=excluded, restored=restored,
                                 attack=ATTACK)  # fmt: skip
    gaps, stored = gaps_in_both(head, V, labels)
    assert lip == lipschitz(head)
    for i, record in enumerate(records):
        held = min(gaps[i], stored[i])
        assert (record.id, record.kind, record.label) == (ids[i], kinds[i], int(labels[i]))
        assert record.gap_after == gaps[i] and record.gap_as_saved == stored[i] and record.gap_before == before[i]
        as_fix = kinds[i] is Kind.MUST_FIX or ids[i] in restored
        if as_fix:  # Cert 1 and 3, never Cert 2
            assert record.restored is (ids[i] in restored) and not record.excluded
            assert record.cert1 is bool(held >= gamma_s) and record.cert2 is None
            assert record.eps_star == eps_star(np.array([gaps[i]]), lip.L)[0]
            assert record.cert3 is bool(record.eps_star > 0 and record.attack_min_gap > 0)
        elif ids[i] in excluded:  # left out: no certificate
            assert record.excluded and (record.cert1, record.cert2, record.cert3) == (None, None, None)
        else:  # Cert 2 alone
            assert record.cert2 is bool(held >= gamma_h and before[i] > 0)
            assert (record.cert1, record.cert3, record.eps_star) == (None, None, None)


def test_a_certificate_measures_only_the_fields_of_a_case_record():
    rows = np.array([True, False])
    with pytest.raises(ValueError, match=r"Measured.columns: \['gap_after'\]"):
        Measured(rows=rows, columns={"gap_after": np.zeros(2)})  # the gaps are every certificate's, not one's
    with pytest.raises(ValueError, match=r"\['cert1'\] have not one value per case \(2\)"):
        Measured(rows=rows, columns={"cert1": np.zeros(3, dtype=bool)})


def test_cert_1_to_3_are_the_table_members_that_measure_cases():
    measuring = [c.title for c in CERTIFICATES if type(c).measure_cases is not Cert.measure_cases]
    assert measuring == ["Cert 1", "Cert 2", "Cert 3"]
