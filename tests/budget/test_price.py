"""The price list (warp_check.budget.price) on a tiny model: each must_fix case priced by its own
repair on the traffic's tune part, the cheapest bought first, and what each budget buys is what a
repair of those cases alone changes there (recomputed here from a repair of its own)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from testkit.suite_builder import write_suite
from testkit.tiny_models import synthetic_cases

from warp_check import load_adapter, load_suite, load_traffic, repair_suite
from warp_check.budget.fit import changes_to_aim_at
from warp_check.budget.price import price_list
from warp_check.certificates.traffic.changes import predictions, traffic_inputs
from warp_check.certificates.traffic.sample import Part
from warp_check.pipeline.evaluation import evaluate
from warp_check.pipeline.ladder import Ladder

BUDGETS = (0.02, 0.05, 0.10, 0.5)


@pytest.fixture(scope="module")
def priced(tmp_path_factory, distilbert_dir, tiny_split):
    wrong, right = tiny_split
    root = tmp_path_factory.mktemp("price")
    (root / "suite").mkdir()
    texts = sorted({c["text"] for c in synthetic_cases("binary", 600, seed=7, unseen_rate=0.5)})
    (root / "suite" / "traffic.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    folder = write_suite(root / "suite", model=distilbert_dir, fix=wrong, keep=right,
                         extra='[traffic]\npath = "traffic.jsonl"\n')  # fmt: skip
    suite = load_suite(folder)
    sample = load_traffic(suite)
    adapter = load_adapter(suite)
    ladder = Ladder(adapter=adapter, evaluation=evaluate(adapter, suite.cases, progress=False),
                    settings=suite.settings(), fallback=False, progress=False)  # fmt: skip
    return suite, sample, price_list(ladder, sample, BUDGETS), root


def test_the_cases_are_priced_and_bought_cheapest_first_within_each_budget(priced):
    suite, sample, prices, _ = priced
    fix_ids = {c.id for c in suite.cases if c.kind.value == "must_fix"}
    assert {p.id for p in prices.prices} == fix_ids and prices.why is None
    known = [p.changed for p in prices.prices if p.changed is not None]
    assert known == sorted(known)  # cheapest first, unpriced last
    assert [b.budget for b in prices.bought] == list(BUDGETS)
    for b in prices.bought:
        assert b.aim == changes_to_aim_at(prices.n, len(sample.bound), sample.confidence, b.budget)
        assert b.changed is not None and b.changed <= b.aim or b.cases == 0
    assert prices.bought[-1].cases >= prices.bought[0].cases
    assert "budget" in prices.table() and f"of {len(fix_ids)}" in prices.table()


def test_what_a_budget_buys_is_what_their_repair_changes_on_the_tune_part(priced, tmp_path):
    suite, sample, prices, _ = priced
    budget = next((b for b in prices.bought if b.cases), prices.bought[-1])
    bought = set(prices.ids_bought(budget.budget))
    assert len(bought) == budget.cases
    rest = dataclasses.replace(
        suite, cases=tuple(c for c in suite.cases if c.kind.value != "must_fix" or c.id in bought)
    )
    adapter = load_adapter(suite)
    again = repair_suite(rest, adapter, suite.settings(), out_dir=tmp_path / "rest")
    assert again.passed
    inputs = traffic_inputs(adapter, sample, part=Part.TUNE)
    was = predictions(adapter.head(), inputs.V)
    now = predictions(load_adapter(dataclasses.replace(suite, model_dir=tmp_path / "rest")).head(), inputs.V)
    assert int(np.sum(was != now)) == budget.changed
    # the run's advice reads the same purchase: every case not bought is named, dearest first
    fit = prices.fit(budget.budget)
    assert {c.id for c in fit.left_out} == {p.id for p in prices.prices} - bought and fit.kept == len(bought)
    assert fit.within and fit.changed == budget.changed
