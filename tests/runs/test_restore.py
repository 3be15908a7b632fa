"""Restoring regressions: a must_keep case the model under repair gets wrong and the suite's baseline
got right is repaired back (Cert 1 and 3, ``restored: true``), by default; one both get wrong is left
out; ``[repair] restore_regressions = false`` leaves them all out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit.releases import leaning
from testkit.suite_builder import exit_code, margins, split_cases, write_suite

import warp_check
from warp_check.releases.restore import CHAIN_START, reference_for

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module")
def release(distilbert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The tiny model as the last release (old), a new one that breaks some of its must_keep cases, and
    the regressions measured with plain transformers (not warp_check)."""
    root = tmp_path_factory.mktemp("restore")
    wrong, right = split_cases(distilbert_dir, 80, seed=11)
    new = leaning(distilbert_dir, root / "new", 1.5)
    label = {"negative": 0, "positive": 1}
    after = margins(new, [c["text"] for c in right], [label[c["label"]] for c in right])
    regressions = {c["id"] for c, gap in zip(right, after, strict=True) if gap <= 0}
    assert regressions, "the shift breaks none of the old model's cases"
    both_wrong = wrong[3]  # a must_keep case the old model gets wrong too (and, leaning further, the new one)
    return {"root": root, "old": distilbert_dir, "new": new, "fix": wrong[:3], "keep": [*right, both_wrong],
            "regressions": regressions, "both_wrong": both_wrong["id"]}  # fmt: skip


def certificate(folder: Path) -> dict:
    return json.loads((folder / "warp_certificate.json").read_text(encoding="utf-8"))


def test_a_regression_is_restored_and_certified_against_the_baseline(release, tmp_path, capsys):
    suite = write_suite(tmp_path / "suite", model=release["old"], fix=release["fix"], keep=release["keep"])
    out = tmp_path / "r2"
    args = ["repair", str(suite), "--model", str(release["new"]), "--baseline", str(release["old"])]
    # The case both models get wrong is left out (and fails); every regression is restored.
    assert exit_code([*args, "--out", str(out), "--cache", "none", "--json"]) == 1
    run = json.loads(capsys.readouterr().out)
    verdicts = {case["id"]: case for case in run["cases"]}
    assert set(run["details"]["restored"]) == release["regressions"]
    for case_id in release["regressions"]:
        assert verdicts[case_id]["passed"] and verdicts[case_id]["kind"] == "must_keep"
        assert verdicts[case_id]["message"].startswith(f"restored: a regression against the baseline {release['old']}")
        assert verdicts[case_id]["properties"]["restored"] is True
    left_out = verdicts[release["both_wrong"]]
    assert not left_out["passed"] and f"and so did the baseline {release['old']}" in left_out["message"]
    assert [case_id for case_id, v in verdicts.items() if not v["passed"]] == [release["both_wrong"]]
    written = certificate(out)
    records = {case["id"]: case for case in written["cases"]}
    for case_id in release["regressions"]:  # Cert 1 and 3, kind kept
        record = records[case_id]
        assert (record["kind"], record["restored"], record["cert1"], record["cert3"]) == ("must_keep", True, True, True)
        assert record["gap_before"] <= 0 and record["gap_after"] >= written["settings"]["gamma_s"]
    assert records[release["both_wrong"]]["excluded"] and not records[release["both_wrong"]]["restored"]
    baseline = written["baseline"]
    assert (baseline["source"], baseline["chosen_by"]) == (str(release["old"]), "--baseline")
    assert set(baseline["restored"]) == release["regressions"]
    # Re-checked from the files: the restored cases' Cert 1 and 3 hold; the case left out fails, as in the repair.
    verification = warp_check.verify(out)  # verify reads no cache unless given one
    assert [(c.name, c.case_id) for c in verification.failures()] == [("left_out", release["both_wrong"])]
    assert exit_code(["verify", str(out)]) == 1
    # A baseline that is not there is refused before any work, naming the flag.
    missing = ["repair", str(suite), "--model", str(release["new"]), "--baseline", str(tmp_path / "nowhere")]
    assert exit_code([*missing, "--out", str(tmp_path / "never"), "--cache", "none"]) == 2
    assert "--baseline: " in capsys.readouterr().err and not (tmp_path / "never").exists()
    # The command's summary says how many.
    report = tmp_path / "report"
    assert exit_code([*args, "--out", str(tmp_path / "again"), "--cache", "none", "-q", "--report", str(report)]) == 1
    printed = capsys.readouterr().out
    assert f"restored {len(release['regressions'])} regression(s)" in printed
    assert f"- restored {len(release['regressions'])} regression(s) against the baseline" in (
        report / "report.md"
    ).read_text(encoding="utf-8")


def test_pytest_restores_against_warp_baseline_with_a_junit_property(release, pytester):
    suite = write_suite(pytester.path / "suite", model=release["old"], fix=release["fix"], keep=release["keep"][:-1])
    result = pytester.runpytest(
        "-p", "no:randomly", "-p", "no:cacheprovider", str(suite), "--warp-cache", "none",
        "--warp-model", str(release["new"]), "--warp-repair", "--warp-baseline", str(release["old"]),
        "--warp-out", str(pytester.path / "r2"), "--junitxml=r.xml",
    )  # fmt: skip
    result.assert_outcomes(passed=len(release["fix"]) + len(release["keep"]) - 1)
    result.stdout.fnmatch_lines([f"*restored {len(release['regressions'])} regression(s)*"])
    junit = (pytester.path / "r.xml").read_text(encoding="utf-8")
    assert junit.count('name="restored" value="True"') == len(release["regressions"])
    refused = pytester.runpytest(
        str(suite), "--warp-baseline", str(release["old"]), "--warp-certificate", str(pytester.path / "r2")
    )
    assert refused.ret == pytest.ExitCode.USAGE_ERROR


def test_restore_regressions_false_leaves_them_out(release, tmp_path, capsys):
    extra = "[repair]\nrestore_regressions = false\n"
    suite = write_suite(tmp_path / "suite", model=release["old"], fix=release["fix"], keep=release["keep"], extra=extra)
    out = tmp_path / "r2"
    args = ["repair", str(suite), "--model", str(release["new"]), "--baseline", str(release["old"]), "--out", str(out)]
    assert exit_code([*args, "--cache", "none", "--json"]) == 1
    run = json.loads(capsys.readouterr().out)
    failing = {case["id"]: case["message"] for case in run["cases"] if not case["passed"]}
    assert set(failing) == release["regressions"] | {release["both_wrong"]}
    assert all("restore_regressions = false" in message for message in failing.values())
    assert run["details"]["restored"] == []
    written = certificate(out)
    assert "baseline" not in written and not any(case["restored"] for case in written["cases"])


def test_without_a_baseline_they_are_left_out_saying_how_to_restore_them(release, tmp_path, capsys):
    suite = write_suite(tmp_path / "suite", model=release["old"], fix=release["fix"], keep=release["keep"])
    out = tmp_path / "r2"
    assert exit_code(["repair", str(suite), "--model", str(release["new"]), "--out", str(out), "--cache", "none"]) == 1
    printed = capsys.readouterr().out
    assert "no baseline says whether it is a regression" in printed and "--baseline DIR" in printed
    assert "baseline" not in certificate(out)


def test_without_a_baseline_the_certificate_chain_s_first_model_is_the_baseline(release, tmp_path, capsys):
    # Release 1 repaired from the old model; then changed with its certificate copied along (its chain
    # still starts at the old model): the cases the old model got right are restored against it.
    suite = write_suite(tmp_path / "suite", model=release["old"], fix=release["fix"], keep=release["keep"][:-1])
    first = tmp_path / "r1"
    assert exit_code(["repair", str(suite), "--out", str(first), "--cache", "none", "-q"]) == 0
    assert reference_for(first, None, option="--baseline").model_dir == release["old"]
    assert reference_for(release["old"], None, option="--baseline") is None  # no certificate: no chain
    broken = leaning(first, tmp_path / "broken", 0.0)
    (broken / "warp_certificate.json").write_text("{", encoding="utf-8")
    assert reference_for(broken, None, option="--baseline") is None  # a chain that cannot be read names none
    changed = leaning(first, tmp_path / "r1-changed", 1.5)
    out = tmp_path / "r2"
    assert exit_code(["repair", str(suite), "--model", str(changed), "--out", str(out), "--cache", "none", "-q"]) == 0
    baseline = certificate(out)["baseline"]
    assert (baseline["source"], baseline["chosen_by"]) == (str(release["old"]), CHAIN_START)
    assert baseline["restored"]


def test_the_baselines_answers_are_data_the_repair_takes_as_given(release, tmp_path):
    """The repair loads no baseline: it restores the cases its caller's judgement names, and the gate's
    answers on the baseline (the same computation a restore asks for) name the same regressions."""
    from dataclasses import replace

    import warp_check as wc
    from warp_check.releases.baseline_folder import suite_on_baseline
    from warp_check.releases.restore import Reference, judged
    from warp_check.runs.check import check_suite
    from warp_check.runs.repair import model_answers

    suite = wc.load_suite(
        write_suite(tmp_path / "suite", model=release["old"], fix=release["fix"], keep=release["keep"]),
        model=release["new"],
    )
    adapter, settings = wc.load_adapter(suite), suite.settings()
    first = model_answers(suite, adapter, settings, out_dir=tmp_path / "out")
    assert set(first.wrong) == release["regressions"] | {release["both_wrong"]}
    gate = check_suite(suite_on_baseline(suite, release["old"]), ids=first.wrong)
    right = {v.case_id for v in gate.verdicts if v.passed}
    assert right == release["regressions"]
    reference = judged(Reference(model_dir=release["old"], chosen_by="--baseline"), first.wrong, right)
    assert set(reference.restored) == release["regressions"] and reference.wrong_there_too == (release["both_wrong"],)
    # Handed a judgement that names one regression only, the repair restores that one: it takes the
    # answers as given and asks the baseline nothing (the certificate hashes its weights, nothing more).
    one = sorted(release["regressions"])[0]
    narrowed = judged(Reference(model_dir=release["old"], chosen_by="--baseline"), first.wrong, {one})
    run = wc.repair_suite(
        suite, adapter, settings, out_dir=tmp_path / "out", restoring=replace(first, reference=narrowed)
    )
    restored = {v.case_id for v in run.verdicts if v.message.startswith("restored:")}
    assert restored == {one}
    assert certificate(tmp_path / "out")["baseline"]["restored"] == [one]
