"""generalise --budgets (issue 41, point 5): its options, the traffic draw and the pool held out from it,
the bound counted against the pool and dev, and the baseline checkpoint "at the same dev drop": pure
functions, no model."""

from __future__ import annotations

import pytest

from benchmarks import budgets, generalise
from warp_check.certificates.traffic.sample import text_key


def test_the_budgets_and_the_traffic_size_parse_and_a_bad_list_is_refused():
    args = generalise.build_parser().parse_args(["--budgets", "0.01,0.02,0.05", "--traffic", "3000"])
    assert args.budgets == [0.01, 0.02, 0.05] and args.traffic == 3000
    assert generalise.build_parser().parse_args([]).budgets == []
    assert generalise.build_parser().parse_args([]).traffic_pool == 4000
    assert generalise.build_parser().parse_args(["--traffic-pool", "0"]).traffic_pool == 0
    assert generalise.build_parser().parse_args(["--budgets", "0.05", "--budget-fit"]).budget_fit
    assert not generalise.build_parser().parse_args([]).budget_fit
    for bad in ("1%", "0", "0.01,2", ""):
        with pytest.raises(SystemExit):
            generalise.build_parser().parse_args(["--budgets", bad])
    with pytest.raises(SystemExit):
        generalise.main(["--budgets", "0.01", "--unlabelled", "10"])


def test_traffic_is_drawn_outside_the_split_once_each_and_the_seed_draws_another_sample():
    train = [{"text": f"a sentence of six words number {i}"} for i in range(50)]
    train += [{"text": "too short"}, {"text": train[0]["text"]}]
    taken = {train[1]["text"], train[2]["text"]}
    first = budgets.traffic_texts(train, taken, 20, seed=0)
    assert len(first) == len(set(first)) == 20 and not set(first) & taken and "too short" not in first
    assert budgets.traffic_texts(train, taken, 20, seed=0) == first
    assert budgets.traffic_texts(train, taken, 20, seed=1) != first
    assert len(budgets.traffic_texts(train, taken, 1000, seed=0)) == 48


def test_the_pool_is_drawn_by_the_traffics_rule_but_holds_no_text_of_the_seeds_sample():
    train = [{"text": f"a sentence of six words number {i}"} for i in range(300)]
    train += [{"text": "too short"}, {"text": "a  sentence of six words number 7 "}]  # respaced: the same text
    taken = {train[1]["text"]}
    traffic = budgets.traffic_texts(train, taken, 100, seed=0)
    pool = budgets.pool_texts(train, taken, traffic, 100)
    keys = {text_key(t) for t in traffic}
    assert len(pool) == len(set(pool)) == 100 and not {text_key(t) for t in pool} & keys
    assert not set(pool) & taken and "too short" not in pool
    assert budgets.pool_texts(train, taken, traffic, 100) == pool  # the same draw each run
    other = budgets.pool_texts(train, taken, budgets.traffic_texts(train, taken, 100, seed=1), 100)
    assert len(set(pool) & set(other)) > 50  # one shuffle for every seed: most of it shared (and its encodings)
    assert len(budgets.pool_texts(train, taken, traffic, 1000)) == 300 - 1 - 100 + 1  # all the rest
    assert budgets.pool_texts(train, taken, traffic, 0) == []


def test_the_bound_is_counted_against_the_pool_and_dev_per_row_and_per_distinct_repair_and_sample():
    def row(seed, budget, chosen, bound, dev, pool, left_out=None):
        fit = {"left_out": left_out} if left_out is not None else None
        return {"model": "m", "seed": seed, "budget": budget, "chosen": chosen, "bound": bound,
                "dev_change_rate": dev, "pool_change_rate": pool} | ({"fit": fit} if fit else {})  # fmt: skip

    rows = [
        row(0, 0.01, "less 2 must_fix", 0.010, 0.004, 0.006, ["b", "a"]),
        row(0, 0.02, "less 2 must_fix", 0.010, 0.004, 0.006, ["a", "b"]),  # the same repair: one pair
        row(0, 0.05, "less 1 must_fix", 0.040, 0.030, 0.050, ["a"]),  # over U on the pool
        row(0, None, "suite's settings", 0.070, 0.080, 0.060),  # over U on dev, not on the pool
        row(1, None, "suite's settings", 0.070, 0.050, 0.060),  # another sample: another pair
        {"model": "m", "seed": 1, "budget": 0.01, "chosen": None, "bound": None, "passed": False},  # no repair
        row(2, None, "suite's settings", 0.070, 0.050, None),  # no pool: not counted
    ]
    table = {"model": "m", "repairs": [], "rows": rows, "baselines": {"methods": {}}}
    got = budgets.like_traffic([table])
    assert got == {
        "rows": 5,
        "pool_change_within_U": 4,
        "dev_change_within_U": 4,
        "distinct_pairs": 4,
        "distinct_pool_change_within_U": 3,
        "distinct_dev_change_within_U": 3,
    }
    assert budgets.summary([table], [])["bound_holds_like_traffic"] == got
    # Another table (a strong model of the same name, the same seeds): its pairs are its own.
    twice = budgets.like_traffic([table, table])
    assert twice == {k: 2 * v for k, v in got.items()}


def test_the_baseline_at_the_same_dev_drop_is_the_checkpoint_fixing_most_among_those_dropping_no_more():
    curve = [
        {"epoch": 1, "dev_correct": 700, "heldout_correct": 10},
        {"epoch": 2, "dev_correct": 690, "heldout_correct": 30},
        {"epoch": 3, "dev_correct": 705, "heldout_correct": 20},
        {"epoch": 4, "dev_correct": 705, "heldout_correct": 20},
    ]
    assert budgets.same_drop(curve, 700)["epoch"] == 3  # epoch 2 drops more; 3 and 4 tie: the earlier
    assert budgets.same_drop(curve, 690)["epoch"] == 2
    assert budgets.same_drop(curve, 706) is None


def test_the_baseline_at_the_same_change_is_the_checkpoint_fixing_most_among_those_changing_no_more():
    curve = [
        {"epoch": 1, "dev_changed": 30, "heldout_correct": 10},
        {"epoch": 2, "dev_changed": 120, "heldout_correct": 60},  # more dev right, but many more changes
        {"epoch": 3, "dev_changed": 25, "heldout_correct": 12},
        {"epoch": 4, "dev_changed": 25, "heldout_correct": 12},
    ]
    assert budgets.same_change(curve, 30)["epoch"] == 3  # 3 and 4 tie: the earlier
    assert budgets.same_change(curve, 200)["epoch"] == 2
    assert budgets.same_change(curve, 24) is None
