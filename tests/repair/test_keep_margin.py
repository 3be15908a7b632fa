"""``keep_margin = "own"``: a must_keep case right before the repair but below γ_h is held at its own
gap (up to γ_h, not below KEEP_FLOOR) instead of being lifted to γ_h, and Cert 2, recomputed in float64
from the repaired weights, holds each case to that bar and records it."""

from __future__ import annotations

import numpy as np
import pytest
from testkit.synthetic import synthetic_problem

from warp_check.cases import Kind
from warp_check.certificates.cases import certify_cases
from warp_check.errors import SettingsError
from warp_check.repair.loop import repair_head
from warp_check.repair.records import CaseSet, RepairStatus
from warp_check.repair.settings import KEEP_FLOOR, KEEP_ROOM, KeepMargin, RepairSettings


def test_the_setting_reads_as_toml_spells_it_and_names_a_bad_value():
    assert RepairSettings(keep_margin="gamma_h").keep_margin is KeepMargin.GAMMA_H
    assert RepairSettings().keep_margin is KeepMargin.OWN  # the default
    with pytest.raises(SettingsError) as raised:
        RepairSettings(keep_margin="lifted")
    assert raised.value.field == "keep_margin"
    # "own" is written and reads back; "gamma_h" is not written, as settings written before "own" existed
    # (certificates, reports) lack the key, and a record without it reads as gamma_h: what those repairs did
    own = RepairSettings()
    assert own.to_dict()["keep_margin"] == "own"
    assert RepairSettings.from_dict(own.to_dict()) == own
    lifted = RepairSettings(keep_margin="gamma_h")
    assert "keep_margin" not in lifted.to_dict()
    assert RepairSettings.from_dict(lifted.to_dict()) == lifted


def test_each_case_is_held_to_its_own_gap_up_to_gamma_h_and_never_below_the_floor():
    before = np.array([-0.2, 0.001, 0.1, 0.3, 2.0])
    assert RepairSettings(keep_margin="gamma_h").keep_bars(before).tolist() == [0.3] * 5
    own = RepairSettings().keep_bars(before)
    assert own.tolist() == pytest.approx([KEEP_FLOOR, KEEP_FLOOR, 0.1 - KEEP_ROOM, 0.3 - KEEP_ROOM, 0.3])


def _with_low_keep(seed: int) -> tuple:
    """A synthetic suite whose must_keep cases include right ones below γ_h (what real suites hold)."""
    head, fix, keep = synthetic_problem(d=16, n_fix=6, n_keep=60, seed=seed)
    rng = np.random.default_rng(seed)
    V = rng.normal(size=(4000, 16))
    labels = head.predict(V)
    gap, _ = head.gaps(V, labels)
    low = np.flatnonzero((gap > 0.02) & (gap < 0.25))[:20]
    keep = CaseSet(
        keep.ids + tuple(f"low{i}" for i in range(len(low))),
        np.vstack([keep.V, V[low]]),
        np.concatenate([keep.labels, labels[low]]),
    )
    return head, fix, keep


def _certified(result, fix: CaseSet, keep: CaseSet, margin: KeepMargin):
    V = np.vstack([fix.V, keep.V])
    before = np.array([result.gaps_before[i] for i in fix.ids + keep.ids])
    records, _ = certify_cases(
        result.head_after,
        ids=fix.ids + keep.ids,
        kinds=[Kind.MUST_FIX] * len(fix) + [Kind.MUST_KEEP] * len(keep),
        V=V,
        labels=np.concatenate([fix.labels, keep.labels]),
        gaps_before=before,
        gamma_s=result.settings.gamma_s,
        gamma_h=result.settings.gamma_h,
        keep_margin=margin,
    )
    return {r.id: r for r in records}


@pytest.mark.parametrize("seed", [0, 1])
def test_own_margins_are_certified_on_every_case_with_each_bar_recorded(seed):
    head, fix, keep = _with_low_keep(seed)
    settings = RepairSettings(keep_margin="own", max_iter=80)
    result = repair_head(head, fix, keep, settings=settings)
    assert result.status is RepairStatus.CONVERGED
    records = _certified(result, fix, keep, KeepMargin.OWN)
    for case_id in keep.ids:
        record, before = records[case_id], result.gaps_before[case_id]
        assert record.keep_bar == pytest.approx(min(0.3, max(before - KEEP_ROOM, KEEP_FLOOR)))
        assert record.cert2 and record.held_gap >= record.keep_bar  # recomputed in float64, as saved too
    assert all(records[i].cert1 for i in fix.ids)
    # Held to γ_h instead, a case left below it fails Cert 2: the bar is each case's, not a formality.
    low = [i for i in keep.ids if records[i].held_gap < 0.3]
    lifted = _certified(result, fix, keep, KeepMargin.GAMMA_H)
    assert all(not lifted[i].cert2 and lifted[i].keep_bar is None for i in low)


def test_own_margins_hold_for_cases_checked_outside_the_loop():
    head, fix, keep = _with_low_keep(3)
    settings = RepairSettings(keep_margin="own", resident_keep=15, max_iter=120)
    result = repair_head(head, fix, keep, settings=settings)
    assert result.held_outside > 0
    if result.status is RepairStatus.CONVERGED:
        records = _certified(result, fix, keep, KeepMargin.OWN)
        assert all(records[i].cert2 for i in keep.ids)
    else:  # refused: the cases it misses are named, each with its own bar
        assert result.misses
        assert all(m.needs <= 0.3 for m in result.misses if m.kind == "must_keep")
