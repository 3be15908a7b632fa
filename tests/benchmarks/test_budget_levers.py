"""budget_price --levers (issue 60, item 3): the levers' settings, the tune part's halves (guards from one,
prices counted on the other), and the options: pure functions, no model."""

from __future__ import annotations

import pytest

from benchmarks import budget_levers, budget_price
from warp_check.certificates.traffic.sample import split_traffic
from warp_check.repair.settings import KeepMargin, RepairSettings


def test_guards_come_from_one_half_of_the_tune_part_and_prices_are_counted_on_the_other():
    sample = split_traffic(
        ((f"traffic sentence number {i}", None, f"t:{i}") for i in range(400)), source="t", confidence=0.95
    )
    a, b = budget_levers.halves(sample)
    assert a.bound == b.bound == sample.bound  # Cert 4's part is never cut
    keys_a, keys_b = {t.key for t in a.tune}, {t.key for t in b.tune}
    assert not keys_a & keys_b and keys_a | keys_b == {t.key for t in sample.tune}
    assert abs(len(a.tune) - len(b.tune)) <= 1


def test_every_lever_repairs_at_the_own_margin_and_changes_only_what_it_names():
    base = RepairSettings()
    for lever in budget_levers.LEVERS:
        settings = lever.repair_settings(base)
        assert settings.keep_margin is KeepMargin.OWN
        assert settings.neighbours.enabled is lever.hood
        for name, value in lever.settings.items():
            assert getattr(settings, name) == value
    baseline = budget_levers.lever_named("baseline").repair_settings(base)
    assert baseline.mu == base.mu and baseline.gamma_s == base.gamma_s and baseline.rank == base.rank
    assert budget_levers.lever_named("guards").guards is budget_levers.Guards.OWN
    assert len(set(budget_levers.LEVER_NAMES)) == len(budget_levers.LEVERS)
    with pytest.raises(SystemExit, match="no lever 'mu7'"):
        budget_levers.lever_named("mu7")


def test_the_lever_options_parse():
    args = budget_price.build_parser().parse_args(
        ["--levers", "all", "--lever-price", "guards,gs0.1", "--strength", "strong", "--must-fix-source", "adversarial"]
    )
    assert budget_price._names(args.levers) == list(budget_levers.LEVER_NAMES)
    assert budget_price._names(args.lever_price) == ["guards", "gs0.1"]
    assert args.price_subset == 20 and args.strength == "strong" and args.must_fix_source == "adversarial"
    assert budget_price._names("") == []
    with pytest.raises(SystemExit):
        budget_price.build_parser().parse_args(["--strength", "medium"])
