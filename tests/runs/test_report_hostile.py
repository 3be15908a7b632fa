"""The report on hostile input: a case's text (markup, comments, entities, bidi controls, a megabyte)
shows as text and never as markup, in the HTML and in a real browser; a right-to-left override
stays inside its cell; a huge text and 50,000 cases keep the page bounded and quick to open; a
report folder that is a file is one refusal, the same in pytest and the CLI; and a report that
fails leaves the one before it intact.

The browser tests run Debian's headless ``chromium`` as test_report_browser.py does: they skip
where none is installed, and fail instead under WARP_REQUIRE_BROWSER=1 (CI).
"""

from __future__ import annotations

import errno
import os
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from testkit.report_runs import page_of, parsed, prose_texts, repair_run

from warp_check.cli import main
from warp_check.reports import folder as report_module
from warp_check.reports.folder import REPORT_HTML, REPORT_JSON, REPORT_MD, markdown_text, read_report, write_report
from warp_check.reports.markup import DISPLAY_CHARS, PAGE_CHARS
from warp_check.runs.result import RunResult

pytest_plugins = ["pytester"]
PWN = "document.body.setAttribute('data-pwned','1')"
MEGABYTE = "a very long review " * 55_189  # 1,048,591 characters
HOSTILE = {
    "script": f"<script>{PWN}</script> runs nothing",
    "end-style": f"</style><script>{PWN}</script><style> ends no style",
    "end-script": f"</script><script>{PWN}</script> ends no script",
    "comment": f"<!-- <script>{PWN}</script> and a comment never closed: <!--",
    "entities": "&amp; &lt;b&gt; &#x3C;script&#x3E; &nbsp; &copy; stay as typed",
    "attribute": f'<img src=x onerror="{PWN}"> " \' <a href="javascript:{PWN}">x</a>',
    "rtl": "\u202eevil override never closed, \u202bembedding, \u2067isolate, \u200fmark \u061c عربي",
}
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def hostile_run(n_keep: int = 20, **kwargs) -> RunResult:
    """A repair whose first cases have the hostile texts, ids and names (the rest plain)."""
    texts = {f"fix-{i:05d}": text for i, text in enumerate(HOSTILE.values())}
    texts[f"keep-{len(HOSTILE):05d}"] = MEGABYTE
    return repair_run(len(HOSTILE), n_keep, texts=texts, **kwargs)


# -- the page's text ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_text_shows_as_itself_and_adds_no_markup(name):
    plain = page_of(repair_run(3, 5))
    page = page_of(repair_run(3, 5, texts={"fix-00001": HOSTILE[name]}))
    cells = parsed(page)
    assert cells.elements == parsed(plain).elements  # no element, comment or script more
    assert {row[0]: row[2] for row in cells.rows}["fix-00001"] == HOSTILE[name]


def test_hostile_ids_names_labels_and_paths_are_text_and_isolated():
    run = hostile_run(name="\u202e</h2><script>x()</script>", failed=1)
    run = RunResult.from_dict(run.to_dict() | {"suite": "/s/\u202e<b>/warp.toml", "message": "\u202eoops <i>"})
    page = page_of(run, repair_run(2, 2, failed=1, name="second"))
    assert parsed(page).scripts == 1 and "<b>/" not in page and "oops <i>" not in page
    # Each string a user chose sits in an isolate: its override ends where the string ends.
    assert "<h2><bdi>\u202e&lt;/h2&gt;&lt;script&gt;x()&lt;/script&gt;</bdi> <small>" in page
    assert "<bdi>/s/\u202e&lt;b&gt;/warp.toml</bdi>" in page and "<bdi>\u202eoops &lt;i&gt;</bdi>" in page
    assert "suite runs (<bdi>\u202e&lt;/h2&gt;" in page  # the page's verdict names the failed runs isolated


def test_a_megabyte_text_is_cut_in_its_cell_and_the_page_stays_small(tmp_path):
    write_report(tmp_path, [hostile_run()])
    page = (tmp_path / REPORT_HTML).read_text(encoding="utf-8")
    cell = {row[0]: row[2] for row in parsed(page).rows}[f"keep-{len(HOSTILE):05d}"]
    assert cell.startswith(MEGABYTE[:DISPLAY_CHARS] + "… (1,048,591 characters)…")
    assert cell.endswith(
        f"{MEGABYTE[DISPLAY_CHARS:PAGE_CHARS]}… {1_048_591 - PAGE_CHARS:,} more characters in report.json"
    )
    assert len(page.encode("utf-8")) < 60_000  # the page holds PAGE_CHARS of it, not a megabyte
    markdown = (tmp_path / REPORT_MD).read_text(encoding="utf-8")
    assert len(markdown.encode("utf-8")) < 20_000 and "a very long review a very" in markdown
    texts = {v.case_id: v.text for v in read_report(tmp_path / REPORT_JSON)[0].verdicts}
    assert texts[f"keep-{len(HOSTILE):05d}"] == MEGABYTE  # report.json keeps every character


def test_markdown_isolates_a_right_to_left_text_and_escapes_markup():
    cell = markdown_text(HOSTILE["rtl"])
    assert cell.startswith("\u2068") and cell.endswith("\u2069")  # in an isolate (FSI ... PDI) of its own
    assert markdown_text("plain words") == "plain words"
    assert "<" not in markdown_text(HOSTILE["script"]).replace("\\<", "")


# -- the report folder ----------------------------------------------------------------------------


def test_a_report_folder_that_is_a_file_is_one_refusal_in_pytest_and_the_cli(pytester, tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("not a folder\n")
    suite = tmp_path / "suite"
    suite.mkdir()
    message = f"report folder {str(target)!r} exists and is not a folder: choose another report folder"
    assert main(["check", str(suite), "--report", str(target)]) == 2
    assert main(["report", str(suite), "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"warp-check check: error: {message}", f"warp-check report: error: {message}"]
    result = pytester.runpytest_inprocess("-p", "no:randomly", str(suite), f"--warp-report={target}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--warp-report: {message}" in result.stderr.str() and "Traceback" not in result.stderr.str()
    assert target.read_text() == "not a folder\n"


def test_a_report_folder_under_a_file_is_refused_naming_the_file(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(["check", str(tmp_path), "--report", str(tmp_path / "file" / "report")]) == 2
    err = capsys.readouterr().err
    assert f"{str(tmp_path / 'file')!r} is a file, not a folder" in err and len(err.splitlines()) == 1


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_report_folder_is_refused_before_the_work(tmp_path, capsys):
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o500)
    assert main(["check", str(tmp_path), "--report", str(folder / "r")]) == 2
    assert "cannot be written" in capsys.readouterr().err


def fingerprint(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@pytest.mark.parametrize("failing", ["plot_radius", "render_html"])
def test_a_report_that_fails_leaves_the_one_before_intact(tmp_path, monkeypatch, failing):
    write_report(tmp_path, [repair_run(12, 6, name="suite")])  # 10 radii or more: a histogram
    before = fingerprint(tmp_path)
    assert set(before) >= {REPORT_MD, REPORT_JSON, REPORT_HTML, "suite-gaps.png", "suite-radius.png"}

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    # internal: the disk fills at a chosen step of the report, after its other files; a real one fails at the first
    monkeypatch.setattr(report_module, failing, full)
    with pytest.raises(OSError, match="No space left"):
        write_report(tmp_path, [repair_run(8, 9, seed=3, name="suite")])
    assert fingerprint(tmp_path) == before  # every file as it was, and no half-written one beside them


def test_the_report_command_that_fails_says_why_in_one_line_and_keeps_the_old_report(tmp_path, monkeypatch, capsys):
    old = tmp_path / "old"
    write_report(old, [repair_run(4, 6)])
    out = tmp_path / "out"
    write_report(out, [repair_run(3, 3, seed=5)])
    before = fingerprint(out)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    # internal: the disk fills at a chosen step of the report, after its other files; a real one fails at the first
    monkeypatch.setattr(report_module, "render_html", full)
    assert main(["report", str(old / REPORT_JSON), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == "warp-check report: error: No space left on device\n"
    assert fingerprint(out) == before


def test_a_new_report_replaces_the_plots_the_old_one_had_and_it_has_not(tmp_path):
    write_report(tmp_path, [repair_run(12, 6)])
    assert (tmp_path / "suite-radius.png").is_file()
    run = repair_run(0, 6)  # nothing to fix: no radius to plot
    write_report(tmp_path, [run])
    assert not (tmp_path / "suite-radius.png").exists() and (tmp_path / "suite-gaps.png").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_fifty_thousand_cases_write_a_report_with_bounded_plots(tmp_path):
    # Each case was a line of its own in the gaps plot: 50,000 of them took minutes to draw.
    run = repair_run(25_000, 25_000, failed=30, words=4)
    start = time.perf_counter()
    assert report_module.plot_gaps(run, tmp_path / "gaps.png") is not None
    assert time.perf_counter() - start < 30  # a promise (about 2 s on one core), not a benchmark


# -- in a browser -------------------------------------------------------------------------------


# Once the page's own script is done: which text holding a bidi control has no isolating element
# (bdi, or a cell with unicode-bidi plaintext) between it and the page, by the browser's own styles.
CHECK = """<script>(function wait(){
if(!document.body.getAttribute("data-ready")){setTimeout(wait,10);return;}
var bidi=/[BIDI]/,loose=[],walk=document.createTreeWalker(document.body,NodeFilter.SHOW_TEXT);
while(walk.nextNode()){var node=walk.currentNode;
  if(!bidi.test(node.data)||node.parentElement.tagName==="SCRIPT"){continue;}
  var e=node.parentElement,isolated=false;
  for(;e&&e!==document.body;e=e.parentElement){
    if(["isolate","plaintext","isolate-override"].indexOf(getComputedStyle(e).unicodeBidi)>=0){isolated=true;break;}}
  if(!isolated){loose.push(node.parentElement.tagName);}}
document.body.setAttribute("data-loose",loose.join(","));document.body.setAttribute("data-checked","1");
})();</script></body>""".replace("BIDI", BIDI)


class Dom(HTMLParser):
    """A dumped DOM: the body's attributes and the case table's rows as shown."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.body: dict[str, str | None] = {}
        self.rows: list[list[str]] = []
        self._row = False

    def handle_starttag(self, tag, attrs):
        if tag == "body":
            self.body = dict(attrs)
        elif tag == "tr" and "hidden" not in dict(attrs):
            self.rows.append([])
            self._row = True
        elif tag == "tr":
            self._row = False
        elif tag == "td" and self._row:
            self.rows[-1].append("")

    def handle_data(self, data):
        if self._row and self.rows and self.rows[-1]:
            self.rows[-1][-1] += data


def opened(browser: str, page: Path, tmp_path: Path, *, check: bool = True) -> tuple[Dom, float]:
    """The page's DOM once its script ran (the bidi check added), and the seconds the browser took."""
    if check:
        page.write_text(page.read_text(encoding="utf-8").replace("</body>", CHECK), encoding="utf-8")
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=30000", "--dump-dom", page.as_uri(),
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    seconds = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-2000:]
    dom = Dom()
    dom.feed(done.stdout)
    assert dom.body.get("data-ready") == "true", "the page's script did not run to its end"
    assert "data-pwned" not in dom.body, "a case's text ran as code"
    return dom, seconds


@pytest.mark.parametrize("n_keep", [20, 800], ids=["html-table", "compressed-table"])
def test_in_a_browser_hostile_texts_run_nothing_show_as_typed_and_stay_isolated(browser, tmp_path, n_keep):
    out = tmp_path / "report"
    run = hostile_run(n_keep, name="\u202eevil name")
    run = RunResult.from_dict(run.to_dict() | {"message": f"\u202e<script>{PWN}</script>"})
    write_report(out, [run, repair_run(2, 2, failed=1, name="second")])
    dom, _ = opened(browser, out / REPORT_HTML, tmp_path)
    assert dom.body.get("data-checked") == "1" and dom.body.get("data-loose") == ""
    shown: dict[str, str] = {}
    for row in dom.rows[1:]:  # the first run's table first (the second run's ids are the same)
        if row:
            shown.setdefault(row[0], row[2])
    for i, text in enumerate(HOSTILE.values()):
        assert shown[f"fix-{i:05d}"] == text
    assert shown[f"keep-{len(HOSTILE):05d}"].startswith(MEGABYTE[:DISPLAY_CHARS] + "… (1,048,591 characters)")


def test_fifty_thousand_cases_make_a_bounded_page_that_opens_in_seconds(browser, tmp_path):
    texts = prose_texts(25_000, 25_000) | {"fix-00000": HOSTILE["script"], "keep-49999": MEGABYTE}
    run = repair_run(25_000, 25_000, failed=40, texts=texts)
    page = tmp_path / REPORT_HTML
    page.write_text(page_of(run), encoding="utf-8")
    size = page.stat().st_size
    assert size < 4_000_000, f"{size:,} bytes"  # about 3.4 MB: the table travels compressed
    dom, seconds = opened(browser, page, tmp_path, check=False)
    rows = [row for row in dom.rows if row]  # not the header's
    assert len(rows) == 500 and rows[0][-2] == "failed"  # the first 500, failures first
    print(f"50,000 cases: index.html {size:,} bytes, opened in {seconds:.1f} s")
    assert seconds < 30, f"{seconds:.1f} s"  # a promise (about 5 s here), not a benchmark
