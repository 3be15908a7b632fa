"""A certificate is one module and one line of the table: a toy Cert 5 (cert5_half_gap.py), once
registered, is measured by the repair and written in its certificate, recomputed by the audit and by
``warp-check verify`` and the public ``verify()``, and shown in the JUnit XML and the report page;
unregistered, the certificate is as before."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from cert5_half_gap import HALF_GAP
from testkit.suite_builder import split_cases, write_suite

import warp_check
from warp_check.certificates import CERTIFICATES, register, unregister
from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.cli import main

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest", "-p", "no:cacheprovider")


@pytest.fixture
def cert5() -> Iterator[None]:
    register(HALF_GAP)  # the one line that adds it
    yield
    unregister(HALF_GAP)


@pytest.fixture
def suite(pytester: pytest.Pytester, distilbert_dir: Path) -> tuple[Path, list[dict], list[dict]]:
    wrong, right = split_cases(distilbert_dir, 24, seed=2)
    return write_suite(pytester.path / "suite", model=distilbert_dir, fix=wrong, keep=right), wrong, right


def _junit(xml: Path) -> dict[str, dict[str, str]]:
    return {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(xml).getroot().iter("testcase")
    }


def test_a_registered_certificate_is_in_the_certificate_the_audit_junit_and_the_report(cert5, pytester, suite, capsys):
    folder, wrong, right = suite
    repair = pytester.runpytest(*INNER, "--warp-repair", "--junitxml=repair.xml", "--warp-report", "rep")
    repair.assert_outcomes(passed=len(wrong) + len(right))
    certificate = folder / ".warp" / "repaired" / CERTIFICATE_NAME
    written = json.loads(certificate.read_text(encoding="utf-8"))
    claims = {c["id"]: c for c in written["cases"]}
    for case in right:
        (claim,) = claims[case["id"]]["further"]
        share = claim["figures"]["gap_share"]
        assert claim["name"] == "half_gap" and claim["holds"] is (share >= 0.5)
        assert share == pytest.approx(claims[case["id"]]["gap_after"] / claims[case["id"]]["gap_before"], rel=1e-12)
    assert all("further" not in claims[case["id"]] for case in wrong)  # claimed for must_keep cases only
    held = sum(claims[case["id"]]["further"][0]["holds"] for case in right)
    assert written["summary"]["further"] == {"half_gap": f"{held}/{len(right)}"}

    properties = _junit(pytester.path / "repair.xml")
    for case in right:
        shown = properties[case["id"]]
        assert shown["half_gap"] == str(claims[case["id"]]["further"][0]["holds"])
        assert float(shown["gap_share"]) == pytest.approx(claims[case["id"]]["further"][0]["figures"]["gap_share"])
    assert all("half_gap" not in properties[case["id"]] for case in wrong)
    page = (pytester.path / "rep" / "index.html").read_text(encoding="utf-8")
    assert "Cert 5" in page and f"{held}/{len(right)} cases: {HALF_GAP.claim}" in page
    assert f"- Cert 5: {held}/{len(right)} cases: {HALF_GAP.claim}" in (pytester.path / "rep" / "report.md").read_text()

    audit = pytester.runpytest(
        *INNER, "--warp-certificate", str(certificate), "--junitxml=audit.xml", "--warp-report", "audit"
    )
    audit.assert_outcomes(passed=len(wrong) + len(right))
    audited = json.loads((pytester.path / "audit" / "report.json").read_text(encoding="utf-8"))["runs"][0]["cases"]
    checked = {c["id"]: c["message"] for c in audited}
    assert all("(gap, cert2, half_gap)" in checked[case["id"]] for case in right)  # recomputed, and held
    assert f"{held}/{len(right)} cases: {HALF_GAP.claim}" in (pytester.path / "audit" / "index.html").read_text()
    assert {k: v["half_gap"] for k, v in _junit(pytester.path / "audit.xml").items() if "half_gap" in v} == {
        case["id"]: properties[case["id"]]["half_gap"] for case in right
    }

    # A claim the weights do not bear out: the audit recomputes Cert 5 and fails that case.
    lied = right[0]["id"]
    claims[lied]["further"][0]["holds"] = not claims[lied]["further"][0]["holds"]
    forged = pytester.path / "forged.json"
    forged.write_text(json.dumps(written), encoding="utf-8")
    model = ("--warp-model", str(certificate.parent))
    caught = pytester.runpytest(*INNER, *model, "--warp-certificate", str(forged), "-k", lied)
    caught.assert_outcomes(failed=1)
    caught.stdout.fnmatch_lines(["*half_gap: * the certificate says it *"])

    # The command re-checks it too: the genuine certificate holds, the forged one is caught on that case.
    assert main(["verify", str(certificate.parent)]) == 0
    assert "certificate holds" in capsys.readouterr().out
    assert main(["verify", str(certificate.parent), "--certificate", str(forged)]) == 1
    said = capsys.readouterr().out
    assert f"FAILED half_gap [{lied}]: half_gap: " in said and "the certificate says it" in said
    assert "certificate does NOT hold" in said

    # So do the public verify() and verify_chain(), with no argument saying so: every registered
    # certificate is re-checked.
    genuine = warp_check.verify(certificate.parent)
    assert genuine.ok and {c.case_id for c in genuine.checks if c.name == "half_gap"} == {c["id"] for c in right}
    caught = warp_check.verify(certificate.parent, forged)
    assert [(c.name, c.case_id) for c in caught.failures()] == [("half_gap", lied)]
    assert "the certificate says it" in caught.failures()[0].detail
    chain = warp_check.verify_chain(certificate.parent)
    rechecked = chain.links[0].verification
    assert chain.ok and rechecked is not None and sum(c.name == "half_gap" for c in rechecked.checks) == len(right)


def test_unregistered_the_certificate_file_is_as_before(pytester, suite):
    assert HALF_GAP not in CERTIFICATES
    folder, wrong, right = suite
    pytester.runpytest(*INNER, "--warp-repair").assert_outcomes(passed=len(wrong) + len(right))
    written = json.loads((folder / ".warp" / "repaired" / CERTIFICATE_NAME).read_text(encoding="utf-8"))
    assert all("further" not in case for case in written["cases"]) and "further" not in written["summary"]
    shutil.rmtree(folder / ".warp")
