"""One verdict, worded once (warp_check/runs/verdict.py), for every front end: pytest's summary and
JUnit, the command's result, report.md and index.html. Over its traffic budget a repair's page leads
with that verdict (never "0 of N cases fail" beside a green FIXED) and lists the cases the budget
cannot buy and the changed traffic texts, as report.md does."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
from testkit.report_runs import CANNOT_BUY, over_budget, page_of, repair_run

from pytest_warp.summary import junit_properties, lines
from warp_check.commands.results import print_result
from warp_check.frontend import mode_named
from warp_check.reports.folder import write_report
from warp_check.reports.summary import headline
from warp_check.runs.verdict import run_verdict


def test_over_budget_the_verdict_says_what_happened_nothing_written_and_what_next():
    said = run_verdict(over_budget())
    assert not said.passed
    assert said.sentence == (
        "Failed: the repair fixes 6 of 6 must_fix cases and keeps 10 of 10 must_keep cases, but it changes up to "
        "4.9 % of predictions on traffic like its sample, over max_change = 1 %."
    )
    assert said.written is None and said.written_words == "nothing: a repair over its traffic budget is never written"
    assert said.next.startswith(
        "defer the 4 must_fix case(s) the budget cannot buy (listed in the report): warp-check defer "
    )
    assert " --from REPORT.json moves them out of this release's must_fix files" in said.next


def test_the_page_leads_with_that_verdict_and_lists_what_the_budget_cannot_buy(tmp_path):
    run = over_budget()
    page = page_of(run)
    said = run_verdict(run)
    assert said.sentence in page and "cases fail on the repaired model" not in page
    assert page.index(said.sentence) < page.index("<table")
    assert "a repair over its traffic budget is never written" in page and "defer the 4 must_fix case(s)" in page
    # The repair's figures are of weights never written: neither good (green) nor bad news beside the verdict.
    facts = {f.name: f for f in headline(run).facts}
    assert facts["fixed"].good is None and facts["kept"].good is None
    assert facts["fixed"].detail == "on the repaired weights, which were not written"
    section = page[page.index("Traffic (Cert 4)") : page.index('class="cases"')]
    assert "Must_fix cases the budget cannot buy (4)" in section
    assert all(case.id in section and case.where in section for case in CANNOT_BUY)
    assert "Texts whose prediction the repair changed (2)" in section
    assert "a gorgeous witty seductive movie" in section and "positive</bdi> → <bdi>negative" in section
    # report.md says the same verdict, and lists the same cases and texts.
    write_report(tmp_path, [run])
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert f"**{said.sentence}**" in markdown
    assert "- written: nothing: a repair over its traffic budget is never written" in markdown
    assert all(f"| {case.id} | {case.where} |" in markdown for case in CANNOT_BUY)
    assert "it 's slow very slow" in markdown
    assert markdown.index("Must_fix cases the budget cannot buy") < markdown.index("| case | kind |")


def test_the_terminal_summary_the_command_and_junit_say_the_same_verdict(capsys):
    run = over_budget()
    said = run_verdict(run)
    print_result(mode_named("repair"), run, quiet=True)
    command = capsys.readouterr().out.splitlines()
    assert [f"  {line}" for line in said.lines()] == command[-4:-1] and command[-1] == "FAILED"
    state = SimpleNamespace(
        runs={run.suite: dataclasses.replace(run, verdicts=())},
        cases={run.suite: list(run.verdicts)},
        config=SimpleNamespace(rootpath=Path("/suites")),
        options=SimpleNamespace(mode=mode_named("repair")),
        report_path=None,
        report_error=None,
    )
    assert lines(state)[-3:] == [f"  {line}" for line in said.lines()]
    assert junit_properties(state) == [
        ("warp suite verdict", f"FAILED: {said.happened}"),
        ("warp suite written", said.written_words),
        ("warp suite next", said.next),
    ]


@pytest.mark.parametrize("failed", [0, 2])
def test_a_repair_that_wrote_its_model_names_it_and_the_next_step(failed):
    said = run_verdict(repair_run(6, 10, failed=failed))
    assert said.passed is (failed == 0) and said.written == "/out/repaired"
    assert said.next == (
        "promote the fixed cases into must_keep so they stay fixed (warp-check promote /suites/s --from "
        "/out/repaired), and gate the next release on this one"
        if not failed
        else "read the failing cases' messages"
    )


def test_junit_carries_the_verdict_as_test_suite_properties(pytester, tiny_suite):
    result = pytester.runpytest_inprocess(str(tiny_suite), "--junitxml=out.xml", "-p", "no:cacheprovider")
    xml = (pytester.path / "out.xml").read_text(encoding="utf-8")
    assert result.ret == 1  # a check of a suite with must_fix cases the model gets wrong
    assert '<property name="warp suite verdict" value="FAILED: the model answers' in xml
    assert '<property name="warp suite next" value="repair it (pytest --warp-repair' in xml


pytest_plugins = ["pytester"]
