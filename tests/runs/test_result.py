"""Run results as plain data: each kind of run's details round-trip through JSON (the xdist run
files, report.json) to the same record and the same JSON, and a run's status is a RunStatus that
the report renders. Model-free: the records are built by hand."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from warp_check import RepairSettings, RepairStatus
from warp_check.cases import Kind
from warp_check.certify.certificate import HistoryRow, Summary
from warp_check.repair.settings import KeepMargin, SynonymUse
from warp_check.reports.folder import REPORT_JSON, write_report
from warp_check.runs.details import (
    AuditDetails,
    CertificateDetails,
    CheckDetails,
    GsnFtNote,
    IterationSummary,
    NeighbourhoodNote,
    RepairDetails,
    RunDetails,
)
from warp_check.runs.messages import num
from warp_check.runs.modes import Mode, RunStatus
from warp_check.runs.result import Outcome, RunResult, Verdict

COUNTS = {Kind.MUST_FIX: 1, Kind.MUST_KEEP: 1, Kind.AUX: 2}
SUITE = {"model": "/models/m", "suite_sha256": "ab" * 32, "counts": COUNTS}


def repair_details(**changes) -> RepairDetails:
    values = dict(
        SUITE,
        head="pre_classifier → relu → classifier",
        encoded=2,
        from_cache=0,
        encode_seconds=0.5,
        status=RunStatus.CONVERGED,
        repair_message="converged in 1 iterations",
        iterations=1,
        repair_seconds=0.25,
        kappa_before=0.5,
        kappa_after=0.75,
        gsn_ft=GsnFtNote(applied=False, reason="mean κ 0.5 ≥ gsn_threshold 0.01"),
        certs=Summary(cert1="1/1", cert2="1/1", cert3="1/1"),
        excluded=(),
        artefact="/out/repaired",
        history=(
            IterationSummary(
                iteration=1, min_gap_fix=1.001, min_gap_keep=0.301, fix_met=1, keep_met=1, step_norm=0.5, seconds=0.1
            ),
        ),
        settings=RepairSettings(keep_margin=KeepMargin.GAMMA_H),  # as data/run-results.json was written
        gamma_s=1.0,
        gamma_h=0.3,
        lipschitz=6.5,
    )
    return RepairDetails(**values | changes)


DETAILS = {
    "failed": (Mode.REPAIR, RunStatus.ERROR, RunDetails(**SUITE)),
    "check": (
        Mode.CHECK,
        RunStatus.CHECKED,
        CheckDetails(**SUITE, selected=2, head="h", encoded=0, from_cache=2, encode_seconds=0.01, model_loaded=False),
    ),
    "repair": (Mode.REPAIR, RunStatus.CONVERGED, repair_details(computed_by="gw1")),
    "repair without certificates": (
        Mode.REPAIR,
        RunStatus.NOT_CONVERGED,
        repair_details(status=RunStatus.NOT_CONVERGED, certs=None, artefact=None, kappa_after=None, lipschitz=None),
    ),
    "audit": (
        Mode.AUDIT,
        RunStatus.FAILED,
        AuditDetails(
            **SUITE,
            certificate="/out/repaired/warp_certificate.json",
            checks=7,
            failed_checks=("gap recomputed 1, certificate says 2",),
            not_in_suite=("gone",),
            gamma_s=1.0,
            gamma_h=0.3,
            computed_by="main",
        ),
    ),
    "from a certificate": (
        Mode.REPAIR,
        RunStatus.CONVERGED,
        CertificateDetails(
            model="/models/m",
            counts={Kind.MUST_KEEP: 1, Kind.MUST_FIX: 1},
            iterations=1,
            repair_seconds=0.25,
            kappa_before=0.5,
            kappa_after=None,
            certs=Summary(cert1="1/1", cert2="1/1", cert3="1/1"),
            excluded=("k2",),
            history=(
                HistoryRow(
                    iteration=1,
                    min_gap_fix=None,
                    min_gap_keep=0.4,
                    fix_met=1,
                    keep_met=1,
                    step_norm=0.5,
                    step_fraction=1.0,
                    promised_fix_shortfall=0.0,
                    full_step_fix_shortfall=0.0,
                    promised_keep_missed=0,
                    full_step_keep_missed=None,
                    seconds=0.1,
                    rank=8,
                    metric_scale=2.0,
                ),
            ),
            gamma_s=1.0,
            gamma_h=0.3,
            lipschitz=6.5,
            artefact="/out/repaired",
        ),
    ),
}


def run_of(mode: Mode, status: RunStatus, details, **changes) -> RunResult:
    verdicts = (
        Verdict(case_id="f1", kind=Kind.MUST_FIX, passed=True, message="Cert 1 holds", properties={"gap": 1.5}),
        Verdict(case_id="k1", kind=Kind.MUST_KEEP, passed=False, message="Cert 2 fails", properties={"gap": math.nan}),
    )
    values = dict(
        suite="/suites/s/warp.toml",
        name="s",
        mode=mode,
        ok=status in (RunStatus.CONVERGED, RunStatus.CHECKED, RunStatus.VERIFIED),
        status=status,
        message=f"the run ended: {status.value}",
        verdicts=verdicts,
        details=details,
    )
    return RunResult(**values | changes)


@pytest.mark.parametrize(("mode", "status", "details"), DETAILS.values(), ids=DETAILS.keys())
def test_details_round_trip_through_a_run_file(tmp_path, mode, status, details):
    run = run_of(mode, status, details)
    path = run.write_json(tmp_path / "run.json")  # what an xdist worker writes for the others
    again = RunResult.read_json(path)
    assert type(again.details) is type(details) and again.details == details
    assert again.status is status and again.mode is mode
    assert again.to_dict() == json.loads(path.read_text())
    assert json.loads(path.read_text())["details"] == json.loads(json.dumps(details.to_json()))


WRITTEN_BEFORE = Path(__file__).parent / "data" / "run-results.json"  # by the code before warp_check.serial


def runs_written_before() -> list[RunResult]:
    """The runs data/run-results.json holds: every kind of details, a neighbourhood, a reported verdict."""
    runs = [run_of(*value) for value in DETAILS.values()]
    hood = NeighbourhoodNote(
        perturbed=3, drawn=12, wrong=2, dropped=1, left_out=None, seconds=0.5, synonyms=SynonymUse.NOT_INSTALLED
    )
    extra = run_of(
        *DETAILS["repair"][:2],
        repair_details(found_by="the head table", neighbourhood=hood),
        warnings=("the cache could not be written",),
    )
    verdict = Verdict(
        case_id="f2", kind=Kind.MUST_FIX, passed=False, message="expected", properties={"gap": 0.5},
        suite="/s/warp.toml", outcome=Outcome.XFAILED, expected_failure="the baseline fails it too",
    )  # fmt: skip
    return [*runs, dataclasses.replace(extra, verdicts=extra.verdicts + (verdict,))]


def test_run_results_are_written_as_before_and_read_back():
    runs = runs_written_before()
    assert json.dumps({"runs": [r.to_dict() for r in runs]}, indent=2) + "\n" == WRITTEN_BEFORE.read_text()
    again = [RunResult.from_dict(r) for r in json.loads(WRITTEN_BEFORE.read_text())["runs"]]
    assert [r.details for r in again] == [r.details for r in runs]
    assert again[-1].verdicts[-1] == runs[-1].verdicts[-1] and again[-1].warnings == runs[-1].warnings


def test_a_malformed_run_file_names_the_file_and_the_key(tmp_path):
    data = json.loads(WRITTEN_BEFORE.read_text())["runs"][2]
    del data["details"]["history"][0]["seconds"]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=rf"^{path}: details.history\[0\].seconds is missing or not a number$"):
        RunResult.read_json(path)
    data["details"]["status"] = "fine"
    with pytest.raises(ValueError, match="details.status is 'fine', not one of 'checked'"):
        RunResult.from_dict(data)


def test_details_json_keeps_the_key_order_and_writes_the_worker_last():
    data = DETAILS["repair"][2].to_json()
    assert list(data)[:4] == ["model", "suite_sha256", "counts", "head"]
    assert list(data)[-1] == "computed_by" and data["computed_by"] == "gw1"
    assert data["counts"] == {"must_fix": 1, "must_keep": 1, "aux": 2}
    assert data["certs"] == {"cert1": "1/1", "cert2": "1/1", "cert3": "1/1"}
    assert DETAILS["repair without certificates"][2].to_json()["certs"] == {}  # no certificate computed
    assert "computed_by" not in DETAILS["failed"][2].to_json()
    assert list(DETAILS["from a certificate"][2].to_json()["history"][0]) == [
        "iteration", "min_gap_fix", "min_gap_keep", "fix_met", "keep_met", "step_norm", "step_fraction",
        "promised_fix_shortfall", "full_step_fix_shortfall", "promised_keep_missed", "full_step_keep_missed", "seconds",
        "rank", "metric_scale",
    ]  # fmt: skip


def test_numbers_json_cannot_hold_are_written_as_null():
    run = run_of(Mode.REPAIR, RunStatus.CONVERGED, repair_details(kappa_before=math.nan))
    data = json.loads(json.dumps(run.to_dict(), allow_nan=False))
    assert data["details"]["kappa_before"] is None and data["cases"][1]["properties"]["gap"] is None
    assert RunResult.from_dict(data).details.kappa_before is None


def test_a_verdict_pytest_reported_travels_with_its_suite_and_outcome():
    verdict = Verdict(case_id="f1", kind=Kind.MUST_FIX, passed=False, message="m", suite="/s/warp.toml")
    data = verdict.to_dict()
    assert list(data) == ["id", "kind", "passed", "message", "properties", "suite"]
    reported = Verdict.from_dict(data | {"outcome": "skipped"})
    assert reported.suite == "/s/warp.toml" and reported.outcome is Outcome.SKIPPED
    assert reported.reported is Outcome.SKIPPED and verdict.reported is Outcome.FAILED
    assert list(reported.to_dict())[-2:] == ["suite", "outcome"]


def test_every_repair_status_is_a_run_status():
    for status in RepairStatus:
        assert RunStatus.of_repair(status).value == status.value
    settled = {s for s in RunStatus if s.settled}
    assert settled == {RunStatus.CONVERGED, RunStatus.NOTHING_TO_REPAIR}


@pytest.mark.parametrize("status", [RunStatus.CONVERGED, RunStatus.NOTHING_TO_REPAIR, RunStatus.INFEASIBLE])
def test_the_report_renders_the_run_status(tmp_path, status):
    run = run_of(Mode.REPAIR, status, repair_details(status=status))
    text = write_report(tmp_path, [run]).read_text()
    assert f"- status: **{status.value}** — the run ended: {status.value}" in text
    assert "- must_fix: 1 case(s), 1 passed, 0 failed" in text and "- must_keep: 1 case(s), 0 passed, 1 failed" in text
    assert json.loads((tmp_path / REPORT_JSON).read_text())["runs"] == [run.to_dict()]


def test_one_formatter_three_spellings_of_no_number():
    assert num(1234.5678) == "1235" and num(None) == "n/a" and num(math.nan) == "n/a"
    assert num(math.inf) == "inf"  # a verdict says so
    assert num(math.inf, show_inf=False) == "n/a"  # the terminal summary shows finite numbers
    assert num(-math.inf, missing="–", show_inf=False) == "–" and num(None, missing="–") == "–"  # the report
