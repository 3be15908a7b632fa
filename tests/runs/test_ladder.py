"""The repair ladder's one retry rule, on its own: each rung's loop scripted (how it ends), the model real.

The script decides each loop's end from what it was given (the final layer's head is σ the identity,
the paper's loop has no function-space price, copies are cases of their own ids), so these tests say
which rungs run after which endings, which result stands, and what it says about the rungs before it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from testkit.tiny_models import synthetic_cases

from warp_check.cases import Case, Kind
from warp_check.model.adapter import ClassifierAdapter
from warp_check.pipeline import ladder
from warp_check.pipeline.evaluation import evaluate
from warp_check.pipeline.ladder import FELL_BACK, Ladder, Rung, climb
from warp_check.pipeline.neighbourhood import Neighbourhood
from warp_check.repair.loop import repair_head
from warp_check.repair.records import Miss, RepairStatus
from warp_check.repair.settings import RepairSettings

NC, CONVERGED = RepairStatus.NOT_CONVERGED, RepairStatus.CONVERGED


@pytest.fixture(scope="module")
def bert(bert_dir: Path):
    """The tiny BERT (a dense tanh pooler that falls back to its classifier), six cases encoded."""
    adapter = ClassifierAdapter.from_pretrained(bert_dir)
    texts = [c["text"] for c in synthetic_cases("binary", 6, seed=0)]
    cases = [
        Case(id=f"c{i}", text=text, label=i % 2, kind=Kind.MUST_FIX if i < 2 else Kind.MUST_KEEP)
        for i, text in enumerate(texts)
    ]
    return adapter, evaluate(adapter, cases, progress=False)


def scripted(monkeypatch, ends):
    """The ladder's loop replaced: ``ends(where, fix_ids)`` says how it ends, ``where`` naming the loop
    ('dense', 'dense paper', 'final', 'final paper'); a list of the loops run, in order."""
    real = repair_head
    runs: list[str] = []

    def loop(head, fix, keep, aux=None, settings=None, *, progress=False):
        where = "final" if head.activation.name == "identity" else "dense"
        where += " paper" if settings.mu == 0.0 else ""
        runs.append(where)
        status, misses = ends(where, fix.ids)
        template = real(head, fix, keep, aux, replace(settings, max_iter=1))
        return replace(
            template, status=status, message=f"{where} {status.value}", misses=misses, settings=settings, seconds=1.0
        )

    # internal: which rung converges turns on the solve; scripting each loop's end reaches every rung
    monkeypatch.setattr(ladder, "repair_head", loop)
    return runs


def test_the_first_rung_that_converges_settles_and_names_the_ones_it_followed(bert, monkeypatch):
    adapter, evaluation = bert
    runs = scripted(monkeypatch, lambda where, ids: (CONVERGED if where == "final" else NC, ()))
    ended = climb(Ladder(adapter=adapter, evaluation=evaluation, settings=RepairSettings(), progress=False))
    assert runs == ["dense", "dense paper", "final"]
    assert ended.tried == (Rung.ADAPTER_HEAD, Rung.PAPER_LOOP, Rung.FINAL_LAYER)
    assert ended.attempt.rung is Rung.FINAL_LAYER and ended.attempt.adapter.spec.found_by.startswith(FELL_BACK)
    assert ended.attempt.adapter.spec.found_by.endswith("did not converge (not_converged after 1 iteration(s))")
    assert ended.result.message == (
        "final converged, on the final linear layer 'classifier' after the dense form "
        f"{adapter.spec.quoted} did not converge"
    )
    assert ended.result.seconds == 2.0  # the final layer's and the dense form's it names, not the paper's loop's


def test_the_papers_loop_that_settles_names_the_loop_that_stalled(bert, monkeypatch):
    adapter, evaluation = bert
    runs = scripted(monkeypatch, lambda where, ids: (CONVERGED if where == "dense paper" else NC, ()))
    ended = climb(Ladder(adapter=adapter, evaluation=evaluation, settings=RepairSettings(), progress=False))
    assert runs == ["dense", "dense paper"] and ended.attempt.rung is Rung.PAPER_LOOP
    assert ended.result.settings.mu == 0.0 and ended.result.settings.max_rank == ended.result.settings.rank
    assert ended.result.message == (
        "dense paper converged (the paper's loop: mu 0, rank 2 fixed, λ fixed, after the defaults stalled: "
        "dense not_converged)"
    )
    assert ended.attempt.adapter.spec is adapter.spec and ended.result.seconds == 2.0


def test_an_infeasible_dense_form_goes_to_the_final_layer_not_to_the_papers_loop(bert, monkeypatch):
    adapter, evaluation = bert
    ends = {"dense": RepairStatus.INFEASIBLE, "final": NC, "final paper": CONVERGED}
    runs = scripted(monkeypatch, lambda where, ids: (ends[where], ()))
    ended = climb(Ladder(adapter=adapter, evaluation=evaluation, settings=RepairSettings(), progress=False))
    assert runs == ["dense", "final", "final paper"]
    assert ended.result.message.startswith(
        "final paper converged (the paper's loop: mu 0, rank 2 fixed, λ fixed, after the defaults stalled: "
        "final not_converged), on the final linear layer 'classifier'"
    )
    assert ended.result.seconds == 3.0


@pytest.mark.parametrize(
    ("status", "fallback", "runs_after"),
    [
        (RepairStatus.NOTHING_TO_REPAIR, True, []),  # no rung helps a repair that did nothing
        (RepairStatus.INVALID_INPUT, True, []),
        (NC, False, ["dense paper"]),  # one layer: the paper's loop, never the final layer
        (NC, True, ["dense paper", "final", "final paper"]),
    ],
)
def test_where_no_rung_converges_the_suites_own_repair_stands(bert, monkeypatch, status, fallback, runs_after):
    adapter, evaluation = bert
    runs = scripted(monkeypatch, lambda where, ids: (status if where == "dense" else NC, ()))
    settings = RepairSettings()
    ended = climb(Ladder(adapter=adapter, evaluation=evaluation, settings=settings, fallback=fallback, progress=False))
    assert runs == ["dense", *runs_after]
    assert ended.attempt.rung is Rung.ADAPTER_HEAD and ended.attempt.adapter.spec is adapter.spec
    assert ended.result.status is status and ended.result.settings == settings
    assert ended.result.message.startswith(f"dense {status.value}")
    tried_final = "final" in runs_after
    said = "the final linear layer 'classifier' was repaired instead and did not converge either (not_converged"
    assert (said in ended.result.message) is tried_final


def test_settings_that_are_the_papers_already_have_no_papers_loop_to_try(bert, monkeypatch):
    adapter, evaluation = bert
    runs = scripted(monkeypatch, lambda where, ids: (NC, ()))
    paper = ladder.paper_loop(RepairSettings())
    ended = climb(Ladder(adapter=adapter, evaluation=evaluation, settings=paper, fallback=False))
    assert runs == ["dense paper"] and ended.tried == (Rung.ADAPTER_HEAD,)


def copies(evaluation, ids: tuple[str, ...]) -> Neighbourhood:
    """Copies of the first must_fix case under ``ids``."""
    one = evaluation.subset([0])
    cases = tuple(replace(one.cases[0], id=i) for i in ids)
    twin = replace(one, cases=cases[:1], encoded=replace(one.encoded, ids=ids[:1], input_keys=()))
    joined = twin
    for case in cases[1:]:
        joined = joined.joined(replace(twin, cases=(case,), encoded=replace(twin.encoded, ids=(case.id,))))
    return Neighbourhood(perturbed=1, drawn=len(ids), evaluation=joined, seconds=0.0)


def test_copies_the_best_iterate_misses_are_dropped_until_the_rest_converge(bert, monkeypatch):
    adapter, evaluation = bert

    def ends(where, ids):  # "in-the-way" can never be met: the others can once it is gone
        if "in-the-way" in ids:
            return NC, (Miss("in-the-way", "must_fix", -1.0, 1.0), Miss("c0", "must_fix", 0.5, 1.0))
        return CONVERGED, ()

    runs = scripted(monkeypatch, ends)
    hood = copies(evaluation, ("in-the-way", "fine"))
    ended = climb(Ladder(adapter=adapter, evaluation=evaluation, settings=RepairSettings(), hood=hood))
    assert runs == ["dense", "dense"]  # the settings' loop alone: no paper's loop beside copies
    assert ended.tried == (Rung.WITH_COPIES, Rung.DROP_COPIES) and ended.attempt.rung is Rung.DROP_COPIES
    assert ended.hood.dropped == ("in-the-way",) and ended.hood.left_out is None
    assert [c.id for c in ended.attempt.evaluation.cases][-1] == "fine"


@pytest.mark.parametrize("missed", [("a", "b"), ()], ids=["every-copy", "suite-cases-only"])
def test_copies_that_cannot_be_sorted_out_are_left_out_whole(bert, monkeypatch, missed):
    adapter, evaluation = bert

    def ends(where, ids):
        if "a" in ids:
            return NC, tuple(Miss(i, "must_fix", -1.0, 1.0) for i in (*missed, "c0"))
        return CONVERGED, ()

    runs = scripted(monkeypatch, ends)
    hood = copies(evaluation, ("a", "b"))
    ended = climb(Ladder(adapter=adapter, evaluation=evaluation, settings=RepairSettings(), hood=hood))
    assert runs == ["dense", "dense"] and ended.tried == (Rung.WITH_COPIES, Rung.ADAPTER_HEAD)
    assert ended.attempt.rung is Rung.ADAPTER_HEAD and ended.result.message == "dense converged"
    assert ended.hood.left_out.startswith("not_converged: dense not_converged") and not ended.hood.dropped


def test_the_rounds_of_dropping_copies_are_counted(bert, monkeypatch):
    adapter, evaluation = bert

    def ends(where, ids):  # each try misses its first copy: one goes a round
        copy = next((i for i in ids if i.startswith("x")), None)
        return (NC, (Miss(copy, "must_fix", -1.0, 1.0),)) if copy else (CONVERGED, ())

    scripted(monkeypatch, ends)
    hood = copies(evaluation, ("x1", "x2", "x3", "x4"))
    ended = climb(Ladder(adapter=adapter, evaluation=evaluation, settings=RepairSettings(), hood=hood))
    drops = (Rung.DROP_COPIES,) * ladder.DROP_ROUNDS
    assert ended.tried == (Rung.WITH_COPIES, *drops, Rung.ADAPTER_HEAD)
    assert ended.hood.dropped == ("x1", "x2") and ended.hood.left_out is not None
