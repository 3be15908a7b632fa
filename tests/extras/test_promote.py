"""The ratchet: what a certified repair fixed becomes must_keep, and repairs on top of repairs keep it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from testkit.suite_builder import exit_code, split_cases, write_suite

from warp_check.errors import CertificateError, SuiteError
from warp_check.extras.promote import promote
from warp_check.suite.loader import load_suite


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def pool(distilbert_dir: Path) -> tuple[list[dict], list[dict]]:
    return split_cases(distilbert_dir, 160, seed=5)


def test_fixed_cases_move_to_must_keep_with_their_ids_and_the_certificate(distilbert_dir, pool, tmp_path):
    wrong, right = pool
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:4], keep=right[:20])
    out = tmp_path / "r1"
    assert exit_code(["repair", str(folder), "--out", str(out), "-q"]) == 0
    suite = load_suite(folder)
    fixed_ids = [c.id for c in suite.cases if c.kind.value == "must_fix"]
    dry = promote(suite, out, dry_run=True)
    assert dry.promoted == tuple(fixed_ids) and records(folder / "fix.jsonl") != []  # nothing written
    done = promote(suite, out)
    assert done.promoted == tuple(fixed_ids) and done.not_fixed == ()
    assert records(folder / "fix.jsonl") == []
    moved = [r for r in records(folder / "keep.jsonl") if r["id"] in fixed_ids]
    assert len(moved) == 4 and {r["fixed_by"] for r in moved} == {done.certificate_sha256}
    assert all(r["kind"] == "must_keep" for r in moved)
    again = load_suite(folder)  # the suite still loads, the promoted cases are must_keep now
    assert {c.id for c in again.cases if c.kind.value == "must_keep"} >= set(fixed_ids)
    assert exit_code(["check", str(folder), "--model", str(out), "-q"]) == 0  # the repaired model keeps them


def test_nothing_is_promoted_from_a_model_its_certificate_does_not_describe(distilbert_dir, pool, tmp_path):
    wrong, right = pool
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:2], keep=right[:10])
    out = tmp_path / "r1"
    assert exit_code(["repair", str(folder), "--out", str(out), "-q"]) == 0
    tampered = tmp_path / "tampered"
    shutil.copytree(out, tampered)
    shutil.copy(distilbert_dir / "model.safetensors", tampered / "model.safetensors")
    with pytest.raises(CertificateError, match="not the ones warp_certificate.json certifies"):
        promote(load_suite(folder), tampered)
    no_keep = write_suite(tmp_path / "fix-only", model=distilbert_dir, fix=wrong[:2])
    with pytest.raises(SuiteError, match="no must_keep case file to promote into"):
        promote(load_suite(no_keep), out)


@pytest.mark.slow
def test_five_rounds_of_repair_on_top_of_repair_keep_every_earlier_fix(distilbert_dir, pool, tmp_path):
    # Each release: two new must_fix cases; repair on top of the last repaired model; promote.
    wrong, right = pool
    assert len(wrong) >= 10, "the tiny model gets too few cases wrong for five rounds"
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:2], keep=right[:20])
    model = distilbert_dir
    promoted: list[str] = []
    for round_ in range(5):
        if round_:  # the next release's new failures
            with (folder / "fix.jsonl").open("a", encoding="utf-8") as handle:
                for case in wrong[2 * round_ : 2 * round_ + 2]:
                    handle.write(json.dumps({k: v for k, v in case.items() if k != "margin"}) + "\n")
        out = tmp_path / f"release-{round_ + 1}"
        assert exit_code(["repair", str(folder), "--model", str(model), "--out", str(out), "-q"]) == 0, round_
        certificate = json.loads((out / "warp_certificate.json").read_text())
        # Every earlier fix is now a must_keep case, and the new repair certifies it kept.
        kept = {c["id"]: c for c in certificate["cases"] if c["kind"] == "must_keep"}
        assert all(kept[i]["cert2"] for i in promoted), round_
        assert exit_code(["verify", str(out), "--suite", str(folder)]) == 0, round_  # audited as released
        promoted += promote(load_suite(folder, model=out), out).promoted
        model = out
    assert len(promoted) == 10
    assert exit_code(["check", str(folder), "--model", str(model), "-q"]) == 0  # all 30 cases right
