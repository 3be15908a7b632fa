"""Traffic as a sample: each text once, suite cases left out, a split that a growing file keeps."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from warp_check.cases import Case, Kind
from warp_check.certificates.traffic.sample import Part, part_of, split_traffic, text_key

words = st.text(alphabet="abcdefgh xyz", min_size=1, max_size=12).filter(lambda t: t.strip())


def rows(texts, pair=None):
    return [(text, pair, f"f:{i}") for i, text in enumerate(texts)]


def sample(texts, **given):
    return split_traffic(rows(texts), source="f", confidence=0.95, **given)


@given(st.lists(words, min_size=1, max_size=40), st.lists(words, max_size=40))
@settings(max_examples=100, deadline=None)
def test_a_file_that_grows_keeps_every_earlier_text_in_its_part(first, more):
    before, after = sample(first), sample(first + more)
    for part in Part:
        assert {t.key for t in before.part(part)} <= {t.key for t in after.part(part)}
    # and the part is the text's own: where it appears, and beside what, does not matter
    assert {t.key for t in sample(list(reversed(first + more))).bound} == {t.key for t in after.bound}


@given(st.lists(words, min_size=1, max_size=40, unique_by=lambda t: " ".join(t.split())))
@settings(max_examples=50, deadline=None)
def test_each_text_is_in_exactly_one_part_and_the_digest_ignores_order_and_repeats(texts):
    one = sample(texts)
    assert len(one.bound) + len(one.tune) == len(texts)
    assert {t.key for t in one.bound}.isdisjoint({t.key for t in one.tune})
    assert all(part_of(t.key) is Part.BOUND for t in one.bound)
    again = sample(list(reversed(texts)) + texts[:3])
    assert again.digest == one.digest and again.duplicates == min(3, len(texts))


def test_about_half_the_texts_go_to_the_bound_part():
    one = sample([f"sentence number {i}" for i in range(4000)])
    assert 0.46 < len(one.bound) / 4000 < 0.54


def test_duplicates_differing_only_in_spacing_are_one_text_counted_once():
    one = sample(["a good  film", " a good film ", "a good film", "A good film"])
    assert one.rows == 4 and one.duplicates == 2  # the capital is another input to a cased model
    assert len(one.bound) + len(one.tune) == 2
    first = next(t for t in one.bound + one.tune if t.text.strip().startswith("a"))
    assert first.where == "f:0"  # the first appearance is the one kept


def test_a_pair_is_part_of_its_text():
    assert text_key("a", "b") != text_key("a", None) != text_key("a b", None)
    assert text_key("a", "b") == text_key(" a", "b ")


def test_suite_cases_are_left_out_and_counted():
    texts = [f"text {i}" for i in range(200)]
    cases = [
        Case(id="f", text="text 3", label=0, kind=Kind.MUST_FIX),
        Case(id="k", text="text  7 ", label=1, kind=Kind.MUST_KEEP),
        Case(id="x", text="text 9", label=1, kind=Kind.AUX),  # aux cases are no test: their texts stay
    ]
    one = sample(texts, exclude=cases)
    kept = {t.text for t in one.bound + one.tune}
    assert one.in_suite == 2 and {"text 3", "text 7"}.isdisjoint(kept) and "text 9" in kept
    assert one.excluding(cases) == one  # twice is once
