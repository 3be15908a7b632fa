"""Cert 4's counting is the kind's: a token classifier's traffic text is a row per word, and a repair's
changes are counted per sentence (any word's tag changed), the words beside it; a whole-text kind's
text is one row, its own draw."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from warp_check.decisions import SINGLE_LABEL, TOKEN_TAGS
from warp_check.decisions.token_tags import sentence_id, split_words, words_of

_TEXTS = st.lists(st.text(alphabet="ab .,!\u00e9", max_size=30), max_size=6)


@given(_TEXTS)
def test_a_traffic_text_is_a_row_per_word_each_marking_its_word(texts):
    rows = TOKEN_TAGS.traffic_rows([(f"t{i}", t) for i, t in enumerate(texts)])
    expected = [(i, [w for w, _, _ in split_words(t)]) for i, t in enumerate(texts)]
    assert [r.draw for r in rows] == [i for i, words in expected for _ in words]
    for row, (draw, word) in zip(rows, [(i, k) for i, words in expected for k in range(len(words))], strict=True):
        assert sentence_id(row.id) == f"t{draw}" and words_of(row.text) == (tuple(expected[draw][1]), word)
    assert SINGLE_LABEL.traffic_rows([(f"t{i}", t) for i, t in enumerate(texts)]) is None


@given(st.lists(st.integers(0, 7), min_size=1, max_size=40).map(sorted), st.data())
def test_a_sentence_changes_where_any_of_its_words_does(draw_of, data):
    changed = data.draw(st.sets(st.integers(0, len(draw_of) - 1)).map(sorted))
    count = TOKEN_TAGS.traffic_count(np.asarray(changed, dtype=np.int64), np.asarray(draw_of))
    assert count.draws_changed == len({draw_of[i] for i in changed})
    assert (count.rows, count.rows_changed) == (len(draw_of), len(changed))
    whole = SINGLE_LABEL.traffic_count(np.asarray(changed, dtype=np.int64), np.arange(len(draw_of)))
    assert (whole.draws_changed, whole.rows, whole.rows_changed) == (len(changed), None, None)
