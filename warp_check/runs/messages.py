"""The words of verdicts and advice, in one place, so a case reads the same everywhere."""

from __future__ import annotations

import math

from warp_check.suite.loader import Suite


def num(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.4g}"


def labelled(suite: Suite, label: int) -> str:
    return repr(suite.label_name(int(label)))
