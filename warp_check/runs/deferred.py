"""A suite's deferred cases in a run: each a known failure (pytest's xfail) that says why it was
deferred; one the model now gets right passes, saying it can be put back, and how."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from warp_check.cases import Case
from warp_check.runs.messages import labelled, num
from warp_check.runs.result import Verdict
from warp_check.suite.loader import Suite


def defer_command(suite: str | Path, *, restore: Sequence[str] | None = None, report: str | None = None) -> str:
    """The command that defers a run's cases (``report``: the run's report.json), or puts back ``restore``."""
    folder = Path(suite).parent.as_posix() if Path(suite).name == "warp.toml" else Path(suite).as_posix()
    if restore is not None:
        return f"warp-check defer {folder} --restore {' '.join(restore) if restore else '--all'}"
    return f"warp-check defer {folder} --from {report or 'REPORT.json'}"


def deferred_verdict(
    suite: Suite, case: Case, *, right: bool, said: str, gap: float, properties: dict[str, Any]
) -> Verdict:
    """A deferred case's verdict on the model as it is: a known failure with its reason, or, where the model
    now answers it right, a pass that says it can be put back."""
    reason = next(d.reason for d in suite.deferred if d.case.id == case.id)
    properties = properties | {"deferred": reason}
    if right:
        message = (
            f"deferred case now right: predicts its label {labelled(suite, case.label)} (gap {num(gap)}); it can be "
            f"put back into its must_fix file ({defer_command(suite.toml, restore=[case.id])})"
        )
        return Verdict.of(case, passed=True, message=message, properties=properties)
    message = f"deferred case, a known failure: {said} (gap {num(gap)}); deferred because {reason}"
    verdict = Verdict.of(case, passed=False, message=message, properties=properties)
    return dataclasses.replace(verdict, expected_failure=f"deferred: {reason}")


__all__ = ["defer_command", "deferred_verdict"]
