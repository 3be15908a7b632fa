"""The terminal summary's lines follow the run's status and the kind of its details, whatever
carried them (model-free: runs built by hand, as the reports bring them to the controller)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_warp.summary import lines
from warp_check import RepairSettings
from warp_check.cases import Kind
from warp_check.certify.certificate import Summary
from warp_check.frontend import mode_named
from warp_check.runs.details import AuditDetails, CheckDetails, RepairDetails, RunDetails
from warp_check.runs.modes import Mode, RunStatus
from warp_check.runs.result import Outcome, RunResult, Verdict

SUITE = "/suites/s/warp.toml"
COUNTS = {Kind.MUST_FIX: 1, Kind.MUST_KEEP: 2, Kind.AUX: 3}
# A repair run's details as its run file holds them.
REPAIR = {
    "model": "/models/m",
    "suite_sha256": "0" * 64,
    "counts": {"must_fix": 1, "must_keep": 2, "aux": 3},
    "head": "pre_classifier → relu → classifier",
    "encoded": 2,
    "from_cache": 0,
    "encode_seconds": 0.5,
    "status": "converged",
    "repair_message": "converged in 1 iterations",
    "iterations": 1,
    "repair_seconds": 0.25,
    "kappa_before": 0.5,
    "kappa_after": 0.75,
    "gsn_ft": {"applied": False, "reason": "mean κ 0.5 ≥ gsn_threshold 0.01"},
    "certs": {"cert1": "1/1", "cert2": "1/1", "cert3": "1/1"},
    "excluded": [],
    "artefact": "/out/repaired",
    "history": [],
    "settings": RepairSettings().to_dict(),
    "gamma_s": 1.0,
    "gamma_h": 0.3,
    "lipschitz": 6.5,
}


def repair_details(**changes) -> RepairDetails:
    return dataclasses.replace(RepairDetails.from_json(REPAIR), **changes)


VERDICT_LINES = ("  verdict: ", "  written: ", "  next: ")


def summary(
    status: RunStatus, details, mode: Mode = Mode.REPAIR, message: str = "the run's message", run_mode=None
) -> list[str]:
    """The summary's lines before the verdict's (the verdict's own test reads those)."""
    out = summary_with_verdict(status, details, mode, message, run_mode)
    assert out[-1].startswith(VERDICT_LINES)  # every suite's lines end with its verdict
    return [line for line in out if not line.startswith(VERDICT_LINES)]


def summary_with_verdict(
    status: RunStatus, details, mode: Mode = Mode.REPAIR, message: str = "the run's message", run_mode=None
) -> list[str]:
    run = RunResult(
        suite=SUITE, name="s", mode=mode, ok=True, status=status, message=message, verdicts=(), details=details
    )
    reported = [
        Verdict(case_id="f", kind=Kind.MUST_FIX, passed=True, message="", suite=SUITE, outcome=Outcome.PASSED),
        Verdict(case_id="k", kind=Kind.MUST_KEEP, passed=False, message="", suite=SUITE, outcome=Outcome.FAILED),
    ]
    state = SimpleNamespace(
        runs={SUITE: run},
        cases={SUITE: reported},
        config=SimpleNamespace(rootpath=Path("/suites")),
        options=SimpleNamespace(mode=run_mode or mode_named(mode.value)),
        report_path=None,
        report_error=None,
    )
    return lines(state)


def test_a_converged_repair():
    out = summary(RunStatus.CONVERGED, repair_details(computed_by="gw0"))
    assert out == [
        "suite 's' (s/warp.toml): repair mode",
        "  model: /models/m (pre_classifier → relu → classifier)",
        "  must_fix   1 passed, 0 failed",
        "  must_keep  0 passed, 1 failed (of 2 in the suite)",
        "  aux        3 case(s): GSN-FT data, not tests",
        "  encoder: 2 case(s) encoded, 0 from the cache, 0.50 s",
        "  repair: converged in 1 iteration(s), 0.25 s",
        "  mean GSN κ: 0.5 before, 0.75 after; GSN-FT not applied (mean κ 0.5 ≥ gsn_threshold 0.01)",
        "  certificates: Cert 1 1/1, Cert 2 1/1, Cert 3 1/1 (γ_s = 1, γ_h = 0.3)",
        "  repaired model: /out/repaired (with warp_certificate.json)",
        "  computed once, by xdist worker gw0",
    ]


@pytest.mark.parametrize(
    ("status", "line"),
    [
        (
            RunStatus.NOTHING_TO_REPAIR,
            "  repair: nothing to repair: every case already meets its margin; nothing was written",
        ),
        (
            RunStatus.INFEASIBLE,
            "  repair: FAILED (infeasible) after 1 iteration(s), 0.25 s: the must_keep constraints cannot all hold; "
            "nothing was written",
        ),
    ],
)
def test_a_repair_that_wrote_nothing(status, line):
    details = repair_details(
        status=status,
        repair_message="the must_keep constraints cannot all hold",
        artefact=None,
        kappa_after=float("inf"),
        excluded=("k",),
    )
    out = summary(status, details)
    assert line in out
    assert "  mean GSN κ: 0.5 before, n/a after; GSN-FT not applied (mean κ 0.5 ≥ gsn_threshold 0.01)" in out
    left_out = "  1 must_keep case(s) left out: the original model already got them wrong; no baseline says which"
    assert any(line.startswith(left_out) for line in out)
    assert out[-1] == "  repaired model: none written"


def test_a_repair_that_restored_regressions_counts_them_and_names_the_baseline():
    details = repair_details(restored=("k1", "k2"), excluded=("k3",), baseline="/old (--baseline)")
    out = summary(RunStatus.CONVERGED, details)
    assert (
        "  restored 2 regression(s): must_keep cases the baseline /old (--baseline) got right, repaired back to γ_s "
        "(Cert 1 and 3)"
    ) in out
    assert (
        "  1 must_keep case(s) left out: the original model already got them wrong, and so did the baseline "
        "/old (--baseline)"
    ) in out


def test_a_run_that_failed_before_its_verdicts_says_why_and_nothing_more():
    out = summary(RunStatus.ERROR, RunDetails(model="/models/m", suite_sha256="0", counts=COUNTS), message="OSError: x")
    assert out[1] == "  model: /models/m" and out[-1] == "  OSError: x"
    assert not any("repair:" in line or "encoder:" in line for line in out)


def test_a_warm_check_and_an_audit():
    check = CheckDetails(
        model="/m", suite_sha256="0", counts=COUNTS, selected=2, head="h", encoded=0, from_cache=2,
        encode_seconds=0.012, model_loaded=False, computed_by="main",
    )  # fmt: skip
    out = summary(RunStatus.CHECKED, check, mode=Mode.CHECK)
    assert (
        out[-1]
        == "  encoder: 0 case(s) encoded, 2 from the cache, 0.01 s; model not loaded (same folder as the last check)"
    )
    loaded = summary(RunStatus.CHECKED, dataclasses.replace(check, model_loaded=True), mode=Mode.CHECK)
    assert loaded[-1] == "  encoder: 0 case(s) encoded, 2 from the cache, 0.01 s"
    audit = AuditDetails(
        model="/m", suite_sha256="0", counts=COUNTS, certificate="/c.json", checks=3, failed_checks=(),
        not_in_suite=("x", "y"), gamma_s=1.0, gamma_h=0.3,
    )  # fmt: skip
    out = summary(RunStatus.VERIFIED, audit, mode=Mode.AUDIT, message="certificate checked")
    assert out[-3:] == [
        "  audit: certificate checked",
        "  certificate: /c.json",
        "  2 certified case(s) are not in this suite",
    ]


def test_certificates_are_shown_only_where_computed():
    out = summary(RunStatus.NOT_CONVERGED, repair_details(status=RunStatus.NOT_CONVERGED, certs=None, artefact=None))
    assert not any("certificates:" in line for line in out)
    assert any("certificates: Cert 1 2/2" in line for line in summary(
        RunStatus.CONVERGED, repair_details(certs=Summary(cert1="2/2", cert2="0/0", cert3="2/2"))
    ))  # fmt: skip


def test_the_head_repaired_and_how_it_was_chosen_follow_the_model():
    why = "layer = 'auto' fell back to the final linear layer: the dense form 'd' → tanh → 'c' did not converge"
    out = summary(RunStatus.CONVERGED, repair_details(head="classifier (final linear layer)", found_by=why))
    assert out[1:3] == ["  model: /models/m (classifier (final linear layer))", f"  head: {why}"]


def test_a_baseline_run_says_it_is_one_and_against_which_model():
    check = CheckDetails(
        model="/new", suite_sha256="0", counts=COUNTS, selected=2, head="h", encoded=2, from_cache=0,
        encode_seconds=0.5, model_loaded=True,
    )  # fmt: skip
    baseline = mode_named("baseline").chosen_with("/old")
    out = summary(RunStatus.CHECKED, check, mode=Mode.CHECK, run_mode=baseline)
    assert out[:2] == ["suite 's' (s/warp.toml): baseline mode (regressions against /old)", "  model: /new (h)"]


def test_every_suite_ends_with_its_verdict_what_was_written_and_what_next():
    out = summary_with_verdict(RunStatus.CONVERGED, repair_details())
    assert out[-3:] == [
        "  verdict: FAILED: the repair fixes 1 of 1 must_fix cases and keeps 0 of 1 must_keep cases: 1 of 2 cases fail",
        "  written: /out/repaired",
        "  next: read the failing cases' messages",
    ]
    nothing = summary_with_verdict(RunStatus.INFEASIBLE, repair_details(status=RunStatus.INFEASIBLE, artefact=None))
    assert nothing[-3].startswith("  verdict: FAILED: the repair did not succeed (infeasible)")
    assert nothing[-2] == "  written: nothing: the repair did not converge, so there is no repaired model"
