"""A repair over its traffic budget, end to end on a tiny model: the run prices its must_fix cases, prints
what each budget buys (the CLI and pytest's summary), writes no model, carries the price list in
report.json, draws it in index.html and tables it in report.md, and `warp-check defer --from` the report
moves out exactly the cases the budget cannot buy."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from testkit.report_runs import PRICES, over_budget_priced, page_of
from testkit.suite_builder import exit_code, write_suite
from testkit.tiny_models import synthetic_cases

from warp_check import REPORT_HTML, REPORT_JSON, read_report
from warp_check.budget.price import budget_advice
from warp_check.certificates.traffic.verdicts import PriceList

pytest_plugins = ["pytester"]
TRAFFIC = '[traffic]\npath = "traffic.jsonl"\n'


def _traffic(folder: Path) -> None:
    texts = sorted({c["text"] for c in synthetic_cases("binary", 600, seed=7, unseen_rate=0.5)})
    (folder / "traffic.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def over(tmp_path_factory, distilbert_dir: Path, tiny_split):
    """The suite repaired by the CLI at max_change = 5 %, with a report: (suite, out, report, stdout, exit)."""
    wrong, right = tiny_split
    root = tmp_path_factory.mktemp("run-prices")
    (root / "suite").mkdir()
    _traffic(root / "suite")
    suite = write_suite(root / "suite", model=distilbert_dir, fix=wrong, keep=right, extra=TRAFFIC)
    out, report = root / "out", root / "report"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = exit_code(["repair", str(suite), "--max-change", "0.05", "--out", str(out), "--report", str(report),
                          "--progress", "off"])  # fmt: skip
    return suite, out, report, printed.getvalue(), code


def test_the_cli_prints_what_each_budget_buys_and_writes_nothing(over):
    suite, out, report, printed, code = over
    assert code == 1 and not out.exists()
    assert "price list (each must_fix case priced by its own repair" in printed
    rows = [line for line in printed.splitlines() if re.match(r"\s+\d+(\.\d+)? %  ", line)]
    assert any(line.strip().startswith("5 %") and line.endswith("<- max_change") for line in rows), printed
    for budget in ("1 %", "2 %", "10 %"):
        assert any(line.strip().startswith(budget) for line in rows), printed
    fit = read_report(report / REPORT_JSON)[0].details.traffic.fit
    assert fit.prices is not None and fit.prices.at(0.05) is not None
    row = fit.prices.at(0.05)
    assert f"{row.cases} of {len(fit.prices.prices)}" in printed and fit.kept == row.cases


def test_report_json_carries_the_price_list(over):
    _, _, report, _, _ = over
    data = json.loads((report / REPORT_JSON).read_text(encoding="utf-8"))
    (run,) = data["runs"]
    prices = PriceList.from_json(run["details"]["traffic"]["fit"]["prices"])
    assert [b.budget for b in prices.bought] == [0.01, 0.02, 0.05, 0.10]
    fix = sum(1 for v in read_report(report / REPORT_JSON)[0].verdicts if v.kind.value == "must_fix")
    assert prices.n > 0 and prices.repairs > 0 and len(prices.prices) == fix


def test_the_report_draws_the_price_list_and_tables_it(over):
    _, _, report, _, _ = over
    page = (report / REPORT_HTML).read_text(encoding="utf-8")
    assert '-prices"><svg' in page and "max_change 5 %" in page and "What each budget buys" in page
    markdown = (report / "report.md").read_text(encoding="utf-8")
    assert "| max_change | must_fix bought | changed (tune part) | bound |" in markdown
    assert "| **5 %** (this run) |" in markdown


def test_defer_from_the_report_moves_out_the_cases_the_budget_cannot_buy(over, tmp_path):
    suite, _, report, _, _ = over
    copy = tmp_path / "suite"
    shutil.copytree(suite.parent if suite.name == "warp.toml" else suite, copy)
    fit = read_report(report / REPORT_JSON)[0].details.traffic.fit
    cannot = {c.id for c in fit.left_out}
    assert cannot and fit.kept
    before = _ids(copy / "fix.jsonl")
    # the report names the suite by its path: a copy is matched as the report's only run
    assert exit_code(["defer", str(copy), "--from", str(report / REPORT_JSON)]) == 0
    assert set(_ids(copy / "fix.jsonl")) == set(before) - cannot
    assert set(_ids(copy / "deferred.jsonl")) == cannot
    assert set(_ids(copy / "fix.jsonl")) == set(PriceList.ids_bought(fit.prices, 0.05))


def test_a_suite_with_more_must_fix_than_the_run_prices_gets_the_leave_out_search(distilbert_dir, tiny_split,
                                                                                   tmp_path):  # fmt: skip
    from warp_check import load_adapter, load_suite, load_traffic
    from warp_check.pipeline.evaluation import evaluate
    from warp_check.pipeline.ladder import Ladder

    wrong, right = tiny_split
    _traffic(tmp_path)
    suite = load_suite(write_suite(tmp_path, model=distilbert_dir, fix=wrong, keep=right, extra=TRAFFIC))
    adapter = load_adapter(suite)
    ladder = Ladder(adapter=adapter, evaluation=evaluate(adapter, suite.cases, progress=False),
                    settings=suite.settings(), fallback=False, progress=False)  # fmt: skip
    fit = budget_advice(ladder, load_traffic(suite), 0.05, max_priced=len(wrong) - 1)
    assert fit.prices is None and fit.unpriced is not None and f"{len(wrong):,} must_fix cases" in fit.unpriced
    assert "leave-out search" in fit.unpriced and fit.unpriced in fit.sentence()
    assert fit.repairs <= 12


def test_the_page_and_the_verdict_of_a_priced_run():
    from warp_check.runs.verdict import run_verdict

    run = over_budget_priced()
    lines = run_verdict(run).lines()
    assert any(line.startswith("price list (") for line in lines)
    assert any("<- max_change" in line and line.strip().startswith("1 %") for line in lines)
    page = page_of(run)
    assert "run-0-prices" in page and page.count("<circle") >= len(PRICES.bought)


def test_pytests_summary_prints_what_each_budget_buys(pytester, distilbert_dir: Path, tiny_split):
    import pytest_warp.summary  # noqa: F401  (what the inner run imports, imported once: pytester drops it)
    import warp_check.runs.repair  # noqa: F401

    wrong, right = tiny_split
    folder = pytester.path / "suite"
    folder.mkdir()
    _traffic(folder)
    write_suite(folder, model=distilbert_dir, fix=wrong, keep=right, extra=TRAFFIC)
    result = pytester.runpytest("-p", "no:randomly", "--warp-repair", "--warp-max-change", "0.05")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*price list (each must_fix case priced by its own repair*", "*5 %*<- max_change"])
    assert not (folder / ".warp" / "repaired").exists()
