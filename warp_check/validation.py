"""The checks every settings record makes of its fields; errors name the field and the value.

Standard library only: a suite's settings are validated whenever it loads, and a warm check
loads suites without importing numpy.
"""

from __future__ import annotations

import math

from warp_check.errors import SettingsError

# The most digits a count, class id or index given as text may have: int() refuses a string of
# more than 4,300 digits with a ValueError, and no real count comes near this.
MAX_DIGITS = 18


def is_decimal(text: str) -> bool:
    """Digits 0-9 only, at most MAX_DIGITS of them: what int() takes. ``str.isdigit`` also accepts
    '²' and other Unicode digits that int() refuses with a traceback."""
    return 0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit()


def is_integer(value: object, minimum: int) -> bool:
    """An int (a bool is not one) that is at least ``minimum``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def require_integer(name: str, value: object, minimum: int) -> None:
    """The check every settings class makes of its counts; the error names the field."""
    if not is_integer(value, minimum):
        raise SettingsError(name, value, f"must be an integer >= {minimum}")


def require_number(name: str, value: object, *, allow_zero: bool = False) -> None:
    """A finite number (not a bool) > 0, or ≥ 0 with ``allow_zero``; the error names the field."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):  # type: ignore[operator]
        raise SettingsError(name, value, "must be a finite number " + (">= 0" if allow_zero else "> 0"))


def require_fraction(name: str, value: object) -> None:
    """A tolerance: a finite number strictly between 0 and 1 (not a bool); the error names the field."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not 0 < value < 1:  # type: ignore[operator]
        raise SettingsError(name, value, "must be a number in (0, 1)")


SHARE_RULE = 'must be a share of predictions: a number in (0, 1) such as 0.01, or a percentage such as "1%"'


def share(value: object) -> float:
    """A budget as people write it: a share in (0, 1) (``0.01``) or a percentage in (0 %, 100 %)
    (``"1%"``, ``"0.5 %"``), as a share. A bare number ≥ 1 is refused asking whether it meant a
    percentage (1 read as "all predictions" would be no gate at all: a run without a budget measures
    and reports the share, ungated); the ValueError says why."""
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("%"):
            try:
                percent = float(text[:-1].strip())
            except ValueError:
                raise ValueError(SHARE_RULE) from None
            if not (math.isfinite(percent) and 0 < percent < 100):
                raise ValueError(f"a percentage must be in (0 %, 100 %); {SHARE_RULE.removeprefix('must be ')}")
            return percent / 100
        try:
            value = float(text)
        except ValueError:
            raise ValueError(SHARE_RULE) from None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ValueError(SHARE_RULE)
    if value > 100:
        raise ValueError(SHARE_RULE)
    if value >= 1:
        meant = f"{value:g}"
        raise ValueError(f'did you mean {meant} %? write {value / 100:g} or "{meant}%" ({SHARE_RULE})')
    return float(value)
