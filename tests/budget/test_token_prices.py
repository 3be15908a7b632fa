"""A token classifier's repair over its traffic budget: the run prices its must_fix *sentences* (a
sentence's words are fixed or deferred together), counts what Cert 4 bounds (sentences with any word's
tag changed), tables the price list in sentences, writes nothing, and does not advise `warp-check defer`,
which refuses a token suite; the sentences a budget buys repair within it on Cert 4's own part.

What changed is measured with plain transformers (testkit.token_tags.word_logits) on the input and
the repaired folders, never with warp_check; the parts are the sample's split rule."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import beta
from testkit.suite_builder import exit_code, tree_digest, write_kind_suite
from testkit.token_tags import build_tagger, sentences, split_by_model, word_logits

from warp_check import REPORT_JSON, load_adapter, load_suite, load_traffic, read_report
from warp_check.budget.fit import changes_to_aim_at, fit_to_budget
from warp_check.certificates.traffic.sample import Part, part_of, text_key
from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.decisions.token_tags import split_words
from warp_check.pipeline.evaluation import evaluate
from warp_check.pipeline.ladder import Ladder

BUDGET = 0.15  # the tiny tagger's cheapest sentence changes ~6 % of the tune part's sentences, all five ~21 %
SEARCH_BUDGET = 0.30  # greedy, the leave-out search names all five at BUDGET; here it keeps some
TRAFFIC = '[traffic]\npath = "traffic.jsonl"\n'


def _run(argv: list[str]) -> tuple[int, str]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = exit_code(argv)
    return code, printed.getvalue()


def _suite(folder: Path, model: Path, fix: list[dict], keep: list[dict], texts: list[str]) -> Path:
    suite = write_kind_suite(folder, model, fix, keep)
    (suite / "traffic.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    (suite / "warp.toml").write_text((suite / "warp.toml").read_text() + TRAFFIC, encoding="utf-8")
    return suite


def _sentences_changed(before: Path, after: Path, texts: list[str]) -> tuple[int, int]:
    """(sentences with any word's tag changed, sentences measured) between two folders, by plain transformers."""
    words = [[w for w, _, _ in split_words(t)] for t in texts]
    was, now = word_logits(before, words), word_logits(after, words)
    return sum(bool(np.any(a.argmax(1) != b.argmax(1))) for a, b in zip(was, now, strict=True)), len(words)


@pytest.fixture(scope="module")
def over(tmp_path_factory):
    """The tagger's suite repaired by the CLI at max_change = BUDGET, over it."""
    root = tmp_path_factory.mktemp("token-prices")
    model = build_tagger(root / "model", family="bert")
    wrong, right = split_by_model(model, fix=5, keep=20)
    # Two generated sentences a text: a traffic text holds several words a repair may move.
    pieces = [" ".join(words) for words in sentences(1600, seed=77, unseen_rate=0.5)]
    texts = sorted({f"{a} {b}" for a, b in zip(pieces[::2], pieces[1::2], strict=True)})
    suite = _suite(root / "suite", model, wrong, right, texts)
    out, report = root / "out", root / "report"
    argv = ["repair", str(suite), "--max-change", str(BUDGET), "--out", str(out), "--report", str(report)]
    code, printed = _run([*argv, "--progress", "off"])
    return {"root": root, "model": model, "wrong": wrong, "right": right, "texts": texts, "suite": suite,
            "out": out, "report": report, "code": code, "printed": printed}  # fmt: skip


def test_over_budget_the_price_list_is_in_sentences_and_nothing_is_written(over):
    assert over["code"] == 1 and not over["out"].exists(), over["printed"]
    printed = over["printed"]
    (run,) = read_report(over["report"] / REPORT_JSON)
    fit = run.details.traffic.fit
    prices = fit.prices
    assert prices is not None and prices.why is None and prices.unit == "sentences"
    sentence_ids = {s["id"] for s in over["wrong"]}
    assert {p.id for p in prices.prices} == sentence_ids  # one price per sentence, named as the run names them
    tune = [t for t in over["texts"] if part_of(text_key(t)) is Part.TUNE]
    assert prices.n == len(tune) < sum(len(split_words(t)) for t in tune)  # sentences, not words
    assert f"measured on the traffic's tune part, {prices.n:,} sentences" in printed
    row = prices.at(BUDGET)
    assert 0 < row.cases < len(sentence_ids), "the budget should buy some sentences, not all: the test proves little"
    marked = [line for line in printed.splitlines() if line.endswith("<- max_change")]
    assert len(marked) == 1 and f"{row.cases} of {len(sentence_ids)}" in marked[0], printed
    assert {c.id for c in fit.left_out} == sentence_ids - set(prices.ids_bought(BUDGET)) and fit.kept == row.cases
    assert run.traffic.properties["cannot buy"].split() == [c.id for c in fit.left_out]
    # The advice does not send the user to a command that refuses a token suite, and that command still refuses.
    assert not fit.deferrable and "by hand" in printed and "defer SUITE --from" not in printed, printed
    before = tree_digest(over["suite"])
    assert exit_code(["defer", str(over["suite"]), "--from", str(over["report"] / REPORT_JSON)]) != 0
    assert tree_digest(over["suite"]) == before


def test_the_sentences_bought_repair_within_the_budget_on_cert_4s_part(over):
    (run,) = read_report(over["report"] / REPORT_JSON)
    prices = run.details.traffic.fit.prices
    bought = set(prices.ids_bought(BUDGET))
    fix = [s for s in over["wrong"] if s["id"] in bought]
    suite = _suite(over["root"] / "bought", over["model"], fix, over["right"], over["texts"])
    out = over["root"] / "bought-out"
    code, printed = _run(["repair", str(suite), "--max-change", str(BUDGET), "--out", str(out), "--progress", "off"])
    assert code == 0, printed
    claim = json.loads((out / CERTIFICATE_NAME).read_text(encoding="utf-8"))["traffic"]
    # Cert 4 bounds the bound part's sentences with any word's tag changed, exactly, within the budget.
    bound_part = [t for t in over["texts"] if part_of(text_key(t)) is Part.BOUND]
    changed, n = _sentences_changed(over["model"], out, bound_part)
    assert (claim["n"], claim["changed"]) == (n, changed)
    assert np.isclose(claim["bound"], beta.ppf(0.95, changed + 1, n - changed), rtol=1e-9)
    assert claim["bound"] <= BUDGET
    # The price list's figure for this purchase is what this repair changes on the tune part, in sentences.
    tune = [t for t in over["texts"] if part_of(text_key(t)) is Part.TUNE]
    assert _sentences_changed(over["model"], out, tune) == (prices.at(BUDGET).changed, prices.n)


def test_the_leave_out_search_names_sentences_and_counts_them(over):
    suite = load_suite(over["suite"])
    sample, adapter = load_traffic(suite), load_adapter(suite)
    ladder = Ladder(adapter=adapter, evaluation=evaluate(adapter, suite.cases, progress=False),
                    settings=suite.settings(), fallback=False, progress=False)  # fmt: skip
    fit = fit_to_budget(ladder, sample, SEARCH_BUDGET)
    sentence_ids = {s["id"] for s in over["wrong"]}
    tune = [t for t in over["texts"] if part_of(text_key(t)) is Part.TUNE]
    assert fit.why is None and fit.unit == "sentences" and not fit.deferrable and fit.n == len(tune)
    left = {c.id for c in fit.left_out}
    assert left < sentence_ids and fit.kept == len(sentence_ids) - len(left) and fit.within
    # Its count is the sentences the repair of the rest changes on the tune part (any word's tag).
    rest = [s for s in over["wrong"] if s["id"] not in left]
    again = _suite(over["root"] / "rest", over["model"], rest, over["right"], over["texts"])
    out = over["root"] / "rest-out"
    assert _run(["repair", str(again), "--out", str(out), "--progress", "off"])[0] == 0
    assert _sentences_changed(over["model"], out, tune) == (fit.changed, fit.n)
    assert fit.changed <= changes_to_aim_at(fit.n, len(sample.bound), sample.confidence, SEARCH_BUDGET)
