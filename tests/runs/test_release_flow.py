"""Release after release, as a user lives it, with the commands alone: a suite started from nothing
(``init``, ``import --split-by-model``), release 1 repaired and its fixes promoted, release 2 fine-tuned
elsewhere and gated on its regressions against release 1, repaired with those regressions restored, and
the whole history verified back to the first model with no drawdown.

Which cases each model gets right is measured with plain transformers (testkit), not by warp-check.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from testkit.releases import leaning
from testkit.suite_builder import exit_code, margins, split_cases

LABEL = {"negative": 0, "positive": 1}


def right_on(model: Path, rows: list[dict]) -> set[str]:
    gaps = margins(model, [r["text"] for r in rows], [LABEL[r["label"]] for r in rows])
    return {r["text"] for r, gap in zip(rows, gaps, strict=True) if gap > 0}


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_a_suite_from_nothing_through_two_releases_keeps_every_case_the_first_model_got_right(
    distilbert_dir: Path, tmp_path: Path, capsys
):
    wrong, right = split_cases(distilbert_dir, 80, seed=11)
    rows = [*wrong[:3], *right]
    source = tmp_path / "labelled.csv"
    with open(source, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["sentence", "label"])
        writer.writeheader()
        writer.writerows({"sentence": r["text"], "label": r["label"]} for r in rows)
    suite = tmp_path / "suite"

    # A suite from nothing: the rows the model gets wrong become must_fix, the rest must_keep.
    assert exit_code(["init", str(suite), "--model", str(distilbert_dir)]) == 0
    assert exit_code(["import", str(suite), str(source), "--text", "sentence", "--split-by-model"]) == 0
    first_right = right_on(distilbert_dir, rows)
    assert {r["text"] for r in records(suite / "must_keep.jsonl")} == first_right
    assert exit_code(["check", str(suite), "-q"]) == 1  # the gate fails on the must_fix cases

    # Release 1: repaired, and its certified fixes promoted to must_keep.
    r1 = tmp_path / "releases" / "r1"
    assert exit_code(["repair", str(suite), "--out", str(r1), "-q"]) == 0
    assert exit_code(["promote", str(suite), "--from", str(r1)]) == 0
    assert records(suite / "must_fix.jsonl") == []
    assert len(records(suite / "must_keep.jsonl")) == len(rows)
    assert exit_code(["check", str(suite), "--model", str(r1), "-q"]) == 0

    # Release 2, fine-tuned elsewhere from release 1 (no certificate): it breaks some of release 1's cases.
    r2_finetuned = leaning(r1, tmp_path / "releases" / "r2-finetuned", 1.5)
    (r2_finetuned / "warp_certificate.json").unlink()
    lost = right_on(r1, rows) - right_on(r2_finetuned, rows)
    assert lost, "the fine-tune breaks none of release 1's cases: lean it further"
    capsys.readouterr()
    assert exit_code(["diff", str(r1), str(r2_finetuned), str(suite), "--json"]) == 1
    regressions = {c["text"] for c in json.loads(capsys.readouterr().out)["cases"] if not c["passed"]}
    assert regressions == lost  # the gate names exactly what the fine-tune broke

    # Release 2 repaired with release 1 as the baseline: every regression restored and certified.
    r2 = tmp_path / "releases" / "r2"
    assert exit_code(["repair", str(suite), "--model", str(r2_finetuned), "--baseline", str(r1), "--out", str(r2),
                      "-q"]) == 0  # fmt: skip
    certificate = json.loads((r2 / "warp_certificate.json").read_text())
    restored = {c["id"] for c in certificate["cases"] if c.get("restored")}
    assert len(restored) == len(lost)
    assert all(c["cert1"] for c in certificate["cases"] if c.get("restored"))
    assert right_on(r2, rows) == {r["text"] for r in rows}  # every case right again, measured apart

    # The history, verified back to the first model through the fine-tune: no drawdown.
    capsys.readouterr()
    assert exit_code(["verify", str(r2), "--chain", "--suite", str(suite), "--json"]) == 0
    chain = json.loads(capsys.readouterr().out)
    assert [Path(link["model_dir"]).name for link in chain["links"]] == [
        "r2", "r2-finetuned", "r1", distilbert_dir.name,
    ]  # fmt: skip
    assert chain["drawdown"]["lost"] == [] and chain["drawdown"]["right_first"] == len(first_right)
