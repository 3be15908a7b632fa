"""Perturbation strategies keep what they promise and shrink toward the original text."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample
from testkit.edit_distance import damerau_levenshtein

from warp_check import (
    case_and_punctuation,
    contractions,
    perturbations,
    typos,
)
from warp_check.perturb import (
    CONTRACTIONS,
    INTENSIFIERS,
    KEYBOARD_NEIGHBOURS,
    NEGATED_FORMS,
    NEUTRAL_PREFIXES,
    WordNetUnavailable,
    negation_markers,
    negation_preserving,
    wordnet_available,
    wordnet_synonyms,
)

FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SENTENCES = ["The service was great", "I don't like it, it's not good!", "Food: ok.", "a b"]
NEGATION = re.compile(r"\bnot\b|n't\b|\bcannot\b", re.IGNORECASE)


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


@pytest.mark.parametrize("strategy", [typos, case_and_punctuation, negation_preserving, perturbations])
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


@FAST
@given(data=st.data(), text=st.sampled_from(SENTENCES))
def test_typo_edits_are_independent_so_any_one_can_be_dropped(data, text):
    """Two edits drawn at once give the same text as applying them one list at a time would:
    each is addressed in the original, so the result never depends on the edits before it."""
    variant = data.draw(typos(text, 3))
    assert damerau_levenshtein(text, variant) <= 3
    # Whole words survive: no run of deletes empties one.
    assert [len(w) > 0 for w in variant.split(" ")] == [len(w) > 0 for w in text.split(" ")]


def test_typos_leave_text_without_letters_alone():
    with pytest.raises(NoSuchExample):
        find(typos("123 !!", 3), lambda t: t != "123 !!", settings=settings(database=None, max_examples=50))


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_max_edits_must_be_a_count(bad):
    with pytest.raises(ValueError, match=f"max_edits={bad!r}"):
        typos("text", bad)


# -- negation-preserving rewrites ---------------------------------------------------------

# Every spelling -> one canonical spelling, to compare texts word by word.
CANONICAL = {form: group[0] for group in NEGATED_FORMS for form in group} | {
    form: expanded for expanded, contracted in CONTRACTIONS for form in (expanded, contracted) if "not" not in expanded
}
WORD_POOL = (
    "I we it the food service was is very really truly extremely good bad great not no never nothing "
    "don't isn't can't cannot won't it's I'm that's do does can will think like much well same . , ! ? ;"
).split() + ["can not", "is not", "do not", "it is", "I am", "It\u2019s", "don\u2019t"]
GENERATED = st.lists(st.sampled_from(WORD_POOL), min_size=1, max_size=12).map(" ".join)


def canonical_words(text: str) -> list[str]:
    """Lower-case words with every respelling undone and a neutral opener removed."""
    lowered = text.replace("\u2019", "'").lower()
    for prefix in NEUTRAL_PREFIXES:
        if lowered.startswith(prefix.lower()):
            lowered = lowered[len(prefix) :]
            break
    for form in sorted(CANONICAL, key=len, reverse=True):
        pattern = re.escape(form).replace(r"\ ", r"\s+")
        lowered = re.sub(rf"(?<![\w']){pattern}(?![\w'])", CANONICAL[form], lowered)
    return re.findall(r"[a-z']+|[.,!?;]", lowered)


def scoped_intensifiers(text: str) -> list[str]:
    """Intensifiers after a negation in their sentence: never dropped."""
    out = []
    for sentence in re.split(r"[.!?;]", text):
        words = re.findall(r"[A-Za-z]+(?:['\u2019][A-Za-z]+)?", sentence)
        negated = [i for i, w in enumerate(words) if negation_markers(w)]
        out += [w.lower() for i, w in enumerate(words) if negated and i > negated[0] and w.lower() in INTENSIFIERS]
    return out


@settings(max_examples=200, deadline=None)
@given(data=st.data(), text=GENERATED)
def test_negation_preserving_keeps_negations_and_every_other_word(data, text):
    variant = data.draw(negation_preserving(text))
    assert negation_markers(variant) == negation_markers(text)
    # Only intensifiers may go; everything else is the same words, respelled at most.
    kept = [w for w in canonical_words(variant) if w not in INTENSIFIERS]
    assert kept == [w for w in canonical_words(text) if w not in INTENSIFIERS]
    assert scoped_intensifiers(variant) == scoped_intensifiers(text)
    assert len(canonical_words(variant)) <= len(canonical_words(text))


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("I don't think it's good", "I do not think it is good"),
        ("I really don't like it", "I do not like it"),  # a drop and a respelling side by side
        ("The food was very good", "The food was good"),
        ("Very good food", "Good food"),
        ("It cannot be fixed", "It can not be fixed"),
        ("It can\u2019t be fixed", "It cannot be fixed"),
        ("The service was fine", "Honestly, the service was fine"),
        ("I won't go", "In my opinion, I won't go"),
    ],
)
def test_negation_preserving_reaches_each_rewrite(text, target):
    reached = find(negation_preserving(text), lambda t: t == target, settings=settings(database=None))
    assert reached == target


@pytest.mark.parametrize(
    "text", ["It is not very good", "I never really liked it", "It isn't really bad", "Nothing was very good"]
)
def test_negation_preserving_never_drops_an_intensifier_after_a_negation(text):
    seen: set[str] = set()

    @settings(max_examples=60, deadline=None, database=None)
    @given(negation_preserving(text))
    def collect(variant):
        seen.add(variant)

    collect()
    word = next(w for w in INTENSIFIERS if w in text.split())
    assert len(seen) > 1 and all(word in variant.split() for variant in seen)


def test_negation_preserving_shrinks_to_one_rewrite_of_the_text():
    text = "Well, I don't think it's very good"
    reached = find(negation_preserving(text), lambda t: t != text, settings=settings(database=None))
    assert reached in {"Well, I do not think it's very good", "Well, I don't think it is very good"}
    # A failure that needs the intensifier gone shrinks to exactly that edit; "very" is in the
    # negation's scope and is never dropped.
    text = "Well, I really don't think it's very good"
    no_really = find(negation_preserving(text), lambda t: "really" not in t, settings=settings(database=None))
    assert no_really == "Well, I don't think it's very good"


def test_negation_preserving_leaves_words_it_cannot_rewrite_alone():
    assert find(negation_preserving("123 !"), lambda t: True) == "123 !"
    with pytest.raises(NoSuchExample):
        find(negation_preserving("123 !"), lambda t: t != "123 !", settings=settings(database=None, max_examples=30))


# -- WordNet synonyms ---------------------------------------------------------------------

needs_wordnet = pytest.mark.skipif(
    not wordnet_available(), reason="nltk with the WordNet corpus is not installed (NLTK_DATA)"
)


@needs_wordnet
@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    text=st.sampled_from(["The movie was not good", "I love this movie and the music", "The film had a plot"]),
    pos=st.sampled_from([("n",), ("n", "v"), ("n", "v", "a", "r")]),
)
def test_wordnet_swaps_replace_words_by_lemmas_of_their_synsets(data, text, pos):
    from nltk.corpus import wordnet as wn

    variant = data.draw(wordnet_synonyms(text, 2, pos=pos))
    before, after = text.split(), variant.split()
    assert len(after) == len(before)
    changed = [(old, new) for old, new in zip(before, after, strict=True) if old != new]
    assert len(changed) <= 2
    tags = {"n": {"n"}, "v": {"v"}, "a": {"a", "s"}, "r": {"r"}}
    for old, new in changed:
        lemmas = {
            lemma.name()
            for synset in wn.synsets(old.lower())
            if synset.pos() in set().union(*(tags[p] for p in pos))
            for lemma in synset.lemmas()
        }
        assert new.lower() in lemmas and new.lower() != old.lower()
        assert old.lower() not in {"not", "the", "and", "a", "i", "this"}  # stop words and negations stay
    assert negation_markers(variant) == negation_markers(text)


@needs_wordnet
def test_wordnet_swap_shrinks_to_the_first_word_and_its_most_frequent_synonym():
    from nltk.corpus import wordnet as wn

    text = "The movie was late"
    reached = find(wordnet_synonyms(text), lambda t: t != text, settings=settings(database=None))
    # Independently: the most frequent other single-word lemma of the synset where 'movie' is most used.
    own = [lemma for synset in wn.synsets("movie") for lemma in synset.lemmas() if lemma.name() == "movie"]
    lemma = max(own, key=lambda lemma: lemma.count())
    best = max(
        (other for other in lemma.synset().lemmas() if other.name() != "movie" and other.name().isalpha()),
        key=lambda other: other.count(),
    )
    assert reached == f"The {best.name()} was late"
    assert find(wordnet_synonyms(text), lambda t: True, settings=settings(database=None)) == text


@needs_wordnet
def test_wordnet_leaves_words_without_a_dominant_sense_alone():
    # 'great' is mostly great.s.01, which has no other lemma: no "Bully flight".
    text = "Great flight"
    with pytest.raises(NoSuchExample):
        find(wordnet_synonyms(text, pos=("n", "v", "a", "r")), lambda t: t != text, settings=settings(database=None))


def test_wordnet_missing_is_a_clear_error(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "nltk", None)  # as if nltk were not installed
    assert not wordnet_available()
    with pytest.raises(WordNetUnavailable, match=r"needs nltk, which is not installed: pip install nltk"):
        wordnet_synonyms("The movie was late")
    with pytest.raises(WordNetUnavailable, match="nltk.downloader wordnet"):
        perturbations("The movie was late", synonyms=True)
    perturbations("The movie was late")  # without synonyms nothing needs nltk


def test_wordnet_data_missing_is_a_clear_error(monkeypatch):
    nltk = pytest.importorskip("nltk")

    def not_found(resource, *args, **kwargs):
        raise LookupError(resource)

    monkeypatch.setattr(nltk.data, "find", not_found)
    with pytest.raises(WordNetUnavailable, match=r"WordNet corpus, which nltk does not find.*NLTK_DATA"):
        wordnet_synonyms("The movie was late")


@pytest.mark.parametrize(
    ("kwargs", "field"), [({"pos": "n"}, "pos"), ({"pos": ("x",)}, "pos"), ({"min_count": -1}, "min_count")]
)
def test_wordnet_settings_are_checked(kwargs, field):
    with pytest.raises(ValueError, match=f"{field}="):
        wordnet_synonyms("The movie", **kwargs)


def test_ctrl_c_in_the_middle_of_a_draw_is_a_keyboard_interrupt_after_it(monkeypatch):
    # Hypothesis takes an interrupt inside a strategy for a failing example and replays it (a
    # FlakyStrategyDefinition traceback); perturbed_texts holds Ctrl-C until its draw ends.
    import os
    import signal

    import warp_check.perturb.draws as draws

    sent, after = [], []

    def interrupting(text, max_edits=2, *, synonyms=False):
        def maybe_interrupt(variant):
            if sent:
                after.append(variant)
            else:
                sent.append(True)
                os.kill(os.getpid(), signal.SIGINT)
            return variant

        return st.text(alphabet="abc", min_size=1, max_size=6).map(maybe_interrupt)

    # internal: a Ctrl-C inside a Hypothesis draw; a signal from outside lands at no known point
    monkeypatch.setattr(draws, "perturbations", interrupting)
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("Ctrl-C reaches the main thread only, and this test runs in another")
    # Python's own handler, whatever the process had: once, under xdist, the interrupt never came.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            draws.perturbed_texts("abc", 3, seed=0)
        # The draw went on to its end (hypothesis never saw the interrupt), then it was delivered.
        assert sent and after and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)
    monkeypatch.undo()
    assert len(draws.perturbed_texts("the film was good", 3, seed=0)) == 3  # and a later draw is whole
