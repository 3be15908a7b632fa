"""The exact (Clopper–Pearson) upper bound of Cert 4: its defining property and its known values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from warp_check.certify.binomial import _bisect, change_bound
from warp_check.errors import SettingsError

confidences = st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99, 0.999])


@st.composite
def counts(draw, max_n: int = 100_000) -> tuple[int, int]:
    n = draw(st.integers(min_value=1, max_value=max_n))
    return draw(st.integers(min_value=0, max_value=n)), n


@given(counts(), confidences)
@settings(max_examples=200, deadline=None)
def test_the_bound_is_the_rate_at_which_so_few_changes_have_probability_one_minus_the_confidence(kn, confidence):
    k, n = kn
    bound = change_bound(k, n, confidence)
    assert k / n <= bound <= 1.0
    if k < n:
        # P(X ≤ k; n, U) = 1 − c: a true rate above U shows k or fewer changes less often than 1 − c.
        assert math.isclose(special.bdtr(k, n, bound), 1 - confidence, rel_tol=1e-7)
        assert math.isclose(bound, stats.beta.ppf(confidence, k + 1, n - k), rel_tol=1e-9)


@given(counts(max_n=5000), confidences)
@settings(max_examples=100, deadline=None)
def test_the_bound_grows_with_the_changes_and_the_confidence_and_falls_with_the_sample(kn, confidence):
    k, n = kn
    bound = change_bound(k, n, confidence)
    if k < n:
        assert change_bound(k + 1, n, confidence) > bound
    assert change_bound(k, n + 1, confidence) <= bound
    assert change_bound(k, n, min(0.9999, confidence + 0.0005)) >= bound


@given(st.integers(min_value=1, max_value=10**6), confidences)
def test_no_change_has_the_closed_form_and_every_change_bounds_at_one(n, confidence):
    # 1 − (1 − c)^(1/n) in float64 loses digits to the subtraction for large n: within 1e-9 of it.
    assert math.isclose(change_bound(0, n, confidence), 1 - (1 - confidence) ** (1 / n), rel_tol=1e-9)
    assert change_bound(n, n, confidence) == 1.0


def test_known_values():
    # The rule of three: no change in n texts bounds the rate near 3/n at 95 %.
    assert change_bound(0, 3000, 0.95) == pytest.approx(3 / 3000, rel=2e-3)
    # The textbook two-sided 90 % interval of 5 in 100 ends at the one-sided 95 % bound, 0.1023.
    assert change_bound(5, 100, 0.95) == pytest.approx(0.10225, abs=1e-5)


@given(counts(max_n=20_000), confidences)
@settings(max_examples=50, deadline=None)
def test_the_bisection_fallback_agrees_with_the_beta_quantile(kn, confidence):
    k, n = kn
    exact = stats.beta.ppf(confidence, k + 1, n - k) if k < n else 1.0
    assert _bisect(k, n, 1 - confidence) == pytest.approx(exact, rel=1e-9)


@pytest.mark.parametrize(
    ("k", "n", "confidence", "field"),
    [(-1, 5, 0.95, "changed"), (6, 5, 0.95, "changed"), (0, 0, 0.95, "n"), (1, 5, 1.0, "confidence"),
     (1, 5, 0.0, "confidence"), (True, 5, 0.95, "changed"), (1, 5, float("nan"), "confidence")],
)  # fmt: skip
def test_a_bad_count_or_confidence_is_named(k, n, confidence, field):
    with pytest.raises(SettingsError) as caught:
        change_bound(k, n, confidence)
    assert caught.value.field == field
