"""``warp-check tune``: folds, what each repair sees, the tune part only for the bound, the budget, --write."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from testkit.suite_builder import write_suite
from testkit.tiny_models import synthetic_cases

from warp_check import Kind, SettingsError, candidates, load_adapter, load_suite, load_traffic, tune, write_choice
from warp_check.budget.tune import Candidate, CandidateScore, TuneResult, choose, fold_of
from warp_check.certificates.traffic.sample import Part, part_of, text_key
from warp_check.cli import main
from warp_check.pipeline import ladder as ladder_module
from warp_check.repair.settings import RepairSettings

# Two candidates keep the tiny runs short: the suite's settings, and the same with guards.
GRID = (
    Candidate(name="suite's settings", gamma_s=1.0, mu=100.0, per_case=0, keep_per_case=0, guards=False, levers=0),
    Candidate(name="guards", gamma_s=1.0, mu=100.0, per_case=0, keep_per_case=0, guards=True, levers=1),
)


def traffic_lines(seed: int, n: int) -> list[str]:
    texts = sorted({c["text"] for c in synthetic_cases("binary", n, seed=seed, unseen_rate=0.5)})
    return [json.dumps({"text": t}) + "\n" for t in texts]


@pytest.fixture
def suite_dir(tmp_path: Path, distilbert_dir: Path, tiny_split) -> Path:
    wrong, right = tiny_split
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "traffic.jsonl").write_text("".join(traffic_lines(7, 600)), encoding="utf-8")
    extra = (
        "# the user's own comment, kept by --write\n"
        "[repair]\ngamma_s = 1.0   # margin of the fixes\nmu = 100.0\n\n"
        '[traffic]\npath = "traffic.jsonl"\n'
    )
    return write_suite(folder, model=distilbert_dir, fix=wrong, keep=right, extra=extra)


def test_folds_are_deterministic_disjoint_and_cover_every_case():
    ids = [f"case-{i}" for i in range(31)]
    folds = fold_of(ids, 3)
    assert folds == fold_of(list(reversed(ids)), 3)  # the order given does not matter
    assert set(folds) == set(ids) and set(folds.values()) == {0, 1, 2}
    sizes = np.bincount(list(folds.values()))
    assert sizes.max() - sizes.min() <= 1
    assert fold_of(ids, 3) != fold_of(ids, 4)


def test_the_grid_is_fixed_and_documented():
    grid = candidates(RepairSettings())
    assert grid == candidates(RepairSettings())
    assert 6 <= len(grid) <= 12 and len({c.name for c in grid}) == len(grid)
    assert grid[0].levers == 0 and grid[0].settings(RepairSettings()) == RepairSettings()
    assert {c.guards for c in grid} == {False, True}
    with pytest.raises(SettingsError, match="folds"):
        tune(None, None, None, folds=1)  # type: ignore[arg-type]
    with pytest.raises(SettingsError, match="keep_per_case"):
        dataclasses.replace(GRID[0], keep_per_case=-1)


def test_no_repair_sees_its_fold_and_the_bound_is_measured_on_the_tune_part(suite_dir, monkeypatch):
    suite = load_suite(suite_dir)
    sample = load_traffic(suite)
    seen: list[set[str]] = []
    real = ladder_module.repair_head

    def recording(head, fix, keep, aux=None, settings=None, **kwargs):
        seen.append(set(fix.ids) | set(keep.ids))
        return real(head, fix, keep, aux, settings, **kwargs)

    # internal: which cases each fold's repair was given is in no result
    monkeypatch.setattr(ladder_module, "repair_head", recording)
    copies = dataclasses.replace(GRID[0], name="copies 4/8", per_case=4, keep_per_case=8, levers=1)
    result = tune(suite, load_adapter(suite), sample, folds=3, grid=(*GRID, copies))
    fold = fold_of([c.id for c in suite.cases if c.kind.value == "must_fix"], 3)
    assert seen
    copies_seen = set()
    for ids in seen:
        held = set(fold) - ids
        assert held, "every repair leaves one fold out"
        left_out = fold[next(iter(held))]
        assert held == {i for i, f in fold.items() if f == left_out}  # exactly that fold, all of it
        drawn = {i for i in ids if "~" in i}
        copies_seen |= drawn
        assert not {i for i in drawn if i.rstrip("'").rpartition("~")[0] in held}  # nor the copies drawn from it
    assert copies_seen  # the copies candidate did draw and repair with copies
    scores = result.scores
    for score in scores:
        assert score.measured == result.tune_texts > 0 and score.scored >= len(fold)
    assert scores[1].guards > 0 and scores[0].guards == 0
    # Guards come from the tune part only, never from the bound part.
    guard_ids = {i for ids in seen for i in ids if i.startswith("guard-")}
    tune_keys = {t.key[:16] for t in sample.tune}
    assert guard_ids and {i.removeprefix("guard-") for i in guard_ids} <= tune_keys


def test_the_bound_part_does_not_change_the_choice(suite_dir, tmp_path):
    suite = load_suite(suite_dir)
    sample = load_traffic(suite)
    first = tune(suite, load_adapter(suite), sample, grid=GRID)
    # Other bound-part texts (and more of them): the tune part is the same, so is every figure.
    lines = traffic_lines(11, 400)
    bound_only = [line for line in lines if part_of(text_key(json.loads(line)["text"])) is Part.BOUND]
    other = tmp_path / "other.jsonl"
    kept = [t for t in (suite_dir / "traffic.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
            if part_of(text_key(json.loads(t)["text"])) is Part.TUNE]  # fmt: skip
    other.write_text("".join(kept + bound_only), encoding="utf-8")
    grown = load_traffic(suite, path=other)
    assert grown.digest != sample.digest and [t.key for t in grown.tune] == [t.key for t in sample.tune]
    second = tune(suite, load_adapter(suite), grown, grid=GRID)
    figures = [(s.fixed, s.changed, s.bound) for s in first.scores]
    assert figures == [(s.fixed, s.changed, s.bound) for s in second.scores]
    assert first.chosen.candidate == second.chosen.candidate


def test_the_choice_respects_the_budget(suite_dir):
    suite = load_suite(suite_dir)
    sample = load_traffic(suite)
    free = tune(suite, load_adapter(suite), sample, grid=GRID)
    bounds = sorted(s.bound for s in free.scores if s.failed is None)
    best = max(s.fix_rate for s in free.scores if s.failed is None)
    assert free.chosen is not None and free.chosen.fix_rate == best
    # A budget between the two bounds leaves one candidate; below both, none.
    if bounds[0] < bounds[-1]:
        between = tune(suite, load_adapter(suite), sample, grid=GRID, max_change=bounds[0])
        assert between.chosen is not None and between.chosen.bound <= bounds[0]
    tight = dataclasses.replace(sample, max_change=bounds[0] / 2)
    none = tune(suite, load_adapter(suite), tight, grid=GRID)
    assert none.chosen is None
    assert "no candidate keeps within max_change" in none.message
    assert f"is bounded by {bounds[0]:.3%}" in none.message
    # What may help: more traffic tightens the bound only toward the share of changes it observes.
    least = min((s for s in free.scores if s.failed is None), key=lambda s: (s.bound, s.candidate.levers))
    for budget in (bounds[0] / 2, 1e-9):
        message = dataclasses.replace(none, budget=budget).message
        if least.changed / least.measured >= budget:
            assert "is itself past the budget, so more traffic cannot help" in message
        else:
            assert "try more traffic (the bound tightens" in message


def test_cli_tunes_deterministically_and_exits_1_over_budget(suite_dir, capsys):
    assert main(["tune", str(suite_dir), "--folds", "2", "--json", "--cache", "none"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(["tune", str(suite_dir), "--folds", "2", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    strip = [{k: v for k, v in c.items() if k != "seconds"} for c in first["candidates"]]
    assert strip == [{k: v for k, v in c.items() if k != "seconds"} for c in second["candidates"]]
    assert first["chosen"] == second["chosen"] and len(first["candidates"]) == len(candidates(RepairSettings()))
    lowest = min(c["bound"] for c in first["candidates"] if c["failed"] is None)
    over = ["tune", str(suite_dir), "--folds", "2", "--max-change", f"{lowest / 2:.6f}"]
    assert main([*over, "--progress", "lines", "--progress-after", "0"]) == 1
    out = capsys.readouterr()
    assert "no candidate keeps within max_change" in out.out
    assert "tuning: candidates scored: 10 of 10 candidates" in out.err  # the progress rule's one line
    with pytest.raises(SystemExit) as usage:
        main(["tune", str(suite_dir), "--folds", "1"])
    assert usage.value.code == 2 and "--folds: '1': must be an integer >= 2" in capsys.readouterr().err


def test_write_puts_the_choice_into_warp_toml_keeping_comments(suite_dir, capsys):
    suite = load_suite(suite_dir)
    assert main(["tune", str(suite_dir), "--folds", "2", "--json", "--write"]) == 0
    printed = json.loads(capsys.readouterr().out)
    chosen = next(c for c in printed["candidates"] if c["name"] == printed["chosen"])
    text = (suite_dir / "warp.toml").read_text(encoding="utf-8")
    assert "# the user's own comment, kept by --write" in text and "# margin of the fixes" in text
    again = load_suite(suite_dir)
    settings = again.settings()
    assert settings.gamma_s == chosen["gamma_s"] and settings.mu == chosen["mu"]
    assert settings.neighbours.per_case == chosen["per_case"]
    assert settings.neighbours.keep_per_case == chosen["keep_per_case"]
    guards = suite_dir / "traffic_guards.jsonl"
    assert guards.is_file() == chosen["guards"]
    assert (len(again.cases) > len(suite.cases)) == chosen["guards"]


def test_write_joins_the_guards_as_a_must_keep_file(suite_dir):
    suite = load_suite(suite_dir)
    adapter = load_adapter(suite)
    sample = load_traffic(suite)
    looser = dataclasses.replace(GRID[1], name="gamma_s / 2 + guards", gamma_s=0.5, levers=2)
    result = tune(suite, adapter, sample, folds=2, grid=(looser,))
    assert result.chosen is not None and result.chosen.candidate.guards
    toml, guards = write_choice(suite, result)
    text = toml.read_text(encoding="utf-8")
    assert "\ngamma_s = 0.5  # margin of the fixes\nmu = 100.0\n" in text  # in place, its comment kept
    assert "neighbours" not in text  # what the choice does not move is not written
    assert load_suite(suite_dir).settings() == result.settings
    again = load_suite(suite_dir)
    added = [c for c in again.cases if c.source == "prediction:traffic"]
    assert guards == suite_dir / "traffic_guards.jsonl" and len(added) == len(result.guard_pool) > 0
    assert all(c.kind is Kind.MUST_KEEP for c in added)
    assert {text_key(c.text) for c in added} <= {t.key for t in sample.tune}  # never the bound part
    assert "[[cases]]" in toml.read_text(encoding="utf-8")
    # A second write appends nothing new and lists the file once.
    write_choice(again, result)
    assert toml.read_text(encoding="utf-8").count("traffic_guards.jsonl") == 1
    assert len(load_suite(suite_dir).cases) == len(again.cases)


def test_tune_needs_traffic(tiny_suite, capsys):
    assert main(["tune", str(tiny_suite)]) == 2
    assert "no traffic" in capsys.readouterr().err


def test_a_traffic_without_a_tune_part_is_refused(suite_dir, tmp_path, capsys):
    lines = [line for line in traffic_lines(7, 600) if part_of(text_key(json.loads(line)["text"])) is Part.BOUND]
    only_bound = tmp_path / "bound.jsonl"
    only_bound.write_text("".join(lines), encoding="utf-8")
    assert main(["tune", str(suite_dir), "--traffic", str(only_bound)]) == 2
    assert "no text of the traffic's tune part is left" in capsys.readouterr().err


def _score(candidate, fixed, bound, failed=None):
    return CandidateScore(candidate=candidate, fixed=fixed, scored=100, changed=0, measured=1000, bound=bound,
                          confidence=0.95, guards=0, seconds=0.0, failed=failed)  # fmt: skip


def test_the_choice_at_another_budget_is_the_rule_on_the_same_table():
    grid = candidates(RepairSettings())
    scores = (
        _score(grid[0], 60, 0.06),
        _score(grid[1], 50, 0.03),
        _score(grid[2], 70, 0.009, failed="fold 1 did not converge"),
        _score(grid[3], 40, 0.009),
        _score(grid[4], 40, 0.008),
    )
    assert choose(scores, None) is scores[0]
    assert choose(scores, 0.05) is scores[1]
    assert choose(scores, 0.01) is scores[4]  # a tie on the fix rate goes to the smaller bound
    assert choose(scores, 0.005) is None
    result = TuneResult(scores=scores, chosen=scores[0], budget=None, folds=3, base=RepairSettings(), must_fix=9,
                        tune_texts=1000, guard_pool=(), seconds=1.0)  # fmt: skip
    assert result.at_budget(0.01).chosen is scores[4] and result.at_budget(0.01).budget == 0.01
    assert "no candidate keeps within max_change = 0.500%" in result.at_budget(0.005).message
