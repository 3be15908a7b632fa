"""generalise --budgets (issue 41, point 5): its options, the traffic draw, tune's choice rule at other
budgets, and the baseline checkpoint "at the same dev drop": pure functions, no model."""

from __future__ import annotations

import pytest

from benchmarks import budgets, generalise


def test_the_budgets_and_the_traffic_size_parse_and_a_bad_list_is_refused():
    args = generalise.build_parser().parse_args(["--budgets", "0.01,0.02,0.05", "--traffic", "3000"])
    assert args.budgets == [0.01, 0.02, 0.05] and args.traffic == 3000
    assert generalise.build_parser().parse_args([]).budgets == []
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
