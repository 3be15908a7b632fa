"""The certificate's format on disk, held to a file written by the code before its records went
through :mod:`warp_check.serial` (data/certificate-v1.json): the same certificate gives the same
bytes, the file reads back to the same certificate, and certificates written before later keys
existed still read. Model-free: the certificate is built by hand."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from pathlib import Path

import pytest

from warp_check import CERTIFICATE_NAME, Certificate
from warp_check.cases import Kind
from warp_check.certify.certificate import (
    BaselineRecord,
    CaseRecord,
    GsnFtSummary,
    HistoryRow,
    Lipschitz,
    ModelRecord,
    ParentRecord,
    RepairRecord,
    Summary,
)
from warp_check.model.specs import HeadForm
from warp_check.qp.solution import Backend, QPForm, QPStatus
from warp_check.repair.records import IterationRecord, RepairStatus
from warp_check.repair.settings import KeepMargin, NeighbourSettings, RepairSettings

WRITTEN_BEFORE = Path(__file__).parent / "data" / "certificate-v1.json"

ROWS = (
    HistoryRow(
        iteration=1, min_gap_fix=None, min_gap_keep=0.30125, fix_met=0, keep_met=3, step_norm=0.5, step_fraction=0.25,
        promised_fix_shortfall=0.125, full_step_fix_shortfall=0.75, promised_keep_missed=0, full_step_keep_missed=2,
        seconds=0.0625, rank=8, metric_scale=1.0,
    ),
    HistoryRow(
        iteration=2, min_gap_fix=1.0009765625, min_gap_keep=0.3, fix_met=2, keep_met=3, step_norm=1e-07,
        step_fraction=1.0, promised_fix_shortfall=None, full_step_fix_shortfall=None, promised_keep_missed=None,
        full_step_keep_missed=None, seconds=0.03125, rank=16, metric_scale=2.5,
    ),
)  # fmt: skip

CASES = (
    CaseRecord(
        id="f1", kind=Kind.MUST_FIX, label=1, text="a bad film", gap_before=-0.25, gap_after=1.0009765625,
        gap_as_saved=1.0, cert1=True, cert3=True, eps_star=0.125, eps_local=0.25, attack_min_gap=0.5, flip_radius=None,
    ),
    CaseRecord(
        id="f1~1", kind=Kind.MUST_FIX, label=1, text="a poor film", source="neighbour", gap_before=-0.5,
        gap_after=1.5, gap_as_saved=1.5, cert1=True, cert3=False, eps_star=None, eps_local=None,
    ),
    CaseRecord(
        id="k1", kind=Kind.MUST_KEEP, label=0, text="premise", text_pair="hypothesis", gap_before=2.0,
        gap_after=1.75, gap_as_saved=1.75, cert2=True,
    ),
    CaseRecord(
        id="k3", kind=Kind.MUST_KEEP, label=0, text="wrong before", gap_before=-1.0, gap_after=-1.0,
        gap_as_saved=-1.0, excluded=True,
    ),
)  # fmt: skip

CERTIFICATE = Certificate(
    created="2026-11-27T03:00:00+00:00",
    warp_check_version="0.9.0",
    model=ModelRecord(
        source="/models/tiny", model_type="distilbert", repair_layer="pre_classifier", activation="relu",
        classifier="classifier", form=HeadForm.DENSE, found_by="the head table's entry for distilbert",
        max_length=64, device="cpu", sha256_upstream="a" * 64, sha256_source_frozen="b" * 64,
        sha256_repair_layer="c" * 64, sha256_frozen="d" * 64,
    ),
    settings=RepairSettings(keep_margin=KeepMargin.GAMMA_H),  # as the file was written: no keep_margin key
    repair=RepairRecord(
        status=RepairStatus.CONVERGED, converged=True, iterations=2, qp_status=("solved", "solved_inaccurate"),
        qp_form=("primal", "dual"), qp_backend=("osqp", "active_set"), history=ROWS, gsn_kappa_before=0.5,
        gsn_kappa_after=None,
        gsn_ft=GsnFtSummary(
            applied=True, reason="mean κ 0.005 < gsn_threshold 0.01", chosen_step=3,
            changed=("repair_layer.bias", "classifier"),
        ),
        excluded_must_keep=("k3",), seconds=1.5,
    ),
    lipschitz=Lipschitz(L=6.5, norm_W=2.0, norm_Wc=3.25, L_sigma=1.0),
    radius_space="the input of pre_classifier (v)",
    cases=CASES,
    summary=Summary(cert1="2/2", cert2="1/1", cert3="1/2"),
    parent=ParentRecord(sha256_repair_layer="e" * 64, sha256_frozen="f" * 64, certificate_sha256=None),
    baseline=BaselineRecord(
        source="/models/release-1", chosen_by="--baseline", sha256_repair_layer="1" * 64, sha256_frozen="2" * 64,
        certificate_sha256="3" * 64, restored=("k9",),
    ),
)  # fmt: skip


def test_a_certificate_is_written_byte_for_byte_as_before(tmp_path):
    written = CERTIFICATE.write(tmp_path / CERTIFICATE_NAME)
    assert written.read_bytes() == WRITTEN_BEFORE.read_bytes()


def test_the_file_written_before_reads_back_to_the_same_certificate():
    assert Certificate.read(WRITTEN_BEFORE) == CERTIFICATE


def _drop(data: dict, where: str) -> None:
    """Delete ``where`` (dotted keys; ``*`` for every item of a list)."""
    *parents, last = where.split(".")
    nodes = [data]
    for key in parents:
        nodes = [item for node in nodes for item in (node if key == "*" else [node[key]])]
    for node in nodes:
        del node[last]


def _cases(**changes) -> tuple[CaseRecord, ...]:
    return tuple(dataclasses.replace(case, **changes) for case in CASES)


OLDER = {
    # what a certificate written before each key existed lacks, and what reading it gives instead
    "before the release chain": (("parent",), {"parent": None}),
    "before neighbourhoods": (
        ("settings.neighbours", "cases.*.source"),
        {
            "settings": RepairSettings(keep_margin=KeepMargin.GAMMA_H, neighbours=NeighbourSettings.off()),
            "cases": _cases(source=None),
        },
    ),
    "before restored regressions": (
        ("baseline", "settings.restore_regressions", "cases.*.restored"),
        {"baseline": None},
    ),
    "before the saved arithmetic": (("cases.*.gap_as_saved",), {"cases": _cases(gap_as_saved=None)}),
    "before the head's form": (
        ("model.form", "model.found_by", "model.device"),
        {"model": dataclasses.replace(CERTIFICATE.model, form=None, found_by=None, device=None)},
    ),
}


@pytest.mark.parametrize(("dropped", "changes"), OLDER.values(), ids=OLDER.keys())
def test_a_certificate_written_before_a_key_existed_still_reads(tmp_path, dropped, changes):
    older = json.loads(WRITTEN_BEFORE.read_text())
    for where in dropped:
        _drop(older, where)
    path = tmp_path / CERTIFICATE_NAME
    path.write_text(json.dumps(older, indent=2))
    assert Certificate.read(path) == dataclasses.replace(CERTIFICATE, **changes)


def test_the_history_keeps_a_declared_selection_of_the_loop_s_iteration_record():
    record = IterationRecord(
        iteration=3, qp_status=QPStatus.SOLVED, qp_form=QPForm.DUAL, qp_rows=40, qp_objective=0.5, step_norm=0.25,
        min_gap_fix=-math.inf, min_gap_keep=math.nan, fix_met=1, keep_met=9, seconds=0.5, qp_backend=Backend("alm"),
        rank=4, metric_scale=2.0, promised_fix_shortfall=0.0,
    )  # fmt: skip
    row = HistoryRow.of(record)
    names = [f.name for f in dataclasses.fields(HistoryRow)]
    assert set(names) < {f.name for f in dataclasses.fields(IterationRecord)}
    assert all(getattr(row, name) == getattr(record, name) for name in names if not name.startswith("min_gap"))
    assert row.min_gap_fix is None and row.min_gap_keep is None  # the file holds null where there is no number
    assert list(row.to_json()) == list(json.loads(WRITTEN_BEFORE.read_text())["repair"]["history"][0])


def test_an_older_certificate_keeps_its_errors_naming_the_file_and_the_key(tmp_path):
    damaged = copy.deepcopy(json.loads(WRITTEN_BEFORE.read_text()))
    damaged["cases"][2]["kind"] = "always"
    path = tmp_path / CERTIFICATE_NAME
    path.write_text(json.dumps(damaged))
    with pytest.raises(Exception, match=rf"^{path}: cases\[2\].kind is 'always', not one of 'must_fix'"):
        Certificate.read(path)
