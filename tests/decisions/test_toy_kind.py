"""A kind of decision registered from outside the core (top_in_set.py: one module, one line) goes
through a check, a repair and its certificates recomputed in float64, unchanged core code."""

from __future__ import annotations

import numpy as np
import pytest
from top_in_set import TOP_IN_SET

from warp_check.certify.bounds import eps_star, lipschitz
from warp_check.certify.cases import gaps_in_both
from warp_check.certify.falsify import pgd_worst_gap
from warp_check.decisions import DECISIONS, SINGLE_LABEL, LabelSpace, decision
from warp_check.model.activations import ACTIVATIONS
from warp_check.model.head import DenseHead
from warp_check.repair.loop import repair_head
from warp_check.repair.records import CaseSet, RepairStatus
from warp_check.repair.settings import RepairSettings

CLASSES = 4
NAMES = {"red": 0, "green": 1, "blue": 2, "grey": 3}


def toy_problem(seed: int = 0, d: int = 48) -> tuple[DenseHead, CaseSet, CaseSet]:
    """A random 4-class head deciding "the top class is one of the case's set": must_keep cases it
    answers right with room, must_fix cases it answers wrong by a little (a set of two classes each)."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(d, d)) / np.sqrt(d)
    head = DenseHead(
        W, rng.normal(size=d) * 0.1, rng.normal(size=(CLASSES, d)) * (3.0 / np.sqrt(d)), np.zeros(CLASSES),
        ACTIVATIONS["relu"], storage_dtype="float32", decision=TOP_IN_SET,
    )  # fmt: skip
    head = head.with_weight(head.round_to_storage(W))
    V = rng.normal(size=(600, d))
    stated = [tuple(sorted(rng.choice(CLASSES, size=2, replace=False).tolist())) for _ in range(len(V))]
    answers = TOP_IN_SET.answers(stated, CLASSES)
    gaps = head.gaps(V, answers)[0]
    keep = np.flatnonzero(gaps > 0.5)[:120]
    fix = np.flatnonzero((gaps < -0.05) & (gaps > -0.6))[:8]
    return (
        head,
        CaseSet(tuple(f"fix{i}" for i in range(len(fix))), V[fix], answers[fix]),
        CaseSet(tuple(f"keep{i}" for i in range(len(keep))), V[keep], answers[keep]),
    )


def test_a_kind_is_one_registration_and_single_label_comes_first():
    assert next(iter(DECISIONS)) == SINGLE_LABEL.name
    assert decision("top_in_set") is TOP_IN_SET
    with pytest.raises(ValueError, match="'top_of_set': not a kind of decision; use one of 'single_label'"):
        decision("top_of_set")


def test_the_kind_reads_a_case_files_answer_and_words_its_errors():
    space = LabelSpace(names=NAMES, num_classes=CLASSES)
    assert TOP_IN_SET.parse_answer(["red", 2], space) == (0, 2)
    with pytest.raises(ValueError, match=r"unknown label 'gren' \(did you mean 'green'\?\)"):
        TOP_IN_SET.parse_answer(["gren"], space)
    with pytest.raises(ValueError, match="allows every class"):
        TOP_IN_SET.parse_answer(list(NAMES), space)
    with pytest.raises(ValueError, match="must be a non-empty list"):
        TOP_IN_SET.parse_answer("red", space)


def test_a_check_answers_as_the_kind_decides_and_its_plain_python_twin_agrees():
    head, fix, keep = toy_problem()
    logits = head.logits(np.vstack([fix.V, keep.V]))
    answers = np.vstack([fix.labels, keep.labels])
    predictions, gaps = head.decision.answers_from_logits(logits, answers)
    right = TOP_IN_SET.right(predictions, answers)
    assert not right[: len(fix)].any() and right[len(fix) :].all()
    assert np.array_equal(right, gaps > 0)
    for row, answer in zip(logits, answers, strict=True):
        predicted, gap = TOP_IN_SET.answer_of(row.tolist(), set(np.flatnonzero(answer).tolist()))
        assert predicted == int(np.argmax(row)) and gap == pytest.approx(
            head.decision.margins(row[None], answer[None]).gap[0]
        )


def test_a_repair_meets_the_kinds_margins_and_its_certificates_hold_in_float64():
    head, fix, keep = toy_problem()
    assert len(fix) >= 4 and len(keep) >= 60
    result = repair_head(head, fix, keep, settings=RepairSettings(rank=2))
    assert result.status is RepairStatus.CONVERGED, result.message
    after = result.head_after
    assert after.decision is TOP_IN_SET
    # Cert 1 and 2, recomputed from the returned weights in float64 and in the saved arithmetic.
    gap_fix, stored_fix = gaps_in_both(after, fix.V, fix.labels)
    gap_keep, stored_keep = gaps_in_both(after, keep.V, keep.labels)
    assert np.minimum(gap_fix, stored_fix).min() >= 1.0
    assert np.minimum(gap_keep, stored_keep).min() >= 0.3
    assert TOP_IN_SET.right(after.predict(keep.V), keep.labels).all()
    assert TOP_IN_SET.right(after.predict(fix.V), fix.labels).all()
    # Cert 3: no perturbation inside ε* = gap / 2L leaves the set, and an attack inside finds none.
    radius = eps_star(gap_fix, lipschitz(after).L)
    assert (radius > 0).all()
    assert (pgd_worst_gap(after, fix.V, fix.labels, radius) > 0).all()
    # Cert 4's "changed" and a regression are the kind's too.
    changed = TOP_IN_SET.changed(head.predict(fix.V), after.predict(fix.V))
    assert changed.all()
    assert not TOP_IN_SET.regressed(head.predict(keep.V), after.predict(keep.V), keep.labels).any()
