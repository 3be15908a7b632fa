"""report.md + report.json + PNG plots, from a real repair of the tiny DistilBERT."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from testkit.suite_builder import split_cases, write_suite

from warp_check.cases import Kind
from warp_check.certify.certificate import CERTIFICATE_NAME, Certificate
from warp_check.errors import WarpError
from warp_check.releases.load import load_adapter
from warp_check.reports.folder import (
    REPORT_HTML,
    REPORT_JSON,
    REPORT_MD,
    markdown_text,
    run_from_certificate,
    write_report,
)
from warp_check.reports.svg import MIN_HISTOGRAM
from warp_check.runs.check import check
from warp_check.runs.modes import RunStatus
from warp_check.runs.repair import repair
from warp_check.suite.loader import load_suite

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def repaired(distilbert_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """(suite, adapter, RunResult) of one converged repair."""
    wrong, right = split_cases(distilbert_dir, 24, seed=2)
    folder = write_suite(tmp_path_factory.mktemp("report") / "suite", model=distilbert_dir, fix=wrong, keep=right)
    suite = load_suite(folder)
    adapter = load_adapter(suite)
    result = repair(suite, adapter, suite.settings(), out_dir=folder / "out", cache_dir=folder / "cache")
    assert result.ok and result.status is RunStatus.CONVERGED, result.message
    return suite, adapter, result


def image_shape(path: Path) -> tuple[int, ...]:
    from matplotlib.image import imread

    assert path.read_bytes()[:8] == PNG_SIGNATURE
    return imread(path).shape


def test_repair_report_has_markdown_json_and_three_plots(repaired, tmp_path):
    suite, _, result = repaired
    pyplot_before = "matplotlib.pyplot" in sys.modules
    path = write_report(tmp_path / "rep", [result])
    assert path == tmp_path / "rep" / REPORT_MD
    radii = sum(1 for v in result.verdicts if v.kind is Kind.MUST_FIX and v.properties.get("radius") is not None)
    plots = ("gaps", "convergence", *(("radius",) if radii >= MIN_HISTOGRAM else ()))  # a histogram needs 10
    for plot in plots:
        height, width, channels = image_shape(tmp_path / "rep" / f"suite-{plot}.png")
        assert height > 100 and width > 100 and channels in (3, 4)
    assert ("matplotlib.pyplot" in sys.modules) == pyplot_before  # no global backend touched
    text = path.read_text()
    certs = result.details.certs
    assert f"Cert 1 {certs.cert1}, Cert 2 {certs.cert2}, Cert 3 {certs.cert3}" in text
    for plot in plots:
        assert f"(suite-{plot}.png)" in text
    if "radius" not in plots:
        assert "fewer than 10 radii): Certified radius._" in text
    texts = {case.id: case.text for case in suite.cases}
    for verdict in result.verdicts:  # one table row per case, with its text and gaps
        gap_after = f"{verdict.properties['gap_after']:.4g}"
        row = f"| `{verdict.case_id}` | {verdict.kind.value} | {markdown_text(texts[verdict.case_id])} |"
        assert verdict.text == texts[verdict.case_id]
        assert any(line.startswith(row) and gap_after in line for line in text.splitlines())
    data = json.loads((tmp_path / "rep" / REPORT_JSON).read_text())
    assert data["runs"] == [json.loads(json.dumps(result.to_dict()))]
    assert sorted(p.name for p in (tmp_path / "rep").iterdir()) == sorted(
        [REPORT_MD, REPORT_JSON, REPORT_HTML, *(f"suite-{plot}.png" for plot in plots)]
    )  # nothing half-written left behind


def test_report_from_a_certificate_carries_its_numbers(repaired, tmp_path):
    suite, _, result = repaired
    cert_path = Path(result.details.artefact) / CERTIFICATE_NAME
    certificate = Certificate.read(cert_path)
    run = run_from_certificate(certificate, source=str(cert_path))
    write_report(tmp_path, [run])
    cases = {c["id"]: c for c in json.loads((tmp_path / REPORT_JSON).read_text())["runs"][0]["cases"]}
    for claim in certificate.cases:
        assert cases[claim.id]["properties"]["gap_after"] == claim.gap_after
        assert cases[claim.id]["text"] == claim.text  # the certified text, in report.json and on the page
        held = (claim.cert1 and claim.cert3) if claim.kind is Kind.MUST_FIX else claim.cert2
        assert cases[claim.id]["passed"] == bool(held)
    assert run.details.iterations == certificate.repair.iterations


def test_check_run_plots_gaps_only_and_says_what_is_missing(repaired, tmp_path):
    suite, adapter, _ = repaired
    result = check(suite, adapter)
    path = write_report(tmp_path, [result, result])  # two runs of one name: no clash
    text = path.read_text()
    assert "_Not plotted (no data in this run, or fewer than 10 radii): Certified radius, Convergence._" in text
    assert (tmp_path / "suite-gaps.png").is_file() and (tmp_path / "suite-2-gaps.png").is_file()
    assert not (tmp_path / "suite-radius.png").exists()


def test_nothing_to_report_is_an_error(tmp_path):
    with pytest.raises(WarpError, match="nothing to report"):
        write_report(tmp_path, [])


def test_report_files_get_the_umask_mode(repaired, tmp_path):
    _, _, result = repaired
    old = os.umask(0o022)
    try:
        path = write_report(tmp_path / "rep", [result])
    finally:
        os.umask(old)
    for written in path.parent.iterdir():
        assert stat.S_IMODE(written.stat().st_mode) == 0o644, written.name
