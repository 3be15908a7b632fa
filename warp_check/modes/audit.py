"""Audit mode: a certificate's claims, recomputed on a model folder, become the cases' verdicts."""

from __future__ import annotations

from dataclasses import dataclass

from warp_check.errors import SettingsError
from warp_check.modes.base import RunJob, RunMode
from warp_check.modes.repair import traffic_lines
from warp_check.options import OPTION, Option
from warp_check.runs.details import AuditDetails
from warp_check.runs.modes import Mode
from warp_check.runs.result import RunResult


@dataclass(frozen=True, kw_only=True)
class AuditMode(RunMode):
    name: str = "audit"
    records: Mode = Mode.AUDIT
    selected_by: Option | None = OPTION["certificate"]
    command: str | None = None  # `warp-check verify MODEL_DIR --suite SUITE` runs it
    junit_properties: tuple[str, ...] | None = None  # a certified case's
    measures_traffic: bool = True

    def run(self, job: RunJob) -> RunResult:
        if job.certificate is None:
            raise SettingsError("certificate", None, "an audit needs the certificate to check")
        suite = job.suite
        from warp_check.runs.audit import audit  # numpy and the certifier: only when an audit runs

        traffic = job.traffic()
        return audit(
            suite, suite.model_dir, job.certificate, cache_dir=job.cache_dir, progress=job.progress, traffic=traffic
        )

    def summary_lines(self, run: RunResult) -> list[str]:
        details = run.details
        if not isinstance(details, AuditDetails):
            return []
        out = [f"  audit: {run.message}", f"  certificate: {details.certificate}"]
        if details.neighbours:
            out.append(
                f"  {details.neighbours} neighbourhood case(s) of the repair (perturbed suite cases) checked too"
            )
        if details.not_in_suite:
            out.append(f"  {len(details.not_in_suite)} certified case(s) are not in this suite")
        return out + traffic_lines(run)

    def result_lines(self, run: RunResult) -> list[str]:
        return traffic_lines(run)


AUDIT = AuditMode()
