"""warp_check.sources.importer: CSV, TSV, JSONL, Parquet and AdvGLUE files into a suite's case files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from testkit.suite_builder import write_suite

from warp_check.cases import Kind
from warp_check.data_files import ImportSettings, format_of
from warp_check.errors import SettingsError, SuiteError
from warp_check.sources.importer import import_cases
from warp_check.suite.loader import load_suite


@pytest.fixture
def suite(tmp_path: Path, distilbert_dir: Path):
    folder = write_suite(
        tmp_path / "suite", model=distilbert_dir, keep=[{"id": "k", "text": "it was good", "label": "positive"}]
    )
    return load_suite(folder)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_csv_with_named_columns_keeps_ids_checks_labels_and_adds_nothing_twice(suite, tmp_path):
    source = tmp_path / "reviews.csv"
    source.write_text(
        'review,sentiment,uid\n"great food, slow service",positive,r1\nawful,0,r2\nfine,1,\n', encoding="utf-8"
    )
    out = tmp_path / "imported.jsonl"
    settings = ImportSettings(format="csv", text="review", label="sentiment", id="uid", kind=Kind.MUST_FIX)
    with pytest.raises(SuiteError, match=r"reviews.csv:4: field 'uid': no id in column 'uid'"):
        import_cases(suite, source, out, settings)
    assert not out.exists()  # nothing half-written
    source.write_text('review,sentiment,uid\n"great food, slow service",positive,r1\nawful,0,r2\n', encoding="utf-8")
    result = import_cases(suite, source, out, settings)
    assert result.rows == 2 and result.appended.added == ("r1", "r2")
    assert lines(out) == [
        {
            "id": "r1",
            "text": "great food, slow service",
            "label": "positive",
            "kind": "must_fix",
            "source": "reviews.csv",
        },
        {"id": "r2", "text": "awful", "label": "negative", "kind": "must_fix", "source": "reviews.csv"},
    ]
    again = import_cases(suite, source, out, settings)
    assert again.appended.added == () and again.appended.duplicates == 2


def test_an_id_the_suite_gives_another_case_is_refused_naming_both_places(suite, tmp_path):
    # The suite would not load with both: refused here, where the row is, not at the next load.
    source = tmp_path / "more.jsonl"
    rows = [{"text": "it was good", "label": "positive", "id": "k"}, {"text": "dull", "label": "negative", "id": "k"}]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    out = tmp_path / "more-cases.jsonl"
    where = suite.locations["k"]
    message = f"more.jsonl:1: field 'id': id 'k' is already a case of the suite ({where.path}:{where.line})"
    with pytest.raises(SuiteError, match=re.escape(message)):
        import_cases(suite, source, out, ImportSettings(format="jsonl", id="id"))
    assert not out.exists()
    # Into the file that holds it, the append sees to it: the same case is a duplicate, the other a new id.
    result = import_cases(suite, source, where.path, ImportSettings(format="jsonl", id="id"))
    assert result.appended.duplicates == 1 and len(result.appended.added) == 1 and result.appended.added != ("k",)
    assert len(load_suite(suite.toml.parent).cases) == 2


def test_a_label_the_model_does_not_have_names_file_line_and_the_labels(suite, tmp_path):
    source = tmp_path / "cases.tsv"
    source.write_text("text\tlabel\nit was good\tpositive\nit was odd\tneutral\n", encoding="utf-8")
    with pytest.raises(
        SuiteError, match=r"cases.tsv:3: field 'label': label 'neutral' is not a label .*'negative' \(0\)"
    ):
        import_cases(suite, source, tmp_path / "out.jsonl", ImportSettings(format="tsv"))


@pytest.mark.parametrize("label", ["²", "١", "-²", "9" * 5000, "1" * 19])
def test_a_label_of_digits_int_refuses_is_named_not_a_traceback(suite, tmp_path, label):
    # str.isdigit takes '²' and Arabic-Indic digits, which int() refuses; int() also refuses a string
    # of more than 4,300 digits: each is a label the model does not have, said with file and line.
    source = tmp_path / "cases.jsonl"
    source.write_text(json.dumps({"text": "it was odd", "label": label}) + "\n", encoding="utf-8")
    with pytest.raises(SuiteError, match=r"cases.jsonl:1: field 'label': label '.*? is not a label of this suite"):
        import_cases(suite, source, tmp_path / "out.jsonl", ImportSettings(format="jsonl"))
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("latin1.csv", "text,label\nok,1\ncaf\xe9,1\n".encode("latin-1"), "latin1.csv:3: not valid UTF-8 (byte 0xe9)"),
        ("latin1.jsonl", '{"text": "caf\xe9", "label": 1}\n'.encode("latin-1"), "latin1.jsonl:1: not valid UTF-8"),
        # A quote left open would otherwise take the rest of the file as one text.
        ("open.csv", b'text,label\nok,1\n"open,1\nmore,0\n', "open.csv:3: not valid CSV: unexpected end of data"),
        ("stray.csv", b'text,label\nok,1\nok,1\n"a"b,1\n', "stray.csv:4: not valid CSV: ',' expected after '\"'"),
        ("long.csv", b"text,label\n" + b"a" * 200_000 + b",1\n", "long.csv:2: not valid CSV: field larger than"),
    ],
)
def test_files_that_are_not_utf8_or_not_csv_name_the_line(suite, tmp_path, name, content, message):
    source = tmp_path / name
    source.write_bytes(content)
    with pytest.raises(SuiteError, match=re.escape(message)):
        import_cases(suite, source, tmp_path / "out.jsonl", ImportSettings(format=format_of(source)))
    assert not (tmp_path / "out.jsonl").exists()


def test_a_byte_order_mark_is_dropped_and_quotes_inside_a_text_kept(suite, tmp_path):
    source = tmp_path / "excel.csv"
    source.write_bytes(b'\xef\xbb\xbftext,label\nhe said "hi" there,1\n"a ""quoted"" word",0\n')
    out = tmp_path / "out.jsonl"
    import_cases(suite, source, out, ImportSettings(format="csv"))
    assert [c["text"] for c in lines(out)] == ['he said "hi" there', 'a "quoted" word']
    # TSV as GLUE writes it: no quoting, so a sentence may begin with a quote and keep it.
    glue = tmp_path / "dev.tsv"
    glue.write_text('text\tlabel\n"Hello," he said.\t1\nit\'s "fine"\t0\n', encoding="utf-8")
    import_cases(suite, glue, tmp_path / "glue.jsonl", ImportSettings(format="tsv"))
    assert [c["text"] for c in lines(tmp_path / "glue.jsonl")] == ['"Hello," he said.', 'it\'s "fine"']


def test_jsonl_and_text_pairs(suite, tmp_path):
    source = tmp_path / "pairs.jsonl"
    source.write_text(json.dumps({"a": "the plot", "b": "it was good", "y": 1}) + "\n\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    import_cases(suite, source, out, ImportSettings(format="jsonl", text="a", text_pair="b", label="y"))
    (case,) = lines(out)
    assert case["text"] == "the plot" and case["text_pair"] == "it was good" and case["label"] == "positive"
    assert case["id"].startswith("import-pairs-")
    source.write_text('{"a": "x", "y": 1}\n[1]\n', encoding="utf-8")
    with pytest.raises(SuiteError, match=r"pairs.jsonl:1: field 'b': no text in column 'b'"):
        import_cases(suite, source, out, ImportSettings(format="jsonl", text="a", text_pair="b", label="y"))


def test_parquet_rows_are_named_by_their_position(suite, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    source = tmp_path / "cases.parquet"
    pq.write_table(pa.table({"text": ["good food", "\u200b"], "label": ["positive", "negative"]}), source)
    with pytest.raises(SuiteError, match=r"row 2: has no visible character"):
        import_cases(suite, source, tmp_path / "out.jsonl", ImportSettings(format="parquet"))
    pq.write_table(pa.table({"text": ["good food"], "label": [1]}), source)
    assert import_cases(suite, source, tmp_path / "out.jsonl", ImportSettings(format="parquet")).rows == 1
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(SuiteError, match="not a readable Parquet file"):
        import_cases(suite, tmp_path / "broken.parquet", tmp_path / "out.jsonl", ImportSettings(format="parquet"))


def test_advglue_dev_json_layout(suite, tmp_path):
    source = tmp_path / "dev.json"
    data = {
        "sst2": [{"idx": 0, "label": 1, "sentence": "a gorgeous film"}, {"idx": 1, "label": 0, "sentence": "dull"}],
        "rte": [{"idx": 0, "label": 0, "sentence1": "a", "sentence2": "b"}],
    }
    source.write_text(json.dumps(data), encoding="utf-8")
    assert format_of(source) == "advglue"
    out = tmp_path / "out.jsonl"
    import_cases(suite, source, out, ImportSettings(format="advglue", task="sst2", kind=Kind.MUST_FIX))
    assert [(c["id"], c["label"]) for c in lines(out)] == [
        ("advglue-sst2-0", "positive"),
        ("advglue-sst2-1", "negative"),
    ]
    with pytest.raises(SuiteError, match=r"no task 'qqp' in this AdvGLUE file \(tasks: sst2, rte\)"):
        import_cases(suite, source, out, ImportSettings(format="advglue", task="qqp"))


def test_settings_name_the_field():
    with pytest.raises(SettingsError, match="format='xlsx'"):
        ImportSettings(format="xlsx")
    with pytest.raises(SettingsError, match="task=None"):
        ImportSettings(format="advglue")
    with pytest.raises(SettingsError, match="cannot tell the format"):
        format_of("cases.xlsx")


def test_the_import_command(suite, tmp_path, capsys):
    from testkit.suite_builder import exit_code

    source = tmp_path / "reviews.tsv"
    source.write_text("review\tsentiment\nlovely\tpositive\ndull\tnegative\n", encoding="utf-8")
    out = tmp_path / "more.jsonl"
    argv = ["import", str(suite.root), str(source), "--out", str(out), "--text", "review", "--label", "sentiment"]
    assert exit_code([*argv, "--kind", "must_fix"]) == 0
    assert "2 row(s) read" in capsys.readouterr().out
    assert [(r["text"], r["label"], r["kind"]) for r in lines(out)] == [
        ("lovely", "positive", "must_fix"),
        ("dull", "negative", "must_fix"),
    ]
    source.write_text("review\tsentiment\nodd\tneutral\n", encoding="utf-8")
    assert exit_code(argv) == 2  # a label the model does not have: file:line, no traceback
    err = capsys.readouterr().err
    assert "reviews.tsv:2: field 'sentiment'" in err and "Traceback" not in err
    unknown = tmp_path / "cases.txt"
    unknown.write_text("lovely\n", encoding="utf-8")
    assert exit_code(["import", str(suite.root), str(unknown), "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        "warp-check import: error: --format: cannot tell the format of 'cases.txt': give one of csv, tsv, jsonl, "
        "parquet, advglue, goemotions, conll"
    )
