"""Regression-only gating: a case fails only where a baseline model got it right and this one does not.

A team fine-tuning a new release can gate it on "no regressions" while must_fix cases are still
open: a case both models get wrong is an expected failure (pytest's xfail, with the reason), a
case the new model fixed passes. Each verdict carries both models' answers (JUnit properties
``baseline_predicted`` and ``baseline_gap`` beside ``predicted`` and ``gap``).
"""

from __future__ import annotations

import dataclasses

from warp_check.runs.details import CheckDetails
from warp_check.runs.messages import num
from warp_check.runs.paired import paired_test
from warp_check.runs.result import RunResult, Verdict


def against_baseline(
    new: RunResult, baseline: RunResult, baseline_name: str, *, worse_p: float | None = None
) -> RunResult:
    """``new`` (a check of the model under test) judged against ``baseline`` (a check of the same
    cases on the baseline model, ``baseline_name`` saying which), with the paired test of the two on
    the cases both answered (its gate at ``worse_p``, where given) in its details."""
    before = {v.case_id: v for v in baseline.verdicts}
    verdicts = [_judged(v, before.get(v.case_id), baseline_name) for v in new.verdicts]
    regressions = sum(not v.passed and v.expected_failure is None for v in verdicts)
    still = sum(v.expected_failure is not None for v in verdicts)
    # A check's verdict passes exactly where the model answers the case right, whatever its kind.
    answers = [(before[v.case_id].passed, v.passed) for v in new.verdicts if v.case_id in before]
    paired = paired_test(answers, worse_p=worse_p)
    message = (
        f"{len(verdicts)} case(s) checked against the baseline {baseline_name}: {regressions} regression(s), "
        f"{still} failing on both (expected)"
    )
    details = (
        dataclasses.replace(new.details, paired_test=paired) if isinstance(new.details, CheckDetails) else new.details
    )
    return dataclasses.replace(new, verdicts=tuple(verdicts), message=message, details=details)


def _judged(now: Verdict, then: Verdict | None, baseline_name: str) -> Verdict:
    if then is None:  # the baseline could not answer this case: judged on its own
        return now
    properties = now.properties | {
        "baseline_predicted": then.properties.get("predicted"),
        "baseline_gap": then.properties.get("gap"),
    }
    gap, old_gap = now.properties.get("gap"), then.properties.get("gap")
    if now.passed:
        fixed = "" if then.passed else f" (the baseline got it wrong, gap {num(old_gap)}: fixed since)"
        return dataclasses.replace(now, properties=properties, message=now.message + fixed)
    if then.passed:
        message = (
            f"regression against the baseline {baseline_name}: it predicted "
            f"{then.properties.get('predicted')} (gap {num(old_gap)}), this model predicts "
            f"{now.properties.get('predicted')} (gap {num(gap)}); labelled {now.properties.get('label')}"
        )
        return dataclasses.replace(now, properties=properties, message=message)
    # Where a case decides several things (labels), one the baseline had right and this model not is a
    # regression, though the baseline got the case wrong on others.
    newly = [p for p in now.properties.get("wrong_labels", ()) if p not in then.properties.get("wrong_labels", ())]
    if newly:
        message = (
            f"regression against the baseline {baseline_name}: {', '.join(map(repr, newly))} wrong now, right on "
            f"the baseline (which is wrong on {', '.join(map(repr, then.properties.get('wrong_labels', ())))}); "
            f"this model predicts {now.properties.get('predicted')} (gap {num(gap)}); labelled "
            f"{now.properties.get('label')}"
        )
        return dataclasses.replace(now, properties=properties, message=message)
    reason = (
        f"not a regression: the baseline {baseline_name} gets it wrong too (gap {num(old_gap)}; "
        f"this model: gap {num(gap)})"
    )
    return dataclasses.replace(now, properties=properties, message=reason, expected_failure=reason)
