"""``warp-check neighbours`` on a token classifier: copies of its sentences that keep one word per word
and every stated word's tag (typos in any stated word, re-casing and synonyms only of words tagged O,
free words untouched), written as must_fix sentences where the model tags a stated word wrong.

Which copies the model tags wrong is computed here with plain transformers (testkit.token_tags.word_logits)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from testkit.suite_builder import write_kind_suite
from testkit.token_tags import TAGS, split_by_model, word_logits

from warp_check.cli import main
from warp_check.perturb import perturbed_sentences, word_edits
from warp_check.suite.loader import load_suite

WORDS = ("Alice", "met", "Bob", "in", "Paris", "today")
TAGGED = ("B-PER", "O", "B-PER", "O", "B-LOC", None)


def _only_typos(old: str, new: str) -> bool:
    """Whether ``new`` is ``old`` or one keyboard typo of it (never a re-casing alone)."""
    return new == old or (new.lower() != old.lower() and abs(len(new) - len(old)) <= 1)


@settings(max_examples=200, deadline=None)
@given(word_edits(WORDS, TAGGED, 2, synonyms=False))
def test_a_copy_keeps_every_word_in_place_and_edits_entities_by_typos_only(copy):
    assert len(copy) == len(WORDS) and all(w and w.split() == [w] for w in copy)
    assert sum(new != old for new, old in zip(copy, WORDS, strict=True)) <= 2
    for new, old, tag in zip(copy, WORDS, TAGGED, strict=True):
        if tag is None:
            assert new == old  # a free word is never edited
        elif tag != "O":
            assert _only_typos(old, new), (old, new)  # "Apple" never becomes "apple"


@pytest.mark.parametrize("seed", [0, 7, 2**31])
def test_drawn_copies_are_distinct_seeded_and_never_the_sentence(seed):
    first = perturbed_sentences(WORDS, TAGGED, 5, seed=seed)
    assert first == perturbed_sentences(WORDS, TAGGED, 5, seed=seed)
    assert len(set(first)) == len(first) and WORDS not in first


def test_neighbours_writes_the_copies_the_model_tags_wrong(tmp_path, shared_tagger, capsys):
    wrong, right = split_by_model(shared_tagger, fix=4, keep=10)
    suite = write_kind_suite(tmp_path / "suite", shared_tagger, wrong, right)
    before = (suite / "must_fix.jsonl").read_text(encoding="utf-8")
    assert main(["neighbours", str(suite), "--per-case", "6", "--per-keep-case", "6", "--keep-cases", "all"]) == 0
    said = capsys.readouterr().out
    lines = (suite / "must_fix.jsonl").read_text(encoding="utf-8")[len(before) :].splitlines()
    copies = [json.loads(line) for line in lines]
    assert copies and said.startswith(f"{len(copies)} neighbour sentences the model gets wrong appended")
    originals = {r["id"]: r for r in wrong + right}
    for copy, logits in zip(copies, word_logits(shared_tagger, [c["tokens"] for c in copies]), strict=True):
        source = originals[copy["original"]]
        assert copy["source"] == "neighbour" and copy["id"].startswith(f"{copy['original']}~")
        assert copy["tags"] == source["tags"] and len(copy["tokens"]) == len(source["tokens"])
        for new, old, tag in zip(copy["tokens"], source["tokens"], copy["tags"], strict=True):
            if tag is None or tag != "O":
                assert new == old if tag is None else _only_typos(old, new)
        said_tags = [TAGS[int(np.argmax(z))] for z in logits]
        assert any(t is not None and t != s for t, s in zip(copy["tags"], said_tags, strict=True)), copy
    loaded = load_suite(suite)  # the suite loads them: one must_fix row per stated word
    rows = sum(t is not None for c in copies for t in c["tags"])
    assert len(loaded.cases) == sum(t is not None for r in wrong + right for t in r["tags"]) + rows
    # A second run draws the same copies: nothing new is appended.
    assert main(["neighbours", str(suite), "--per-case", "6", "--per-keep-case", "6", "--keep-cases", "all"]) == 0
    assert (suite / "must_fix.jsonl").read_text(encoding="utf-8").count("\n") == before.count("\n") + len(copies)
