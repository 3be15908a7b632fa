"""The ``warp-check`` section of the terminal summary, built from what the reports carried
back (so it reads the same under pytest-xdist as in a serial run)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from warp_check.cases import Kind
from warp_check.runs.details import AuditDetails, CheckDetails, RepairDetails, RunDetails
from warp_check.runs.messages import num
from warp_check.runs.modes import RunStatus
from warp_check.runs.result import Outcome, RunResult, Verdict

from .state import WarpSession


def _relative(path: str, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


def lines(state: WarpSession) -> list[str]:
    out: list[str] = []
    for suite_path, run in state.runs.items():
        out += _suite_lines(run, state.cases.get(suite_path, []), state.config.rootpath)
    if state.report_path is not None:
        out.append(f"report: {state.report_path}")
    if state.report_error is not None:
        out.append(f"report NOT written: {state.report_error}")
    return out


def _suite_lines(run: RunResult, verdicts: Sequence[Verdict], root: Path) -> list[str]:
    details = run.details
    out = [f"suite '{run.name}' ({_relative(run.suite, root)}): {run.mode.value} mode"]
    head = details.head if isinstance(details, (CheckDetails, RepairDetails)) else None
    out.append(f"  model: {details.model}" + (f" ({head})" if head else ""))
    if isinstance(details, RepairDetails) and details.found_by:
        out.append(f"  head: {details.found_by}")
    for kind in (Kind.MUST_FIX, Kind.MUST_KEEP):
        outcomes = [v.reported for v in verdicts if v.kind is kind]
        ran = f"{outcomes.count(Outcome.PASSED)} passed, {outcomes.count(Outcome.FAILED)} failed"
        if Outcome.XFAILED in outcomes:
            ran += f", {outcomes.count(Outcome.XFAILED)} xfailed (wrong on the baseline too)"
        total = details.counts.get(kind, len(outcomes))
        of = f" (of {total} in the suite)" if total != len(outcomes) else ""
        out.append(f"  {kind.value:<9}  {ran}{of}")
    if details.counts.get(Kind.AUX):
        out.append(f"  aux        {details.counts[Kind.AUX]} case(s): GSN-FT data, not tests")
    if isinstance(details, (CheckDetails, RepairDetails)):
        out.append(
            f"  encoder: {details.encoded} case(s) encoded, {details.from_cache} from the cache, "
            f"{details.encode_seconds:.2f} s"
            + ("; model not loaded (same folder as the last check)" if _warm(details) else "")
        )
    out += [f"  warning: {warning}" for warning in run.warnings]
    if run.status is RunStatus.ERROR:
        out.append(f"  {run.message}")
    elif isinstance(details, AuditDetails):
        out += _audit_lines(run, details)
    elif isinstance(details, RepairDetails):
        out += _repair_lines(run, details)
    computed_by = details.computed_by if isinstance(details, RunDetails) else None
    if computed_by not in (None, "main"):
        out.append(f"  computed once, by xdist worker {computed_by}")
    return out


def _warm(details: CheckDetails | RepairDetails) -> bool:
    return isinstance(details, CheckDetails) and not details.model_loaded


def _audit_lines(run: RunResult, details: AuditDetails) -> list[str]:
    out = [f"  audit: {run.message}", f"  certificate: {details.certificate}"]
    if details.neighbours:
        out.append(f"  {details.neighbours} neighbourhood case(s) of the repair (perturbed suite cases) checked too")
    if details.not_in_suite:
        out.append(f"  {len(details.not_in_suite)} certified case(s) are not in this suite")
    return out


def _repair_lines(run: RunResult, details: RepairDetails) -> list[str]:
    took = f"{details.iterations} iteration(s), {details.repair_seconds:.2f} s"
    if run.status is RunStatus.CONVERGED:
        out = [f"  repair: converged in {took}"]
    elif run.status is RunStatus.NOTHING_TO_REPAIR:
        out = ["  repair: nothing to repair: every case already meets its margin; nothing was written"]
    else:
        why = details.repair_message or run.message
        out = [f"  repair: FAILED ({run.status.value}) after {took}: {why}; nothing was written"]
    gsn = details.gsn_ft
    gsn_text = "applied" if gsn.applied else f"not applied ({gsn.reason})"
    before, after = num(details.kappa_before, show_inf=False), num(details.kappa_after, show_inf=False)
    out.append(f"  mean GSN κ: {before} before, {after} after; GSN-FT {gsn_text}")
    if details.neighbourhood is not None:
        out.append(f"  neighbourhood: {details.neighbourhood}")
    if details.certs is not None:
        gamma_s, gamma_h = num(details.gamma_s, show_inf=False), num(details.gamma_h, show_inf=False)
        out.append(f"  certificates: {details.certs} (γ_s = {gamma_s}, γ_h = {gamma_h})")
    if details.excluded:
        out.append(f"  {len(details.excluded)} must_keep case(s) left out: the original model already got them wrong")
    if details.artefact:
        out.append(f"  repaired model: {details.artefact} (with warp_certificate.json)")
    else:
        out.append("  repaired model: none written")
    return out
