"""Check mode: the model as it is (the CI gate)."""

from __future__ import annotations

from dataclasses import dataclass

from warp_check.modes.base import RunJob, RunMode
from warp_check.runs.check import check, check_warm
from warp_check.runs.details import CheckDetails, RepairDetails, RunDetails
from warp_check.runs.modes import Mode
from warp_check.runs.result import RunResult


def head_shown(details: RunDetails) -> str:
    """`` (head)`` after the model, for details that know the head."""
    head = details.head if isinstance(details, (CheckDetails, RepairDetails)) else None
    return f" ({head})" if head else ""


def encoder_line(details: RunDetails) -> list[str]:
    if not isinstance(details, (CheckDetails, RepairDetails)):
        return []
    warm = isinstance(details, CheckDetails) and not details.model_loaded
    same = f", {details.identical} identical to an earlier case (encoded once)" if details.identical else ""
    return [
        f"  encoder: {details.encoded} case(s) encoded, {details.from_cache} from the cache{same}, "
        f"{details.encode_seconds:.2f} s" + ("; model not loaded (same folder as the last check)" if warm else "")
    ]


def check_job(job: RunJob) -> RunResult:
    """The check of ``job``: from what an earlier check recorded where it answers, else on the model."""
    recalled = check_warm(job.suite, job.warm, ids=job.ids, cache_dir=job.cache_dir)
    return recalled or check(
        job.suite, job.load_model(job.suite), ids=job.ids, cache_dir=job.cache_dir, progress=job.progress
    )


@dataclass(frozen=True, kw_only=True)
class CheckMode(RunMode):
    name: str = "check"
    records: Mode = Mode.CHECK
    command: str | None = "check"
    command_help: str = "run the suite against the model as it is (the CI gate)"
    cli_options: tuple[str, ...] = ("report",)
    recalls_checks: bool = True

    def run(self, job: RunJob) -> RunResult:
        return check_job(job)

    def model_lines(self, details: RunDetails) -> list[str]:
        return [f"  model: {details.model}{head_shown(details)}"]

    def encoder_lines(self, details: RunDetails) -> list[str]:
        return encoder_line(details)


CHECK = CheckMode()
