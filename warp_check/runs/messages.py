"""The words of verdicts and advice, in one place, so a case reads the same everywhere."""

from __future__ import annotations

import math

from warp_check.suite.loader import Suite


def num(value: float | None, *, missing: str = "n/a", show_inf: bool = True) -> str:
    """``value`` to 4 significant digits; ``missing`` where there is no number (None or NaN,
    and ±inf too unless ``show_inf``: tables show only finite numbers)."""
    if value is None or (isinstance(value, float) and (math.isnan(value) or (not show_inf and math.isinf(value)))):
        return missing
    return f"{value:.4g}"


def labelled(suite: Suite, label: object) -> str:
    """A case's answer as the suite's kind of decision states it, each class's name quoted."""
    return suite.decision.stated(label, lambda c: repr(suite.label_name(int(c))))
