"""One input, one verdict: an input the core refuses (the command's exit 2) is one error and a usage
exit code under pytest, serial and under xdist, never a failure of every case; a baseline whose
labels are not the suite's is refused naming the baseline, not blamed on the suite's case files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from testkit.inner_runs import warm_inner_runs
from testkit.suite_builder import write_suite

from warp_check.cli import main

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest", "-p", "no:cacheprovider")
FLIPPED = {"negative": "positive", "positive": "negative"}


@pytest.fixture(scope="module", autouse=True)
def _warm_imports(distilbert_dir: Path) -> None:
    warm_inner_runs(distilbert_dir)


def relabelled(model: Path, to: Path, names: list[str]) -> Path:
    """A copy of the model folder whose config.json names its classes ``names`` (a model saved without
    names has LABEL_0, LABEL_1)."""
    shutil.copytree(model, to)
    config = json.loads((to / "config.json").read_text())
    config["id2label"] = {str(i): name for i, name in enumerate(names)}
    config["label2id"] = {name: i for i, name in enumerate(names)}
    (to / "config.json").write_text(json.dumps(config))
    return to


def run(pytester: pytest.Pytester, *args: str, workers: int = 0) -> pytest.RunResult:
    if workers:
        return pytester.runpytest_subprocess(*INNER, "-n", str(workers), *args)
    return pytester.runpytest(*INNER, *args)


def assert_refused_once(result: pytest.RunResult, cases: int, message: str) -> None:
    """One error carrying ``message``, the suite's other cases skipped, the usage exit code."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.assert_outcomes(errors=1, skipped=cases - 1)
    result.stdout.fnmatch_lines([f"*warp-check refused the run: {message}*"])
    assert "Traceback" not in result.stdout.str()


# -- a baseline with other labels ------------------------------------------------------------------


def test_pytest_names_a_baseline_with_other_labels_not_the_suite(pytester, distilbert_dir, tiny_split):
    wrong, right = tiny_split
    write_suite(pytester.path / "suite", model=distilbert_dir, fix=wrong, keep=right)
    old = relabelled(distilbert_dir, pytester.path / "r1", ["LABEL_0", "LABEL_1"])
    result = run(pytester, "--warp-cache", "none", "--warp-baseline", str(old))
    said = (
        f"ModelError: the baseline {old}: its labels are LABEL_0, LABEL_1, the suite's (and the model under test's) "
        "negative, positive: a baseline must name the same labels"
    )
    assert_refused_once(result, len(wrong) + len(right), said)
    assert "unknown label" not in result.stdout.str()


def test_diff_names_a_baseline_with_other_labels(tiny_suite, distilbert_dir, tmp_path, capsys):
    old = relabelled(distilbert_dir, tmp_path / "r1", ["LABEL_0", "LABEL_1"])
    assert main(["diff", str(old), str(distilbert_dir), str(tiny_suite), "--cache", "none", "-q"]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith(
        f"warp-check diff: error: the baseline {old}: its labels are LABEL_0, LABEL_1, the suite's (and the model "
        "under test's) negative, positive: a baseline must name the same labels; save it with the model under "
        "test's id2label"
    )
    assert "unknown label" not in line and captured.out == ""


def test_diff_names_a_baseline_with_another_number_of_classes(tiny_suite, distilbert_dir, tmp_path, capsys):
    old = relabelled(distilbert_dir, tmp_path / "r1", ["negative", "positive", "neutral"])
    assert main(["diff", str(old), str(distilbert_dir), str(tiny_suite), "--cache", "none", "-q"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"the baseline {old} has 3 classes, the model under test 2: a baseline must be a release" in line


def test_a_suite_that_names_its_labels_takes_a_baseline_without_names(tiny_suite, distilbert_dir, tmp_path, capsys):
    # [labels] names the classes: the models' own names do not matter, the same weights gate clean.
    toml = tiny_suite / "warp.toml"
    toml.write_text(toml.read_text() + "\n[labels]\nnegative = 0\npositive = 1\n")
    old = relabelled(distilbert_dir, tmp_path / "r1", ["LABEL_0", "LABEL_1"])
    assert main(["diff", str(old), str(distilbert_dir), str(tiny_suite), "--cache", "none", "-q"]) == 0
    assert capsys.readouterr().err == ""


# -- inputs the core refuses -----------------------------------------------------------------------


def emoji_suite(folder: Path, model: Path, right: list[dict]) -> Path:
    return write_suite(folder, model=model, keep=[*right, {"id": "emoji", "text": "😀 🎉", "label": "positive"}])


def same_tokens_suite(folder: Path, model: Path, right: list[dict]) -> Path:
    # "  x" and "x" tokenize alike: kept with one label, to be fixed to the other.
    fix = [{"id": f"fix-{c['id']}", "text": "  " + c["text"], "label": FLIPPED[c["label"]]} for c in right[:1]]
    return write_suite(folder, model=model, fix=fix, keep=right)


@pytest.mark.parametrize("workers", [0, 2], ids=["serial", "xdist"])
def test_an_emoji_only_text_is_one_usage_error(pytester, distilbert_dir, tiny_split, workers, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    _, right = tiny_split
    emoji_suite(pytester.path / "suite", distilbert_dir, right)
    result = run(pytester, "--warp-cache", "none", workers=workers)
    assert_refused_once(result, len(right) + 1, "SuiteError: keep.jsonl:*: field 'text': tokenizes to nothing")


def test_two_cases_one_input_with_two_labels_are_one_usage_error(pytester, distilbert_dir, tiny_split):
    _, right = tiny_split
    same_tokens_suite(pytester.path / "suite", distilbert_dir, right)
    result = run(pytester, "--warp-cache", "none", "--warp-repair")  # no repair can satisfy both labels
    assert_refused_once(result, len(right) + 1, "SuiteError: *are the same input to the model*")
    assert not (pytester.path / "suite" / ".warp" / "repaired").exists()


@pytest.mark.parametrize("workers", [0, 2], ids=["serial", "xdist"])
def test_an_out_folder_that_is_a_file_is_one_usage_error(pytester, distilbert_dir, tiny_split, workers, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    wrong, right = tiny_split
    write_suite(pytester.path / "suite", model=distilbert_dir, fix=wrong, keep=right)
    taken = pytester.path / "taken"
    taken.write_text("a file")
    result = run(pytester, "--warp-cache", "none", "--warp-repair", "--warp-out", str(taken), workers=workers)
    assert_refused_once(result, len(wrong) + len(right), "ArtefactError: *exists and is not a folder*")
    assert taken.read_text() == "a file"


def test_the_command_refuses_the_same_inputs_with_exit_2(distilbert_dir, tiny_split, tmp_path, capsys):
    wrong, right = tiny_split
    for command, folder, said in (
        ("check", emoji_suite(tmp_path / "emoji", distilbert_dir, right), "tokenizes to nothing"),
        ("repair", same_tokens_suite(tmp_path / "same", distilbert_dir, right), "are the same input to the model"),
    ):
        assert main([command, str(folder), "--cache", "none", "-q"]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"warp-check {command}: error: ") and said in line
    taken = tmp_path / "taken"
    taken.write_text("a file")
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong, keep=right)
    assert main(["repair", str(folder), "--out", str(taken), "--cache", "none", "-q"]) == 2
    assert "exists and is not a folder" in capsys.readouterr().err
