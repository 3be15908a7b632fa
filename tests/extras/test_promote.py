"""The ratchet: what a certified repair fixed becomes must_keep, and repairs on top of repairs keep it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from testkit.suite_builder import exit_code, split_cases, write_suite

from warp_check.errors import CertificateError, SuiteError
from warp_check.sources.promote import promote
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
    assert exit_code(["promote", str(folder), "--from", str(out), "--dry-run"]) == 0  # the command, dry
    assert len(records(folder / "fix.jsonl")) == 4
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
    assert exit_code(["promote", str(folder), "--from", str(tampered)]) == 2  # one line, nothing moved
    assert len(records(folder / "fix.jsonl")) == 2
    no_keep = write_suite(tmp_path / "fix-only", model=distilbert_dir, fix=wrong[:2])
    with pytest.raises(SuiteError, match="no must_keep case file to promote into"):
        promote(load_suite(no_keep), out)


NO_HOOD = "[repair.neighbours]\nper_case = 0\nkeep_per_case = 0\n"


@pytest.mark.slow
def test_five_rounds_of_repair_on_top_of_repair_keep_every_earlier_fix(distilbert_dir, pool, tmp_path, capsys):
    # Each release: two new must_fix cases; repair on top of the last repaired model; promote.
    wrong, right = pool
    assert len(wrong) >= 10, "the tiny model gets too few cases wrong for five rounds"
    # Without a neighbourhood: its repairs may fix the next release's failures before they come.
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:2], keep=right[:20], extra=NO_HOOD)
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
    # The whole history, re-checked: five repaired releases and the first model, no drawdown.
    capsys.readouterr()
    assert exit_code(["verify", str(model), "--chain", "--suite", str(folder), "--json"]) == 0
    chain = json.loads(capsys.readouterr().out)
    assert [Path(link["model_dir"]).name for link in chain["links"]] == [
        *(f"release-{i}" for i in range(5, 0, -1)),
        distilbert_dir.name,
    ]
    assert chain["drawdown"]["lost"] == [] and chain["drawdown"]["right_first"] == 20


def test_a_chain_with_a_replaced_link_does_not_hold(distilbert_dir, pool, tmp_path, capsys):
    wrong, right = pool
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:2], keep=right[:10], extra=NO_HOOD)
    first, second = tmp_path / "r1", tmp_path / "r2"
    assert exit_code(["repair", str(folder), "--out", str(first), "-q"]) == 0
    with (folder / "fix.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"text": wrong[2]["text"], "label": wrong[2]["label"]}) + "\n")
    assert exit_code(["repair", str(folder), "--model", str(first), "--out", str(second), "-q"]) == 0
    assert exit_code(["verify", str(second), "--chain"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "chain of 3 model(s): every link holds"
    # r1 repaired again in place (same suite, another rank): r2's parent is no longer there.
    assert exit_code(["repair", str(folder), "--out", str(first), "--rank", "3", "-q"]) == 0
    capsys.readouterr()
    assert exit_code(["verify", str(second), "--chain"]) == 1
    out = capsys.readouterr().out
    assert "FAILED parent_weights: " in out and "does not hold the weights this model was repaired from" in out
