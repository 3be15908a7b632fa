"""Perturbation strategies shrink toward the original; INV/DIR helpers catch planted faults."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from warp_check import (
    Case,
    ClassifierAdapter,
    Kind,
    assert_moves_toward,
    assert_same_label,
    case_and_punctuation,
    contractions,
    evaluate,
    perturbations,
    predictor,
    scorer,
    typos,
)
from warp_check.strategies import CONTRACTIONS, KEYBOARD_NEIGHBOURS

FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SENTENCES = ["The service was great", "I don't like it, it's not good!", "Food: ok.", "a b"]
NEGATION = re.compile(r"\bnot\b|n't\b|\bcannot\b", re.IGNORECASE)


def damerau_levenshtein(a: str, b: str) -> int:
    """Unrestricted Damerau–Levenshtein (Lowrance–Wagner): a metric, so k edits ⇒ distance ≤ k."""
    big = len(a) + len(b)
    last_row: dict[str, int] = {}
    d = [[big] * (len(b) + 2) for _ in range(len(a) + 2)]
    for i in range(len(a) + 1):
        d[i + 1][1] = i
    for j in range(len(b) + 1):
        d[1][j + 1] = j
    for i in range(1, len(a) + 1):
        last_col = 0
        for j in range(1, len(b) + 1):
            k, m = last_row.get(b[j - 1], 0), last_col
            cost = 0 if a[i - 1] == b[j - 1] else 1
            if cost == 0:
                last_col = j
            d[i + 1][j + 1] = min(
                d[i][j] + cost,
                d[i + 1][j] + 1,
                d[i][j + 1] + 1,
                d[k][m] + (i - k - 1) + 1 + (j - m - 1),
            )
        last_row[a[i - 1]] = i
    return d[len(a) + 1][len(b) + 1]


def test_distance_helper_counts_a_swap_as_one_edit():
    assert damerau_levenshtein("great", "graet") == 1
    assert damerau_levenshtein("great", "gret") == 1
    assert damerau_levenshtein("abc", "ca") == 2
    assert damerau_levenshtein("", "ab") == 2


def test_keyboard_table_is_symmetric_and_local():
    for key, near in KEYBOARD_NEIGHBOURS.items():
        assert key not in near and 2 <= len(near) <= 6
        assert all(key in KEYBOARD_NEIGHBOURS[n] for n in near)
    assert set(KEYBOARD_NEIGHBOURS["g"]) == set("fhtyvb")
    assert set(KEYBOARD_NEIGHBOURS["q"]) == set("wa")


@FAST
@given(data=st.data(), text=st.sampled_from(SENTENCES), max_edits=st.integers(0, 3))
def test_typos_stay_within_max_edits_and_keep_whitespace(data, text, max_edits):
    variant = data.draw(typos(text, max_edits))
    assert damerau_levenshtein(text, variant) <= max_edits
    assert len(variant.split()) == len(text.split())
    assert re.sub(r"\S", "", variant) == re.sub(r"\S", "", text)
    # Punctuation is never a typo target.
    assert re.sub(r"[\w\s]", "", variant) == re.sub(r"[\w\s]", "", text)


@FAST
@given(data=st.data(), text=st.sampled_from(SENTENCES), max_edits=st.integers(0, 3))
def test_case_and_punctuation_keep_the_words(data, text, max_edits):
    variant = data.draw(case_and_punctuation(text, max_edits))
    strip = str.maketrans("", "", ".!?,;:")
    assert variant.lower().translate(strip).split() == text.lower().translate(strip).split()
    assert damerau_levenshtein(text.lower(), variant.lower()) <= max_edits


@FAST
@given(
    data=st.data(),
    text=st.sampled_from(
        [
            "I do not like it",
            "It is not good and they can't fix it",
            "This cannot be right; we're sure it isn't",
            "Don't go, it's late",
            "She WON'T come and he would not either",
            "The food is not good",
            "This isn't it",
        ]
    ),
)
def test_contractions_preserve_negation(data, text):
    variant = data.draw(contractions(text))
    assert len(NEGATION.findall(variant)) == len(NEGATION.findall(text)) > 0


@pytest.mark.parametrize(("expanded", "contracted"), CONTRACTIONS)
def test_every_table_pair_swaps_both_ways_and_keeps_negation(expanded, contracted):
    for before, after in ((expanded, contracted), (contracted, expanded)):
        text = f"Well {before} here"
        reached = find(contractions(text), lambda t, text=text: t != text, settings=settings(database=None))
        assert reached.lower() == f"well {after} here"
        assert bool(NEGATION.search(reached)) == bool(NEGATION.search(text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I do not like it", {"I do not like it", "I don't like it"}),
        ("Cannot stop", {"Cannot stop", "Can't stop"}),
        (
            "i'm sure it's fine",
            {"i'm sure it's fine", "I am sure it's fine", "i'm sure it is fine", "I am sure it is fine"},
        ),
        ("Nothing to swap here", {"Nothing to swap here"}),
    ],
)
def test_contractions_reach_exactly_the_table_rewrites(text, expected):
    seen: set[str] = set()

    @settings(max_examples=50, deadline=None, database=None)
    @given(contractions(text))
    def collect(variant):
        seen.add(variant)

    collect()
    assert seen == expected


@pytest.mark.parametrize("strategy", [typos, case_and_punctuation, perturbations])
def test_minimal_example_is_the_original(strategy):
    text = "The service was great"
    assert find(strategy(text), lambda t: True, settings=settings(database=None)) == text


def test_contractions_minimal_example_is_the_original():
    text = "It is not what I do not want"
    assert find(contractions(text), lambda t: True, settings=settings(database=None)) == text


def test_smallest_changed_typo_is_one_simple_edit():
    text = "The service was great"
    variant = find(typos(text), lambda t: t != text, settings=settings(database=None))
    assert damerau_levenshtein(text, variant) == 1
    # Shrinks to the first edit kind (substitution) at the first letter, with its first neighbour.
    assert variant == KEYBOARD_NEIGHBOURS["t"][0].upper() + text[1:]


def test_typos_leave_text_without_letters_alone():
    with pytest.raises(NoSuchExample):
        find(typos("123 !!", 3), lambda t: t != "123 !!", settings=settings(database=None, max_examples=50))


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_max_edits_must_be_a_count(bad):
    with pytest.raises(ValueError, match=f"max_edits={bad!r}"):
        typos("text", bad)


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


def test_same_label_finds_the_planted_non_invariance_and_names_both_texts():
    text = "The food was great"

    @settings(max_examples=50, deadline=None, database=None)
    @given(data=st.data())
    def check(data):
        assert_same_label(keyword_predict, text, data.draw(typos(text)))

    with pytest.raises(AssertionError) as failure:
        check()
    message = str(failure.value)
    assert "label changed under perturbation: 1 -> 0" in message
    assert repr(text) in message
    variant = re.search(r"variant  \(label 0\): '(.*)'", message).group(1)
    assert variant != text and damerau_levenshtein(text, variant) == 1


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
