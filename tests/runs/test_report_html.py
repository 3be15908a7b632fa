"""index.html as a release manager reads it, checked on the page's text (no browser: see
test_report_browser.py for the page after its JavaScript ran): the verdict in words, the figures
a run has and no line for those it has not, one row per case with its text, hostile texts
escaped, a bounded size, and nothing the page would fetch."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import html
import json
import re

from hypothesis import given
from hypothesis import strategies as st
from testkit.report_runs import SUITE, check_run, page_of, parsed, prose_texts, repair_details, repair_run

from warp_check.cases import Kind
from warp_check.certificates.traffic.verdicts import TrafficNote
from warp_check.reports.folder import REPORT_HTML, REPORT_JSON, markdown_text, read_report, write_report
from warp_check.reports.html import HTML_ROWS, PREVIEW_ROWS
from warp_check.reports.markup import DISPLAY_CHARS, PAGE_CHARS
from warp_check.reports.summary import headline
from warp_check.reports.svg import MAX_POINTS, nice_ticks, thinned
from warp_check.runs.details import AuditDetails
from warp_check.runs.modes import Mode, RunStatus
from warp_check.runs.result import Outcome, Verdict

HOSTILE = {
    "fix-00000": '<script>document.title="pwned"</script> & "quotes" \'single\' </td></table>',
    "fix-00001": "\u202eevil override\u202c and \u2067isolate\u2069 عربي",
    "fix-00002": "bell\x07 and escape\x1b[31m in a text",
    "keep-00003": "long " + "x" * 100_000,
}


def test_the_page_opens_with_the_verdict_and_has_one_row_per_case_with_its_text():
    run = repair_run(6, 10, failed=2)
    page = page_of(run)
    assert page.index('id="verdict"') < page.index("<table")
    assert '<p id="verdict" class="verdict fail" data-passed="false">FAILED</p>' in page
    said = "Failed: the repair fixes 6 of 6 must_fix cases and keeps 8 of 10 must_keep cases: 2 of 16 cases fail."
    assert said in page
    rows = parsed(page).rows
    assert len(rows) == 16
    by_id = {row[0]: row for row in rows}
    for verdict in run.verdicts:
        row = by_id[verdict.case_id]
        assert row[1] == verdict.kind.value and row[2] == verdict.text and row[3] == verdict.properties["label"]
        assert (
            row[5] == f"{verdict.properties['gap_before']:.3g}" and row[7] == f"{verdict.properties['gap_after']:.3g}"
        )
    assert [row[-2] for row in rows[:2]] == ["failed", "failed"]  # failures first
    assert all(row[-1] == "" for row in rows[2:])  # a passing case needs no why


def test_hostile_texts_are_escaped_cut_and_kept_apart_from_the_page():
    run = repair_run(3, 2, texts=HOSTILE, name='</title><script>alert("name")</script>')
    run = dataclasses.replace(run, details=dataclasses.replace(run.details, model="/m/\u202e<b>odd</b>"))
    page = page_of(run)
    table = parsed(page)
    assert table.scripts == 1  # the page's own, and no other
    assert "<script>document" not in page and "</td></table>" not in page and "<b>odd" not in page
    assert "&lt;script&gt;alert(&quot;name&quot;)" not in page  # text, not attribute: quotes as they are
    assert '&lt;/title&gt;&lt;script&gt;alert("name")&lt;/script&gt;' in page
    cells = {row[0]: row[2] for row in table.rows}
    assert cells["fix-00000"] == HOSTILE["fix-00000"]  # what the browser shows is the text itself
    assert cells["fix-00001"] == HOSTILE["fix-00001"]
    assert cells["fix-00002"] == "bell\ufffd and escape\ufffd[31m in a text"  # no control character reaches HTML
    text = HOSTILE["keep-00003"]  # the summary, then the rest up to PAGE_CHARS, then how much more there is
    shown = f"{text[:DISPLAY_CHARS]}… (100,005 characters)…{text[DISPLAY_CHARS:PAGE_CHARS]}"
    assert cells["keep-00003"] == f"{shown}… 98,005 more characters in report.json"
    assert len(page) < 24_000 + PAGE_CHARS + DISPLAY_CHARS  # the 100,000 characters are not all there
    assert "<bdi>/m/\u202e&lt;b&gt;odd&lt;/b&gt;</bdi>" in page  # a user's string is isolated from our words


def test_the_page_names_no_address_and_loads_nothing():
    run = repair_run(4, 4, texts={"fix-00000": "see https://example.com/x.png and http://evil/a.js"})
    page = page_of(run, check_run(6, wrong=2, baseline=True)).replace(
        "see https://example.com/x.png and http://evil/a.js", ""
    )  # the one address is a case's text, shown as text
    assert "http://" not in page and "https://" not in page and "//" not in page.replace("://", "")
    for loads in ("<link", "<img", "<iframe", " src=", "url(", "@import"):
        assert loads not in page
    assert "default-src 'none'" in page  # and the browser refuses anything it would load


def packed_columns(page: str) -> list[list[str]]:
    """The columns a compressed table carries, as the page's script decodes them: the code must
    be nothing but URL-safe base64, its gzip header without a time stamp."""
    codes = re.findall(r'<script type="application/octet-stream" id="[^"]+">([^<]*)</script>', page)
    assert len(codes) == 1 and re.fullmatch(r"[A-Za-z0-9_=-]+", codes[0])
    data = base64.urlsafe_b64decode(codes[0])
    assert data[:2] == b"\x1f\x8b" and data[4:8] == bytes(4)  # gzip, mtime 0: the same report, the same page
    return json.loads(gzip.decompress(data))


def test_five_thousand_cases_with_review_like_texts_make_a_page_under_400_kb():
    run = repair_run(2500, 2500, failed=40, texts=prose_texts(2500, 2500))
    page = page_of(run)
    assert len(page.encode("utf-8")) <= 400_000, f"{len(page.encode('utf-8')):,} bytes"
    columns = packed_columns(page)
    assert len(columns[1]) == 5000 and sorted(columns[1]) == sorted(v.case_id for v in run.verdicts)
    by_id = {v.case_id: v for v in run.verdicts}
    assert all(text == by_id[case].text for case, text in zip(columns[1], columns[3], strict=True))
    short = repair_run(2500, 2500, words=6)  # the plots do not grow with the cases
    assert len(page_of(short).encode("utf-8")) < 250_000


def test_a_large_table_carries_every_cell_compressed_and_its_first_rows_as_html():
    run = repair_run(300, HTML_ROWS, failed=12, texts=HOSTILE)
    page = page_of(run)
    html_rows = parsed(page).rows
    assert len(html_rows) == PREVIEW_ROWS and [row[-2] for row in html_rows[:12]] == ["failed"] * 12
    assert f"first {PREVIEW_ROWS} of its 800 cases, failures first" in page
    columns = packed_columns(page)
    rows = [list(row) for row in zip(*columns, strict=True)]
    assert len(rows) == 800 and [row[0] for row in rows[:12]] == ["failed"] * 12 and rows[12][0] == ""
    for html_row, row in zip(html_rows, rows, strict=False):  # the same cells, HTML or compressed
        text = row[3] if isinstance(row[3], str) else f"{row[3][0]}… ({row[3][2]} characters)…{row[3][1]}"
        assert html_row == row[1:3] + [text] + row[4:], row[1]
    assert len(columns) == 1 + len(html_rows[0])


def test_hostile_texts_in_a_compressed_table_stay_text():
    texts = HOSTILE | {"keep-00700": "</script><script>alert(1)</script><!-- <script>"}
    run = repair_run(3, 797, texts=texts)  # keep-00700 passes: not among the HTML rows
    page = page_of(run)
    assert parsed(page).scripts == 2  # the page's own and the data block, no other
    assert page.count("</script>") == 2 and "alert(1)" not in page and "<!--" not in page
    texts_shown = dict(zip(*packed_columns(page)[1:4:2], strict=True))
    assert texts_shown["keep-00700"] == texts["keep-00700"] and texts_shown["fix-00000"] == HOSTILE["fix-00000"]
    assert texts_shown["fix-00002"] == "bell\ufffd and escape\ufffd[31m in a text"
    head, rest, length, more = texts_shown["keep-00003"]  # cut as the HTML cell is
    text = HOSTILE["keep-00003"]
    assert (head, rest, length, more) == (text[:DISPLAY_CHARS], text[DISPLAY_CHARS:PAGE_CHARS], "100,005", "98,005")
    clean = page.replace('"//', "")  # a case's text may hold an address; the page's code none
    assert "//" not in clean.replace("://", "") and "default-src 'none'" in page


def test_a_table_of_up_to_html_rows_cases_is_plain_html_with_nothing_compressed():
    page = page_of(repair_run(100, HTML_ROWS - 100, failed=3))
    assert len(parsed(page).rows) == HTML_ROWS
    packed = ('<script type="application/octet-stream"', ' data-packed="', '<p class="note">')
    assert not any(mark in page for mark in packed)
    assert all(mark in page_of(repair_run(100, HTML_ROWS - 99)) for mark in packed)


def test_a_repair_says_what_it_fixed_kept_and_certified():
    facts = {f.name: f for f in headline(repair_run(6, 10)).facts}
    assert facts["fixed"].value == "6 of 6 must_fix cases" and facts["fixed"].good
    assert facts["kept"].value == "10 of 10 must_keep cases"
    assert facts["certificates"].value == "Cert 1 6/6, Cert 2 10/10, Cert 3 6/6"
    assert "restored" not in facts and "traffic" not in facts and "left out" not in facts
    assert headline(repair_run(6, 10)).verdict.startswith(
        "Passed: the repair fixes 6 of 6 must_fix cases and keeps 10 of 10 must_keep cases"
    )


def traffic_note(*, n: int, changed: int, bound: float, confidence: float) -> TrafficNote:
    return TrafficNote(
        source="traffic.jsonl", rows=2 * n, duplicates=0, in_suite=0, tune=n, no_text=0, sample_sha256="0" * 64,
        n=n, changed=changed, bound=bound, confidence=confidence, max_change=None, by_pair={}, changes=(),
        seconds=1.0,
    )  # fmt: skip


def test_restored_regressions_and_a_traffic_bound_are_shown_where_the_run_has_them():
    details = dataclasses.replace(
        repair_details(2, 4),
        traffic=traffic_note(n=800, changed=3, bound=0.0117, confidence=0.95),
        restored=("keep-00002", "keep-00003"),
    )
    run = repair_run(2, 4, details=details)
    facts = {f.name: f for f in headline(run).facts}
    assert facts["restored"].value == "2 of 2 regressions restored"
    assert facts["kept"].value == "2 of 2 must_keep cases"  # the restored ones are counted apart
    assert facts["traffic"].value == "changes at most 1.17% of predictions on traffic like this"
    assert facts["traffic"].detail == "3 of 800 sampled texts changed prediction; 95% confidence"
    page = page_of(run)
    assert "regressions restored" in page and "changes at most 1.17% of predictions" in page
    marked = dataclasses.replace(
        repair_run(2, 4),
        verdicts=tuple(
            dataclasses.replace(v, properties=v.properties | {"restored": True}) if v.case_id == "keep-00005" else v
            for v in repair_run(2, 4).verdicts
        ),
    )
    assert {f.name: f.value for f in headline(marked).facts}["restored"] == "1 of 1 regressions restored"


def test_baseline_gating_counts_regressions_apart_from_expected_failures():
    run = check_run(40, wrong=6, baseline=True)  # 3 regressions, 3 wrong on both
    head = headline(run)
    facts = {f.name: f.value for f in head.facts}
    assert (
        facts["regressions"] == "3 cases" and facts["still wrong"] == "3 cases" and facts["right"] == "34 of 40 cases"
    )
    assert head.verdict == "Failed: 3 regressions against the baseline (right before, wrong now)."
    rows = parsed(page_of(run)).rows
    assert sorted(row[-2] for row in rows[:6]) == ["expected failure"] * 3 + ["failed"] * 3
    page = page_of(run)
    assert ">prediction on the baseline<" in page and ">gap now<" in page
    assert "<small>baseline mode</small>" in page and ">must_keep on the baseline</text>" in page


def test_a_check_says_how_many_cases_the_model_gets_wrong():
    assert headline(check_run(10, wrong=0)).verdict == "Passed: the model answers all 10 cases right."
    failing = headline(check_run(10, wrong=4)).verdict
    assert failing.startswith("Failed: the model answers 4 of 10 cases wrong (0 must_fix, 4 must_keep).")
    page = page_of(check_run(10, wrong=0))
    assert "before" not in page.split("<thead>")[1].split("</thead>")[0]  # a check has no before


def test_a_run_that_failed_before_its_verdicts_says_so():
    run = dataclasses.replace(repair_run(1, 1), status=RunStatus.ERROR, ok=False, message="the model folder is gone")
    assert headline(run).verdict == "Failed: the run could not finish: the model folder is gone."
    assert "the model folder is gone" in page_of(run)


def test_write_report_writes_the_page_and_report_json_keeps_every_text(tmp_path):
    run = repair_run(3, 3, texts=HOSTILE)
    write_report(tmp_path, [run])
    assert parsed((tmp_path / REPORT_HTML).read_text(encoding="utf-8")).rows
    again = read_report(tmp_path / REPORT_JSON)
    assert [v.text for v in again[0].verdicts] == [v.text for v in run.verdicts]
    assert json.loads((tmp_path / REPORT_JSON).read_text())["runs"][0]["cases"][3]["text"] == HOSTILE["keep-00003"]
    markdown = (tmp_path / "report.md").read_text()
    assert "\n**Passed: the repair fixes 3 of 3 must_fix cases and keeps 3 of 3 must_keep cases" in markdown
    assert "\n- written: /out/repaired\n- next: promote the fixed cases" in markdown
    assert '\\<script\\>document.title="pwned"\\</script\\> & "quotes"' in markdown
    assert "<script>" not in markdown


def test_a_verdict_keeps_its_text_through_json_and_an_older_file_reads_without_one():
    verdict = Verdict(case_id="k", kind=Kind.MUST_KEEP, passed=True, message="", text="a", text_pair="b")
    data = verdict.to_dict()
    assert list(data)[:6] == ["id", "kind", "passed", "message", "text", "text_pair"]
    assert Verdict.from_dict(data) == verdict
    older = {k: v for k, v in data.items() if k not in ("text", "text_pair")}
    assert Verdict.from_dict(older).text is None
    row = parsed(page_of(dataclasses.replace(repair_run(1, 0), verdicts=(Verdict.from_dict(older),)))).rows[0]
    assert row[2] == "–"  # shown as missing, not as an empty or broken cell


def test_markdown_cells_take_any_text_on_one_line():
    assert markdown_text("a | b\nc *d* _e_ <i>") == "a \\| b c \\*d\\* \\_e\\_ \\<i\\>"
    assert markdown_text("x" * 200) == "x" * 79 + "…"
    assert markdown_text("premise", "hypothesis") == "premise ‖ hypothesis"
    assert markdown_text(None) == "–"


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=2000), st.integers(2, 400))
def test_a_thinned_curve_keeps_its_ends_and_order_within_its_limit(values, limit):
    points = thinned(values, limit)
    assert len(points) <= max(limit, 1) and points[0][1] == min(values) and points[-1][1] == max(values)
    assert [y for _, y in points] == sorted(y for _, y in points)
    assert all(0 <= x <= 1 for x, _ in points)


@given(st.floats(-1e6, 1e6), st.floats(1e-6, 1e6))
def test_ticks_are_round_increasing_and_inside_their_range(low, width):
    ticks = nice_ticks(low, low + width)
    assert 1 <= len(ticks) <= 12 and ticks == sorted(ticks)
    assert all(low - 1e-9 * max(1, abs(low)) <= t <= low + width + 1e-9 * max(1, abs(low + width)) for t in ticks)


def test_plots_have_plain_captions_and_a_bounded_size():
    page = page_of(repair_run(2500, 2500))
    figures = page[page.index('<div class="plots">') : page.index("<h3>Cases</h3>")]
    assert len(figures) < 60_000
    for title in ("How sure the model is, case by case.", "How firmly each fix holds.", "How the repair got there."):
        assert title in figures
    assert "Larger is safer" in figures and "not a number of edited words or characters" in figures
    assert figures.count("<polyline") == 6  # before and after of each kind, and the two convergence lines
    assert max(len(p.split('"')[0].split(" ")) for p in figures.split('points="')[1:]) <= MAX_POINTS
    assert html.escape("γ_s") in figures


def test_outcomes_pytest_reported_are_the_ones_shown():
    run = repair_run(2, 2)
    skipped = dataclasses.replace(run.verdicts[0], outcome=Outcome.SKIPPED)
    run = dataclasses.replace(run, verdicts=(skipped, *run.verdicts[1:]))
    page = page_of(run)
    assert '<option value="skipped">skipped</option>' in page and '<tr class="skipped">' in page


def test_an_audit_says_whether_the_certificate_holds_and_which_checks_failed():
    run = repair_run(2, 2)
    details = AuditDetails(
        **SUITE, counts={Kind.MUST_FIX: 2, Kind.MUST_KEEP: 2}, certificate="/m/warp_certificate.json", checks=7,
        failed_checks=("the repair layer's hash differs",), not_in_suite=(), gamma_s=1.0, gamma_h=0.3,
    )  # fmt: skip
    audit = dataclasses.replace(run, mode=Mode.AUDIT, status=RunStatus.FAILED, ok=False, details=details)
    head = headline(audit)
    assert head.verdict.startswith("Failed: the certificate does not hold on this model (") and not head.passed
    facts = {f.name: f for f in head.facts}
    assert facts["checks"].value == "6 of 7 checks of the certificate hold"
    assert facts["checks"].detail == "the repair layer's hash differs" and facts["checks"].good is False


def test_every_id_in_a_page_of_several_runs_is_its_own():
    page = page_of(repair_run(3, 3), repair_run(3, 3), check_run(4, wrong=1))
    ids = [part.split('"')[0] for part in page.split(' id="')[1:]]
    assert len(ids) == len(set(ids)) and "run-1-gaps" in ids


def test_an_audit_that_recomputed_cert_4_shows_the_traffic_bound(tmp_path):
    run = repair_run(2, 2)
    details = AuditDetails(
        **SUITE, counts={Kind.MUST_FIX: 2, Kind.MUST_KEEP: 2}, certificate="/m/warp_certificate.json", checks=7,
        failed_checks=(), not_in_suite=(), gamma_s=1.0, gamma_h=0.3,
        traffic=traffic_note(n=500, changed=2, bound=0.0125, confidence=0.95),
    )  # fmt: skip
    audit = dataclasses.replace(run, mode=Mode.AUDIT, status=RunStatus.VERIFIED, ok=True, details=details)
    facts = {f.name: f for f in headline(audit).facts}
    assert facts["traffic"].value == "changes at most 1.25% of predictions on traffic like this"
    written = write_report(tmp_path / "report", [audit])
    assert "### Traffic (Cert 4)" in written.read_text(encoding="utf-8")
