"""The most changes a traffic budget allows: the count the must_fix search aims at."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from warp_check.budget.fit import most_changes_within
from warp_check.certify.binomial import change_bound


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 5000),
    budget=st.floats(0.0005, 0.999),
    confidence=st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_the_most_changes_within_a_budget_is_the_last_count_whose_bound_is_within(n, budget, confidence):
    k = most_changes_within(n, confidence, budget)
    assert -1 <= k <= n
    if k >= 0:
        assert change_bound(k, n, confidence) <= budget
    if k < n:
        assert change_bound(k + 1, n, confidence) > budget


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 3000),
    n_bound=st.integers(1, 3000),
    budget=st.floats(0.002, 0.5),
)
def test_the_aim_is_shown_by_the_tune_part_and_passes_a_fresh_sample_as_often_as_promised(n, n_bound, budget):
    from scipy import stats

    from warp_check.budget.fit import PASS_CHANCE, changes_to_aim_at

    aim = changes_to_aim_at(n, n_bound, 0.95, budget)
    allowed = most_changes_within(n_bound, 0.95, budget)
    assert aim <= most_changes_within(n, 0.95, budget)

    def chance(k):  # the rate as the tune part leaves it uncertain, then a fresh sample's count
        return stats.betabinom.cdf(allowed, n_bound, k + 0.5, n - k + 0.5)

    if aim >= 0:
        assert chance(aim) >= PASS_CHANCE - 1e-9
    if 0 <= aim < most_changes_within(n, 0.95, budget):  # the pass chance is what stopped it
        assert chance(aim + 1) < PASS_CHANCE


def test_a_changed_text_counts_against_the_nearest_case_pulling_towards_its_new_class():
    import numpy as np

    from warp_check.budget.fit import _nearest

    fix = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.8, 0.6]])
    fix_labels = np.array([0, 1, 2, 1])
    texts = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    now = np.array([1, 0, 2, 3])  # class 3: no must_fix case pulls that way
    inside = np.array([True, True, True, True])
    # text 0 → class 1: cases 1 and 3 pull that way, 3 is nearer; text 1 → class 0: case 0;
    # text 2 → class 2: case 2; text 3 → class 3: none pulls, so the nearest of all, case 1.
    assert _nearest(texts, now, fix, fix_labels, inside).tolist() == [3, 0, 2, 1]
    inside[3] = False  # left out already: no longer a culprit
    assert _nearest(texts, now, fix, fix_labels, inside).tolist()[0] == 1


def test_a_failure_message_names_the_costliest_cases_and_counts_the_rest():
    from warp_check.certificates.traffic.verdicts import NAMED_IN_MESSAGE, BudgetFit, LeftOut

    left = tuple(LeftOut(id=f"case-{i}", where=f"fix.jsonl:{i + 1}", nearest=i % 7) for i in range(30))
    common = dict(budget=0.05, confidence=0.95, left_out=left, n=1000, changed=20, bound=0.03, within=True,
                  repairs=5, seconds=1.0)  # fmt: skip
    some = BudgetFit(kept=4, **common).sentence()
    named = [c for c in left if f"'{c.id}'" in some]
    assert len(named) == NAMED_IN_MESSAGE and min(c.nearest for c in named) >= max(
        c.nearest for c in left if c not in named
    )
    assert "these 30 cannot be fixed within it" in some and f"and {30 - NAMED_IN_MESSAGE} more" in some
    none = BudgetFit(kept=0, **common).sentence()
    assert "No must_fix case can be fixed within max_change = 5 %" in none and "only with all 30 left out" in none
    assert sum(f"'{c.id}'" in none for c in left) == NAMED_IN_MESSAGE
