"""A release against the last one: Cert 4 between the two models on the traffic, the paired test on the
suite, and the inputs a release manager may give by mistake.

Which predictions the release changed is measured apart from warp-check, with plain transformers on
both model folders."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from testkit.suite_builder import exit_code, split_cases, write_suite
from testkit.tiny_models import synthetic_cases
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from benchmarks.compare_releases import shifted_release
from warp_check.certificates.traffic.sample import split_traffic
from warp_check.certify.binomial import change_bound, sign_test

pytest_plugins = ["pytester"]


def predicted(model_dir: Path, texts: list[str]) -> np.ndarray:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    with torch.inference_mode():
        return np.array([int(model(**tokenizer(text, return_tensors="pt")).logits.argmax()) for text in texts])


@pytest.fixture(scope="module")
def release(distilbert_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """(suite, old, new, traffic file): the tiny model as the last release, the new one leaning to
    'positive', 600 synthetic texts (none of them suite cases) as the traffic."""
    root = tmp_path_factory.mktemp("compare")
    wrong, right = split_cases(distilbert_dir, 40, seed=11)
    suite = write_suite(root / "suite", model=distilbert_dir, fix=wrong, keep=right)
    new = shifted_release(distilbert_dir, root / "new", 4.0)  # leans to positive: a second release
    suite_texts = {c["text"] for c in wrong + right}
    texts = sorted({c["text"] for c in synthetic_cases("binary", 700, seed=23, unseen_rate=0.5)} - suite_texts)
    traffic = root / "traffic.jsonl"
    traffic.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return suite, distilbert_dir, new, traffic


def diff_json(argv: list[str], capsys) -> tuple[int, dict]:
    capsys.readouterr()
    code = exit_code(["diff", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def bound_texts(traffic: Path) -> list[str]:
    rows = [(json.loads(line)["text"], None, "x") for line in traffic.read_text(encoding="utf-8").splitlines()]
    return [t.text for t in split_traffic(rows, source=str(traffic), confidence=0.95).bound]


def test_diff_bounds_the_share_of_predictions_new_changes_against_old(release, capsys):
    suite, old, new, traffic = release
    code, run = diff_json([str(old), str(new), str(suite), "--traffic", str(traffic), "--cache", "none"], capsys)
    texts = bound_texts(traffic)
    was, now = predicted(old, texts), predicted(new, texts)
    changed = int((was != now).sum())
    assert changed > 0  # the fixture's release changes some
    note = run["details"]["traffic"]
    assert (note["n"], note["changed"]) == (len(texts), changed)
    assert note["bound"] == pytest.approx(change_bound(changed, len(texts), 0.95), rel=1e-12)
    assert note["bound"] >= changed / len(texts)
    flips = {
        f"{a}→{b}": int(((was == i) & (now == j)).sum())
        for i, a in enumerate(("negative", "positive"))
        for j, b in enumerate(("negative", "positive"))
        if i != j and ((was == i) & (now == j)).any()
    }
    assert note["by_pair"] == flips
    assert {texts[c["index"]] for c in note["changes"]} == {
        t for t, a, b in zip(texts, was, now, strict=True) if a != b
    }
    assert run["traffic"]["passed"] and run["traffic"]["message"].startswith("Cert 4 against the baseline")
    # No budget: measured, not gating; the exit code is the regressions'.
    regressions = [c for c in run["cases"] if not c["passed"] and "expected_failure" not in c]
    assert code == (1 if regressions else 0)


def test_the_budget_fails_the_traffic_item_naming_the_bound(release, capsys):
    suite, old, new, traffic = release
    argv = [str(old), str(new), str(suite), "--traffic", str(traffic), "--max-change", "0.02", "--cache", "none"]
    code, run = diff_json(argv, capsys)
    assert code == 1 and not run["traffic"]["passed"]
    bound = run["details"]["traffic"]["bound"]
    assert bound > 0.02
    message = run["traffic"]["message"]
    assert message.startswith(f"Cert 4 fails the budget against the baseline {old}")
    assert f"bound {100 * bound:.2g} % over max_change = 2 %" in message
    assert run["traffic"]["properties"]["bound"] == bound
    capsys.readouterr()
    assert exit_code(["diff", *argv, "-q"]) == 1
    said = capsys.readouterr().out
    assert f"FAILED Cert 4 fails the budget against the baseline {old}" in said
    # The run's verdict, worded once, says why: the bound over its budget.
    verdict = next(line.strip() for line in said.splitlines() if line.strip().startswith("verdict: "))
    assert verdict.startswith("verdict: FAILED: ") and f"{100 * bound:.2g}" in verdict and "over budget" in verdict


def test_a_second_comparison_encodes_nothing(release, tmp_path, capsys):
    suite, old, new, traffic = release
    argv = [str(old), str(new), str(suite), "--traffic", str(traffic), "--cache", str(tmp_path / "cache")]
    _, first = diff_json(argv, capsys)
    n = first["details"]["traffic"]["n"]
    # Each text once per model at most; once in all here: the release changed only the head, and the
    # cache keys a v by the layers below it.
    assert (first["traffic"]["properties"]["encoded_old"], first["traffic"]["properties"]["encoded_new"]) == (n, 0)
    _, second = diff_json(argv, capsys)
    assert (second["traffic"]["properties"]["encoded_old"], second["traffic"]["properties"]["encoded_new"]) == (0, 0)
    assert second["details"]["traffic"]["changed"] == first["details"]["traffic"]["changed"]


def test_new_identical_to_old_is_bounded_from_zero_changes(release, capsys):
    suite, old, _, traffic = release
    code, run = diff_json([str(old), str(old), str(suite), "--traffic", str(traffic), "--cache", "none"], capsys)
    note = run["details"]["traffic"]
    assert code == 0 and note["changed"] == 0 and note["by_pair"] == {}
    assert note["bound"] == pytest.approx(1 - 0.05 ** (1 / note["n"]), rel=1e-12)
    paired = run["details"]["paired_test"]
    assert (paired["right_to_wrong"], paired["wrong_to_right"], paired["p_value"]) == (0, 0, 1.0)


def test_traffic_that_is_all_suite_cases_is_refused(release, tmp_path, capsys):
    suite, old, new, _ = release
    cases = [json.loads(line) for line in (suite / "keep.jsonl").read_text(encoding="utf-8").splitlines()]
    traffic = tmp_path / "cases.jsonl"
    traffic.write_text("".join(json.dumps({"text": c["text"]}) + "\n" for c in cases), encoding="utf-8")
    capsys.readouterr()
    assert exit_code(["diff", str(old), str(new), str(suite), "--traffic", str(traffic), "--cache", "none"]) == 2
    err = capsys.readouterr().err
    assert "every text of this file is a must_fix or must_keep case of the suite" in err
    assert "Traceback" not in err


def test_a_baseline_with_other_labels_is_refused_naming_it(release, tmp_path, capsys):
    suite, old, _, traffic = release
    other = Path(shutil.copytree(old, tmp_path / "other"))
    config = json.loads((other / "config.json").read_text(encoding="utf-8"))
    config["id2label"] = {"0": "bad", "1": "good"}
    config["label2id"] = {"bad": 0, "good": 1}
    (other / "config.json").write_text(json.dumps(config), encoding="utf-8")
    capsys.readouterr()
    assert exit_code(["diff", str(other), str(old), str(suite), "--traffic", str(traffic), "--cache", "none"]) == 2
    err = capsys.readouterr().err
    assert f"the baseline {other}: its labels are bad, good" in err and "Traceback" not in err
    # A release of a history with other labels than the first: refused naming it, before any encoding.
    assert exit_code(["history", str(suite), str(old), str(other), "--cache", "none"]) == 2
    err = capsys.readouterr().err
    assert f"{other}: its labels are bad, good" in err and "Traceback" not in err


def test_models_with_different_tokenizers_are_compared_on_the_texts(release, tmp_path, capsys):
    """NEW keeps case where OLD lowers it: allowed, each model reads the texts its own way; texts one of
    them reads as nothing but unknown tokens are refused, named."""
    suite, old, _, traffic = release
    new = Path(shutil.copytree(old, tmp_path / "cased"))
    settings_file = new / "tokenizer_config.json"
    tokenizer = json.loads(settings_file.read_text(encoding="utf-8"))
    tokenizer["do_lower_case"] = False  # the tiny vocabulary is lower-case: a capital is unknown to NEW
    settings_file.write_text(json.dumps(tokenizer), encoding="utf-8")
    lines = [json.loads(line)["text"] for line in traffic.read_text(encoding="utf-8").splitlines()]
    for name, written in (("capitalised", str.capitalize), ("upper", str.upper)):
        (tmp_path / f"{name}.jsonl").write_text(
            "".join(json.dumps({"text": written(t)}) + "\n" for t in lines), encoding="utf-8"
        )
    argv = [str(old), str(new), str(suite), "--cache", "none", "--traffic"]
    code, run = diff_json([*argv, str(tmp_path / "capitalised.jsonl")], capsys)
    texts = bound_texts(tmp_path / "capitalised.jsonl")
    note = run["details"]["traffic"]
    assert (note["n"], note["no_text"]) == (len(texts), 0)
    assert note["changed"] == int((predicted(old, texts) != predicted(new, texts)).sum()) > 0
    capsys.readouterr()
    assert exit_code(["diff", *argv, str(tmp_path / "upper.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "the two models see no text in any of the" in err and "Traceback" not in err


def test_the_paired_test_counts_regressions_and_fixes_and_gates(release, capsys):
    suite, old, new, _ = release
    _, run = diff_json([str(old), str(new), str(suite), "--cache", "none"], capsys)
    regressions = [c for c in run["cases"] if not c["passed"] and "expected_failure" not in c]
    fixed = [c for c in run["cases"] if c["passed"] and c["properties"]["baseline_gap"] <= 0]
    assert regressions  # the fixture's release has some
    paired = run["details"]["paired_test"]
    assert (paired["right_to_wrong"], paired["wrong_to_right"]) == (len(regressions), len(fixed))
    assert paired["cases"] == len(run["cases"])
    n = len(regressions) + len(fixed)
    assert paired["p_value"] == pytest.approx(stats.binomtest(len(regressions), n, 0.5).pvalue, rel=1e-9)
    worse = stats.binomtest(len(regressions), n, 0.5, alternative="greater").pvalue
    assert paired["p_worse"] == pytest.approx(worse, rel=1e-9)
    # As a gate: a p below it fails the run, however the cases fare; one above it does not.
    gate = min(1.0, worse * 2)
    code, gated = diff_json([str(old), str(new), str(suite), "--cache", "none", "--worse-p", f"{gate:.17g}"], capsys)
    assert code == 1 and gated["details"]["paired_test"]["worse_p"] == pytest.approx(gate)
    capsys.readouterr()
    exit_code(["diff", str(old), str(new), str(suite), "--cache", "none", "--worse-p", f"{gate:.17g}", "-q"])
    said = capsys.readouterr().out
    assert "FAILED paired test (exact McNemar)" in said
    verdicts = [line.strip() for line in said.splitlines() if line.strip().startswith("verdict: ")]
    assert verdicts and verdicts[0].startswith("verdict: FAILED: ") and "below worse_p" in verdicts[0], said
    code, same = diff_json([str(old), str(old), str(suite), "--cache", "none", "--worse-p", "0.05"], capsys)
    assert code == 0 and same["details"]["paired_test"]["p_worse"] == 1.0


def test_pytest_gives_the_release_a_traffic_item_with_its_figures_in_junit(release, pytester):
    suite, old, new, traffic = release
    args = ["-p", "no:randomly", "-p", "no:cacheprovider", str(suite), "--warp-cache", "none"]
    args += ["--warp-model", str(new), "--warp-baseline", str(old), "--warp-traffic", str(traffic)]
    ran = pytester.runpytest(
        *args, "--warp-max-change", "0.02", "--junitxml=r.xml", "-k", "traffic", "--warp-report", "page"
    )
    ran.assert_outcomes(failed=1)
    ran.stdout.fnmatch_lines(["*Cert 4 fails the budget against the baseline*over max_change = 2 %*"])
    junit = (pytester.path / "r.xml").read_text(encoding="utf-8")
    assert 'name="bound"' in junit and 'name="changed"' in junit and 'name="encoded_new"' in junit
    page = (pytester.path / "page" / "index.html").read_text(encoding="utf-8")  # the comparison page, as diff's
    assert "<h3>Against the baseline</h3>" in page and "Traffic changed, by label pair" in page


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 3000), st.integers(0, 3000))
def test_the_paired_p_values_are_scipys_exact_binomial_test(worse: int, better: int) -> None:
    two_sided, one_sided = sign_test(worse, better)
    n = worse + better
    if n == 0:
        assert (two_sided, one_sided) == (1.0, 1.0)
        return
    assert two_sided == pytest.approx(stats.binomtest(worse, n, 0.5).pvalue, rel=1e-9, abs=1e-300)
    assert one_sided == pytest.approx(
        stats.binomtest(worse, n, 0.5, alternative="greater").pvalue, rel=1e-9, abs=1e-300
    )


def test_pytest_gates_on_the_paired_test_with_its_figures_in_junit(release, pytester):
    suite, old, new, _ = release
    args = ["-p", "no:randomly", "-p", "no:cacheprovider", str(suite), "--warp-cache", "none"]
    args += ["--warp-model", str(new), "--warp-baseline", str(old)]
    ran = pytester.runpytest(*args, "--warp-worse-p", "0.999999", "--junitxml=r.xml", "-rf")
    ran.stdout.fnmatch_lines(
        ["*paired test (exact McNemar)*below the gate worse_p = 0.999999*", "FAILED *::paired_test*"]
    )
    junit = (pytester.path / "r.xml").read_text(encoding="utf-8")
    assert 'name="p_value"' in junit and 'name="right_to_wrong"' in junit and 'name="p_worse"' in junit
    # The baseline against itself: no discordant case, p = 1, within any gate.
    same = ["-p", "no:randomly", "-p", "no:cacheprovider", str(suite), "--warp-cache", "none"]
    same += ["--warp-model", str(old), "--warp-baseline", str(old), "--warp-worse-p", "0.05", "-rA"]
    pytester.runpytest(*same).stdout.fnmatch_lines(["PASSED *::paired_test"])
    refused = pytester.runpytest(str(suite), "--warp-worse-p", "0.05")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*--warp-worse-p gates a model against its baseline*"])


def test_a_token_tagger_release_is_compared_per_word_and_bounded_per_sentence(tmp_path) -> None:
    """Two tiny taggers: a word changes where its tag does, a sentence where any of its words does; the share
    bounded is of sentences (the sample's draws), as a repair's Cert 4 on token traffic; recomputed here with
    plain transformers at each word's first sub-token."""
    from safetensors.numpy import load_file, save_file
    from testkit.token_tags import TAGS, build_tagger, sentences, word_logits

    from warp_check.decisions.token_tags import split_words

    old = build_tagger(tmp_path / "old", family="bert")
    new = Path(shutil.copytree(old, tmp_path / "new"))
    weights = load_file(new / "model.safetensors")
    bias = next(k for k in weights if k.endswith("classifier.bias"))
    weights[bias] = weights[bias].copy()
    weights[bias][TAGS.index("B-TOPIC")] += 2.5
    save_file(weights, new / "model.safetensors", metadata={"format": "pt"})
    keep = sentences(1, seed=5)[0]
    suite = write_suite(tmp_path / "suite", model=old, keep=[{"id": "k", "tokens": keep, "tags": ["O"] * len(keep)}])
    traffic = tmp_path / "traffic.jsonl"
    pool = sorted({" ".join(words) for words in sentences(300, seed=9)} - {" ".join(keep)})
    traffic.write_text("".join(json.dumps({"text": t}) + "\n" for t in pool), encoding="utf-8")
    out = io.StringIO()
    argv = ["diff", str(old), str(new), str(suite), "--traffic", str(traffic), "--cache", "none", "--json"]
    with contextlib.redirect_stdout(out):
        exit_code([*argv, "--max-change", "0.05"])
    run = json.loads(out.getvalue())
    note = run["details"]["traffic"]
    measured = [[w for w, _, _ in split_words(t)] for t in bound_texts(traffic)]
    was = [logits.argmax(axis=1) for logits in word_logits(old, measured)]
    now = [logits.argmax(axis=1) for logits in word_logits(new, measured)]
    changed_words = sum(int((a != b).sum()) for a, b in zip(was, now, strict=True))
    changed = sum(bool((a != b).any()) for a, b in zip(was, now, strict=True))
    assert note["decision"] == "token_tags" and note["n"] == len(measured) and changed > 0
    assert (note["changed"], note["words"], note["words_changed"]) == (
        changed, sum(map(len, measured)), changed_words,
    )  # fmt: skip
    assert note["bound"] == pytest.approx(change_bound(changed, len(measured), 0.95), rel=1e-12)
    assert not run["traffic"]["passed"] and "(of sentences)" in run["traffic"]["message"]


def test_a_multi_label_release_is_compared_as_its_kind_decides(tmp_path) -> None:
    """Several labels per text: a text is changed where any label's answer is, counted per label moved;
    recomputed here from each folder's logits with plain transformers."""
    from safetensors.numpy import load_file, save_file
    from testkit.multi_label import NAMES, build_multi_label, logits_of, texts

    from warp_check.cli import main

    old = build_multi_label(tmp_path / "old")
    new = Path(shutil.copytree(old, tmp_path / "new"))
    weights = load_file(new / "model.safetensors")
    bias = next(k for k in weights if k.endswith("classifier.bias"))
    weights[bias] = weights[bias].copy()
    weights[bias][NAMES.index("negated")] += 6.0
    save_file(weights, new / "model.safetensors", metadata={"format": "pt"})
    batch = texts(40, seed=3)
    suite = write_suite(
        tmp_path / "suite", model=old, keep=[{"id": f"k{i}", "text": t, "labels": []} for i, t in enumerate(batch[:3])]
    )
    traffic = tmp_path / "traffic.jsonl"
    pool = sorted(set(texts(900, seed=8)) - set(batch[:3]))
    traffic.write_text("".join(json.dumps({"text": t}) + "\n" for t in pool), encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["diff", str(old), str(new), str(suite), "--traffic", str(traffic), "--cache", "none", "--json"])
    note = json.loads(out.getvalue())["details"]["traffic"]
    measured = bound_texts(traffic)
    was, now = logits_of(old, measured) > 0, logits_of(new, measured) > 0
    assert note["decision"] == "multi_label" and note["n"] == len(measured)
    assert note["changed"] == int((was != now).any(axis=1).sum()) > 0
    assert note["bound"] == pytest.approx(change_bound(note["changed"], note["n"], 0.95), rel=1e-12)


def test_diff_writes_the_comparison_into_the_report(release, tmp_path, capsys):
    suite, old, new, traffic = release
    argv = [
        str(old),
        str(new),
        str(suite),
        "--traffic",
        str(traffic),
        "--cache",
        "none",
        "--report",
        str(tmp_path / "r"),
    ]
    _, run = diff_json(argv, capsys)
    note = run["details"]["traffic"]
    markdown = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert f"({note['changed']} of {note['n']}, 95 %)" in markdown and "Cert 4 against the baseline" in markdown
    saved = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))["runs"][0]["details"]
    assert saved["paired_test"] == run["details"]["paired_test"] and saved["traffic"]["bound"] == note["bound"]


@pytest.fixture(scope="module")
def comparison_page(release, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """``diff --report`` of the release against the last one, with traffic and a 2 % budget: the page and the run."""
    suite, old, new, traffic = release
    out = tmp_path_factory.mktemp("page")
    argv = [str(old), str(new), str(suite), "--traffic", str(traffic), "--max-change", "0.02", "--cache", "none"]
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exit_code(["diff", *argv, "--report", str(out / "r"), "--json"])
    return out / "r" / "index.html", json.loads(stdout.getvalue())


def test_the_comparison_page_puts_the_verdict_first_then_flips_texts_and_cases(comparison_page):
    from html.parser import HTMLParser

    page, run = comparison_page
    note, paired = run["details"]["traffic"], run["details"]["paired_test"]

    class Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.text = ""

        def handle_data(self, data: str) -> None:
            self.text += data

    parsed = Text()
    parsed.feed(page.read_text(encoding="utf-8"))
    words = " ".join(parsed.text.split())
    order = [
        words.index(said)
        for said in (
            "Against the baseline",
            f"{note['changed']} of {note['n']} texts changed",
            f"p = {paired['p_value']:.3g} two-sided",
            "Traffic changed, by label pair",
            f"Traffic texts whose prediction changed ({note['changed']})",
            "Cases",
        )
    ]
    assert order == sorted(order)  # the figures first, the case table last
    assert "budget 2 %: OVER it" in words and f"{paired['right_to_wrong']} right → wrong" in words
    regressions = [c for c in run["cases"] if not c["passed"] and "expected_failure" not in c]
    assert f"Regressions: right on the baseline, wrong now ({len(regressions)})" in words
    source = page.read_text(encoding="utf-8")
    flips = source[source.index('<table class="parts flips">') :]
    flips = flips[: flips.index("</table>")]
    head, body = flips.split("</thead>")
    cells = [[re.sub("<[^>]+>", "", cell) for cell in row.split("<td>")[1:]] for row in body.split("<tr>")[1:]]
    heads = [re.sub("<[^>]+>", "", th) for th in head.split('<th scope="col">')[2:]]
    matrix = {f"{row[0]}→{head}": int(count) for row in cells for head, count in zip(heads, row[1:], strict=True)}
    assert {pair: count for pair, count in matrix.items() if count} == note["by_pair"]
    assert note["changes"][0]["text"][:40] in words


@pytest.mark.parametrize("width", [1280, 390])
def test_the_comparison_page_fits_its_width_in_a_browser(browser, comparison_page, tmp_path, width):
    from test_report_browser import measured, rendered

    page, _ = comparison_page
    seen = measured(browser, page, tmp_path, width)
    assert seen["overflow"] <= 0 and seen["past"] == [], f"the page runs past {width} px: {seen}"
    assert seen["verdict"] >= 0
    assert rendered(browser, page, tmp_path).verdict == "FAILED"  # over the 2 % budget


@pytest.fixture(scope="module")
def history(release, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict, Path, tuple[int, dict]]:
    """``warp-check history`` over old → new → old with the traffic and a 2 % budget, its page written;
    and ``diff`` of new against old with the same budget."""
    suite, old, new, traffic = release
    out = tmp_path_factory.mktemp("history")
    argv = [str(suite), str(old), str(new), str(old), "--traffic", str(traffic), "--max-change", "0.02"]
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = exit_code(["history", *argv, "--cache", "none", "--report", str(out / "r"), "--json"])
    said = json.loads(stdout.getvalue())
    diffed = io.StringIO()
    with contextlib.redirect_stdout(diffed):
        diff_code = exit_code(["diff", str(old), str(new), str(suite), *argv[4:], "--cache", "none", "--json"])
    return code, said, out / "r", (diff_code, json.loads(diffed.getvalue()))


def test_history_compares_each_release_with_the_one_before_as_diff_does(history):
    code, said, _, (_, diffed) = history
    first, second, third = said["releases"]
    assert code == 1 and "paired_test" not in first and "traffic" not in first
    note, paired = diffed["details"]["traffic"], diffed["details"]["paired_test"]
    assert second["paired_test"] == paired | {"worse_p": None} or second["paired_test"] == paired
    regressions = sorted(c["id"] for c in diffed["cases"] if not c["passed"] and "expected_failure" not in c)
    assert sorted(second["regressions"]) == regressions and sorted(third["fixes"]) == regressions
    assert second["right"] == sum(c["passed"] for c in diffed["cases"] if "expected_failure" not in c)
    for key in ("n", "changed", "bound", "by_pair"):
        assert second["traffic"][key] == note[key], key
    # Back to the first release: the same texts change, the other way round.
    assert third["traffic"]["changed"] == note["changed"] and third["right"] == first["right"]
    assert {pair.split("→")[1] + "→" + pair.split("→")[0] for pair in third["traffic"]["by_pair"]} == set(
        note["by_pair"]
    )


def test_history_fails_over_the_budget_naming_the_bound_and_pages_its_trend(history, capsys):
    _, said, report, _ = history
    bound = said["releases"][1]["traffic"]["bound"]
    page = (report / "index.html").read_text(encoding="utf-8")
    assert f"Cert 4&#x27;s bound {100 * bound:.2g} % is over max_change = 2 %" in page or (
        f"Cert 4's bound {100 * bound:.2g} % is over max_change = 2 %" in page
    )
    assert page.count("<tr") == 1 + 3 and "<polyline" in page and "max_change 2 %" in page
    assert json.loads((report / "history.json").read_text(encoding="utf-8"))["releases"] == said["releases"]


@pytest.mark.parametrize("width", [1280, 390])
def test_the_history_page_fits_its_width_in_a_browser(browser, history, tmp_path, width):
    from test_report_browser import measured

    seen = measured(browser, history[2] / "index.html", tmp_path, width)
    assert seen["overflow"] <= 0 and seen["past"] == [], f"the page runs past {width} px: {seen}"


def test_a_second_history_encodes_nothing_and_prints_its_table(release, tmp_path, capsys):
    suite, old, new, traffic = release
    argv = ["history", str(suite), str(old), str(new), "--traffic", str(traffic), "--cache", str(tmp_path / "c")]
    capsys.readouterr()
    assert exit_code([*argv, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)["releases"][1]["traffic"]
    assert exit_code(argv) == 0
    said = capsys.readouterr().out
    assert f"{first['changed']}/{first['n']}" in said and "Cert 4 against release 1: it changes at most" in said
    assert said.rstrip().endswith("PASSED: 2 release(s), each within its gates against the one before")
    assert exit_code([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["releases"][1]["traffic"]["encoded"] == 0


def test_verify_chain_bounds_each_link_against_the_model_before_and_gates_it(release, history, capsys):
    suite, old, new, traffic = release
    bound = history[1]["releases"][1]["traffic"]
    argv = ["verify", str(new), "--chain", "--suite", str(suite), "--from", str(old), "--traffic", str(traffic)]
    argv += ["--max-change", "0.02", "--accept-drawdown", "1000", "--cache", "none"]
    capsys.readouterr()
    assert exit_code([*argv, "--json"]) == 1
    newest, first = json.loads(capsys.readouterr().out)["links"]
    assert "traffic" not in first and not newest["ok"]
    assert {key: newest["traffic"][key] for key in ("n", "changed", "bound")} == {
        key: bound[key] for key in ("n", "changed", "bound")
    }
    assert [f["name"] for f in newest["failed"]] == ["Cert 4 against the model before"]
    assert exit_code(argv) == 1
    said = capsys.readouterr().out
    assert f"  traffic: against {old} it changes at most {100 * bound['bound']:.2g} %" in said
    # The same chain, as history walks it: the first model first.
    assert exit_code(["history", str(suite), str(new), "--from", str(old), "--cache", "none", "--json"]) == 0
    assert [r["model_dir"] for r in json.loads(capsys.readouterr().out)["releases"]] == [str(old), str(new)]
