"""Cert 4 on a token classifier's traffic: each unlabelled sentence a row per word, and what a repair
changes counted per sentence.

A traffic text is split into words as a case file's ``text`` is (:func:`~warp_check.decisions.token_tags.split_words`),
and each word is a row (``row_text``: the sentence with that word marked), encoded as the suite's
word rows are. A repair changes a word where its tag differs; a sentence changes where any of its
words does. The words of one sentence are not independent draws (one shift of the layer moves a
sentence's words together), so the share bounded exactly (Clopper–Pearson) is the **sentence**
share, the sentences being the sample's independent draws; the words changed are reported as counted
(the kind counts them: :meth:`~warp_check.decisions.token_tags.TokenTags.traffic_count`).
That bound also bounds the expected share of a sentence's words that change (a sentence's share of
changed words is at most 1 where it changes, 0 where not).
"""

from __future__ import annotations

from collections.abc import Sequence

from warp_check.cases import Case
from warp_check.certificates.traffic.changes import traffic_cases
from warp_check.certificates.traffic.sample import TrafficText
from warp_check.decisions import TOKEN_TAGS


def word_rows(texts: Sequence[TrafficText]) -> tuple[list[Case], list[int]]:
    """Every word of every text as a row (a case the encoder takes; its label is not measured), and
    per row the index of its text; a text with no word has no row (the kind's ``traffic_rows``)."""
    cases, sentence_of, _ = traffic_cases(texts, TOKEN_TAGS)
    return cases, sentence_of


__all__ = ["word_rows"]
