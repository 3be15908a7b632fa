"""Regression-only gating: a case fails only where the baseline got it right and the new model does not."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from testkit.suite_builder import exit_code, split_cases, write_suite

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module")
def release(distilbert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(suite, old, new): the tiny model as the last release; the new one leans to 'positive'
    (its classifier bias moved), so it breaks some negative cases the old one got right."""
    from safetensors.torch import load_file, save_file

    root = tmp_path_factory.mktemp("release")
    wrong, right = split_cases(distilbert_dir, 40, seed=11)
    suite = write_suite(root / "suite", model=distilbert_dir, fix=wrong, keep=right)
    new = Path(shutil.copytree(distilbert_dir, root / "new"))
    weights = load_file(str(new / "model.safetensors"))
    weights["classifier.bias"] += weights["classifier.bias"].new_tensor([-4.0, 4.0])
    save_file(weights, str(new / "model.safetensors"), metadata={"format": "pt"})
    return suite, distilbert_dir, new


def checked(suite: Path, model: Path, capsys) -> dict[str, bool]:
    exit_code(["check", str(suite), "--model", str(model), "--cache", "none", "--json"])
    return {case["id"]: case["passed"] for case in json.loads(capsys.readouterr().out)["cases"]}


def test_diff_fails_only_the_regressions_and_expects_what_the_baseline_got_wrong(release, capsys):
    suite, old, new = release
    before, after = checked(suite, old, capsys), checked(suite, new, capsys)
    regressions = {i for i in after if before[i] and not after[i]}
    both_wrong = {i for i in after if not before[i] and not after[i]}
    assert regressions and both_wrong  # the fixture gives both kinds
    assert exit_code(["diff", str(old), str(new), str(suite), "--cache", "none", "--json"]) == 1
    cases = json.loads(capsys.readouterr().out)["cases"]
    failing = {c["id"] for c in cases if not c["passed"] and "expected_failure" not in c}
    expected = {c["id"] for c in cases if "expected_failure" in c}
    assert (failing, expected) == (regressions, both_wrong)
    for case in cases:
        assert {"baseline_gap", "baseline_predicted", "gap", "predicted"} <= set(case["properties"])
        if case["id"] in regressions:
            assert case["message"].startswith(f"regression against the baseline {old}: it predicted")
    # The baseline against itself: no regression, its own failures expected (xfailed, as pytest says).
    assert exit_code(["diff", str(old), str(old), str(suite), "--cache", "none", "-q"]) == 0
    out = capsys.readouterr().out
    assert " 0 failed, " in out and "xfailed (wrong on the baseline too)" in out


def test_diff_counts_as_pytest_does(release, pytester, capsys):
    """One count for both: per kind, diff's passed / failed / xfailed lines are pytest's summary lines,
    and their totals pytest's outcomes."""
    suite, old, new = release
    capsys.readouterr()
    exit_code(["diff", str(old), str(new), str(suite), "--cache", "none", "-q"])
    printed = capsys.readouterr().out.splitlines()
    args = ["-p", "no:randomly", "-p", "no:cacheprovider", str(suite), "--warp-cache", "none"]
    ran = pytester.runpytest(*args, "--warp-model", str(new), "--warp-baseline", str(old))
    totals = {"passed": 0, "failed": 0, "xfailed": 0}
    for kind in ("must_fix", "must_keep"):
        line = next(row.strip() for row in printed if row.strip().startswith(kind + "  "))
        assert line == next(row.strip() for row in ran.stdout.lines if row.strip().startswith(kind + "  "))
        for number, word in re.findall(r"(\d+) (passed|failed|xfailed)", line):
            totals[word] += int(number)
    ran.assert_outcomes(**totals)
    assert totals["failed"] and totals["xfailed"]  # the fixture has regressions and expected failures


def test_pytest_gates_on_regressions_with_both_verdicts_in_junit(release, pytester, capsys):
    suite, old, new = release
    before, after = checked(suite, old, capsys), checked(suite, new, capsys)
    regressions = sum(before[i] and not after[i] for i in after)
    both_wrong = sum(not before[i] and not after[i] for i in after)
    args = ["-p", "no:randomly", "-p", "no:cacheprovider", str(suite), "--warp-cache", "none"]
    result = pytester.runpytest(*args, "--warp-model", str(new), "--warp-baseline", str(old), "--junitxml=r.xml")
    result.assert_outcomes(failed=regressions, xfailed=both_wrong, passed=len(after) - regressions - both_wrong)
    result.stdout.fnmatch_lines(["*regression against the baseline*", "*xfailed (wrong on the baseline too)*"])
    junit = (pytester.path / "r.xml").read_text(encoding="utf-8")
    assert 'name="baseline_gap"' in junit and 'name="gap"' in junit
    # With --warp-certificate (an audit) it is refused; with --warp-repair it names where restored
    # regressions come from (tests/runs/test_restore.py).
    refused = pytester.runpytest(*args, "--warp-certificate", str(new), "--warp-baseline", str(old))
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*--warp-baseline gates a model on regressions*"])
