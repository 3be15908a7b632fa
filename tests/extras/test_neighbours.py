"""Neighbourhoods of must_fix cases: perturbed copies the model gets wrong become must_fix cases too."""

from __future__ import annotations

from pathlib import Path

import pytest
from testkit.suite_builder import split_cases

from warp_check import ClassifierAdapter
from warp_check.cases import Case, Kind
from warp_check.errors import SettingsError
from warp_check.extras.neighbours import SOURCE, neighbour_cases, perturbed_texts
from warp_check.runs.pipeline import evaluate


def test_perturbed_texts_are_distinct_new_and_the_same_for_the_same_seed():
    text = "the food was not good at all"
    first = perturbed_texts(text, 6, seed=3)
    assert len(first) == 6 and len(set(first)) == 6 and text not in first
    assert perturbed_texts(text, 6, seed=3) == first
    assert perturbed_texts(text, 6, seed=4) != first


def test_neighbours_are_wrong_predictions_with_the_originals_label_and_id(distilbert_dir: Path):
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    wrong, _ = split_cases(distilbert_dir, 40, seed=2)
    fix = [Case(id=f"f{i}", text=r["text"], label=["negative", "positive"].index(r["label"]), kind=Kind.MUST_FIX)
           for i, r in enumerate(wrong[:4])]  # fmt: skip
    found = neighbour_cases(adapter, fix, per_case=6, seed=0)
    assert found, "the tiny model gets some perturbation of its own mistakes wrong"
    by_id = {c.id: c for c in fix}
    for case in found:
        original = by_id[case.id.split("~")[0]]
        assert case.kind is Kind.MUST_FIX and case.source == SOURCE and case.label == original.label
        assert case.text != original.text
    gaps = evaluate(adapter, found, progress=False).gaps
    assert (gaps <= 0).all()  # every neighbour kept is one the model gets wrong
    assert neighbour_cases(adapter, fix, per_case=6, seed=0) == found  # seeded
    assert neighbour_cases(adapter, fix, per_case=0) == []
    with pytest.raises(SettingsError, match="per_case"):
        neighbour_cases(adapter, fix, per_case=-1)


def test_the_neighbours_command_appends_them_to_the_must_fix_file_once(distilbert_dir: Path, tmp_path: Path, capsys):
    import json

    from testkit.suite_builder import exit_code, write_suite

    from warp_check.suite.loader import load_suite

    wrong, right = split_cases(distilbert_dir, 40, seed=2)
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:4], keep=right[:10])
    command = ["neighbours", str(folder), "--per-case", "6", "--cache", "none"]
    argv = [*command, "--per-keep-case", "0"]
    assert exit_code([*command, "--per-keep-case", "-1"]) == 2
    assert exit_code([*command, "--keep-cases", "some"]) == 2
    assert exit_code(argv) == 0
    lines = [json.loads(line) for line in (folder / "fix.jsonl").read_text(encoding="utf-8").splitlines()]
    added = [line for line in lines if line.get("source") == SOURCE]
    assert added and len(lines) == 4 + len(added)
    originals = {c.id for c in load_suite(folder).cases if c.kind is Kind.MUST_FIX and c.source != SOURCE}
    assert all(line["original"] in originals and line["id"].startswith(line["original"] + "~") for line in added)
    capsys.readouterr()
    assert exit_code(argv) == 0  # the same draws again: nothing new
    said = capsys.readouterr().out
    assert f"0 neighbour case(s) the model gets wrong appended to {folder / 'fix.jsonl'}; {len(added)} already" in said
    keep_ids = {c.id for c in load_suite(folder).cases if c.kind is Kind.MUST_KEEP}
    assert exit_code(command) == 0  # by default must_keep cases are perturbed too
    lines = [json.loads(line) for line in (folder / "fix.jsonl").read_text(encoding="utf-8").splitlines()]
    from_keep = [line for line in lines if line.get("original") in keep_ids]
    assert from_keep and all(line["source"] == SOURCE for line in from_keep)


def test_must_keep_neighbours_the_model_gets_wrong_become_must_fix_with_the_kept_label(distilbert_dir: Path):
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    wrong, right = split_cases(distilbert_dir, 40, seed=2)

    def cases(records, prefix, kind):
        labels = ["negative", "positive"]
        return [Case(id=f"{prefix}{i}", text=r["text"], label=labels.index(r["label"]), kind=kind)
                for i, r in enumerate(records)]  # fmt: skip

    fix, keep = cases(wrong[:3], "f", Kind.MUST_FIX), cases(right, "k", Kind.MUST_KEEP)
    alone = neighbour_cases(adapter, fix + keep, per_case=6, keep_per_case=0, seed=0)
    both = neighbour_cases(adapter, fix + keep, per_case=6, keep_per_case=6, keep_cases=None, seed=0)
    from_keep = [c for c in both if c.id.startswith("k")]
    assert from_keep, "the tiny model gets some perturbation of a case it gets right wrong"
    assert [c for c in both if c.id.startswith("f")] == alone  # must_fix draws do not depend on keep_per_case
    by_id = {c.id: c for c in keep}
    for case in from_keep:
        original = by_id[case.id.split("~")[0]]
        assert case.kind is Kind.MUST_FIX and case.source == SOURCE and case.label == original.label
    assert (evaluate(adapter, from_keep, progress=False).gaps <= 0).all()
    assert not any(c.id.startswith("k") for c in alone)
    with pytest.raises(SettingsError, match="keep_per_case"):
        neighbour_cases(adapter, keep, keep_per_case=-1)
    # A seeded sample of must_keep cases bounds the cost; a sampled case draws what it draws unsampled.
    sampled = neighbour_cases(adapter, fix + keep, per_case=0, keep_per_case=6, keep_cases=5, seed=0)
    assert len(keep) > 5 and sampled and {c.id.split("~")[0] for c in sampled} <= {c.id for c in keep}
    assert len({c.id.split("~")[0] for c in sampled}) <= 5 and set(sampled) <= set(from_keep)
    assert neighbour_cases(adapter, fix + keep, per_case=0, keep_per_case=6, keep_cases=5, seed=0) == sampled
    assert neighbour_cases(adapter, keep, per_case=0, keep_per_case=6, keep_cases=0) == []
    with pytest.raises(SettingsError, match="keep_cases"):
        neighbour_cases(adapter, keep, keep_cases=-1)
