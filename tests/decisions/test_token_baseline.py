"""A token suite against a baseline: a regression is a word the old model tagged right and the new one
tags wrong. ``diff`` and ``--warp-baseline`` fail a sentence for its regressions (its words both get
wrong expected), and ``repair --baseline`` restores every regressed must_keep word, certified.

Which words regress is measured with plain transformers on both taggers (``word_logits``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from testkit.suite_builder import exit_code, write_kind_suite
from testkit.token_tags import TAGS, sentences, tag_of, word_logits
from transformers import AutoModelForTokenClassification, AutoTokenizer

from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.decisions.token_tags import sentence_id

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:cacheprovider", "--warp-cache", "none")


def _noisier(model_dir: Path, out: Path) -> Path:
    """``model_dir``'s tagger with its classifier jolted by seeded noise: a release that regresses some words."""
    model = AutoModelForTokenClassification.from_pretrained(model_dir)
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        weight = model.classifier.weight
        weight.add_(torch.randn(weight.shape, generator=generator) * weight.std() * 4)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def release(tmp_path_factory, shared_tagger):
    """(suite, old, new, right_old, right_new): must_keep sentences, every word stated, some with a word
    the new tagger regresses on, some both taggers tag wrong somewhere, some both tag all right."""
    root = tmp_path_factory.mktemp("token_release")
    new = _noisier(shared_tagger, root / "new")
    pool = sentences(300, seed=21, unseen_rate=0.5)
    old_logits, new_logits = word_logits(shared_tagger, pool), word_logits(new, pool)
    keep, regressing, both, fine = [], 0, 0, 0
    right_old, right_new = {}, {}
    for i, (words, lo, ln) in enumerate(zip(pool, old_logits, new_logits, strict=True)):
        tags = [TAGS.index(tag_of(w)) for w in words]
        was, now = lo.argmax(axis=1) == tags, ln.argmax(axis=1) == tags
        regresses, wrong_both = bool((was & ~now).any()), bool((~was & ~now).any())
        all_right = bool(was.all() and now.all())
        if (regresses and regressing < 4) or (wrong_both and not regresses and both < 3) or (all_right and fine < 8):
            regressing += regresses
            both += wrong_both and not regresses
            fine += all_right
            keep.append({"id": f"k{i}", "tokens": words, "tags": [TAGS[t] for t in tags]})
            for w in range(len(words)):
                right_old[f"k{i}#{w}"], right_new[f"k{i}#{w}"] = bool(was[w]), bool(now[w])
    assert regressing == 4 and both == 3, "the taggers' errors moved: pick another pool seed"
    suite = write_kind_suite(root / "suite", shared_tagger, [], keep)
    return suite, shared_tagger, new, right_old, right_new


def test_diff_fails_only_regressed_words_and_expects_those_both_get_wrong(release, capsys):
    suite, old, new, right_old, right_new = release
    regressions = {r for r in right_new if right_old[r] and not right_new[r]}
    both_wrong = {r for r in right_new if not right_old[r] and not right_new[r]}
    assert exit_code(["diff", str(old), str(new), str(suite), "--cache", "none", "--json"]) == 1
    cases = json.loads(capsys.readouterr().out)["cases"]
    failing = {c["id"] for c in cases if not c["passed"] and "expected_failure" not in c}
    expected = {c["id"] for c in cases if "expected_failure" in c}
    assert (failing, expected) == (regressions, both_wrong)


def test_pytest_gates_each_sentence_on_its_regressed_words(release, pytester):
    suite, old, new, right_old, right_new = release
    regressed = {sentence_id(r) for r in right_new if right_old[r] and not right_new[r]}
    wrong_both = {sentence_id(r) for r in right_new if not right_old[r] and not right_new[r]} - regressed
    total = len({sentence_id(r) for r in right_new})
    result = pytester.runpytest(*INNER, str(suite), "--warp-model", str(new), "--warp-baseline", str(old))
    passed = total - len(regressed) - len(wrong_both)
    result.assert_outcomes(failed=len(regressed), xfailed=len(wrong_both), passed=passed)
    result.stdout.fnmatch_lines(["*constrained word(s) wrong:*", "*regression against the baseline*"])


def test_repair_restores_every_regressed_word_certified(release, tmp_path, capsys):
    suite, old, new, right_old, right_new = release
    regressions = {r for r in right_new if right_old[r] and not right_new[r]}
    out = tmp_path / "restored"
    args = ["repair", str(suite), "--model", str(new), "--baseline", str(old), "--out", str(out), "--json"]
    exit_code(args)
    run = json.loads(capsys.readouterr().out)
    assert set(run["details"]["restored"]) == regressions
    records = {r["id"]: r for r in json.loads((out / CERTIFICATE_NAME).read_text())["cases"]}
    for row in regressions:
        assert (records[row]["restored"], records[row]["cert1"], records[row]["cert3"]) == (True, True, True)
    # The repaired tagger, with plain transformers, tags every restored word right.
    by_id = {}
    for line in (suite / "must_keep.jsonl").read_text().splitlines():
        record = json.loads(line)
        by_id[record["id"]] = record
    ids = sorted({sentence_id(r) for r in regressions})
    logits = dict(zip(ids, word_logits(out, [by_id[i]["tokens"] for i in ids]), strict=True))
    for row in regressions:
        sentence, word = sentence_id(row), int(row.rpartition("#")[2])
        tag = TAGS.index(by_id[sentence]["tags"][word])
        assert int(np.argmax(logits[sentence][word])) == tag
