"""One input, one verdict: a must_keep case the input model gets wrong, left out of a repair, fails the
run in the Python API as it does in pytest, and a verification of the certificate fails on it too."""

from __future__ import annotations

from pathlib import Path

from testkit.suite_builder import exit_code, split_cases, write_suite

import warp_check as wc


def test_a_case_left_out_is_said_by_the_run_and_fails_the_verification(distilbert_dir: Path, tmp_path: Path, capsys):
    wrong, right = split_cases(distilbert_dir, 24, seed=2)
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[1:], keep=[*right, wrong[0]])
    suite = wc.load_suite(folder)
    run = wc.repair_suite(suite, wc.load_adapter(suite), suite.settings(), out_dir=tmp_path / "repaired")
    assert run.ok and not run.passed  # the repair settled; the case left out fails
    said = (
        "1 must_keep case(s) left out, which fail: the input model gets them wrong and nothing certifies them "
        f"({wrong[0]['id']!r}; each verdict says why and what helps)"
    )
    assert said in run.message
    assert [v.case_id for v in run.verdicts if not v.passed] == [wrong[0]["id"]]
    verification = wc.verify(tmp_path / "repaired")
    assert not verification.ok
    assert [(c.name, c.case_id) for c in verification.failures()] == [("left_out", wrong[0]["id"])]
    assert verification.holds and verification.left_out == (wrong[0]["id"],)  # what the certificate claims holds
    assert exit_code(["verify", str(tmp_path / "repaired")]) == 1
    printed = capsys.readouterr().out.splitlines()
    assert f"  FAILED left_out [{wrong[0]['id']}]: the certificate left this must_keep case out" in "\n".join(printed)
    assert printed[-1] == "certificate holds, but FAILED: 1 must_keep case(s) it left out are wrong on the model"
