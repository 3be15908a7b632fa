"""The plugin in its own processes: pytest-xdist (repair once, same numbers as serial) and the
promise that ``pytest --help`` and plain test runs never import torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from testkit.suite_builder import split_cases, write_suite

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest")
HEAVY = ("torch", "transformers", "osqp", "matplotlib", "textattack")
# A warm check is pure Python: not even numpy (0.15 s of a run that takes about a second).
NOT_WARM = (*HEAVY, "numpy", "scipy", "safetensors", "hypothesis")


def junit_properties(path: Path) -> dict[str, dict[str, str]]:
    return {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(path).getroot().iter("testcase")
    }


def test_xdist_repairs_once_and_reports_what_a_serial_run_reports(pytester, distilbert_dir, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    wrong, right = split_cases(distilbert_dir, 24, seed=2)
    suite = write_suite(pytester.path / "suite", model=distilbert_dir, fix=wrong, keep=right)
    n = len(wrong) + len(right)
    serial = pytester.runpytest(*INNER, "--warp-repair", "--junitxml=serial.xml")
    serial.assert_outcomes(passed=n)

    result = pytester.runpytest_subprocess(
        *INNER, "-n", "2", "-v", "--warp-repair", "--junitxml=xdist.xml", "--warp-report", "rep"
    )
    result.assert_outcomes(passed=n)
    output = result.stdout.str()
    assert "[gw0] " in output and "[gw1] " in output  # both workers ran cases
    result.stdout.fnmatch_lines(
        [
            "*= warp-check =*",
            f"  must_fix   {len(wrong)} passed, 0 failed",
            f"  must_keep  {len(right)} passed, 0 failed",
            "  repair: converged in *",
            "  computed once, by xdist worker gw*",
        ]
    )
    # One result file for the one repair of this test run; the other worker read it.
    assert len(list((suite / ".warp" / "runs").glob("*.json"))) == 1
    assert junit_properties(pytester.path / "xdist.xml") == junit_properties(pytester.path / "serial.xml")
    # The controller wrote the report from what the workers' reports carried back.
    report = json.loads((pytester.path / "rep" / "report.json").read_text())["runs"][0]
    assert len(report["cases"]) == n and report["details"]["computed_by"].startswith("gw")
    texts = {case["id"]: case["text"] for case in wrong + right}
    assert {case["id"]: case["text"] for case in report["cases"]} == texts  # each case's text travelled too


def test_help_and_plain_test_runs_do_not_import_heavy_libraries(pytester):
    help_run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pytest", "--help"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert help_run.returncode == 0, help_run.stderr[-2000:]
    assert "--warp-repair" in help_run.stdout and "warp_gamma_h" in help_run.stdout  # the plugin is loaded
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in help_run.stderr.splitlines() if "|" in line}
    assert "pytest_warp" in imported
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))

    # A project with ordinary tests and no suite: the plugin costs nothing there either.
    pytester.makeconftest(
        f"""
        import sys

        def pytest_unconfigure(config):
            heavy = sorted(name for name in {HEAVY!r} if name in sys.modules)
            open("heavy.txt", "w").write(",".join(heavy))
        """
    )
    pytester.makepyfile("def test_plain():\n    assert 1 + 1 == 2\n")
    run = pytester.runpytest_subprocess(*INNER)
    run.assert_outcomes(passed=1)
    assert (pytester.path / "heavy.txt").read_text() == ""


def test_a_second_plain_run_answers_from_the_cache_without_importing_torch_or_numpy(
    pytester, distilbert_dir, tiny_split
):
    # The warm path (warp_check.cache.warm): the first run loads the model and records the folder; the
    # second finds the same folder content and reports the same verdicts from the cache alone.
    wrong, right = tiny_split
    write_suite(pytester.path / "suite", model=distilbert_dir, fix=wrong, keep=right)
    pytester.makeconftest(
        f"""
        import sys

        def pytest_unconfigure(config):
            heavy = sorted(name for name in {NOT_WARM!r} if name in sys.modules)
            open("heavy.txt", "a").write(",".join(heavy) + "\\n")
        """
    )
    for name in ("cold", "warm"):
        run = pytester.runpytest_subprocess(*INNER, "-v", f"--junitxml={name}.xml")
        run.assert_outcomes(passed=len(right), failed=len(wrong))
    cold_heavy, warm_heavy = (pytester.path / "heavy.txt").read_text().splitlines()
    assert "torch" in cold_heavy.split(",") and warm_heavy == ""
    run.stdout.fnmatch_lines(["  encoder: 0 case(s) encoded, * from the cache, *; model not loaded (same folder*"])
    assert junit_properties(pytester.path / "warm.xml") == junit_properties(pytester.path / "cold.xml")
