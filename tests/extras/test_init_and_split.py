"""A suite from nothing: ``warp-check init``, ``import`` into a suite with no cases, and labelled rows
sorted by the model as they come in (``--split-by-model``, ``--drop-wrong``)."""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import pytest
from testkit.hub import COMMIT, REPO_ID, lay_out_hub_cache
from testkit.suite_builder import exit_code

from warp_check.errors import ModelError, SuiteError
from warp_check.suite.init import init_suite
from warp_check.suite.loader import load_suite

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib

pytest_plugins = ["pytester"]


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def labelled_csv(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["sentence", "label"])
        writer.writeheader()
        for row in rows:
            writer.writerow({"sentence": row["text"], "label": row["label"]})
    return path


def test_init_writes_a_suite_that_loads_and_never_overwrites(distilbert_dir, tmp_path, capsys):
    folder = tmp_path / "work" / "suite"
    assert exit_code(["init", str(folder), "--model", str(distilbert_dir)]) == 0
    out = capsys.readouterr().out
    assert f"suite 'suite' written to {folder.as_posix()}: warp.toml" in out
    assert "labels: negative (0), positive (1)" in out and "warp-check import" in out
    written = tomllib.loads((folder / "warp.toml").read_text(encoding="utf-8"))
    assert written["model"]["path"] == Path(os.path.relpath(distilbert_dir, folder)).as_posix()
    assert written["labels"] == {"negative": 0, "positive": 1}
    assert [(t["path"], t["kind"]) for t in written["cases"]] == [
        ("must_keep.jsonl", "must_keep"),
        ("must_fix.jsonl", "must_fix"),
    ]
    assert (folder / "must_keep.jsonl").read_bytes() == b"" and (folder / "must_fix.jsonl").read_bytes() == b""
    assert sorted(p.name for p in folder.parent.iterdir()) == ["suite"]  # nothing left beside it
    suite = load_suite(folder, empty=True)
    assert suite.model_dir == distilbert_dir.resolve() and suite.cases == ()
    # Tested as it is, it says it has no cases and how to add them.
    with pytest.raises(SuiteError, match="the suite has no must_fix or must_keep cases.*warp-check import"):
        load_suite(folder)
    before = (folder / "warp.toml").read_bytes()
    (folder / "must_keep.jsonl").write_text('{"text": "good", "label": "positive"}\n', encoding="utf-8")
    assert exit_code(["init", str(folder), "--model", str(distilbert_dir)]) == 2
    assert "warp.toml: already exists: warp-check init never overwrites a suite" in capsys.readouterr().err
    assert (folder / "warp.toml").read_bytes() == before
    # An existing folder with other files takes a suite; one holding a case file already does not.
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine", encoding="utf-8")
    init_suite(other, distilbert_dir)
    assert sorted(p.name for p in other.iterdir()) == ["must_fix.jsonl", "must_keep.jsonl", "notes.txt", "warp.toml"]
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "must_fix.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(SuiteError, match="must_fix.jsonl: already exists"):
        init_suite(taken, distilbert_dir)
    assert sorted(p.name for p in taken.iterdir()) == ["must_fix.jsonl"]


def test_init_refuses_what_is_not_a_model_and_writes_nothing(tmp_path, capsys):
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    with pytest.raises(ModelError, match="has no weights"):
        init_suite(tmp_path / "s", empty)
    assert exit_code(["init", str(tmp_path / "s"), "--model", str(tmp_path / "nowhere" / "deep")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_pytest_on_a_new_suite_says_it_has_no_cases(distilbert_dir, tmp_path, pytester):
    init_suite(tmp_path / "suite", distilbert_dir)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", str(tmp_path / "suite"))
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error
    result.stdout.fnmatch_lines(["*field 'cases': the suite has no must_fix or must_keep cases*warp-check import*"])


def test_init_pins_a_hub_model_to_the_commit_the_cache_holds(distilbert_dir, tmp_path, monkeypatch, capsys):
    lay_out_hub_cache(tmp_path / "hub", distilbert_dir, monkeypatch)
    folder = tmp_path / "suite"
    assert exit_code(["init", str(folder), "--model", REPO_ID]) == 0
    assert f"(model {REPO_ID} at commit {COMMIT})" in capsys.readouterr().out
    model = tomllib.loads((folder / "warp.toml").read_text(encoding="utf-8"))["model"]
    assert (model["id"], model["revision"]) == (REPO_ID, COMMIT) and "path" not in model
    assert load_suite(folder, empty=True).model_commit == COMMIT
    assert exit_code(["init", str(tmp_path / "s2"), "--model", "acme/absent"]) == 2
    assert "hf download acme/absent --revision main" in capsys.readouterr().err
    assert not (tmp_path / "s2").exists()


def test_import_fills_a_new_suite_then_the_gate_runs(distilbert_dir, tiny_split, tmp_path, capsys):
    wrong, right = tiny_split
    folder = tmp_path / "suite"
    init_suite(folder, distilbert_dir)
    source = labelled_csv(tmp_path / "right.csv", right)
    assert exit_code(["import", str(folder), str(source), "--text", "sentence"]) == 0  # --out: the must_keep file
    assert f"{len(right)} case(s) appended to {folder / 'must_keep.jsonl'}" in capsys.readouterr().out
    assert [r["text"] for r in lines(folder / "must_keep.jsonl")] == [r["text"] for r in right]
    assert exit_code(["check", str(folder), "--cache", "none", "-q"]) == 0


def test_import_into_a_suite_without_case_tables_or_files_yet(distilbert_dir, tiny_split, tmp_path, capsys):
    _, right = tiny_split
    folder = tmp_path / "bare"
    folder.mkdir()
    (folder / "warp.toml").write_text(f"[model]\npath = {json.dumps(str(distilbert_dir))}\n", encoding="utf-8")
    source = labelled_csv(tmp_path / "rows.csv", right[:3])
    assert exit_code(["import", str(folder), str(source), "--text", "sentence"]) == 2  # no file of the kind
    assert "has no [[cases]] file of kind must_keep: say where the must_keep cases go with --out" in (
        capsys.readouterr().err
    )
    out = folder / "keep.jsonl"
    assert exit_code(["import", str(folder), str(source), "--text", "sentence", "--out", str(out)]) == 0
    assert 'to use them, list the file in warp.toml: [[cases]] path = "keep.jsonl"' in capsys.readouterr().out
    assert len(lines(out)) == 3
    # A suite listing a file not written yet: import creates it.
    (folder / "warp.toml").write_text(
        f'[model]\npath = {json.dumps(str(distilbert_dir))}\n\n[[cases]]\npath = "later.jsonl"\nkind = "must_keep"\n',
        encoding="utf-8",
    )
    assert exit_code(["import", str(folder), str(source), "--text", "sentence"]) == 0
    assert len(lines(folder / "later.jsonl")) == 3 and len(load_suite(folder).cases) == 3


def test_split_by_model_sends_wrong_rows_to_must_fix(distilbert_dir, tiny_split, tmp_path, capsys):
    wrong, right = tiny_split  # measured with plain transformers, not warp-check
    folder = tmp_path / "suite"
    init_suite(folder, distilbert_dir)
    rows = sorted(wrong + right, key=lambda r: r["id"])
    source = labelled_csv(tmp_path / "labelled.csv", rows)
    argv = ["import", str(folder), str(source), "--text", "sentence", "--split-by-model"]
    assert exit_code(argv) == 0
    out = capsys.readouterr().out
    assert f"{len(rows)} row(s) read from {source}; the model gets {len(right)} right and {len(wrong)} wrong" in out
    assert f"right: {len(right)} must_keep case(s) appended to {folder / 'must_keep.jsonl'}" in out
    assert f"wrong: {len(wrong)} must_fix case(s) appended to {folder / 'must_fix.jsonl'}" in out
    assert {r["text"] for r in lines(folder / "must_keep.jsonl")} == {r["text"] for r in right}
    fixes = lines(folder / "must_fix.jsonl")
    assert {r["text"] for r in fixes} == {r["text"] for r in wrong}
    assert {r["kind"] for r in fixes} == {"must_fix"}
    assert {r["label"] for r in fixes} <= {"negative", "positive"}
    assert any((folder / ".warp" / "cache").rglob("*")), "the rows' representations are cached for the next run"
    # The gate now fails exactly on the wrong rows, and keeps the right ones.
    assert exit_code(["check", str(folder), "--json"]) == 1
    verdicts = json.loads(capsys.readouterr().out)["cases"]
    failed = {c["id"] for c in verdicts if not c["passed"]}
    assert failed == {r["id"] for r in fixes}
    # A second import adds nothing.
    assert exit_code(argv) == 0
    assert f"right: 0 must_keep case(s) appended to {folder / 'must_keep.jsonl'}, {len(right)} already there" in (
        capsys.readouterr().out
    )


def test_drop_wrong_leaves_wrong_rows_out(distilbert_dir, tiny_split, tmp_path, capsys):
    wrong, right = tiny_split
    folder = tmp_path / "suite"
    init_suite(folder, distilbert_dir)
    source = labelled_csv(tmp_path / "labelled.csv", wrong + right)
    assert exit_code(["import", str(folder), str(source), "--text", "sentence", "--drop-wrong"]) == 0
    out = capsys.readouterr().out
    assert f"right: {len(right)} must_keep case(s)" in out and f"wrong: {len(wrong)} left out (--drop-wrong)" in out
    assert {r["text"] for r in lines(folder / "must_keep.jsonl")} == {r["text"] for r in right}
    assert lines(folder / "must_fix.jsonl") == []
    assert exit_code(["check", str(folder), "-q"]) == 0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--split-by-model", "--drop-wrong"], "--split-by-model sends wrong rows to must_fix, --drop-wrong leaves"),
        (["--split-by-model", "--kind", "must_fix"], "makes must_keep cases of the rows the model gets right"),
        (["--drop-wrong", "--predicted"], "--drop-wrong sorts labelled rows by the model; --predicted labels"),
        (["--fix-out", "x.jsonl"], "--fix-out goes with --split-by-model"),
    ],
    ids=["both", "kind", "predicted", "fix-out-alone"],
)
def test_sorting_flags_that_do_not_go_together_are_refused(distilbert_dir, tmp_path, capsys, flags, message):
    folder = tmp_path / "suite"
    init_suite(folder, distilbert_dir)
    source = labelled_csv(tmp_path / "rows.csv", [{"text": "good film", "label": "positive"}])
    assert exit_code(["import", str(folder), str(source), "--text", "sentence", *flags]) == 2
    assert message in capsys.readouterr().err
    assert lines(folder / "must_keep.jsonl") == [] and lines(folder / "must_fix.jsonl") == []


def test_one_text_with_two_labels_is_refused_before_anything_is_written(distilbert_dir, tmp_path, capsys):
    folder = tmp_path / "suite"
    init_suite(folder, distilbert_dir)
    rows = [{"text": "a fine film", "label": "positive"}, {"text": "a fine film", "label": "negative"}]
    source = labelled_csv(tmp_path / "rows.csv", rows)
    assert exit_code(["import", str(folder), str(source), "--text", "sentence", "--split-by-model"]) == 2
    err = capsys.readouterr().err
    assert "rows.csv:3: field 'label': the same text is labelled 'positive' at line 2 and 'negative' here" in err
    assert lines(folder / "must_keep.jsonl") == [] and lines(folder / "must_fix.jsonl") == []


def test_the_written_toml_reads_back_whatever_the_paths_and_label_names():
    from warp_check.model.hub_cache import ModelSource
    from warp_check.suite.init import suite_toml

    labels = {0: "not good", 1: 'say "yes"', 2: "ok"}
    inside = tomllib.loads(suite_toml(Path("/srv/suites/x"), ModelSource(folder=Path("/srv/models/m")), labels))
    assert inside["model"]["path"] == "../../models/m"  # a project that moves as a whole
    assert inside["labels"] == {"not good": 0, 'say "yes"': 1, "ok": 2}
    apart = tomllib.loads(suite_toml(Path("/srv/suites/x"), ModelSource(folder=Path("/opt/cache/m")), {}))
    assert apart["model"]["path"] == "/opt/cache/m" and "labels" not in apart  # a cache of its own: absolute


def test_predicted_rows_go_into_a_new_suite_too(distilbert_dir, tiny_split, tmp_path, capsys):
    _, right = tiny_split
    folder = tmp_path / "suite"
    init_suite(folder, distilbert_dir)
    source = tmp_path / "traffic.csv"
    source.write_text("sentence\n" + "\n".join(r["text"] for r in right[:4]) + "\n", encoding="utf-8")
    assert exit_code(["import", str(folder), str(source), "--text", "sentence", "--predicted"]) == 0
    assert "must_keep case(s) appended to" in capsys.readouterr().out
    assert 0 < len(lines(folder / "must_keep.jsonl")) <= 4


def test_init_takes_no_unicode_digit_for_a_class_id(distilbert_dir, tmp_path, capsys):
    # "²" passes str.isdigit and fails int(): a config's id2label keyed so is left out, never a traceback.
    import shutil

    model = Path(shutil.copytree(distilbert_dir, tmp_path / "model"))
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    config["id2label"] = {"0": "negative", "²": "positive"}
    (model / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert exit_code(["init", str(tmp_path / "suite"), "--model", str(model)]) == 0
    written = tomllib.loads((tmp_path / "suite" / "warp.toml").read_text(encoding="utf-8"))
    assert written["labels"] == {"negative": 0}
