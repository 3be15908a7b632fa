"""The exact binomial arithmetic the certificates and the release comparison share: the
(Clopper–Pearson) one-sided upper confidence bound on a rate, and the exact sign (McNemar) test.

k changes seen in n independent draws: the bound U is the rate p at which seeing k or fewer
changes has probability 1 − c, so a true rate above U would have produced so few changes in
less than 1 − c of samples. U = 1 at k = n; at k = 0 it is 1 − (1 − c)^(1/n).

scipy's inverse regularised incomplete beta gives U (the binomial tail is I_{1−p}(n − k, k + 1));
its answer is checked against the tail itself and, where the check fails (an inaccurate quantile
near 0 or 1), found again by bisection on the tail, keeping the upper end of the last interval.
"""

from __future__ import annotations

import math

from warp_check.errors import SettingsError

_BISECTIONS = 200  # far past float64's 52 bits: the interval stops shrinking first
_TAIL_REL_TOLERANCE = 1e-9  # how far the tail at U may sit from 1 − c before U is refined


def change_bound(changed: int, n: int, confidence: float) -> float:
    """The exact one-sided upper bound on the rate, at ``confidence``, of ``changed`` in ``n``."""
    for name, value in (("changed", changed), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SettingsError(name, value, "must be an integer >= 0")
    if n == 0:
        raise SettingsError("n", n, "no text measured: a bound needs at least one")
    if changed > n:
        raise SettingsError("changed", changed, f"cannot exceed n = {n}")
    if not isinstance(confidence, (int, float)) or isinstance(confidence, bool) or not 0 < confidence < 1:
        raise SettingsError("confidence", confidence, "must be a number strictly between 0 and 1")
    if changed == n:
        return 1.0
    alpha = 1.0 - float(confidence)
    if changed == 0:  # closed form: (1 − U)^n = α
        return -math.expm1(math.log(alpha) / n)
    from scipy import special  # a dependency already (OSQP's matrices); only when a bound is computed

    candidate = float(special.betaincinv(changed + 1, n - changed, float(confidence)))
    if math.isfinite(candidate) and changed / n <= candidate <= 1.0:
        tail = float(special.bdtr(changed, n, candidate))
        if abs(tail - alpha) <= _TAIL_REL_TOLERANCE * alpha:
            return candidate
    return _bisect(changed, n, alpha)


def _bisect(changed: int, n: int, alpha: float) -> float:
    """The bound by bisection on the binomial tail P(X ≤ k; n, p), which falls as p grows: the upper
    end of the last interval (exact to the tail's own rounding)."""
    from scipy import special

    low, high = changed / n, 1.0
    for _ in range(_BISECTIONS):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if float(special.bdtr(changed, n, middle)) > alpha:
            low = middle
        else:
            high = middle
    return high


def sign_test(worse: int, better: int) -> tuple[float, float]:
    """The exact McNemar test on paired answers: ``worse`` pairs went right → wrong, ``better`` wrong → right.
    Under "neither model is better" each discordant pair is a fair coin, so worse ~ Bin(worse + better, ½).
    Gives the two-sided p-value and the one-sided p of "worse than before" (P(X ≥ worse)); both 1 where
    no pair is discordant."""
    for name, value in (("worse", worse), ("better", better)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SettingsError(name, value, "must be an integer >= 0")
    n = worse + better
    if n == 0:
        return 1.0, 1.0
    from scipy import special

    # The distribution is symmetric: P(X ≥ worse) = P(X ≤ better), and the two-sided p doubles the
    # smaller tail (capped at 1, where the tails overlap).
    one_sided = float(special.bdtr(better, n, 0.5))
    two_sided = 1.0 if worse == better else min(1.0, 2.0 * float(special.bdtr(min(worse, better), n, 0.5)))
    return two_sided, one_sided


__all__ = ["change_bound", "sign_test"]
