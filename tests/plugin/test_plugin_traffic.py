"""The suite's ``traffic`` item in pytest (pytester, in process): Cert 4 reported, its budget a gate
that fails the run and leaves no artefact, and the audit recomputing it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from testkit.inner_runs import warm_inner_runs
from testkit.suite_builder import write_suite
from testkit.tiny_models import synthetic_cases

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest")


@pytest.fixture(scope="module", autouse=True)
def _warm_imports(distilbert_dir: Path) -> None:
    warm_inner_runs()


@pytest.fixture
def suite(pytester: pytest.Pytester, distilbert_dir: Path, tiny_split) -> Path:
    wrong, right = tiny_split
    folder = pytester.path / "suite"
    folder.mkdir()
    texts = sorted({c["text"] for c in synthetic_cases("binary", 600, seed=7, unseen_rate=0.5)})
    (folder / "traffic.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return write_suite(folder, model=distilbert_dir, fix=wrong, keep=right, extra='[traffic]\npath = "traffic.jsonl"\n')


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*INNER, *args)


def test_the_budget_gate_fails_the_traffic_item_exits_1_and_writes_nothing(pytester, suite, tiny_split):
    wrong, right = tiny_split
    result = run(pytester, "--warp-repair", "--warp-max-change", "0.05", "-rf")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=len(wrong) + len(right), failed=1)
    result.stdout.fnmatch_lines(
        [
            "*FAILED Cert 4 fails the budget: the repair changes at most * % of predictions on traffic like this*",
            "*repaired model: none written*",
            "FAILED suite/warp.toml::traffic - Cert 4 fails the budget*",
        ]
    )
    text = result.stdout.str()
    assert "over max_change = 5 % by" in text and "nothing was written" in text
    assert "fewer or looser must_fix cases (a smaller gamma_s), a larger mu" in text
    assert "cannot be fixed within it: '" in text  # the must_fix cases the budget cannot buy, named
    assert "traffic of the suite at suite/warp.toml:" in text
    assert not (suite / ".warp" / "repaired").exists()


def test_without_a_budget_the_item_passes_and_reports_the_bound(pytester, suite):
    xml = pytester.path / "junit.xml"
    result = run(pytester, "--warp-repair", f"--junitxml={xml}", "-k", "traffic or s2")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*traffic: *traffic.jsonl: * rows, 0 duplicate(s) merged, * suite case(s) left out; * texts measured*",
            "*Cert 4: the repair changes at most * % of predictions on traffic like this (* of *, 95 %)*",
        ]
    )
    certificate = json.loads((suite / ".warp" / "repaired" / "warp_certificate.json").read_text())
    case = next(c for c in ET.parse(xml).getroot().iter("testcase") if c.get("name") == "traffic")
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    claim = certificate["traffic"]
    assert properties["n"] == str(claim["n"]) and properties["changed"] == str(claim["changed"])
    assert float(properties["bound"]) == pytest.approx(claim["bound"]) and properties["confidence"] == "0.95"
    # the audit recomputes Cert 4 on the saved model
    audited = run(pytester, "--warp-certificate", str(suite / ".warp" / "repaired"), "-k", "traffic")
    audited.assert_outcomes(passed=1, deselected=len(certificate["cases"]))
    audited.stdout.fnmatch_lines(["*Cert 4 holds: the repair changes at most*"])


def test_a_check_has_no_traffic_item(pytester, suite, tiny_split):
    wrong, right = tiny_split
    result = run(pytester, "--collect-only", "-q")
    assert "traffic" not in result.stdout.str()
    assert run(pytester, "--warp-repair", "--collect-only", "-q").stdout.str().count("::traffic") == 1


def test_a_budget_without_traffic_is_refused_once(pytester, distilbert_dir, tiny_split):
    wrong, right = tiny_split
    write_suite(pytester.path / "plain", model=distilbert_dir, fix=wrong, keep=right)
    result = run(pytester, "plain", "--warp-repair", "--warp-max-change", "0.01")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*a budget needs traffic: give --traffic or [[]traffic] in*"])
    bad = run(pytester, "plain", "--warp-repair", "--warp-max-change", "2")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR and 'did you mean 2 %? write 0.02 or "2%"' in bad.stderr.str()
