"""``warp-check import --predicted`` into a token classifier's suite: untagged sentences (CoNLL words
alone, or a column of texts) become must_keep cases, each word tagged by the model itself where it
tags it by at least γ_h, left free (null) where not; bad input is refused naming file, line and
field, and nothing is written.

The tags expected are computed here with plain transformers (testkit.token_tags.word_logits)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from testkit.suite_builder import write_kind_suite
from testkit.token_tags import TAGS, sentences, split_by_model, word_logits

from warp_check.cli import main
from warp_check.decisions.token_tags import split_words
from warp_check.suite.loader import load_suite


@pytest.fixture
def suite(tmp_path, shared_tagger) -> Path:
    wrong, right = split_by_model(shared_tagger, fix=2, keep=4)
    folder = write_kind_suite(tmp_path / "suite", shared_tagger, wrong, right)
    # A margin the tiny tagger clears on most words, not all: some words are left free.
    (folder / "warp.toml").write_text((folder / "warp.toml").read_text() + "[repair]\ngamma_s = 3.0\ngamma_h = 3.0\n")
    return folder


def _expected(model: Path, batch: list[list[str]], gamma_h: float) -> list[list[str | None]]:
    """Per sentence, each word's tag where the model's gap clears gamma_h, None where not."""
    out = []
    for logits in word_logits(model, batch):
        tags = []
        for z in logits:
            best = int(np.argmax(z))
            gap = z[best] - np.max(np.delete(z, best))
            tags.append(TAGS[best] if gap >= gamma_h else None)
        out.append(tags)
    return out


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_conll_words_are_tagged_by_the_model_and_kept(suite, shared_tagger, tmp_path, capsys):
    batch = sentences(12, seed=41, unseen_rate=0.5)
    in_suite = _read(suite / "must_keep.jsonl")[0]["tokens"]
    lines = "".join("".join(f"{w}\n" for w in words) + "\n" for words in [*batch, batch[0], in_suite])
    (tmp_path / "traffic.conll").write_text("-DOCSTART-\n\n" + lines, encoding="utf-8")
    before = _read(suite / "must_keep.jsonl")
    args = ["import", str(suite), str(tmp_path / "traffic.conll"), "--format", "conll", "--predicted"]
    assert main(args) == 0
    gamma_h = load_suite(suite).repair.gamma_h
    expected = _expected(shared_tagger, batch, gamma_h)
    assert any(None in tags for tags in expected) and any(None not in tags for tags in expected)
    added = _read(suite / "must_keep.jsonl")[len(before) :]
    offered = [(words, tags) for words, tags in zip(batch, expected, strict=True) if any(tags)]
    assert [(r["tokens"], r["tags"]) for r in added] == offered
    assert {r["source"] for r in added} == {"prediction:traffic.conll"}
    out = capsys.readouterr().out
    free = sum(t is None for _, tags in offered for t in tags)
    assert f"{len(offered)} must_keep sentence(s) appended" in out and f"left free: {free} of " in out
    assert "left out: 1 sentence(s) the model sees as an earlier sentence of the file" in out
    assert "left out: 1 sentence(s) the model sees as sentences of the suite" in out
    # The suite loads them, and the model answers every tagged word as its case says (Cert 2's cases).
    assert main(["check", str(suite), "--json"]) == 1  # its must_fix sentences fail, as before
    verdicts = json.loads(capsys.readouterr().out)["cases"]
    ids = {r["id"] for r in added}
    mine = [v for v in verdicts if v["id"].rpartition("#")[0] in ids]
    assert len(mine) == sum(len(tags) - tags.count(None) for _, tags in offered) and all(v["passed"] for v in mine)
    # Importing again adds nothing: every sentence is now the suite's (or a repeat).
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"0 must_keep sentence(s) appended to {suite / 'must_keep.jsonl'}" in out
    assert f"left out: {len(batch) + 2} sentence(s) the model sees as sentences of the suite" in out


def test_a_column_of_texts_is_split_into_words_and_tagged(suite, shared_tagger, tmp_path):
    texts = [" ".join(words) for words in sentences(6, seed=43)]
    (tmp_path / "traffic.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    n = len(_read(suite / "must_keep.jsonl"))
    assert main(["import", str(suite), str(tmp_path / "traffic.jsonl"), "--predicted", "--source", "prod-sample"]) == 0
    batch = [[w for w, _, _ in split_words(t)] for t in texts]
    expected = _expected(shared_tagger, batch, load_suite(suite).repair.gamma_h)
    added = _read(suite / "must_keep.jsonl")[n:]
    offered = [(w, t, f"prediction-traffic-{i + 1}") for i, (w, t) in enumerate(zip(batch, expected, strict=True))]
    assert [(r["tokens"], r["tags"], r["id"]) for r in added] == [o for o in offered if any(o[1])]
    assert {r["source"] for r in added} == {"prod-sample"}


@pytest.mark.parametrize(
    ("name", "lines", "where", "words"),
    [
        ("t.conll", "the\nfood\tB-POS\n", "t.conll:2: field 'tag'", "a tag column"),
        ("t.conll", "the\n\n food\n", "t.conll:3:", "expected a word"),
        ("t.conll", "the\nfo\u27e6od\n", "t.conll:2: field 'token'", "holds a space or"),
        ("t.conll", "the\n\n" + "good\n" * 40, "t.conll:3: field 'tokens'", "longer than the model's window"),
        ("t.jsonl", '{"text": "the food"}\n{"text": "the \u27e6food"}\n', "t.jsonl:2: field 'text'", "holds a space"),
        ("t.jsonl", '{"text": "ok"}\n{"text": "' + "good " * 40 + '"}\n', "t.jsonl:2: field 'tokens'", "window"),
    ],
)
def test_bad_input_names_file_line_and_field_and_writes_nothing(suite, tmp_path, capsys, name, lines, where, words):
    (tmp_path / name).write_text(lines, encoding="utf-8")
    before = (suite / "must_keep.jsonl").read_bytes()
    assert main(["import", str(suite), str(tmp_path / name), "--format", name.split(".")[1], "--predicted"]) != 0
    err = capsys.readouterr().err
    assert where in err and words in err, err
    assert (suite / "must_keep.jsonl").read_bytes() == before


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--kind", "must_fix"], "--predicted makes must_keep cases, not must_fix"),
        (["--label", "tag"], "--predicted reads no tag column (--label)"),
        (["--split-by-model"], "--split-by-model, --drop-wrong and --fix-out sort tagged ones: give one"),
        (["--text-pair", "b"], "a token classifier tags one sentence: no --text-pair"),
    ],
)
def test_flags_that_do_not_go_with_predicted_tags_are_refused(suite, tmp_path, capsys, flags, words):
    (tmp_path / "t.jsonl").write_text('{"text": "the food"}\n', encoding="utf-8")
    assert main(["import", str(suite), str(tmp_path / "t.jsonl"), "--predicted", *flags]) == 2
    assert words in capsys.readouterr().err
