"""How a verdict writes its figures: a number to 4 significant digits, a class by its name, the same
in every certificate's words and in the runs' messages (:mod:`warp_check.runs.messages`)."""

from __future__ import annotations

import math


def num(value: float | None, *, missing: str = "n/a", show_inf: bool = True) -> str:
    """``value`` to 4 significant digits; ``missing`` where there is no number (None or NaN,
    and ±inf too unless ``show_inf``: tables show only finite numbers)."""
    if value is None or (isinstance(value, float) and (math.isnan(value) or (not show_inf and math.isinf(value)))):
        return missing
    return f"{value:.4g}"


def named(label: str | int) -> str:
    """A class as a verdict names it: its name, quoted."""
    return repr(label)


__all__ = ["named", "num"]
