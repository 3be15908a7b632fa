"""Hostile baselines and chains: one input, one verdict.

A baseline that cannot answer the suite's cases as the model under test does (no weights, no
config.json, other labels, another number of classes) is refused before any work, naming the
baseline, with the same message under pytest (exit 4) and the command (exit 2), and an earlier
repaired model in the out folder stays byte-identical. A chain whose certificates loop, or whose
baseline folder is gone, fails ``verify --chain`` saying so, never a traceback or a false "holds"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from testkit.releases import leaning
from testkit.suite_builder import exit_code, split_cases, tree_digest, write_suite

from warp_check.releases.restore import reference_for

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
CERTIFICATE = "warp_certificate.json"


@pytest.fixture(scope="module", autouse=True)
def _warm_imports() -> None:
    """Import what the inner pytest runs import, first: pytester drops the modules a run imported, and a
    later in-process repair would meet two copies of the same enums."""
    import pytest_warp.summary  # noqa: F401
    import warp_check.qp.osqp_backend  # noqa: F401
    import warp_check.runs.repair  # noqa: F401


def _config(folder: Path, **changes: object) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config.update(changes)
    path.write_text(json.dumps(config), encoding="utf-8")


def _no_weights(model: Path, to: Path) -> Path:
    folder = Path(shutil.copytree(model, to))
    (folder / "model.safetensors").unlink()
    return folder


def _no_config(model: Path, to: Path) -> Path:
    folder = Path(shutil.copytree(model, to))
    (folder / "config.json").unlink()
    return folder


def _other_labels(model: Path, to: Path) -> Path:
    folder = Path(shutil.copytree(model, to))
    _config(folder, id2label={"0": "LABEL_0", "1": "LABEL_1"}, label2id={"LABEL_0": 0, "LABEL_1": 1})
    return folder


def _three_classes(model: Path, to: Path) -> Path:
    folder = Path(shutil.copytree(model, to))
    names = ["negative", "positive", "neutral"]
    _config(folder, id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)})
    return folder


# What each hostile baseline is refused with: the baseline named, what is wrong with it.
HOSTILE = {
    "no-weights": (_no_weights, "has no weights (*.safetensors): a baseline is a saved model folder"),
    "no-config": (_no_config, "has no config.json: a baseline is a saved model folder"),
    "other-labels": (_other_labels, "its labels are LABEL_0, LABEL_1, the suite's (and the model under test's)"),
    "three-classes": (_three_classes, "has 3 classes, the model under test 2: a baseline must be a release"),
}


@pytest.fixture(scope="module")
def earlier(distilbert_dir: Path, tiny_split, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The tiny suite, and a model repaired on it earlier (the artefact a refused run must leave as it is)."""
    root = tmp_path_factory.mktemp("hostile-baselines")
    wrong, right = tiny_split
    suite = write_suite(root / "suite", model=distilbert_dir, fix=wrong, keep=right)
    out = root / "repaired"
    assert exit_code(["repair", str(suite), "--out", str(out), "--cache", "none", "-q"]) == 0
    return {"root": root, "suite": suite, "out": out, "cases": len(wrong) + len(right)}


def _baseline(kind: str, distilbert_dir: Path, tmp_path: Path) -> tuple[Path, str]:
    folder = HOSTILE[kind][0](distilbert_dir, tmp_path / f"baseline-{kind}")
    return folder, f"the baseline {folder}"


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_the_command_refuses_a_hostile_baseline_and_the_earlier_repair_stays(
    kind, earlier, distilbert_dir, tmp_path, capsys
):
    baseline, named = _baseline(kind, distilbert_dir, tmp_path)
    out = Path(shutil.copytree(earlier["out"], tmp_path / "out"))
    before = tree_digest(out)
    capsys.readouterr()
    args = ["repair", str(earlier["suite"]), "--baseline", str(baseline), "--out", str(out), "--cache", "none", "-q"]
    assert exit_code([*args, "--rank", "3"]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith(f"warp-check repair: error: {named}") and HOSTILE[kind][1] in line
    assert "warp.toml" not in line and "unknown label" not in line  # the baseline's fault, not the suite's
    assert "Traceback" not in captured.out + captured.err
    assert tree_digest(out) == before and not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_pytest_refuses_a_hostile_baseline_with_the_command_s_message(kind, earlier, distilbert_dir, pytester):
    baseline, named = _baseline(kind, distilbert_dir, pytester.path)
    out = Path(shutil.copytree(earlier["out"], pytester.path / "out"))
    before = tree_digest(out)
    result = pytester.runpytest(
        *INNER, str(earlier["suite"]), "--warp-cache", "none", "--warp-repair", "--warp-rank", "3",
        "--warp-baseline", str(baseline), "--warp-out", str(out),
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.assert_outcomes(errors=1, skipped=earlier["cases"] - 1)
    result.stdout.fnmatch_lines([f"*warp-check refused the run: ModelError: {named}*{HOSTILE[kind][1]}*"])
    assert "Traceback" not in result.stdout.str() and "unknown label" not in result.stdout.str()
    assert tree_digest(out) == before


@pytest.mark.parametrize("kind", ["no-weights", "no-config"])
def test_the_regression_gate_names_a_baseline_without_a_model_not_warp_toml(
    kind, earlier, distilbert_dir, pytester, capsys
):
    baseline, named = _baseline(kind, distilbert_dir, pytester.path)
    suite = earlier["suite"]
    result = pytester.runpytest(*INNER, str(suite), "--warp-cache", "none", "--warp-baseline", str(baseline))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([f"*warp-check refused the run: ModelError: {named}*"])
    capsys.readouterr()
    assert exit_code(["diff", str(baseline), str(distilbert_dir), str(suite), "--cache", "none", "-q"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"warp-check diff: error: {named}") and HOSTILE[kind][1] in line
    assert line.removeprefix("warp-check diff: error: ") in result.stdout.str()  # one message, both front ends


def test_a_baseline_of_another_architecture_with_the_same_labels_is_one_verdict(
    earlier, roberta_dir, distilbert_dir, pytester, capsys
):
    # Only its answers are compared: a release may change architecture. Both front ends agree on them.
    suite = earlier["suite"]
    result = pytester.runpytest(*INNER, str(suite), "--warp-cache", "none", "--warp-baseline", str(roberta_dir))
    outcomes = result.parseoutcomes()
    capsys.readouterr()
    code = exit_code(["diff", str(roberta_dir), str(distilbert_dir), str(suite), "--cache", "none", "--json"])
    run = json.loads(capsys.readouterr().out)
    passed = sum(case["passed"] for case in run["cases"])
    assert (result.ret, code) in ((pytest.ExitCode.TESTS_FAILED, 1), (pytest.ExitCode.OK, 0))
    assert outcomes.get("passed", 0) == passed and "Traceback" not in result.stdout.str()


# -- chains --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def releases(distilbert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """r1 repaired from the tiny model; a fine-tune of it from elsewhere (no certificate); r2 repaired from
    the fine-tune against a copy of r1 as its baseline, that copy then deleted."""
    root = tmp_path_factory.mktemp("hostile-chains")
    wrong, right = split_cases(distilbert_dir, 80, seed=11)
    suite = write_suite(root / "suite", model=distilbert_dir, fix=wrong[:3], keep=right)
    r1 = root / "r1"
    assert exit_code(["repair", str(suite), "--out", str(r1), "--cache", "none", "-q"]) == 0
    finetuned = leaning(r1, root / "finetuned", 1.5)
    (finetuned / CERTIFICATE).unlink()
    gone = Path(shutil.copytree(r1, root / "r1-copy"))
    r2 = root / "r2"
    args = ["repair", str(suite), "--model", str(finetuned), "--baseline", str(gone), "--cache", "none", "-q"]
    assert exit_code([*args, "--out", str(r2)]) == 0
    shutil.rmtree(gone)
    return {"suite": suite, "first": distilbert_dir, "r1": r1, "finetuned": finetuned, "r2": r2, "gone": gone}


def _looped(r1: Path, root: Path, *, into_itself: bool) -> Path:
    """Copies of r1 whose certificates name each other (or itself) as the model they were repaired from,
    edited as a user might."""
    a = Path(shutil.copytree(r1, root / "a"))
    b = a if into_itself else Path(shutil.copytree(r1, root / "b"))
    for folder, source in ((a, b), (b, a)):
        path = folder / CERTIFICATE
        certificate = json.loads(path.read_text(encoding="utf-8"))
        certificate["model"]["source"] = str(source)
        path.write_text(json.dumps(certificate, indent=2), encoding="utf-8")
    return a


def _chain(capsys, *argv: str) -> tuple[int, dict, str]:
    capsys.readouterr()
    code = exit_code(["verify", *argv, "--chain", "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


@pytest.mark.parametrize("into_itself", [False, True], ids=["two-models", "itself"])
def test_a_chain_whose_certificates_loop_fails_saying_so(releases, tmp_path, capsys, into_itself):
    a = _looped(releases["r1"], tmp_path, into_itself=into_itself)
    code, out, err = _chain(capsys, str(a))
    assert code == 1 and not out["ok"] and err == ""
    assert len(out["links"]) == (1 if into_itself else 2)  # walked once, not round and round
    failed = [f for link in out["links"] for f in link["failed"] if f["name"] == "chain_loop"]
    (loop,) = failed
    assert f"it names {a} as where it came from" in loop["detail"] and "the chain loops" in loop["detail"]
    capsys.readouterr()
    assert exit_code(["verify", str(a), "--chain"]) == 1
    printed = capsys.readouterr().out
    assert "FAILED chain_loop: " in printed and printed.splitlines()[-1].startswith("chain of ")


def test_a_looping_chain_names_no_first_model_for_a_repair_to_restore_against(releases, tmp_path, capsys):
    a = _looped(releases["r1"], tmp_path, into_itself=False)
    assert reference_for(a, None, option="--baseline") is None
    before = tree_digest(a)
    capsys.readouterr()
    assert exit_code(["repair", str(releases["suite"]), "--model", str(a), "--out", str(tmp_path / "o"), "-q",
                      "--cache", "none"]) in (0, 1)  # fmt: skip
    assert "Traceback" not in capsys.readouterr().err and tree_digest(a) == before


def test_a_chain_whose_baseline_folder_is_gone_fails_instead_of_ending_there(releases, capsys):
    code, out, _ = _chain(capsys, str(releases["r2"]))
    assert [Path(link["model_dir"]) for link in out["links"]] == [releases["r2"], releases["finetuned"]]
    (gone,) = out["links"][1]["failed"]
    assert gone["name"] == "baseline_folder" and f"'{releases['gone']}', is not there" in gone["detail"]
    assert "give --from DIR" in gone["detail"] and code == 1 and not out["ok"]
    # Its first model cannot be reached: a repair of r2 restores against no model it cannot name.
    assert reference_for(releases["r2"], None, option="--baseline") is None


def test_a_gone_baseline_is_passed_by_from_where_the_user_says_where_it_came_from(releases, capsys):
    code, out, _ = _chain(capsys, str(releases["r2"]), "--from", str(releases["r1"]), "--suite", str(releases["suite"]))
    assert [Path(link["model_dir"]) for link in out["links"]] == [
        releases["r2"], releases["finetuned"], releases["r1"], releases["first"]
    ]  # fmt: skip
    assert not any(f["name"] == "baseline_folder" for link in out["links"] for f in link["failed"])
    assert out["links"][2]["reached_by"] == "--from"


def test_a_certificate_whose_parent_folder_is_gone_fails_the_link(releases, tmp_path, capsys):
    r1 = Path(shutil.copytree(releases["r1"], tmp_path / "r1"))
    path = r1 / CERTIFICATE
    certificate = json.loads(path.read_text(encoding="utf-8"))
    certificate["model"]["source"] = str(tmp_path / "deleted")
    path.write_text(json.dumps(certificate), encoding="utf-8")
    code, out, err = _chain(capsys, str(r1))
    (link,) = out["links"]
    assert [f["name"] for f in link["failed"]] == ["parent_folder"] and "is not there" in link["failed"][0]["detail"]
    assert code == 1 and err == ""


def test_an_uncertified_link_is_named_and_fails_without_a_suite(releases, capsys):
    code, out, _ = _chain(capsys, str(releases["r2"]), "--from", str(releases["r1"]))
    uncertified = [link for link in out["links"] if any(f["name"] == "uncertified" for f in link["failed"])]
    assert [Path(link["model_dir"]) for link in uncertified] == [releases["finetuned"]]
    assert code == 1
