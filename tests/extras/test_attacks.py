"""``warp-check attack``: TextAttack recipes turned into must_fix cases.

The fail-fast paths (unknown, online-only and useless recipes, the missing extra) need no
textattack and run everywhere. The rest needs the ``attack`` extra and the NLTK data prepared by
``.ci/prepare_nltk_offline.sh``; without textattack installed (the transformers-5 environment) those
tests skip. Which attacks really fool the model is checked with plain transformers
(``suite_builder.margins``, ``tiny_models.predict``), not with warp-check.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from testkit.suite_builder import exit_code, margins, split_cases, tree_digest, write_suite
from testkit.tiny_models import LABELS, predict, synthetic_cases

from warp_check.cases import NEIGHBOUR, Case, Kind
from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.cli import main
from warp_check.errors import SettingsError
from warp_check.extras import attacks
from warp_check.extras.attacks import (
    NEEDS_NETWORK,
    NOT_FOR_MUST_FIX,
    RECIPES,
    AttackUnavailable,
    Attempt,
    RecipeSettings,
    check_ready,
    confirm_wrong,
    resolve_recipe,
)
from warp_check.model.adapter import ClassifierAdapter
from warp_check.suite.loader import load_suite

HAS_TEXTATTACK = importlib.util.find_spec("textattack") is not None
needs_textattack = pytest.mark.skipif(not HAS_TEXTATTACK, reason="textattack not installed (warp-check[attack])")
NAMES = LABELS["binary"]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def cases(distilbert_dir: Path) -> tuple[list[dict], list[dict]]:
    """(wrong, right) binary cases for the tiny DistilBERT, measured with plain transformers."""
    wrong, right = split_cases(distilbert_dir, 48, seed=5)
    assert len(wrong) >= 3 and len(right) >= 20
    return wrong, right


@pytest.fixture
def suite(tmp_path: Path, distilbert_dir: Path, cases) -> Path:
    wrong, right = cases
    return write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong, keep=right)


# -- fail fast, no textattack needed ----------------------------------------------------------------

ONLINE = ["BAEGarg2019", "TextFoolerJin2019", "PSOZang2020", "CheckList2020", "HotFlipEbrahimi2017"]


@pytest.mark.parametrize("recipe", ONLINE + ["InputReductionFeng2018", "textfooler"])
def test_a_recipe_that_cannot_run_offline_is_refused_before_textattack_is_imported(recipe, suite):
    """Its own process: sys.modules says what was imported, and the refusal costs no import time."""
    before = tree_digest(suite)
    code = textwrap.dedent(
        f"""
        import sys
        from warp_check.cli import main
        rc = main(["attack", {str(suite)!r}, "--recipe", {recipe!r}])
        heavy = sorted(m for m in ("textattack", "torch", "transformers", "nltk") if m in sys.modules)
        print("RESULT", rc, heavy)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "RESULT 2 []" in proc.stdout, proc.stdout + proc.stderr
    name = resolve_recipe_name(recipe)
    err = proc.stderr.strip()
    assert err.startswith(f"warp-check attack: error: {name} ") and len(err.splitlines()) == 1
    if name in NEEDS_NETWORK:
        assert NEEDS_NETWORK[name] in err and "does not download" in err
    else:
        assert "never flips a label" in err
    assert "use one of DeepWordBugGao2018, Pruthi2019, PWWSRen2019, LEAP2023" in err
    assert tree_digest(suite) == before


def resolve_recipe_name(name: str) -> str:
    with pytest.raises(AttackUnavailable) as info:
        resolve_recipe(name)
    return str(info.value).split(" ")[0]


@pytest.mark.parametrize(
    "given, suggested",
    [
        ("DeepWordBug2018", "DeepWordBugGao2018"),
        ("pwsw", "PWWSRen2019"),
        ("pw", "PWWSRen2019"),
        ("leap2032", "LEAP2023"),
    ],
)
def test_an_unknown_recipe_suggests_close_names(given, suggested, suite, capsys):
    before = tree_digest(suite)
    assert exit_code(["attack", str(suite), "--recipe", given]) == 2
    err = capsys.readouterr().err
    assert f"unknown recipe {given!r}; did you mean {suggested}" in err
    assert "recipes that run offline: DeepWordBugGao2018, Pruthi2019, PWWSRen2019, LEAP2023" in err
    assert tree_digest(suite) == before


@pytest.mark.parametrize(
    "given, name",
    [("DeepWordBugGao2018", "DeepWordBugGao2018"), ("deepwordbug", "DeepWordBugGao2018"), ("PWWS", "PWWSRen2019")]
    + [("prut", "Pruthi2019"), ("leap", "LEAP2023")],
)
def test_names_are_case_insensitive_and_a_unique_prefix_will_do(given, name):
    assert resolve_recipe(given) is RECIPES[name]


def test_the_missing_extra_says_how_to_install_it(suite, monkeypatch, capsys):
    real_find_spec, real_version = importlib.util.find_spec, importlib.metadata.version
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "textattack" else real_find_spec(name, *a)
    )
    assert exit_code(["attack", str(suite), "--recipe", "pruthi"]) == 2
    err = capsys.readouterr().err
    assert 'needs TextAttack, which is not installed: pip install "warp-check[attack]"' in err
    # With transformers 5 the extra cannot go into the same environment: the message says so.
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "5.0.1" if name == "transformers" else real_version(name)
    )
    assert exit_code(["attack", str(suite), "--recipe", "pruthi"]) == 2
    assert "this environment has 5.0.1: install it in a separate virtual environment" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--max", "0"], "--max: max_cases=0: must be an integer >= 1"),
        (["--query-budget", "0"], "--query-budget: query_budget=0: must be an integer >= 1"),
        (["--threads", "0"], "argument --threads: '0': must be an integer >= 1"),  # the declared option's words
    ],
)
def test_bad_numbers_are_usage_errors_naming_the_flag(argv, message, suite, capsys):
    assert exit_code(["attack", str(suite), "--recipe", "pruthi", *argv]) == 2
    assert f"warp-check attack: error: {message}" in capsys.readouterr().err
    with pytest.raises(SettingsError, match="source_kind='must_fix'"):
        RecipeSettings(source_kind="must_fix")


def test_confirm_wrong_keeps_only_what_the_model_gets_wrong(distilbert_dir, cases):
    """The filter every written case passes: a 'success' the model gets right is dropped, with its gap."""
    wrong, right = cases
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    clean = Case(id=right[0]["id"], text=right[0]["text"], label=NAMES.index(right[0]["label"]), kind=Kind.MUST_KEEP)
    fooled = Attempt(case_id=clean.id, status="succeeded", queries=1, text=wrong[0]["text"])
    not_fooled = Attempt(case_id=clean.id, status="succeeded", queries=1, text=clean.text)  # the model is right
    label_of_wrong = NAMES.index(wrong[0]["label"])
    kept, dropped = confirm_wrong(
        adapter,
        [(Case(id="w", text="x", label=label_of_wrong, kind=Kind.MUST_KEEP), fooled), (clean, not_fooled)],
    )
    assert kept == [fooled]
    [(case_id, gap)] = dropped
    expected = margins(distilbert_dir, [clean.text], [clean.label])[0]
    assert case_id == clean.id and gap == pytest.approx(expected, abs=1e-4) and gap > 0


# -- with textattack ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def attacked(tmp_path_factory, distilbert_dir, cases) -> dict:
    """One DeepWordBug run through the command line on a suite with a must_fix file (the default --out)."""
    if not HAS_TEXTATTACK:
        pytest.skip("textattack not installed (warp-check[attack])")
    wrong, right = cases
    # One hand-written must_fix line to append to: the wrong case nearest the boundary (the synthetic
    # errors far from it are encoder errors that no repair of the head fixes at rank 2).
    nearest = max(wrong, key=lambda c: c["margin"])
    folder = write_suite(tmp_path_factory.mktemp("attacked") / "suite", model=distilbert_dir, fix=[nearest], keep=right)
    before = (folder / "fix.jsonl").read_text(encoding="utf-8")
    argv = ["attack", str(folder), "--recipe", "DeepWordBugGao2018", "--threads", "1", "--json"]
    threads = torch.get_num_threads()
    try:
        code = main(argv)
    finally:
        torch.set_num_threads(threads)
    return {"folder": folder, "before": before, "code": code, "argv": argv}


@needs_textattack
def test_an_offline_recipe_appends_must_fix_cases_the_model_really_gets_wrong(attacked, cases, distilbert_dir, capsys):
    wrong, right = cases
    folder = attacked["folder"]
    assert attacked["code"] == 0
    text = (folder / "fix.jsonl").read_text(encoding="utf-8")
    assert text.startswith(attacked["before"])  # appended; the hand-written lines kept byte for byte
    new = read_jsonl(folder / "fix.jsonl")[1:]
    assert len(new) >= 5
    keep = {c["id"]: c for c in right}
    for record in new:
        assert record["source"] == "DeepWordBugGao2018" and record["original"] in keep
        assert record["label"] == keep[record["original"]]["label"]
        assert record["id"].startswith("deepwordbug-") and record["text"] != keep[record["original"]]["text"]
    gaps = margins(distilbert_dir, [r["text"] for r in new], [NAMES.index(r["label"]) for r in new])
    assert (gaps < 0).all(), gaps  # independently of warp-check and of TextAttack
    suite = load_suite(folder)
    assert suite.count(Kind.MUST_FIX) == 1 + len(new)
    assert {suite.case(r["id"]).kind for r in new} == {Kind.MUST_FIX}


@needs_textattack
def test_the_counts_are_explained_and_a_second_run_adds_nothing(attacked, cases, capsys):
    wrong, right = cases
    folder = attacked["folder"]
    before = (folder / "fix.jsonl").read_bytes()
    assert main(attacked["argv"][:-1] + ["-q"]) == 0
    out = capsys.readouterr().out
    assert (folder / "fix.jsonl").read_bytes() == before
    n_new = len(read_jsonl(folder / "fix.jsonl")) - 1
    assert f"DeepWordBugGao2018 on {len(right)} must_keep case(s), seed 0" in out
    assert "  succeeded" in out and "the label flipped: a new must_fix case" in out
    assert "the search ended or used its query budget without flipping the label" in out
    assert "the model is already wrong on the clean case: nothing to attack" in out
    assert "case(s)/s" in out and "model queries per case" in out
    assert f"nothing written: every case found is already in {folder / 'fix.jsonl'} or the suite" in out
    assert main(attacked["argv"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["added"] == [] and data["duplicates"] == n_new == data["counts"]["succeeded"] - len(data["dropped"])
    assert sum(data["counts"].values()) == data["attempted"] == len(right) and data["examples_per_second"] > 0


@needs_textattack
def test_the_recorded_file_feeds_a_successful_repair(attacked, tmp_path, capsys):
    folder = attacked["folder"]
    out_dir = tmp_path / "repaired"
    assert main(["repair", str(folder), "--out", str(out_dir), "--cache", "none", "-q"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    suite = load_suite(folder)
    certified = json.loads((out_dir / CERTIFICATE_NAME).read_text())["cases"]
    n_fix = suite.count(Kind.MUST_FIX) + sum(c["source"] == NEIGHBOUR for c in certified)  # the neighbourhood too
    n_keep = suite.count(Kind.MUST_KEEP)
    assert f"certificates: Cert 1 {n_fix}/{n_fix}, Cert 2 {n_keep}/{n_keep}" in out
    assert main(["check", str(folder), "--model", str(out_dir), "--cache", "none", "-q"]) == 0


@needs_textattack
def test_max_and_seed_select_cases_and_the_search_per_case(suite, cases, capsys):
    wrong, right = cases

    def run(*argv: str) -> dict:
        assert main(["attack", str(suite), "--recipe", "DeepWordBugGao2018", "--dry-run", "--json", *argv]) == 0
        data = json.loads(capsys.readouterr().out)
        return {a["case_id"]: (a["status"], a["text"]) for a in data["attempts"]}

    before = tree_digest(suite)
    first = run("--max", "12", "--threads", "1")
    assert list(first) == [c["id"] for c in right[:12]]  # the first N clean cases, in suite order
    fewer = run("--max", "5", "--threads", "1")
    assert fewer == {k: first[k] for k in list(first)[:5]}  # a case's search depends on (seed, its id) only
    assert run("--max", "12", "--threads", "1") == first
    other = run("--max", "12", "--seed", "1", "--threads", "1")
    assert other.keys() == first.keys() and other != first  # DeepWordBug's edits are random
    assert tree_digest(suite) == before  # --dry-run writes nothing


@needs_textattack
def test_nothing_is_written_when_nothing_succeeds(tmp_path, distilbert_dir, cases, capsys):
    wrong, right = cases
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, keep=right[:6], aux=wrong)
    out = folder / "new_fix.jsonl"
    # A budget of one query is spent on the clean case: every search fails at once.
    assert main(["attack", str(folder), "--recipe", "pruthi", "--out", str(out), "--query-budget", "1", "-q"]) == 0
    text = capsys.readouterr().out
    assert "  succeeded     0" in text and "  failed        6" in text and "no attack succeeded" in text
    # The aux cases are ones the model gets wrong: nothing to attack.
    assert main(["attack", str(folder), "--recipe", "pruthi", "--from", "aux", "--out", str(out), "-q"]) == 0
    text = capsys.readouterr().out
    assert f"  skipped   {len(wrong):>5}  the model is already wrong on the clean case" in text
    assert not out.exists()


@needs_textattack
def test_out_must_be_a_must_fix_file_and_is_required_without_one(tmp_path, distilbert_dir, cases, capsys):
    wrong, right = cases
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, keep=right[:4])
    before = tree_digest(folder)
    assert exit_code(["attack", str(folder), "--recipe", "pruthi"]) == 2
    assert "has no [[cases]] file of kind must_fix: say where the new cases go with --out" in capsys.readouterr().err
    assert exit_code(["attack", str(folder), "--recipe", "pruthi", "--out", str(folder / "keep.jsonl")]) == 2
    assert "is the suite's must_keep file; adversarial cases are must_fix" in capsys.readouterr().err
    assert tree_digest(folder) == before
    assert main(["attack", str(folder), "--recipe", "deepwordbug", "--out", str(folder / "fix.jsonl"), "-q"]) == 0
    assert 'add it to warp.toml as [[cases]] path = "fix.jsonl", kind = "must_fix"' in capsys.readouterr().out


@needs_textattack
def test_ctrl_c_keeps_what_was_found(suite, cases, monkeypatch, capsys):
    wrong, right = cases
    real = attacks._attack_one
    calls: list[Attempt] = []

    def interrupted_at_the_eighth(attack, case):
        if len(calls) == 7:
            raise KeyboardInterrupt
        calls.append(real(attack, case))
        return calls[-1]

    # internal: a Ctrl-C between two attacks at a known count; a signal from outside lands at no known point
    monkeypatch.setattr(attacks, "_attack_one", interrupted_at_the_eighth)
    assert main(["attack", str(suite), "--recipe", "deepwordbug", "--threads", "1", "-q"]) == 130
    assert "interrupted after 7 of" in capsys.readouterr().out
    found = {a.text for a in calls if a.status == "succeeded"}
    assert found and {r["text"] for r in read_jsonl(suite / "fix.jsonl")[len(wrong) :]} == found
    load_suite(suite)


@needs_textattack
@pytest.mark.parametrize("recipe", ["Pruthi2019", "PWWSRen2019", "LEAP2023"])
def test_every_offline_recipe_runs_without_downloading(recipe, tmp_path, distilbert_dir, cases, monkeypatch, capsys):
    import nltk

    downloads: list[tuple] = []
    monkeypatch.setattr(nltk, "download", lambda *a, **k: downloads.append(a) or False)
    wrong, right = cases
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong, keep=right[:6])
    assert main(["attack", str(folder), "--recipe", recipe, "--threads", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"]["succeeded"] >= 1 and not downloads
    new = read_jsonl(folder / "fix.jsonl")[len(wrong) :]
    assert len(new) == len(data["added"]) >= 1 and {r["source"] for r in new} == {recipe}
    assert (margins(distilbert_dir, [r["text"] for r in new], [NAMES.index(r["label"]) for r in new]) < 0).all()
    assert (
        data["caveat"] is None
        if recipe == "Pruthi2019"
        else "WordNet synonyms can change the meaning" in data["caveat"]
    )


@needs_textattack
def test_text_pairs_are_attacked_as_premise_and_hypothesis(tmp_path, pair_dir, capsys):
    names = LABELS["pair"]
    records = synthetic_cases("pair", 40, seed=3, unseen_rate=0.0)
    predicted = predict(pair_dir, [r["text"] for r in records], [r["text_pair"] for r in records])
    keep = [
        {"id": f"p{i}", "text": r["text"], "text_pair": r["text_pair"], "label": names[r["label"]]}
        for i, r in enumerate(records)
        if predicted[i] == r["label"]
    ][:12]
    folder = write_suite(tmp_path / "suite", model=pair_dir, keep=keep)
    out = folder / "fix.jsonl"
    assert main(["attack", str(folder), "--recipe", "deepwordbug", "--out", str(out), "--threads", "1", "-q"]) == 0
    new = read_jsonl(out)
    assert new and all(isinstance(r.get("text_pair"), str) for r in new)
    originals = {k["id"]: k for k in keep}
    for r in new:
        clean = originals[r["original"]]
        assert (r["text"], r["text_pair"]) != (clean["text"], clean["text_pair"]) and r["label"] == clean["label"]
    predicted = predict(pair_dir, [r["text"] for r in new], [r["text_pair"] for r in new])
    assert all(names[p] != r["label"] for p, r in zip(predicted, new, strict=True))


@needs_textattack
def test_missing_nltk_data_and_marker_say_how_to_prepare_them(tmp_path, suite, monkeypatch, capsys):
    import nltk.data

    empty = tmp_path / "nltk_data"
    (empty / "corpora" / "stopwords").mkdir(parents=True)
    monkeypatch.setattr(nltk.data, "path", [str(empty)])
    before = tree_digest(suite)
    assert exit_code(["attack", str(suite), "--recipe", "pwws"]) == 2
    err = capsys.readouterr().err
    assert "PWWSRen2019 needs NLTK data that is not installed: the English stop-word list and WordNet 3.0" in err
    assert "bash .ci/prepare_nltk_offline.sh DIR ~/.cache/textattack" in err and "export NLTK_DATA=DIR" in err
    (empty / "corpora" / "stopwords" / "english").write_text("a\nthe\n", encoding="utf-8")
    with pytest.raises(AttackUnavailable, match="needs NLTK data that is not installed: WordNet 3.0 "):
        check_ready(RECIPES["LEAP2023"])
    check_ready(RECIPES["DeepWordBugGao2018"])  # stop words are all it needs
    monkeypatch.setenv("TA_CACHE_DIR", str(tmp_path / "ta-cache"))
    assert exit_code(["attack", str(suite), "--recipe", "deepwordbug"]) == 2
    marker = tmp_path / "ta-cache" / "post_install_check_3"
    assert f"TextAttack's post-install marker {marker} is missing" in capsys.readouterr().err
    assert tree_digest(suite) == before


@needs_textattack
def test_importing_textattack_leaves_the_environment_alone_and_every_recipe_is_classified(tmp_path):
    """With TA_CACHE_DIR set, textattack points XDG_CACHE_HOME, HF_HOME... at its cache for the whole
    process (the example models are cached under XDG_CACHE_HOME): warp-check puts them back. Every
    recipe textattack has is either offered or refused with a reason. (One process: one 10 s import.)"""
    cache = tmp_path / "ta-cache"
    cache.mkdir()
    (cache / "post_install_check_3").touch()
    env = {k: v for k, v in os.environ.items() if k not in ("TOKENIZERS_PARALLELISM", "HF_HOME")}
    env |= {"TA_CACHE_DIR": str(cache), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    code = textwrap.dedent(
        """
        import json, os, sys
        before = dict(os.environ)
        import warp_check.extras.attacks as a
        textattack = a.import_textattack()
        after = dict(os.environ)
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        recipes = [n for n in dir(textattack.attack_recipes) if n[0].isupper() and n != "AttackRecipe"]
        print(json.dumps({"changed": changed, "recipes": recipes, "imported": "textattack" in sys.modules}))
        """
    )
    proc = subprocess.run([sys.executable, "-W", "error", "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["changed"] in ([], ["HF_HUB_OFFLINE"]) and data["imported"]
    assert set(data["recipes"]) == set(RECIPES) | set(NEEDS_NETWORK) | set(NOT_FOR_MUST_FIX)
