"""``warp-check compare`` on a token classifier: WARP beside same-layer LoRA and all-layers fine-tuning
on the same sentences, each method's must_fix words fixed and must_keep words kept counted per word and
per sentence whole; a subsample takes sentences whole.

What each row should count is computed here with plain transformers (testkit.token_tags.word_logits)
on the input tagger and on the baselines' models trained again here with the same seeded settings and
saved; WARP's count is what its certificate promises (every constrained word right)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from testkit.suite_builder import write_kind_suite
from testkit.token_tags import TAGS, split_by_model, word_logits

from warp_check import SettingsError, load_adapter, load_suite
from warp_check.cli import main
from warp_check.decisions import TOKEN_TAGS
from warp_check.extras.baselines import TrainSettings, train_full, train_lora
from warp_check.extras.compare import CompareSettings, compare_suite, select_cases

FEW_EPOCHS = TrainSettings(max_epochs=3)


@pytest.fixture(scope="module")
def tagged(tmp_path_factory, shared_tagger):
    wrong, right = split_by_model(shared_tagger, fix=4, keep=10)
    suite = write_kind_suite(tmp_path_factory.mktemp("token_compare") / "suite", shared_tagger, wrong, right)
    return suite, wrong, right


def _counts(model_dir, records) -> tuple[int, int, int, int]:
    """(constrained words right, constrained words, sentences with every one right, sentences)."""
    words = right_words = whole = 0
    for record, logits in zip(records, word_logits(model_dir, [r["tokens"] for r in records]), strict=True):
        said = [TAGS[int(np.argmax(z))] for z in logits]
        asked = [(t, s) for t, s in zip(record["tags"], said, strict=True) if t is not None]
        words += len(asked)
        right_words += sum(t == s for t, s in asked)
        whole += all(t == s for t, s in asked)
    return right_words, words, whole, len(records)


def _row(row) -> tuple[int, int, int, int]:
    return row.repair.correct, row.repair.total, row.repair_whole.correct, row.repair_whole.total


def _keep(row) -> tuple[int, int, int, int]:
    return row.remain.correct, row.remain.total, row.remain_whole.correct, row.remain_whole.total


def test_compare_counts_words_fixed_and_kept_for_every_method(tagged, shared_tagger, tmp_path):
    suite, wrong, right = tagged
    loaded = load_suite(suite)
    settings = CompareSettings(train=FEW_EPOCHS, batch_size=loaded.model.batch_size)
    comparison = compare_suite(loaded, settings)
    assert comparison.counted.rows == "words" and comparison.counted.cases == "sentences"

    original = comparison.row("original")
    assert _row(original) == _counts(shared_tagger, wrong) and _keep(original) == _counts(shared_tagger, right)
    assert original.repair_whole.correct == 0  # every must_fix sentence has a wrong word

    warp = comparison.row("warp")
    assert warp.details["ok"] and warp.details["certs"]["cert1"].startswith(str(warp.repair.total))
    fix_words, keep_words = _counts(shared_tagger, wrong)[1], _counts(shared_tagger, right)[1]
    assert _row(warp) == (fix_words, fix_words, 4, 4) and _keep(warp) == (keep_words, keep_words, 10, 10)

    # The baselines as plain transformers tag with the weights they train (same seeded settings).
    adapter = load_adapter(loaded)
    for method, train in (("lora", train_lora), ("full_ft", train_full)):
        trained = train(adapter, loaded.cases, FEW_EPOCHS)
        saved = tmp_path / method
        trained.model.save_pretrained(saved)
        adapter.tokenizer.save_pretrained(saved)
        row = comparison.row(method)
        assert _row(row) == _counts(saved, wrong) and _keep(row) == _counts(saved, right), method
        assert row.details["epochs"] == trained.epochs
    assert comparison.row("lora").details["changed_head_tensors"] == [f"{adapter.spec.repair_layer}.weight"]

    text = comparison.to_markdown()
    assert "| Method | Repair Acc | Remain Acc | Repair (sentences) | Remain (sentences) |" in text
    assert (
        f"| WARP (r=2) | 100.0% ({fix_words}/{fix_words}) | 100.0% ({keep_words}/{keep_words}) | 100.0% (4/4) |" in text
    )
    data = comparison.to_dict()
    assert data["counted"] == {"rows": "words", "cases": "sentences"}
    assert data["sizes"]["must_fix_sentences"] == 4 and data["sizes"]["must_fix"] == fix_words


def test_a_subsample_takes_sentences_whole_and_a_size_counts_sentences(tagged):
    suite, wrong, right = tagged
    cases = load_suite(suite).cases
    chosen = select_cases(cases, CompareSettings(fix_size=2, keep_size=3, seed=5), TOKEN_TAGS)
    for kind, n, records in (("must_fix", 2, wrong), ("must_keep", 3, right)):
        rows = [c for c in chosen if c.kind.value == kind]
        sentences = {TOKEN_TAGS.group(c.id) for c in rows}
        assert len(sentences) == n
        stated = {r["id"]: sum(t is not None for t in r["tags"]) for r in records}
        assert len(rows) == sum(stated[s] for s in sentences)  # every constrained word of each
    with pytest.raises(SettingsError) as error:
        select_cases(cases, CompareSettings(fix_size=5), TOKEN_TAGS)
    assert error.value.field == "fix_size" and "only 4 must_fix sentences" in str(error.value)


def test_the_command_compares_a_token_suite(tagged, capsys):
    suite, _, _ = tagged
    assert main(["compare", str(suite), "--methods", "original,warp", "--fix-size", "3", "--json", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["sizes"]["must_fix_sentences"] == 3 and data["passed"] is True
    warp = next(m for m in data["methods"] if m["method"] == "warp")
    assert warp["repair_acc"] == 1.0 and warp["counts"]["repair_whole"] == {"accuracy": 1.0, "correct": 3, "total": 3}
