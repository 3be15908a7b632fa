"""index.html in a real browser: headless Chromium opens the page, its JavaScript runs, and the
DOM it leaves (``--dump-dom``) shows the verdict, the row counts, a view pre-applied from the URL
(filters, sorting), and no hostile text run as code; a screenshot shows it renders.

Where no Chromium is installed these tests skip, saying so; with WARP_REQUIRE_BROWSER=1 (CI sets
it, having installed Debian's ``chromium``) a missing browser fails them instead.
"""

from __future__ import annotations

import html
import json
import re
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from testkit.report_runs import check_run, over_budget, over_budget_priced, repair_run

from warp_check.reports.folder import REPORT_HTML, write_report
from warp_check.reports.html import HTML_ROWS, SHOWN_ROWS
from warp_check.reports.markup import DISPLAY_CHARS, PAGE_CHARS

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PWNED = "document.body.setAttribute('data-pwned','1')"
HOSTILE = {
    "fix-00000": f"<script>{PWNED}</script> runs nothing",
    "fix-00001": f'<img src=x onerror="{PWNED}"> loads nothing',
    "keep-00012": "needle in a haystack",
}


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report of two runs: a repair (12 must_fix, 30 must_keep, 2 of them failing) and a check
    against a baseline (40 cases, 3 regressions, 3 wrong on both)."""
    out = tmp_path_factory.mktemp("report")
    write_report(out, [repair_run(12, 30, failed=2, texts=HOSTILE), check_run(40, wrong=6, baseline=True)])
    return out / REPORT_HTML


@pytest.fixture(scope="module")
def large_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repair of 1,200 cases (40 must_fix, 7 must_keep failing): its table travels compressed."""
    out = tmp_path_factory.mktemp("large")
    texts = HOSTILE | {"keep-00900": "needle in a haystack", "keep-01000": LONG}
    write_report(out, [repair_run(40, 1160, failed=7, texts=texts)])
    return out / REPORT_HTML


LONG = "a long review " * 300


def run_browser(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        f"--user-data-dir={profile}", *args,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


class Dom(HTMLParser):
    """What a dumped DOM shows: the body's attributes, each table's visible rows, the counts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.body: dict[str, str | None] = {}
        self.verdict = ""
        self.counts: list[str] = []
        self.tables: list[list[list[str]]] = []  # visible rows' cells
        self._where: str | None = None
        self._row: list[str] | None = None
        self.more = False  # the "show more" button is shown

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        if tag == "body":
            self.body = found
        elif tag == "p" and found.get("id") == "verdict":
            self._where = "verdict"
        elif tag == "output":
            self._where = "count"
            self.counts.append("")
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables and "hidden" not in found:
            self._row = []
        elif tag == "tr":
            self._row = None
        elif tag == "td" and self._row is not None:
            self._row.append("")

    def handle_endtag(self, tag):
        if tag in ("p", "output"):
            self._where = None
        elif tag == "tr" and self._row:
            self.tables[-1].append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._where == "verdict":
            self.verdict += data
        elif self._where == "count":
            self.counts[-1] += data
        elif self._row:
            self._row[-1] += data


def rendered(browser: str, page: Path, tmp_path: Path, view: str = "") -> Dom:
    # A compressed table is decoded after the page loaded: the DOM is dumped once that is done.
    done = run_browser(browser, tmp_path / "profile", "--virtual-time-budget=30000", "--dump-dom", page.as_uri() + view)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = Dom()
    dom.feed(done.stdout)
    dom.more = '<button type="button" class="show-more">' in done.stdout  # shown, not hidden
    assert dom.body.get("data-ready") == "true", "the page's JavaScript did not run to its end"
    assert "data-pwned" not in dom.body, "a case's text ran as code"
    return dom


def test_the_browser_shows_the_verdict_and_every_case(browser, page, tmp_path):
    dom = rendered(browser, page, tmp_path)
    assert dom.verdict == "FAILED: 2 of 2 suite runs (suite, check)"
    assert dom.counts == ["showing 42 of 42 cases", "showing 40 of 40 cases"]  # written by the page's script
    assert [len(rows) for rows in dom.tables] == [42, 40]
    texts = {row[0]: row[2] for row in dom.tables[0]}
    assert texts["fix-00000"] == HOSTILE["fix-00000"] and texts["fix-00001"] == HOSTILE["fix-00001"]


def test_a_view_in_the_url_filters_by_outcome_and_kind(browser, page, tmp_path):
    dom = rendered(browser, page, tmp_path, "#outcome=failed")
    assert dom.counts == ["showing 2 of 42 cases", "showing 3 of 40 cases"]
    assert all(row[-2] == "failed" for rows in dom.tables for row in rows)
    dom = rendered(browser, page, tmp_path, "?kind=must_fix")
    assert dom.counts[0] == "showing 12 of 42 cases" and {row[1] for row in dom.tables[0]} == {"must_fix"}
    dom = rendered(browser, page, tmp_path, "#q=NEEDLE")  # words of a case's text, any case
    assert [row[0] for row in dom.tables[0]] == ["keep-00012"] and dom.counts[1] == "showing 0 of 40 cases"


def test_a_view_in_the_url_sorts_by_a_column_either_way(browser, page, tmp_path):
    for view, descending in (("#sort=gap_after", False), ("#sort=gap_after&desc=1&kind=must_keep", True)):
        rows = rendered(browser, page, tmp_path, view).tables[0]
        gaps = [float(row[7]) for row in rows]
        assert gaps == sorted(gaps, reverse=descending) and len(set(gaps)) > 10, view


def test_the_page_renders_to_a_screenshot(browser, page, tmp_path):
    shot = tmp_path / "report.png"
    done = run_browser(
        browser, tmp_path / "profile", "--hide-scrollbars", "--window-size=1280,1800", f"--screenshot={shot}",
        page.as_uri(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 20_000  # a page with text and plots, not a blank one


def test_a_compressed_table_shows_its_first_rows_with_their_cells(browser, large_page, tmp_path):
    assert 1200 > HTML_ROWS and SHOWN_ROWS == 500
    dom = rendered(browser, large_page, tmp_path)
    assert dom.verdict == "FAILED" and dom.counts == ["showing the first 500 of 1200 cases"] and dom.more
    rows = dom.tables[0]
    assert len(rows) == 500 and [row[-2] for row in rows[:7]] == ["failed"] * 7 and rows[7][-2] == "passed"
    texts = {row[0]: row[2] for row in rows}
    assert texts["fix-00000"] == HOSTILE["fix-00000"] and texts["fix-00001"] == HOSTILE["fix-00001"]
    assert all(float(row[7]) == float(f"{float(row[7]):.3g}") for row in rows)  # gaps as the page rounds them


def test_a_compressed_table_filters_and_sorts_every_case(browser, large_page, tmp_path):
    dom = rendered(browser, large_page, tmp_path, "#outcome=failed")
    assert dom.counts == ["showing 7 of 1200 cases"] and not dom.more
    assert [row[0] for row in dom.tables[0]] == [f"keep-{i:05d}" for i in range(40, 47)]
    dom = rendered(browser, large_page, tmp_path, "#q=NEEDLE")  # a case far past the first rows
    assert [row[0] for row in dom.tables[0]] == ["keep-00900"] and dom.counts == ["showing 1 of 1200 cases"]
    dom = rendered(browser, large_page, tmp_path, "#q=a%20long%20review")  # cut as an HTML cell is
    shown = f"{LONG[:DISPLAY_CHARS]}… ({len(LONG):,} characters)…{LONG[DISPLAY_CHARS:PAGE_CHARS]}"
    assert [row[2] for row in dom.tables[0]] == [f"{shown}… {len(LONG) - PAGE_CHARS:,} more characters in report.json"]
    dom = rendered(browser, large_page, tmp_path, "#sort=gap_after&desc=1&kind=must_keep")
    assert dom.counts == ["showing the first 500 of 1160 matching cases (1200 in all)"] and dom.more
    gaps = [float(row[7]) for row in dom.tables[0]]
    assert len(gaps) == 500 and gaps == sorted(gaps, reverse=True)
    assert {row[1] for row in dom.tables[0]} == {"must_keep"}
    dom = rendered(browser, large_page, tmp_path, "#sort=gap_after")  # the smallest gaps are the failures'
    assert [row[-2] for row in dom.tables[0][:7]] == ["failed"] * 7


def test_show_more_adds_the_next_rows_until_every_case_is_shown(browser, large_page, tmp_path):
    # A reader's clicks, as a script the test adds to a copy of the page (its CSP allows inline scripts).
    clicks = (
        '<script>(function wait(n){if(document.body.getAttribute("data-ready")){'
        'for(var i=0;i<n;i++){document.querySelector("button.show-more").click();}}else{setTimeout(wait,10,n);}})'
        "(CLICKS);</script></body>"
    )
    for n, count, more in ((1, "showing the first 1000 of 1200 cases", True), (2, "showing 1200 of 1200 cases", False)):
        page = tmp_path / f"clicked-{n}.html"
        page.write_text(large_page.read_text(encoding="utf-8").replace("</body>", clicks.replace("CLICKS", str(n))))
        dom = rendered(browser, page, tmp_path)
        assert dom.counts == [count] and len(dom.tables[0]) == min(1200, 500 * (n + 1)) and dom.more is more


# What a reader sees of the layout, measured by a script the test adds to a copy of the page once the
# page's own script is done: the viewport's width, how far the page runs past it, the elements that do
# (each one's tag), scroll boxes around a case table, and where the verdict, the plots and the table
# start. The copy is shown in a frame of the width measured (headless Chromium's window is at least
# 500 px wide), which the script tells what it saw.
MEASURE = r"""<script>(function wait(){
var b=document.body;if(!b.getAttribute("data-ready")){setTimeout(wait,10);return;}
var d=document.documentElement,w=d.clientWidth,out=[],boxes=0;
Array.prototype.forEach.call(b.querySelectorAll("*"),function(e){
  var r=e.getBoundingClientRect();if(r.width&&r.right>w+1){out.push(e.tagName);}
});
Array.prototype.forEach.call(document.querySelectorAll("table.cases"),function(t){
  for(var e=t.parentElement;e&&e!==b;e=e.parentElement){
    var s=getComputedStyle(e);if(/auto|scroll/.test(s.overflowX+s.overflowY)){boxes++;}
  }
});
var top=function(q){var e=document.querySelector(q);return e?Math.round(e.getBoundingClientRect().top+scrollY):-1;};
parent.postMessage(JSON.stringify({width:innerWidth,overflow:d.scrollWidth-w,past:out.slice(0,5),
  boxes:boxes,verdict:top("section.run p.verdict"),plots:top(".plots"),cases:top("table.cases")}),"*");
})();</script></body>"""
FRAME = (
    '<!DOCTYPE html><html><body style="margin:0"><iframe src="{src}" style="border:0;width:{width}px;'
    'height:{height}px"></iframe><script>addEventListener("message",function(e){{'
    'document.body.setAttribute("data-measured",e.data);}});</script></body></html>'
)


def framed(page: Path, tmp_path: Path, width: int, height: int, *, measuring: bool) -> Path:
    """``page`` (a copy with the measuring script, where ``measuring``) in a frame ``width`` px wide."""
    copy = tmp_path / f"copy-{width}.html"
    text = page.read_text(encoding="utf-8")
    copy.write_text(text.replace("</body>", MEASURE) if measuring else text, encoding="utf-8")
    frame = tmp_path / f"frame-{width}.html"
    frame.write_text(FRAME.format(src=copy.name, width=width, height=height), encoding="utf-8")
    return frame


def measured(browser: str, page: Path, tmp_path: Path, width: int) -> dict:
    frame = framed(page, tmp_path, width, 900, measuring=True)
    done = run_browser(browser, tmp_path / "profile", "--virtual-time-budget=30000", "--dump-dom", frame.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'data-measured="([^"]*)"', done.stdout)
    assert found, "the measuring script did not run"
    return json.loads(html.unescape(found[1]))


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("width", [1280, 390])
def test_the_page_fits_its_width_verdict_first_then_plots_then_the_table(browser, page, tmp_path, width):
    seen = measured(browser, page, tmp_path, width)
    assert seen["width"] == width
    assert seen["overflow"] <= 0 and seen["past"] == [], f"the page runs past {width} px: {seen}"
    assert seen["boxes"] == 0, "the case table sits in a scroll box of its own"
    assert 0 <= seen["verdict"] < seen["plots"] < seen["cases"]
    shot = tmp_path / f"report-{width}.png"
    frame = framed(page, tmp_path, width, 1800, measuring=False)
    done = run_browser(
        browser, tmp_path / "profile", "--hide-scrollbars", f"--window-size={width},1800", f"--screenshot={shot}",
        "--virtual-time-budget=10000", frame.as_uri(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert png_size(data) == (width, 1800) and len(data) > 20_000  # the page drawn at that width, not blank


def test_a_repair_over_its_budget_fits_too(browser, tmp_path):
    write_report(tmp_path / "budget", [over_budget(), over_budget_priced()])  # the second draws its price list
    for width in (1280, 390):
        seen = measured(browser, tmp_path / "budget" / REPORT_HTML, tmp_path, width)
        assert seen["overflow"] <= 0 and seen["past"] == [], f"the page runs past {width} px: {seen}"
