"""warp_check.sources.predictions: unlabelled text into must_keep cases the model labels itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from testkit.suite_builder import exit_code, margins, split_cases, write_suite
from testkit.tiny_models import LABELS

from warp_check.cases import Kind
from warp_check.data_files import ImportSettings
from warp_check.errors import SettingsError, SuiteError
from warp_check.runs.check import check_suite
from warp_check.sources.importer import import_cases
from warp_check.sources.predictions import import_predicted
from warp_check.suite.loader import load_suite

JSONL = ImportSettings(format="jsonl", predicted=True)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def unlabelled(distilbert_dir: Path, tmp_path: Path):
    """A suite (2 must_fix, 4 must_keep) and a JSONL file of 30 texts, 2 of them the suite's own."""
    wrong, right = split_cases(distilbert_dir, 60, seed=5)
    suite_cases, traffic = right[:4], right[4:] + wrong[2:]
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:2], keep=suite_cases)
    texts = [c["text"] for c in traffic[:28]] + [wrong[0]["text"], suite_cases[0]["text"]]
    source = tmp_path / "traffic.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return folder, source, texts


def test_rows_are_labelled_by_the_models_prediction_and_pass_the_gate_once_listed(unlabelled, distilbert_dir):
    folder, source, texts = unlabelled
    suite = load_suite(folder)
    out = folder / "predicted.jsonl"
    result = import_predicted(suite, source, out, JSONL)
    assert result.rows == 30 and result.in_suite == 2  # the suite's own texts keep the suite's labels
    fresh = texts[:28]
    # Independently of the importer: each text's gap under the label the model predicts.
    best = np.max([margins(distilbert_dir, fresh, [k] * len(fresh)) for k in range(2)], axis=0)
    assert result.near_boundary == int(np.sum(best < suite.repair.gamma_h))
    written = lines(out)
    assert len(written) == len(result.appended.added) == 28 - result.near_boundary > 0
    assert sum(count for _, count in result.by_label) == len(written)
    assert {line["kind"] for line in written} == {"must_keep"}
    assert {line["source"] for line in written} == {"prediction:traffic.jsonl"}
    for line in written:  # the label is the one the model predicts, by at least gamma_h
        k = LABELS["binary"].index(line["label"])
        assert margins(distilbert_dir, [line["text"]], [k])[0] >= suite.repair.gamma_h
    toml = folder / "warp.toml"
    toml.write_text(toml.read_text() + '\n[[cases]]\npath = "predicted.jsonl"\n')
    listed = load_suite(folder)
    run = check_suite(listed)
    assert all(run.verdict(line["id"]).passed for line in written)  # the gate agrees: the model keeps them
    again = import_predicted(listed, source, out, JSONL)
    assert again.appended.added == () and again.near_boundary == result.near_boundary
    assert again.in_suite == 30 - result.near_boundary  # they are the suite's cases now


def test_rows_all_within_the_margin_write_nothing(unlabelled):
    folder, source, _ = unlabelled
    toml = folder / "warp.toml"
    toml.write_text(toml.read_text() + "\n[repair]\ngamma_s = 1000.0\ngamma_h = 1000.0\n")
    suite = load_suite(folder)
    out = folder / "predicted.jsonl"
    result = import_predicted(suite, source, out, JSONL)
    assert result.near_boundary == 28 and result.appended.added == () and result.by_label == ()
    assert not out.exists()  # nothing asked for was found: nothing is written


def test_a_row_without_text_names_its_file_line_and_column(unlabelled, tmp_path):
    folder, _, _ = unlabelled
    source = tmp_path / "bad.csv"
    source.write_text('review\nfine food\n""\n', encoding="utf-8")
    suite = load_suite(folder)
    out = tmp_path / "out.jsonl"
    settings = ImportSettings(format="csv", text="review", predicted=True)
    with pytest.raises(SuiteError, match=r"bad\.csv:3: field 'review': no text in column 'review'"):
        import_predicted(suite, source, out, settings)
    assert not out.exists()


def test_predicted_labels_are_for_must_keep_cases_and_need_the_model():
    with pytest.raises(SettingsError, match=r"kind='must_fix'.*must be must_keep with predicted labels"):
        ImportSettings(format="csv", kind=Kind.MUST_FIX, predicted=True)
    with pytest.raises(SettingsError, match="predicted"):
        ImportSettings(format="csv", predicted="yes")
    with pytest.raises(SettingsError, match="needs the model"):
        import_cases(None, "any.csv", "out.jsonl", ImportSettings(format="csv", predicted=True))


def test_the_import_command_labels_unlabelled_text_and_says_how_to_use_it(unlabelled, capsys):
    folder, source, _ = unlabelled
    out = folder / "predicted.jsonl"
    command = ["import", str(folder), str(source), "--out", str(out), "--predicted"]
    assert exit_code([*command, "--kind", "must_fix"]) == 2
    assert "--predicted makes must_keep cases, not must_fix" in capsys.readouterr().err
    assert exit_code([*command, "--label", "sentiment"]) == 2
    assert "--predicted reads no label column (--label)" in capsys.readouterr().err
    assert not out.exists()
    assert exit_code(command) == 0
    said = capsys.readouterr().out
    added = len(lines(out))
    assert f"30 row(s) read from {source}, labelled by the model's predictions (" in said
    assert f"): {added} must_keep case(s) appended to {out}, 0 already there" in said
    assert "left out: 2 the model sees as cases of the suite" in said
    assert 'list the file in warp.toml: [[cases]] path = "predicted.jsonl"' in said


def test_what_the_model_sees_as_a_suite_case_or_an_earlier_row_is_left_out(unlabelled):
    folder, _, texts = unlabelled
    suite = load_suite(folder)
    fix_text = next(c.text for c in suite.cases if c.kind is Kind.MUST_FIX)
    # The tiny model's tokenizer is uncased: a shouted copy of a must_fix case is that case.
    rows = [texts[0], fix_text.upper(), fix_text + "  ", texts[0] + " ", texts[1]]
    source = folder.parent / "near.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in rows), encoding="utf-8")
    result = import_predicted(suite, source, folder / "p.jsonl", JSONL)
    assert (result.in_suite, result.repeated) == (2, 1)
    assert sum(count for _, count in result.by_label) + result.near_boundary == 2


def test_rows_of_another_shape_or_with_a_suite_id_are_refused_naming_the_file(unlabelled, distilbert_dir, tmp_path):
    # A file that cannot be imported costs no model load: the suite's model has damaged weights, and
    # loading it first would be the error said instead.
    folder, source, texts = unlabelled
    model = tmp_path / "damaged"
    shutil.copytree(distilbert_dir, model)
    (model / "model.safetensors").write_bytes(b"\x00" * 64)
    toml = folder / "warp.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace(json.dumps(str(distilbert_dir)), json.dumps(str(model))))
    suite = load_suite(folder)
    assert suite.model_dir == model
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"text": texts[0], "other": texts[1]}) + "\n", encoding="utf-8")
    settings = ImportSettings(format="jsonl", text_pair="other", predicted=True)
    with pytest.raises(SuiteError, match=r"pairs\.jsonl: field 'text_pair': the suite's cases are single texts"):
        import_predicted(suite, pairs, tmp_path / "out.jsonl", settings)
    taken = next(c.id for c in suite.cases)
    ids = tmp_path / "ids.jsonl"
    ids.write_text(json.dumps({"text": texts[0], "uid": "new"}) + "\n" + json.dumps({"text": texts[1], "uid": taken}))
    with pytest.raises(SuiteError, match=rf"ids\.jsonl:2: field 'uid': id '{taken}' is already a case of the suite"):
        import_predicted(suite, ids, tmp_path / "out.jsonl", ImportSettings(format="jsonl", id="uid", predicted=True))
    assert not (tmp_path / "out.jsonl").exists()
    with pytest.raises(SuiteError, match="cannot load the model"):  # a file that can be imported: the model loads
        import_predicted(suite, source, tmp_path / "out.jsonl", JSONL)


def test_rows_the_model_sees_as_no_text_are_left_out_and_counted(unlabelled, tmp_path, capsys):
    # Bulk text holds rows of emoji and the like: the model sees nothing in them, and no label can be
    # predicted for nothing. They are left out and counted, not a reason to refuse the file.
    folder, _, texts = unlabelled
    source = tmp_path / "scraped.jsonl"
    rows = [texts[0], "\u00a0\u200b.", "🎉🎉", texts[1]]
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in rows), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = import_predicted(load_suite(folder), source, out, JSONL)
    assert (result.rows, result.no_text, result.in_suite, result.repeated) == (4, 2, 0, 0)
    assert sum(count for _, count in result.by_label) + result.near_boundary == 2
    assert {line["text"] for line in lines(out)} <= {texts[0], texts[1]}
    again = tmp_path / "again.jsonl"
    assert exit_code(["import", str(folder), str(source), "--out", str(again), "--predicted"]) == 0
    assert "left out: 2 the model sees as no text (nothing but special and unknown tokens)" in capsys.readouterr().out


def test_an_input_the_tokenizer_fails_on_names_the_file_and_the_entry(unlabelled, tmp_path, monkeypatch):
    from warp_check.errors import TokenizerFailure
    from warp_check.model.adapter import ClassifierAdapter

    folder, _, texts = unlabelled
    suite = load_suite(folder)
    dev = tmp_path / "dev.json"
    entries = [{"idx": 0, "label": 1, "sentence": texts[0]}, {"idx": 1, "label": 0, "sentence": texts[1]}]
    dev.write_text(json.dumps({"sst2": entries}), encoding="utf-8")
    settings = ImportSettings(format="advglue", task="sst2", predicted=True)

    def fails_on_the_second(texts, pairs=None):
        raise TokenizerFailure("the tokenizer failed", index=1, reason="a stand-in failure")

    adapter = ClassifierAdapter.from_pretrained(suite.model_dir)
    # internal: a tokenizer that takes the load's probe texts yet fails on one entry: none does so on demand
    monkeypatch.setattr(adapter, "tokenize", fails_on_the_second)
    with pytest.raises(SuiteError) as raised:
        import_predicted(suite, dev, tmp_path / "out.jsonl", settings, adapter=adapter)
    assert str(raised.value).startswith(f"{dev}: field 'text': case 'entry 2'")
    assert "a stand-in failure" in str(raised.value)
