"""The paired test of two releases on the labelled suite: the exact McNemar (sign) test on the cases
the two models answer differently, right → wrong (regressions) against wrong → right (fixes).

Pass counts alone compare two models as if they had been tested on different cases; pairing each
case's two answers keeps only the cases that tell the models apart. Under "neither model is better"
each of them is a fair coin, so the counts give an exact p-value, two-sided, and one-sided for
"the new model is worse" (:func:`~warp_check.certify.binomial.sign_test`). ``worse_p`` makes it a
gate: the run fails where that one-sided p falls below it.

Standard library only at import (the run records are read without numpy); scipy when a p is computed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from warp_check.certify.binomial import sign_test
from warp_check.serial import Record, on_disk


@dataclass(frozen=True, kw_only=True)
class PairedTest(Record):
    """The exact McNemar test of the model under test against its baseline, on the suite's cases both
    answered; ``worse_p``: the gate (None: reported, never gating)."""

    cases: int  # cases both models answered
    right_to_wrong: int  # right on the baseline, wrong now: regressions
    wrong_to_right: int  # wrong on the baseline, right now: fixes
    p_value: float  # two-sided
    p_worse: float  # one-sided: the model under test is worse than the baseline
    worse_p: float | None = field(default=None, metadata=on_disk(omit_none=True))

    @property
    def passed(self) -> bool:
        return self.worse_p is None or self.p_worse >= self.worse_p

    def __str__(self) -> str:
        found = (
            f"paired test (exact McNemar) on {self.cases} case(s) both models answered: {self.right_to_wrong} "
            f"right → wrong, {self.wrong_to_right} wrong → right; p = {self.p_value:.3g} (two-sided), "
            f"p = {self.p_worse:.3g} that this model is worse"
        )
        if self.worse_p is None:
            return found
        if self.passed:
            return f"{found}; within the gate worse_p = {self.worse_p:g}"
        return f"{found}: below the gate worse_p = {self.worse_p:g}, so it is worse than the baseline"

    def properties(self) -> dict[str, Any]:
        """Its figures, for JUnit and reports."""
        gate = {} if self.worse_p is None else {"worse_p": self.worse_p}
        return {
            "paired_cases": self.cases,
            "right_to_wrong": self.right_to_wrong,
            "wrong_to_right": self.wrong_to_right,
            "p_value": self.p_value,
            "p_worse": self.p_worse,
            **gate,
        }


def paired_test(answers: list[tuple[bool, bool]], *, worse_p: float | None = None) -> PairedTest:
    """The paired test on ``answers``, one (right on the baseline, right now) per case both answered."""
    worse = sum(then and not now for then, now in answers)
    better = sum(now and not then for then, now in answers)
    p_value, p_worse = sign_test(worse, better)
    return PairedTest(
        cases=len(answers),
        right_to_wrong=worse,
        wrong_to_right=better,
        p_value=p_value,
        p_worse=p_worse,
        worse_p=worse_p,
    )


__all__ = ["PairedTest", "paired_test"]
