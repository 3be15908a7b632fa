"""Repair mode: repair the model on the whole suite, save it with its certificate, and assert
Cert 1–3 on the repaired weights."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from warp_check.modes.base import RunJob, RunMode
from warp_check.modes.check import encoder_line, head_shown
from warp_check.options import OPTION, Option
from warp_check.releases.baseline_folder import suite_on_baseline
from warp_check.runs.check import check_suite
from warp_check.runs.details import RepairDetails, RunDetails, traffic_of
from warp_check.runs.messages import num
from warp_check.runs.modes import Mode, RunStatus
from warp_check.runs.result import RunResult
from warp_check.runs.workdir import default_out_dir, workdir

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter
    from warp_check.repair.settings import RepairSettings
    from warp_check.runs.repair import Restoring


@dataclass(frozen=True, kw_only=True)
class RepairMode(RunMode):
    name: str = "repair"
    records: Mode = Mode.REPAIR
    selected_by: Option | None = OPTION["repair"]
    command: str | None = "repair"
    command_help: str = "repair the model on the suite, save it with its certificate"
    cli_options: tuple[str, ...] = (
        "out", "rank", "gamma_s", "gamma_h", "keep_margin", "neighbours", "report", "traffic", "max_change", "baseline",
    )  # fmt: skip
    junit_properties: tuple[str, ...] | None = None  # a certified case's
    measures_traffic: bool = True

    def run(self, job: RunJob) -> RunResult:
        suite = job.suite
        settings = suite.settings(**job.overrides)
        if job.out_dir is not None:
            out = job.out_dir
        else:
            workdir(suite)
            out = default_out_dir(suite)
        traffic = job.traffic()  # read before the model loads: a bad file costs no encoder pass
        adapter = job.load_model(suite)
        from warp_check.runs.repair import repair  # numpy, the solvers, the certifier: only when a repair runs

        return repair(
            suite,
            adapter,
            settings,
            out_dir=out,
            cache_dir=job.cache_dir,
            progress=job.progress,
            flags=job.flags,
            traffic=traffic,
            restoring=restoring(job, adapter, settings, out),
        )

    def model_lines(self, details: RunDetails) -> list[str]:
        out = [f"  model: {details.model}{head_shown(details)}"]
        if isinstance(details, RepairDetails) and details.found_by:
            out.append(f"  head: {details.found_by}")
        return out

    def encoder_lines(self, details: RunDetails) -> list[str]:
        return encoder_line(details)

    def summary_lines(self, run: RunResult) -> list[str]:
        details = run.details
        if not isinstance(details, RepairDetails):
            return []
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
        if details.merged:
            out.append(
                f"  {details.merged} case(s) identical to another (same input and label) merged: each constrained once"
            )
        out += restore_lines(details)
        out += traffic_lines(run)
        if details.artefact:
            out.append(f"  repaired model: {details.artefact} (with warp_certificate.json)")
        else:
            out.append("  repaired model: none written")
        return out

    def result_lines(self, run: RunResult) -> list[str]:
        repaired = run.details if isinstance(run.details, RepairDetails) else None
        out = []
        if repaired is not None and repaired.neighbourhood is not None:
            out.append(f"  neighbourhood: {repaired.neighbourhood}")
        if repaired is not None and repaired.certs is not None:
            out.append(f"  certificates: {repaired.certs}")
        if repaired is not None:
            out += restore_lines(repaired)
        out += traffic_lines(run)
        out.append(f"  repaired model: {(repaired.artefact if repaired else None) or 'none written'}")
        return out


def restoring(job: RunJob, adapter: ClassifierAdapter, settings: RepairSettings, out: Path) -> Restoring | None:
    """What a repair that restores regressions is handed: the model's answers on the suite, then the
    baseline's on the must_keep cases it gets wrong (the regression gate's computation: the suite on
    the baseline, :func:`~warp_check.releases.baseline_folder.suite_on_baseline`, checked), judged. None
    where no baseline is named (nor the first model of the model's certificate chain) or
    ``restore_regressions`` is off."""
    from warp_check.releases.restore import checked, judged, reference_for
    from warp_check.runs.repair import model_answers

    if not settings.restore_regressions:
        return None
    option = job.flags.get("baseline", OPTION["baseline"].flag)
    suite = job.suite
    reference = checked(reference_for(adapter.source, job.baseline, option=option), suite)
    if reference is None:
        return None
    first = model_answers(
        suite, adapter, settings, out_dir=out, cache_dir=job.cache_dir, progress=job.progress, flags=job.flags
    )
    right: set[str] = set()
    wrong = first.wrong
    if wrong:
        model = suite.model  # the encoder runs on the baseline as on the model under repair
        compute = {"device": model.device, "batch_size": model.batch_size, "threads": model.threads}
        answers = check_suite(
            suite_on_baseline(suite, reference.model_dir, compute), ids=wrong, cache_dir=job.cache_dir
        )
        right = {v.case_id for v in answers.verdicts if v.passed}
    return dataclasses.replace(first, reference=judged(reference, wrong, right))


def traffic_lines(run: RunResult) -> list[str]:
    """Cert 4's lines: how the file became the sample, and the bound (or why it was not measured)."""
    note = traffic_of(run.details)
    out = [f"  traffic: {note.sample_line()}"] if note is not None else []
    if run.traffic is not None:
        out.append(f"  {'' if run.traffic.passed else 'FAILED '}{run.traffic.message}")
    return out


def restore_lines(details: RepairDetails) -> list[str]:
    """What became of the must_keep cases the original model got wrong: restored against the suite's
    baseline, or left out, and why."""
    out = []
    if details.restored:
        out.append(
            f"  restored {len(details.restored)} regression(s): must_keep cases the baseline {details.baseline} "
            "got right, repaired back to γ_s (Cert 1 and 3)"
        )
    if not details.excluded:
        return out
    left = f"  {len(details.excluded)} must_keep case(s) left out: the original model already got them wrong"
    if not details.settings.restore_regressions:
        left += " ([repair] restore_regressions = false)"
    elif details.baseline is not None:
        left += f", and so did the baseline {details.baseline}"
    else:
        left += (
            "; no baseline says which are regressions: name the last release (pytest --warp-baseline DIR, "
            "warp-check repair --baseline DIR) to have those it got right restored"
        )
    return [*out, left]


REPAIR = RepairMode()
