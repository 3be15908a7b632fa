"""Cert 4 on a token classifier's traffic: unlabelled sentences, each word a row; the share of
sentences with any word's tag changed bounded exactly (Clopper–Pearson over sentences), the words
changed counted, ``max_change`` gating the sentence share, and ``verify`` recomputing it all.

What changed is measured with plain transformers on the input and the repaired folders, never with
warp_check: the sentences measured are the sample's bound part (half the texts, by their key)."""

from __future__ import annotations

import json

import numpy as np
from scipy.stats import beta
from testkit.suite_builder import write_kind_suite
from testkit.token_tags import sentences, split_by_model, word_logits

from warp_check.certificates.traffic.sample import Part, part_of, text_key
from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.cli import main
from warp_check.decisions.token_tags import split_words


def test_repair_bounds_the_sentences_it_changes_gates_on_them_and_verify_recomputes(tmp_path, shared_tagger, capsys):
    wrong, right = split_by_model(shared_tagger, fix=4, keep=20)
    suite = write_kind_suite(tmp_path / "suite", shared_tagger, wrong, right)
    # Two review sentences a text: a text holds several words a repair may move.
    pieces = [" ".join(words) for words in sentences(800, seed=77, unseen_rate=0.5)]
    texts = sorted({f"{a} {b}" for a, b in zip(pieces[::2], pieces[1::2], strict=True)})
    traffic = tmp_path / "traffic.jsonl"
    traffic.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")

    out = tmp_path / "model"
    assert main(["repair", str(suite), "--out", str(out), "--traffic", str(traffic), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    claim = json.loads((out / CERTIFICATE_NAME).read_text())["traffic"]

    measured = [t for t in texts if part_of(text_key(t)) is Part.BOUND]
    words = [[w for w, _, _ in split_words(t)] for t in measured]
    before, after = word_logits(shared_tagger, words), word_logits(out, words)
    changed = [b.argmax(axis=1) != a.argmax(axis=1) for b, a in zip(before, after, strict=True)]
    sentences_changed = sum(bool(c.any()) for c in changed)
    words_changed = sum(int(c.sum()) for c in changed)
    assert 0 < sentences_changed < words_changed, "the repair should change several words of some sentences"
    assert (claim["n"], claim["changed"]) == (len(measured), sentences_changed)
    assert (claim["words"], claim["words_changed"]) == (sum(map(len, words)), words_changed)
    exact = beta.ppf(0.95, sentences_changed + 1, len(measured) - sentences_changed)
    assert np.isclose(claim["bound"], exact, rtol=1e-9)
    assert result["traffic"]["passed"]
    assert result["traffic"]["properties"]["words changed"] == words_changed
    assert "of sentences on traffic like this" in result["traffic"]["message"]

    assert main(["verify", str(out), "--traffic", str(traffic)]) == 0
    held = capsys.readouterr().out
    assert f"({sentences_changed} of {len(measured)} sentences, 95 %; {words_changed} of" in held

    # The budget gates the sentence share, and says so; nothing is written over it.
    budget = claim["bound"] * 0.9
    gated = tmp_path / "gated"
    argv = ["repair", str(suite), "--out", str(gated), "--traffic", str(traffic), "--max-change", f"{budget:.6f}"]
    assert main(argv) == 1
    printed = capsys.readouterr().out
    assert "Cert 4 fails the budget" in printed and "of sentences on traffic like this" in printed
    assert "(of sentences)" in printed and not gated.exists()
    assert main(["verify", str(out), "--traffic", str(traffic), "--max-change", f"{budget:.6f}"]) == 1
