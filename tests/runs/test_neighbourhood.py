"""A repair's neighbourhood: perturbed copies of suite cases the model gets wrong join it as must_fix cases."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from testkit.suite_builder import split_cases

from warp_check import ClassifierAdapter
from warp_check.cases import NEIGHBOUR, Case, Kind
from warp_check.errors import SettingsError
from warp_check.perturb import perturbed_texts, wordnet_available
from warp_check.pipeline.evaluation import evaluate
from warp_check.pipeline.neighbourhood import chosen_cases, draw_neighbourhood
from warp_check.repair.settings import KeepChoice, NeighbourSettings, RepairSettings, SynonymUse
from warp_check.runs.details import WITHOUT_SYNONYMS, NeighbourhoodNote
from warp_check.runs.repair_cases import repair_cases

LABELS = ["negative", "positive"]


def as_cases(records, prefix, kind):
    return [Case(id=f"{prefix}{i}", text=r["text"], label=LABELS.index(r["label"]), kind=kind)
            for i, r in enumerate(records)]  # fmt: skip


@pytest.fixture(scope="module")
def suite_cases(distilbert_dir: Path):
    wrong, right = split_cases(distilbert_dir, 60, seed=2)
    return as_cases(wrong[:4], "f", Kind.MUST_FIX), as_cases(right, "k", Kind.MUST_KEEP)


def test_perturbed_texts_are_distinct_new_and_the_same_for_the_same_seed():
    text = "the food was not good at all"
    first = perturbed_texts(text, 6, seed=3)
    assert len(first) == 6 and len(set(first)) == 6 and text not in first
    assert perturbed_texts(text, 6, seed=3) == first
    assert perturbed_texts(text, 6, seed=4) != first
    assert perturbed_texts(text, 3, seed=3) == first[:3]  # stopping early draws the same first texts


def test_settings_are_validated_and_read_as_toml_spells_them():
    assert NeighbourSettings(keep_cases="all").keep_cases is None
    assert NeighbourSettings(keep_choice="random").keep_choice is KeepChoice.RANDOM
    # Off unless asked for: on a strong model it costs general accuracy (the settings' docstring).
    assert NeighbourSettings() == NeighbourSettings.off() and not RepairSettings().neighbours.enabled
    on = NeighbourSettings(seed=3, keep_cases=40).drawing()
    assert on == NeighbourSettings(per_case=8, keep_per_case=16, seed=3, keep_cases=40) and on.drawing() == on
    assert NeighbourSettings(per_case=2).drawing() == NeighbourSettings(per_case=2)  # on already: as it is
    assert not NeighbourSettings(per_case=0, keep_cases=0).enabled
    for field, value in (("per_case", -1), ("keep_per_case", 1.5), ("keep_cases", -2), ("keep_choice", "closest"),
                         ("synonyms", "yes"), ("synonyms", 1), ("max_edits", 0)):  # fmt: skip
        with pytest.raises(SettingsError, match=field):
            NeighbourSettings(**{field: value})
    settings = RepairSettings(neighbours=NeighbourSettings(keep_cases=None, keep_choice=KeepChoice.RANDOM))
    assert RepairSettings.from_dict(settings.to_dict()) == settings
    # A command line's one word: off, on, or how many must_keep cases (on and a count turn an off one on).
    measured = NeighbourSettings().drawing()
    assert measured.overridden("OFF") == NeighbourSettings.off()
    assert NeighbourSettings().overridden("on") == measured and measured.overridden(" On ") == measured
    assert NeighbourSettings().overridden("all") == replace(measured, keep_cases=None)
    assert NeighbourSettings.off().overridden("40") == replace(measured, keep_cases=40)
    assert NeighbourSettings(per_case=3).overridden("40") == NeighbourSettings(per_case=3, keep_cases=40)
    for word in ("-3", "²", "٣", "9" * 5000):  # isdigit() takes the two in the middle; int() refuses them
        with pytest.raises(SettingsError, match="must be off, on, all, or how many"):
            NeighbourSettings().overridden(word)
    old = {k: v for k, v in RepairSettings().to_dict().items() if k != "neighbours"}
    assert RepairSettings.from_dict(old).neighbours == NeighbourSettings.off()  # recorded before neighbourhoods
    assert NeighbourSettings(synonyms="auto").synonyms is None and NeighbourSettings().synonyms is None


def test_the_must_keep_cases_nearest_the_boundary_are_chosen_and_wrong_ones_never():
    fix = [Case(id="f", text="bad", label=0, kind=Kind.MUST_FIX)]
    keep = [Case(id=f"k{i}", text=f"text {i}", label=1, kind=Kind.MUST_KEEP) for i in range(6)]
    gaps = np.array([-1.0, 3.0, 0.2, -0.5, 0.1, 2.0, 0.9])  # f, then k0 … k5 (k2 is wrong)
    nearest = NeighbourSettings(per_case=2, keep_per_case=3, keep_cases=3)
    chosen = chosen_cases([*fix, *keep], gaps, nearest)
    assert [(seed, c.id, n) for seed, c, n in chosen] == [(0, "f", 2), (2, "k1", 3), (4, "k3", 3), (6, "k5", 3)]
    sampled = chosen_cases([*fix, *keep], gaps, replace(nearest, keep_choice=KeepChoice.RANDOM))
    assert len(sampled) == 4 and "k2" not in {c.id for _, c, _ in sampled}
    every = chosen_cases([*fix, *keep], gaps, replace(nearest, keep_cases=None))
    assert [c.id for _, c, _ in every] == ["f", "k0", "k1", "k3", "k4", "k5"]
    # A case's seed is its place within its kind: the same whichever others are chosen.
    assert {c.id: s for s, c, _ in every}["k3"] == 4


def test_neighbours_are_wrong_predictions_with_the_originals_label(distilbert_dir: Path, suite_cases):
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    fix, keep = suite_cases
    evaluation = evaluate(adapter, fix + keep, progress=False)
    settings = NeighbourSettings(per_case=6, keep_per_case=6, keep_cases=None)
    hood = draw_neighbourhood(adapter, evaluation, settings)
    assert hood.cases and hood.drawn > len(hood.cases) and hood.perturbed == len(fix) + len(keep)
    assert any(c.id.startswith("k") for c in hood.cases), "the tiny model gets some variant of a kept case wrong"
    by_id = {c.id: c for c in fix + keep}
    for case in hood.cases:
        original = by_id[case.id.rsplit("~", 1)[0]]
        assert case.kind is Kind.MUST_FIX and case.source == NEIGHBOUR and case.label == original.label
        assert case.text != original.text
    assert (hood.evaluation.gaps <= 0).all()
    assert (evaluate(adapter, list(hood.cases), progress=False).gaps <= 0).all()
    assert draw_neighbourhood(adapter, evaluation, settings).cases == hood.cases  # seeded
    assert draw_neighbourhood(adapter, evaluation, NeighbourSettings.off()).cases == ()
    # Variants already among the cases are not drawn again: a suite holding its neighbourhood adds nothing.
    holding = evaluate(adapter, fix + keep + list(hood.cases), progress=False)
    assert draw_neighbourhood(adapter, holding, settings).cases == ()


def test_synonyms_auto_draws_them_where_wordnet_is_installed_and_says_so_where_not(
    distilbert_dir: Path, suite_cases, monkeypatch
):
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    fix, keep = suite_cases
    evaluation = evaluate(adapter, fix + keep, progress=False)
    auto = NeighbourSettings(per_case=4, keep_per_case=2, keep_cases=10)
    if wordnet_available():  # the environment with the WordNet extra: auto is synonyms = true
        assert draw_neighbourhood(adapter, evaluation, auto).synonyms is SynonymUse.USED
        assert (
            draw_neighbourhood(adapter, evaluation, auto).cases
            == draw_neighbourhood(adapter, evaluation, replace(auto, synonyms=True)).cases
        )
    monkeypatch.setitem(sys.modules, "nltk", None)  # `import nltk` fails, as where the WordNet extra is not installed
    hood = draw_neighbourhood(adapter, evaluation, auto)
    off = draw_neighbourhood(adapter, evaluation, replace(auto, synonyms=False))
    assert hood.synonyms is SynonymUse.NOT_INSTALLED and off.synonyms is SynonymUse.OFF
    assert hood.cases == off.cases
    note = NeighbourhoodNote.of(hood)
    assert WITHOUT_SYNONYMS in str(note) and WITHOUT_SYNONYMS not in str(NeighbourhoodNote.of(off))
    assert NeighbourhoodNote.from_json(json.loads(json.dumps(note.to_json()))) == note
    # A repair records what it drew, not "auto": its certificate's settings say false here.
    outcome = repair_cases(adapter, fix + keep, RepairSettings(neighbours=auto), progress=False, fallback=False)
    assert outcome.result.repaired and outcome.neighbourhood.synonyms is SynonymUse.NOT_INSTALLED
    assert outcome.result.settings.neighbours == replace(auto, synonyms=False)


def test_a_second_draw_reads_the_first_ones_texts_back(distilbert_dir: Path, suite_cases, tmp_path, monkeypatch):
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    fix, keep = suite_cases
    evaluation = evaluate(adapter, fix + keep[:10], progress=False)
    settings = NeighbourSettings(per_case=6, keep_per_case=6, keep_cases=None)
    first = draw_neighbourhood(adapter, evaluation, settings, cache_dir=tmp_path)
    assert first.cases and (tmp_path / "perturbations.json").is_file()

    def no_draw(*args, **kwargs):
        raise AssertionError("drawn again although remembered")

    # internal: a draw read back gives the same texts as one drawn again; only the draw's call tells them apart
    monkeypatch.setattr("warp_check.pipeline.neighbourhood.perturbed_texts", no_draw)
    again = draw_neighbourhood(adapter, evaluation, settings, cache_dir=tmp_path)
    assert again.cases == first.cases and again.drawn == first.drawn
    # Other settings draw other texts: they are not read back.
    with pytest.raises(AssertionError, match="drawn again"):
        draw_neighbourhood(adapter, evaluation, replace(settings, seed=1), cache_dir=tmp_path)


def test_a_variant_whose_input_is_a_cases_already_is_left_out(distilbert_dir: Path, suite_cases):
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    fix, keep = suite_cases
    settings = NeighbourSettings(per_case=6, keep_per_case=0)
    hood = draw_neighbourhood(adapter, evaluate(adapter, fix, progress=False), settings)
    twin = hood.cases[0]
    # The same input under another id and label in the suite (an uncased tokenizer's twin): it is left out.
    clash = Case(id="clash", text=twin.text.upper(), label=1 - twin.label, kind=Kind.MUST_KEEP)
    assert adapter.tokenize([clash.text], [None])[0] == adapter.tokenize([twin.text], [None])[0]
    again = draw_neighbourhood(adapter, evaluate(adapter, [*fix, clash], progress=False), settings)
    assert twin.id not in {c.id for c in again.cases}
    assert {c.id for c in again.cases} == {c.id for c in hood.cases} - {twin.id}


def test_a_repair_certifies_its_neighbourhood_and_the_paper_setting_draws_none(distilbert_dir: Path, suite_cases):
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    fix, keep = suite_cases
    settings = RepairSettings(neighbours=NeighbourSettings(per_case=6, keep_per_case=6, keep_cases=20))
    outcome = repair_cases(adapter, fix + keep, settings, progress=False)
    hood = outcome.neighbourhood
    assert outcome.result.repaired and hood is not None and hood.cases and hood.left_out is None
    records = {r.id: r for r in outcome.certificate.cases}
    assert {c.id for c in hood.cases} <= set(records)
    assert all(records[c.id].cert1 and records[c.id].source == NEIGHBOUR for c in hood.cases)
    assert all(records[c.id].cert1 for c in fix) and all(records[c.id].cert2 for c in keep)
    alone = repair_cases(adapter, fix + keep, replace(settings, neighbours=NeighbourSettings.off()), progress=False)
    assert alone.neighbourhood is None and {r.id for r in alone.certificate.cases} == {c.id for c in fix + keep}
    # Nothing needs repair: nothing is drawn and nothing changes.
    kept = repair_cases(adapter, keep, settings, progress=False)
    assert kept.neighbourhood is None and not kept.result.repaired


def _with_a_contradiction(monkeypatch):
    """draw_neighbourhood, its copies joined by one no weights can meet: a kept case's own input under
    the other label."""
    import warp_check.runs.repair_cases as repair_cases

    real = repair_cases.draw_neighbourhood

    def contradicting(adapter, evaluation, settings, **kw):
        hood = real(adapter, evaluation, settings, **kw)
        k = next(i for i, c in enumerate(evaluation.cases) if c.kind is Kind.MUST_KEEP)
        bad = evaluation.subset([k])
        case = replace(bad.cases[0], id="contradiction", kind=Kind.MUST_FIX, label=1 - bad.cases[0].label)
        twin = replace(bad, cases=(case,), encoded=replace(bad.encoded, ids=("contradiction",), input_keys=()))
        return replace(hood, evaluation=twin.joined(hood.evaluation))

    # internal: the draw leaves out a copy whose input is a case's (tested above), so no real draw contradicts one
    monkeypatch.setattr(repair_cases, "draw_neighbourhood", contradicting)


def test_a_copy_the_repair_cannot_meet_is_dropped_and_the_rest_certified(distilbert_dir: Path, suite_cases,
                                                                          monkeypatch):  # fmt: skip
    _with_a_contradiction(monkeypatch)
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    fix, keep = suite_cases
    # Typos only, the same copies wherever WordNet is installed or not: the contradiction alone is missed.
    settings = RepairSettings(max_iter=20, neighbours=NeighbourSettings(per_case=4, keep_per_case=0, synonyms=False))
    outcome = repair_cases(adapter, fix + keep, settings, progress=False, fallback=False)
    hood = outcome.neighbourhood
    assert outcome.result.repaired, outcome.result.message
    assert hood.left_out is None and hood.dropped == ("contradiction",) and hood.cases
    certified = {r.id: r for r in outcome.certificate.cases}
    assert "contradiction" not in certified
    assert all(certified[c.id].cert1 and certified[c.id].source == NEIGHBOUR for c in hood.cases)
    note = str(NeighbourhoodNote.of(hood))
    assert f"{len(hood.cases)} repaired and certified" in note and "1 the repair could not meet" in note


def test_a_neighbourhood_the_repair_cannot_meet_is_left_out_not_fatal(distilbert_dir: Path, suite_cases, monkeypatch):
    import warp_check.pipeline.ladder as ladder

    _with_a_contradiction(monkeypatch)
    # internal: with the contradiction above, the ladder's dropping rounds always find it
    monkeypatch.setattr(ladder, "DROP_ROUNDS", 0)  # no copy is dropped: the neighbourhood goes whole
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    fix, keep = suite_cases
    settings = RepairSettings(max_iter=20, neighbours=NeighbourSettings(per_case=4, keep_per_case=0))
    outcome = repair_cases(adapter, fix + keep, settings, progress=False, fallback=False)
    assert outcome.result.repaired, outcome.result.message
    assert outcome.neighbourhood.left_out is not None and not outcome.neighbourhood.dropped
    assert "contradiction" not in {r.id for r in outcome.certificate.cases}
    assert not any(r.source == NEIGHBOUR for r in outcome.certificate.cases)
    assert "repaired alone" in str(NeighbourhoodNote.of(outcome.neighbourhood))
