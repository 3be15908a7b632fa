"""``warp-check tune`` on a token classifier's traffic: the change bound counts sentences (a sentence
changed where any word's tag changed: the share Cert 4 bounds), folds keep a sentence's words
together, no neighbourhood lever is offered, and ``--write`` joins guards as sentences whose guard
words carry the model's own tags.

What is expected is computed here: the tune part's sentences from the sample's split rule, each
guard word's tag and gap with plain transformers (testkit.token_tags.word_logits)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import beta
from testkit.suite_builder import write_kind_suite
from testkit.token_tags import TAGS, sentences, split_by_model, word_logits

from warp_check import SettingsError, load_adapter, load_traffic, tune, write_choice
from warp_check.budget.tune import GUARDS_FILE, Candidate, case_folds
from warp_check.certificates.traffic.sample import Part, part_of, text_key
from warp_check.cli import main
from warp_check.commands.tune import table_lines
from warp_check.decisions import TOKEN_TAGS
from warp_check.decisions.token_tags import split_words
from warp_check.suite.loader import load_suite


def test_folds_deal_sentences_whole():
    ids = [f"s{s}#{w}" for s in range(9) for w in range(s % 4 + 1)]
    folds = case_folds(ids, TOKEN_TAGS, 3)
    by_sentence = {}
    for ident, fold in folds.items():
        by_sentence.setdefault(ident.split("#")[0], set()).add(fold)
    assert all(len(f) == 1 for f in by_sentence.values()) and len(by_sentence) == 9
    assert sorted(np.bincount([f.pop() for f in by_sentence.values()])) == [3, 3, 3]


def test_tune_bounds_sentences_and_writes_guards_as_sentences(tmp_path, shared_tagger, capsys):
    wrong, right = split_by_model(shared_tagger, fix=4, keep=16)
    suite = write_kind_suite(tmp_path / "suite", shared_tagger, wrong, right)
    pieces = [" ".join(words) for words in sentences(600, seed=91, unseen_rate=0.5)]
    texts = sorted({f"{a} {b}" for a, b in zip(pieces[::2], pieces[1::2], strict=True)})
    (suite / "traffic.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    (suite / "warp.toml").write_text((suite / "warp.toml").read_text() + '[traffic]\npath = "traffic.jsonl"\n')

    assert main(["tune", str(suite), "--folds", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    tune_part = [t for t in texts if part_of(text_key(t)) is Part.TUNE]
    words = sum(len(split_words(t)) for t in tune_part)
    assert result["must_fix"] == 4 and result["tune_texts"] == len(tune_part) < words
    scores = result["candidates"]
    assert {(c["per_case"], c["keep_per_case"]) for c in scores} == {(0, 0)}  # no neighbourhood lever
    assert len(scores) == 6 and {c["guards"] for c in scores} == {False, True}
    for c in scores:
        assert c["failed"] is None and c["measured"] == len(tune_part), c  # every sentence once, by one fold
        k, n = c["changed"], c["measured"]
        assert 0 <= k <= n and np.isclose(c["bound"], beta.ppf(0.95, k + 1, n - k), rtol=1e-9)
    assert any(c["changed"] > 0 for c in scores), "no candidate changed a tag: the check above proves little"
    # Every count is named for what it counts: sentences, and the words scored and guarding.
    fix_words = sum(t is not None for r in wrong for t in r["tags"])
    assert all(c["scored"] == fix_words for c in scores)
    assert result["counted"] == {"must_fix": "sentences", "scored": "words", "measured": "sentences", "guards": "words"}
    chosen = next(c for c in scores if c["name"] == result["chosen"])
    assert result["message"].startswith(f"chosen: '{chosen['name']}': fixes an estimated ")
    assert f"of unseen must_fix words ({chosen['fixed']} of {fix_words})" in result["message"]
    assert (
        "changes a word's tag in at most " in result["message"] and "of sentences on the tune part" in result["message"]
    )
    assert f"({chosen['changed']} of {len(tune_part)} sentences, 95%)" in result["message"]
    assert "prediction" not in result["message"]

    # The guards a choice joins are written as sentences: each guard word tagged as the model tags it.
    loaded = load_suite(suite)
    guarded = Candidate(name="guards", gamma_s=loaded.repair.gamma_s, mu=loaded.repair.mu, per_case=0,
                        keep_per_case=0, guards=True, levers=1)  # fmt: skip
    chosen = tune(loaded, load_adapter(loaded), load_traffic(loaded), folds=2, grid=(guarded,))
    assert chosen.chosen is not None and chosen.chosen.guards > 0
    write_choice(loaded, chosen)
    guards = [json.loads(line) for line in (suite / GUARDS_FILE).read_text().splitlines()]
    split = {tuple(w for w, _, _ in split_words(t)) for t in tune_part}
    assert guards and all(tuple(r["tokens"]) in split for r in guards)
    tagged = 0
    for record, logits in zip(guards, word_logits(shared_tagger, [r["tokens"] for r in guards]), strict=True):
        for tag, z in zip(record["tags"], logits, strict=True):
            if tag is not None:
                best = int(np.argmax(z))
                assert tag == TAGS[best] and z[best] - np.max(np.delete(z, best)) >= loaded.repair.gamma_h
                tagged += 1
    assert tagged == len(chosen.guard_pool)
    head = table_lines(chosen)[0]
    assert head.startswith(f"1 candidates, 2 folds over 4 must_fix sentences; {len(tune_part):,} tune-part sentences ")
    assert f"({tagged:,} words may guard)" in head
    assert len(load_suite(suite).cases) == len(loaded.cases) + tagged  # the suite lists and loads them


def test_a_candidate_drawing_copies_is_refused_for_a_token_suite(tmp_path, shared_tagger):
    wrong, right = split_by_model(shared_tagger, fix=2, keep=4)
    suite = write_kind_suite(tmp_path / "suite", shared_tagger, wrong, right)
    (suite / "traffic.jsonl").write_text('{"text": "the food was good"}\n', encoding="utf-8")
    (suite / "warp.toml").write_text((suite / "warp.toml").read_text() + '[traffic]\npath = "traffic.jsonl"\n')
    loaded = load_suite(suite)
    copies = Candidate(name="copies", gamma_s=1.0, mu=1.0, per_case=4, keep_per_case=0, guards=False, levers=1)
    with pytest.raises(SettingsError) as error:
        tune(loaded, load_adapter(loaded), load_traffic(loaded), folds=2, grid=(copies,))
    assert error.value.field == "grid" and "not built for a token classifier" in str(error.value)
