"""INV/DIR helpers catch planted faults and record shrunk counterexamples."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from testkit.edit_distance import damerau_levenshtein

from warp_check import (
    Case,
    ClassifierAdapter,
    Kind,
    assert_moves_toward,
    assert_same_label,
    case_and_punctuation,
    evaluate,
    predictor,
    scorer,
    typos,
)
from warp_check.extras.invariance import Counterexample, InvarianceFailure, counterexamples, record_counterexamples
from warp_check.suite.casefile import append_cases

FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- INV / DIR helpers ------------------------------------------------------------------


def keyword_predict(texts: list[str]) -> list[int]:
    """A planted fault: positive only when the exact lower-case word 'great' is present."""
    return [int("great" in re.findall(r"[a-z]+", t)) for t in texts]


def robust_predict(texts: list[str]) -> list[int]:
    return [int("gr" in t.lower()) for t in texts]


@FAST
@given(data=st.data())
def test_same_label_passes_for_an_invariant_predictor(data):
    text = "The food was great"
    assert_same_label(robust_predict, text, data.draw(case_and_punctuation(text)))


@pytest.mark.parametrize("run_seed", range(6))
def test_same_label_finds_the_planted_non_invariance_and_shrinks_to_one_edit(run_seed):
    """Whatever the seed, the report is a one-edit variant: edits are addressed in the original text,
    so hypothesis can delete any one of them without changing what the others do (with a count
    and positions in the edited text, 5 seeds in 300 stopped at two edits)."""
    text = "The food was great"

    @seed(run_seed)
    @settings(max_examples=50, deadline=None, database=None)
    @given(data=st.data())
    def check(data):
        assert_same_label(keyword_predict, text, data.draw(typos(text)))

    with pytest.raises(InvarianceFailure) as failure:
        check()
    message = str(failure.value)
    assert "label changed under perturbation: 1 -> 0" in message
    assert repr(text) in message
    variant = re.search(r"variant  \(label 0\): '(.*)'", message).group(1)
    assert variant != text and damerau_levenshtein(text, variant) == 1
    assert failure.value.counterexample == Counterexample(text=variant, label=1, original=text, check="same_label")


def positive_scores(texts: list[str]) -> np.ndarray:
    """P(positive) rises with the number of '!' (a DIR property that holds)."""
    p = np.array([1 - 0.5 ** (1 + t.count("!")) for t in texts])
    return np.stack([1 - p, p], axis=1)


def test_moves_toward_passes_when_the_score_does_not_fall():
    assert_moves_toward(positive_scores, "Good", "Good!", label=1)
    assert_moves_toward(positive_scores, "Good", "Good", label=1)


def test_moves_toward_names_both_texts_and_the_drop():
    with pytest.raises(AssertionError, match=r"score for label 1 fell by 0\.25") as failure:
        assert_moves_toward(positive_scores, "Good!", "Good", label=1)
    assert "'Good!'" in str(failure.value) and "'Good'" in str(failure.value)
    assert_moves_toward(positive_scores, "Good!", "Good", label=1, tolerance=0.3)
    with pytest.raises(ValueError, match="label=2"):
        assert_moves_toward(positive_scores, "a", "b", label=2)


def test_helpers_reject_a_predictor_returning_the_wrong_count():
    with pytest.raises(ValueError, match="returned 1 results for 2 texts"):
        assert_same_label(lambda texts: [0], "a", "b")


def test_predictor_and_scorer_agree_with_evaluate(distilbert_dir):
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    texts = ["the movie was great", "terrible awful film", "okay I guess", "The service was great!"]
    cases = [Case(id=str(i), text=t, label=0, kind=Kind.MUST_KEEP) for i, t in enumerate(texts)]
    expected = evaluate(adapter, cases, progress=False).predictions.tolist()
    assert predictor(adapter, batch_size=3)(texts) == expected
    scores = scorer(adapter, batch_size=3)(texts)
    assert scores.shape == (4, 2) and np.allclose(scores.sum(axis=1), 1)
    assert scores.argmax(axis=1).tolist() == expected


# -- counterexamples for --warp-record ----------------------------------------------------


def test_same_label_with_a_known_label_fails_on_a_misclassified_original():
    with pytest.raises(InvarianceFailure, match="the original itself gets label 0, not the expected 1") as failure:
        assert_same_label(keyword_predict, "nice food", "nice food!", label=1, original_id="case-7")
    assert failure.value.counterexample == Counterexample(
        text="nice food", label=1, original="nice food", check="same_label", original_id="case-7"
    )
    with pytest.raises(ValueError, match="label=-1"):
        assert_same_label(keyword_predict, "a", "b", label=-1)


def test_moves_toward_records_only_when_the_original_already_has_the_label():
    with pytest.raises(InvarianceFailure) as failure:  # original top class 1 = label: the variant should be 1 too
        assert_moves_toward(positive_scores, "Good!", "Good", label=1)
    assert failure.value.counterexample == Counterexample(text="Good", label=1, original="Good!", check="moves_toward")
    with pytest.raises(InvarianceFailure, match="not a must_fix case: the original's top class is 1, not 0") as other:
        assert_moves_toward(positive_scores, "Good!", "Good!!", label=0)
    assert other.value.counterexample is None


def failure_of(check, *args, **kwargs) -> InvarianceFailure:
    with pytest.raises(InvarianceFailure) as failure:
        check(*args, **kwargs)
    return failure.value


def test_counterexamples_come_out_of_exception_groups_and_are_recorded_once(tmp_path):
    """hypothesis raises an exception group when one test has several distinct failures."""
    try:
        group_type = ExceptionGroup
    except NameError:  # Python 3.10: the backport hypothesis depends on there
        from exceptiongroup import ExceptionGroup as group_type
    inv = failure_of(assert_same_label, keyword_predict, "The food was great!", "The food was graet!")
    dir_ = failure_of(assert_moves_toward, positive_scores, "Good!", "Good", label=1)
    error = group_type("Hypothesis found 2 distinct failures.", [inv, dir_, ValueError("not ours")])
    found = counterexamples(error)
    assert [(c.check, c.text, c.label) for c in found] == [
        ("same_label", "The food was graet!", 1),
        ("moves_toward", "Good", 1),
    ]
    assert counterexamples(group_type("nested", [error, inv])) == found  # each once

    path = tmp_path / "recorded.jsonl"
    first = record_counterexamples(path, error, source="tests/x.py::check", id_prefix="check")
    again = record_counterexamples(path, error, source="tests/x.py::check", id_prefix="check")
    assert len(first.added) == 2 and again.added == () and again.duplicates == 2
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert {line["text"] for line in lines} == {c.text for c in found}
    assert all(line["label"] == 1 and line["source"] == "tests/x.py::check" for line in lines)
    assert [line["original"] for line in lines] == ["The food was great!", "Good!"]
    assert all(line["id"].startswith("check-") for line in lines)
    # A plain assertion error carries nothing to record, and writes nothing.
    assert record_counterexamples(tmp_path / "none.jsonl", AssertionError("x"), source="s") is None
    assert not (tmp_path / "none.jsonl").exists()
    assert append_cases(path, [], id_prefix="check").added == ()
