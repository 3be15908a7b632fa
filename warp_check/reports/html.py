"""``index.html``: the report as one self-contained page a release manager reads, and CI publishes.

The page opens with the verdict and the figures behind it, then each run's cases in a table
(sortable by a click on a header, filterable by kind, outcome and text), then its plots as
inline SVG with captions in plain words. It loads nothing: no network, no file beside it (its
Content-Security-Policy forbids both); its CSS and JavaScript are inline. A table of up to
:data:`HTML_ROWS` cases is plain HTML, so the page reads without JavaScript too; a larger one
carries its rows as gzip-compressed JSON in base64 (a third of their size as HTML, and no
character of a case's text can end the element it sits in), which the page's script decodes
with the browser's own ``DecompressionStream``, and shows its first :data:`PREVIEW_ROWS` cases,
failures first, as HTML for a reader without JavaScript. The verdict and figures are HTML always.

Every string from a suite or a model (case texts and ids, label names, paths, messages) is
hostile input: escaped, stripped of characters HTML cannot carry, isolated from the text
around it so a right-to-left mark cannot reorder the page, and cut to :data:`DISPLAY_CHARS`
in the table (the full text, up to :data:`PAGE_CHARS`, one click away; report.json has all).
The URL's query or fragment pre-applies a view: ``#kind=must_fix&outcome=failed&q=word&sort=gap_after&desc=1``.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Sequence

from warp_check.certificates.traffic.verdicts import TrafficNote
from warp_check.reports.markup import (
    TRAFFIC_ROWS,
    carried,
    esc,
    esc_attr,
    facts,
    inline,
    text_cell,
    text_parts,
)
from warp_check.reports.parts import PartTable, part_table
from warp_check.reports.summary import (
    CAPTIONS,
    PRICE_CAPTION,
    CaseRow,
    Headline,
    case_rows,
    headline,
    is_baseline_run,
    price_points,
    price_rows,
    when_words,
)
from warp_check.reports.svg import convergence_plot, gaps_plot, price_plot, radius_plot
from warp_check.reports.tokens import TOKENS_CSS, sentences_html
from warp_check.runs.details import AuditDetails, CertificateDetails, RepairDetails, traffic_of
from warp_check.runs.result import Outcome, RunResult

REPORT_HTML = "index.html"
HTML_ROWS = 500  # a table of more cases carries them compressed
PREVIEW_ROWS = 50  # of a compressed table, the first cases (failures first) as HTML too
SHOWN_ROWS = 500  # rows the script shows at once; "show more" adds as many again
OUTCOME_WORDS = {
    Outcome.PASSED: "passed",
    Outcome.FAILED: "failed",
    Outcome.XFAILED: "expected failure",
    Outcome.SKIPPED: "skipped",
}


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


# -- one run --------------------------------------------------------------------------------------


def _columns(run: RunResult, rows: Sequence[CaseRow]) -> list[tuple[str, str, str]]:
    """(key, header, type) of the table's columns; a column no case has a value in is left out."""
    before, after = when_words(run)
    columns = [("case", "case", "text"), ("kind", "kind", "text"), ("text", "text", "text"), ("label", "label", "text")]
    if any(r.gap_before is not None or r.predicted_before is not None for r in rows):
        columns += [
            ("predicted_before", f"prediction {before}", "text"),
            ("gap_before", f"gap {before}", "num"),
        ]
    columns += [
        ("predicted_after", f"prediction {after}".strip(), "text"),
        ("gap_after", f"gap {after}".strip(), "num"),
    ]
    if any(r.radius is not None for r in rows):
        columns.append(("radius", "certified radius", "num"))
    return columns + [("outcome", "outcome", "text"), ("why", "why", "text")]


def _shown(row: CaseRow, key: str) -> str:
    """What a cell other than the text's shows, as plain text."""
    if key == "case":
        return row.case_id
    if key == "kind":
        return row.kind.value
    if key == "outcome":
        return OUTCOME_WORDS[row.outcome]
    if key == "why":
        return row.why
    value = getattr(row, key)
    if isinstance(value, float) or key in ("gap_before", "gap_after", "radius"):
        return _num(value)
    return "–" if value is None else str(value)


def _cell(row: CaseRow, key: str) -> str:
    if key == "text":
        return text_cell(row.text, row.text_pair)
    return esc(_shown(row, key))


def _row_html(row: CaseRow, keys: Sequence[str]) -> str:
    # End tags of cells and rows are optional in HTML: leaving them out saves a tenth of the page.
    # A row is marked only where its case did not pass (its colour, and what the filter reads).
    start = "<tr>" if row.outcome is Outcome.PASSED else f'<tr class="{row.outcome.value}">'
    return start + "".join(f"<td>{_cell(row, key)}" for key in keys)


def packed_rows(rows: Sequence[CaseRow], keys: Sequence[str]) -> str:
    """``rows`` as the page's script reads them: a JSON array of columns, first the rows' classes,
    then each cell's text (the text's cell as :func:`text_parts` gives it), gzip-compressed (no
    time stamp, so the same report gives the same page) and in URL-safe base64: letters, digits,
    ``-``, ``_`` and ``=``, nothing an HTML parser reads as markup, and no ``//`` that looks like
    an address. By columns, not rows: like next to like compresses an eighth better."""
    columns = [["" if row.outcome is Outcome.PASSED else row.outcome.value for row in rows]] + [
        [text_parts(row.text, row.text_pair) for row in rows]
        if key == "text"
        else [carried(_shown(row, key)) for row in rows]
        for key in keys
    ]
    raw = json.dumps(columns, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def _table(run: RunResult, rows: Sequence[CaseRow], anchor: str) -> str:
    columns = _columns(run, rows)
    keys = [key for key, _, _ in columns]
    head = "".join(
        f'<th data-key="{key}" data-type="{kind}" scope="col" tabindex="0">{esc(title)}</th>'
        for key, title, kind in columns
    )
    packed = len(rows) > HTML_ROWS
    body = "\n".join(_row_html(row, keys) for row in (rows[:PREVIEW_ROWS] if packed else rows))
    kinds = sorted({r.kind.value for r in rows})
    outcomes = [o for o in Outcome if any(r.outcome is o for r in rows)]
    kind_options = "".join(f'<option value="{k}">{k}</option>' for k in kinds)
    outcome_options = "".join(f'<option value="{o.value}">{OUTCOME_WORDS[o]}</option>' for o in outcomes)
    controls = (
        '<div class="controls">'
        f'<label>kind <select data-filter="kind"><option value="">all</option>{kind_options}</select></label>'
        f'<label>outcome <select data-filter="outcome"><option value="">all</option>{outcome_options}</select></label>'
        '<label>text <input type="search" data-filter="q" placeholder="words in the text, id or why"></label>'
        f'<output class="count" data-total="{len(rows)}">{len(rows)} cases</output></div>'
    )
    data = ""
    source = f"{anchor}-rows"
    if packed:
        data = (
            f'<p class="note">Without JavaScript this table shows the first {PREVIEW_ROWS} of its {len(rows):,} '
            "cases, failures first; report.json beside this page has them all.</p>"
            f'<script type="application/octet-stream" id="{esc_attr(source)}">{packed_rows(rows, keys)}</script>'
        )
    attrs = f' data-packed="{esc_attr(source)}"' if packed else ""
    return (
        f'{controls}<div class="table"><table class="cases" data-rows="{len(rows)}"{attrs}>'
        f"<thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table></div>"
        f'<button type="button" class="show-more" hidden>show more</button>{data}'
    )


def _plots(run: RunResult, rows: Sequence[CaseRow], anchor: str) -> str:
    details = run.details
    gamma_s = gamma_h = None
    if isinstance(details, (RepairDetails, CertificateDetails, AuditDetails)):
        gamma_s, gamma_h = details.gamma_s, details.gamma_h
    history = details.history if isinstance(details, (RepairDetails, CertificateDetails)) else ()
    drawn = {
        "gaps": gaps_plot(rows, gamma_s=gamma_s, gamma_h=gamma_h, when=when_words(run)),
        "radius": radius_plot(rows),
        "convergence": convergence_plot(
            [(h.iteration, h.min_gap_fix, h.min_gap_keep) for h in history], gamma_s=gamma_s, gamma_h=gamma_h
        ),
    }
    figures = []
    for key, svg in drawn.items():
        if svg is None:
            continue
        caption = CAPTIONS[key]
        figures.append(
            f'<figure id="{esc_attr(anchor)}-{key}">{svg}<figcaption><b>{esc(caption.title)}.</b> {esc(caption.plain)}'
            f'<span class="technical">{esc(caption.technical)}</span></figcaption></figure>'
        )
    return f'<h3>Plots</h3><div class="plots">{"".join(figures)}</div>' if figures else ""


def _parts_html(table: PartTable | None) -> str:
    """The per-part table (per label, or per class): plain HTML, numbers right-aligned."""
    if table is None:
        return ""
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in table.headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{inline(c)}" if i == 0 else f"<td>{esc(c)}" for i, c in enumerate(table.cells(row)))
        for row in table.rows
    )
    return (
        f"<h3>Per {esc(table.word)}</h3>"
        f'<div class="scroll parts"><table class="parts"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
        f'<p class="meta">{esc(table.caption)}</p>'
    )


def _said_html(head: Headline) -> str:
    """What the run wrote (or why nothing) and what to do next, under its verdict."""
    said = head.said
    lines = [("written", said.written_words), ("deferred", said.deferred), ("next", said.next)]
    items = "".join(f"<div><dt>{name}</dt><dd>{inline(text)}</dd></div>" for name, text in lines if text)
    return f'<dl class="said">{items}</dl>' if items else ""


def _budget_html(note: TrafficNote, anchor: str) -> str:
    """A repair over its budget: what each budget buys (the curve, then the table, this run's marked), and
    the must_fix cases this one cannot buy."""
    fit, out = note.fit, ""
    if fit is None:
        return out
    rows = price_rows(note)
    if rows and fit.prices is not None:
        svg = price_plot(price_points(note), budget=note.max_change, total=len(fit.prices.prices))
        if svg is not None:
            out += (
                f'<div class="plots"><figure id="{esc_attr(anchor)}-prices">{svg}'
                f"<figcaption><b>{esc(PRICE_CAPTION.title)}.</b> "
                f'{esc(PRICE_CAPTION.plain)}<span class="technical">{esc(PRICE_CAPTION.technical)}</span>'
                "</figcaption></figure></div>"
            )
        body = "".join(
            ("<tr><td><b>" + esc(row.budget) + "</b> (this run)" if row.mine else "<tr><td>" + esc(row.budget))
            + f"<td>{esc(row.bought)}<td>{esc(row.changed)}<td>{esc(row.bound)}"
            for row in rows
        )
        out += (
            f'<h4>What each budget buys</h4><p class="meta">{inline(fit.prices.heading().removesuffix(":"))}</p>'
            '<table class="plain"><thead><tr><th scope="col">max_change<th scope="col">must_fix bought'
            f'<th scope="col">changed (tune part)<th scope="col">bound</thead><tbody>{body}</tbody></table>'
        )
    if fit.unpriced:
        out += f'<p class="meta">Not priced: {inline(fit.unpriced)}.</p>'
    if fit.left_out:
        column = "its fix alone changes" if fit.prices is not None else "changes nearest it"
        body = "".join(f"<tr><td>{inline(c.id)}<td>{inline(c.where)}<td>{c.nearest}" for c in fit.left_out)
        out += (
            f"<h4>Must_fix cases the budget cannot buy ({len(fit.left_out)})</h4>"
            '<table class="plain"><thead><tr><th scope="col">case<th scope="col">where'
            f'<th scope="col">{column}</thead><tbody>{body}</tbody></table>'
        )
    return out


def _traffic_html(run: RunResult, anchor: str) -> str:
    """Cert 4 as the page shows it: the sample, the bound and its verdict, the must_fix cases the budget
    cannot buy, and the texts whose prediction the repair changed (as report.md lists them)."""
    note = traffic_of(run.details)
    if note is None:
        return ""
    items = [f"<li>{inline(note.sample_line())}</li>", f"<li>{inline(str(note))}</li>"]
    if run.traffic is not None:
        items.append(f"<li>{esc(run.traffic.reported.value)}: {inline(run.traffic.message)}</li>")
    out = f'<h3>Traffic (Cert 4)</h3><ul class="traffic">{"".join(items)}</ul>'
    out += _budget_html(note, anchor)
    if note.changes:
        shown = note.changes[:TRAFFIC_ROWS]
        body = "".join(
            f"<tr><td>{change.index}<td>{text_cell(change.text, change.text_pair)}"
            f"<td>{inline(note.prediction_words(change.before))} → {inline(note.prediction_words(change.after))}"
            for change in shown
        )
        more = len(note.changes) - len(shown)
        out += (
            f"<h4>Texts whose prediction the repair changed ({len(note.changes)})</h4>"
            '<table class="plain"><thead><tr><th scope="col">#<th scope="col">text<th scope="col">before → after'
            f"</thead><tbody>{body}</tbody></table>"
            + (f'<p class="meta">{more} more changed text(s) in report.json.</p>' if more else "")
        )
    return out


def _figures_html(run: RunResult, head: Headline, anchor: str) -> str:
    """The figures under a run's verdict: a release compared with its baseline has its own page part."""
    # Loaded here: the comparison reads Cert 4's records, which import numpy, and a warm check imports
    # this module without it (tests/test_package.py).
    from warp_check.reports import comparison

    return (
        comparison.comparison_html(run)
        if comparison.is_comparison(run)
        else facts(head.facts) + _traffic_html(run, anchor)
    )


def _run_section(run: RunResult, anchor: str) -> str:
    head = headline(run)
    rows = case_rows(run)
    details = run.details
    where = [f"suite {inline(run.suite)}"] if run.suite else []
    if details.model:
        where.append(f"model {inline(details.model)}")
    tone = "pass" if head.passed else "fail"
    mode = "baseline" if is_baseline_run(run) else run.mode.value
    return (
        f'<section class="run {tone}" id="{esc_attr(anchor)}">'
        f"<h2>{inline(run.name)} <small>{mode} mode</small></h2>"
        f'<p class="verdict {tone}" data-passed="{str(head.passed).lower()}">{_verdict_html(head.verdict, run)}</p>'
        f"{_said_html(head)}{_figures_html(run, head, anchor)}"
        f'<p class="meta">{"; ".join(where)}</p><p class="meta">{inline(run.message)}</p>'
        f"{_parts_html(part_table(run))}{sentences_html(run)}{_plots(run, rows, anchor)}"
        f"<h3>Cases</h3>{_table(run, rows, anchor)}</section>"
    )


# -- the page -----------------------------------------------------------------------------------


def _page_verdict(runs: Sequence[RunResult]) -> tuple[bool, str]:
    """Whether every run passed, and the page's verdict as HTML (the runs' names isolated)."""
    failed = [run.name for run in runs if not headline(run).passed]
    if len(runs) == 1:
        return not failed, "FAILED" if failed else "PASSED"
    if not failed:
        return True, f"PASSED: all {len(runs)} suite runs"
    return False, f"FAILED: {len(failed)} of {len(runs)} suite runs ({', '.join(map(inline, failed))})"


def _verdict_html(verdict: str, run: RunResult) -> str:
    """A run's verdict as HTML: the run's message, where the verdict quotes it, isolated."""
    at = verdict.rfind(run.message) if run.message else -1
    if at < 0:
        return esc(verdict)
    return esc(verdict[:at]) + inline(run.message) + esc(verdict[at + len(run.message) :])


def render_html(runs: Sequence[RunResult], anchors: Sequence[str], *, version: str, created: str) -> str:
    """The whole page for ``runs`` (``anchors``: each run's id in the page, as its plots' file names)."""
    passed, verdict = _page_verdict(runs)
    contents = ""
    if len(runs) > 1:
        links = "".join(
            f'<li><a href="#{esc_attr(a)}">{inline(r.name)}</a> — {"passed" if headline(r).passed else "failed"}</li>'
            for r, a in zip(runs, anchors, strict=True)
        )
        contents = f'<ul class="contents">{links}</ul>'
    sections = "\n".join(_run_section(run, anchor) for run, anchor in zip(runs, anchors, strict=True))
    header = (
        f'<p class="meta">warp-check {esc(version)}, {esc(created)}. The full numbers of every case are in '
        f"report.json beside this page.</p>{contents}"
    )
    return page_frame("warp-check report", passed=passed, verdict=verdict, header=header, main=sections)


def page_frame(title: str, *, passed: bool, verdict: str, header: str, main: str) -> str:
    """A whole page in the report's style: ``title``, the verdict first, then ``header`` and ``main`` (HTML)."""
    tone = "pass" if passed else "fail"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # Nothing leaves the page: no request of any kind, whatever a case's text holds.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(title)}: {'passed' if passed else 'failed'}</title>"
        f"<style>{_CSS}{TOKENS_CSS}</style></head>\n"
        f'<body class="{tone}"><header><h1>{esc(title)}</h1>'
        f'<p id="verdict" class="verdict {tone}" data-passed="{str(passed).lower()}">{verdict}</p>'
        f"{header}</header>\n<main>{main}</main>\n<script>{_JS}</script></body></html>\n"
    )


_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1280px;
padding:0 18px 40px;color:#1b1b1b}
h1{margin:18px 0 4px;font-size:24px}h2{margin:30px 0 4px;font-size:20px}h2 small{color:#666;font-weight:normal}
h3{margin:22px 0 6px;font-size:16px}
.verdict{font-size:18px;font-weight:600;padding:10px 14px;border-radius:6px;border-left:6px solid}
.verdict.pass{background:#e8f5ec;border-color:#2e8b57}.verdict.fail{background:#fdecea;border-color:#c0392b}
header .verdict{font-size:22px}
.meta{color:#555;font-size:13px;overflow-wrap:anywhere}
.facts{display:flex;flex-wrap:wrap;gap:8px;margin:10px 0}
.facts div{border:1px solid #ddd;border-radius:6px;padding:6px 10px;min-width:150px;max-width:420px}
.facts div.good{border-color:#2e8b57}.facts div.bad{border-color:#c0392b;background:#fff6f5}
.facts dt{font-size:12px;color:#666;text-transform:uppercase;letter-spacing:.03em}
.facts dd{margin:0;font-weight:600;overflow-wrap:anywhere}.facts small{display:block;font-weight:normal;color:#555}
.controls{display:flex;flex-wrap:wrap;gap:14px;align-items:center;margin:6px 0}
.controls output{color:#444;font-weight:600}
.scroll{overflow-x:auto;max-height:80vh;overflow-y:auto;border:1px solid #ddd}
.verdict,.said dd{overflow-wrap:anywhere}
div.table{border:1px solid #ddd}
table.cases{border-collapse:collapse;font-size:13px;width:100%}
.cases th{position:sticky;top:0;background:#f3f3f3;text-align:left;cursor:pointer;padding:5px 6px;
user-select:none;vertical-align:bottom}
.cases th[aria-sort=ascending]::after{content:" ▲"}.cases th[aria-sort=descending]::after{content:" ▼"}
.cases td{padding:4px 6px;border-top:1px solid #eee;vertical-align:top;unicode-bidi:plaintext;overflow-wrap:break-word}
.cases td:nth-child(1),.cases td:nth-child(3),.cases td:last-child{overflow-wrap:anywhere}
.cases td:nth-child(1){min-width:9ch}.cases td:nth-child(2){white-space:nowrap}.cases td:nth-child(4){min-width:8ch}
.cases td:nth-child(3){min-width:220px;width:32%}
.cases td:last-child{color:#444;min-width:160px;width:22%;font-size:12px}
.cases tr.failed td{background:#fff6f5}.cases tr.xfailed td{background:#fbfbf0}
@media (max-width:700px){
.cases thead tr{display:flex;flex-wrap:wrap;gap:2px}.cases th{position:static;padding:3px 5px;font-size:12px}
.cases tr{display:block;border-top:1px solid #ddd;padding:3px 0}.cases tbody tr[hidden]{display:none}
.cases td{display:inline-block;border:0;padding:1px 5px;max-width:100%}
.cases td:nth-child(3),.cases td:last-child{display:block;width:auto;min-width:0}
.plots figure{flex-basis:100%}.facts div{min-width:0;max-width:100%}.verdict{font-size:16px}}
details summary{cursor:pointer}i.more{color:#777}
.plots{display:flex;flex-wrap:wrap;gap:18px}
figure{margin:0;max-width:640px}.plots figure{flex:1 1 420px;min-width:0}
figure svg{width:100%;height:auto;font-size:11px;font-family:inherit}
figcaption{font-size:13px}.technical{display:block;color:#666;font-size:12px;margin-top:3px}
.contents{margin:4px 0}
.said{margin:6px 0}.said div{display:flex;gap:8px}.said dt{font-weight:600;min-width:64px}.said dd{margin:0}
table.plain{border-collapse:collapse;font-size:13px;width:100%}
.plain th{text-align:left;background:#f3f3f3;padding:4px 6px}
.plain td{padding:3px 6px;border-top:1px solid #eee;vertical-align:top;overflow-wrap:anywhere}
.scroll.parts{max-height:50vh;display:inline-block;max-width:100%}
table.parts{border-collapse:collapse;font-size:13px}
.parts th{position:sticky;top:0;background:#f3f3f3;text-align:left;padding:5px 8px;white-space:nowrap}
.parts td{padding:3px 8px;border-top:1px solid #eee;text-align:right;white-space:nowrap}
.parts td:first-child{text-align:left}
"""

# Sort on a header's click (Enter too), filter by kind, outcome and text; a view from the URL
# (?kind=…&outcome=…&q=…&sort=KEY&desc=1, or the same after #) is applied on load, and each
# change is written back into the URL so that a link shows the same view. A compressed table is
# first decoded into rows (a browser without DecompressionStream keeps the HTML rows and the
# note saying what they are); any table shows its first SHOWN matching rows, "show more" the next.
_JS = r"""
(function(){
"use strict";
var SHOWN=@SHOWN@;
var params=new URLSearchParams(location.search);
new URLSearchParams(location.hash.slice(1)).forEach(function(v,k){params.set(k,v);});
var view={kind:params.get("kind")||"",outcome:params.get("outcome")||"",q:params.get("q")||"",
  sort:params.get("sort")||"",desc:params.get("desc")==="1"};
function column(table,key){
  var ths=table.tHead.rows[0].cells;
  for(var i=0;i<ths.length;i++){if(ths[i].getAttribute("data-key")===key){return i;}}
  return -1;
}
function el(tag,text,cls){
  var e=document.createElement(tag);if(text){e.textContent=text;}if(cls){e.className=cls;}return e;
}
function textCell(td,v){
  if(typeof v==="string"){td.textContent=v;return;}
  var d=el("details"),s=el("summary",v[0]+"\u2026 ");
  s.appendChild(el("i","("+v[2]+" characters)"));d.appendChild(s);
  d.appendChild(document.createTextNode("\u2026"+v[1]));
  if(v[3]){d.appendChild(el("i","\u2026 "+v[3]+" more characters in report.json","more"));}
  td.appendChild(d);
}
function unpack(table){
  var id=table.getAttribute("data-packed");if(!id){return Promise.resolve();}
  var code=document.getElementById(id).textContent.trim().replace(/-/g,"+").replace(/_/g,"/");
  var bin=atob(code),bytes=new Uint8Array(bin.length);
  for(var i=0;i<bin.length;i++){bytes[i]=bin.charCodeAt(i);}
  var stream=new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Response(stream).json().then(function(columns){
    var textAt=column(table,"text")+1,body=document.createElement("tbody");
    for(var i=0;i<columns[0].length;i++){
      var tr=document.createElement("tr");if(columns[0][i]){tr.className=columns[0][i];}
      for(var j=1;j<columns.length;j++){var td=document.createElement("td");
        if(j===textAt){textCell(td,columns[j][i]);}else{td.textContent=columns[j][i];}tr.appendChild(td);}
      body.appendChild(tr);
    }
    table.replaceChild(body,table.tBodies[0]);
    var note=table.closest("section").querySelector("p.note");if(note){note.hidden=true;}
  });
}
function filter(section){
  var table=section.querySelector("table.cases");if(!table){return;}
  var kindAt=column(table,"kind"),rows=table.tBodies[0].rows,shown=0,q=view.q.toLowerCase();
  var limit=table.limit||SHOWN;
  for(var i=0;i<rows.length;i++){
    var r=rows[i];
    var ok=(!view.kind||r.cells[kindAt].textContent===view.kind)
      &&(!view.outcome||(r.className||"passed")===view.outcome)&&(!q||r.textContent.toLowerCase().indexOf(q)>=0);
    r.hidden=!ok||shown>=limit;if(ok){shown++;}
  }
  var visible=Math.min(shown,limit);
  table.setAttribute("data-shown",shown);
  section.querySelector("output.count").textContent=visible<shown
    ?"showing the first "+visible+" of "+shown+(shown<rows.length?" matching cases ("+rows.length+" in all)":" cases")
    :"showing "+shown+" of "+rows.length+" cases";
  section.querySelector("button.show-more").hidden=visible>=shown;
}
function sort(table,key,desc){
  var at=column(table,key);if(at<0){return;}
  var th=table.tHead.rows[0].cells[at],numeric=th.getAttribute("data-type")==="num";
  var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows);
  var keyed=rows.map(function(r,i){var t=r.cells[at].textContent;return [numeric?parseFloat(t):t.toLowerCase(),i,r];});
  keyed.sort(function(a,b){
    var x=a[0],y=b[0];
    if(numeric){var nx=isNaN(x),ny=isNaN(y);if(nx||ny){return (nx-ny)||(a[1]-b[1]);}return (desc?y-x:x-y)||(a[1]-b[1]);}
    return (desc?-1:1)*x.localeCompare(y)||(a[1]-b[1]);
  });
  var frag=document.createDocumentFragment();
  keyed.forEach(function(k){frag.appendChild(k[2]);});body.appendChild(frag);
  var ths=table.tHead.rows[0].cells;
  for(var i=0;i<ths.length;i++){ths[i].removeAttribute("aria-sort");}
  th.setAttribute("aria-sort",desc?"descending":"ascending");
}
function remember(){
  var out=new URLSearchParams();
  ["kind","outcome","q","sort"].forEach(function(k){if(view[k]){out.set(k,view[k]);}});
  if(view.sort&&view.desc){out.set("desc","1");}
  try{history.replaceState(null,"",location.pathname+(out.toString()?"#"+out:""));}catch(e){}
}
function syncInputs(){
  Array.prototype.forEach.call(document.querySelectorAll("[data-filter]"),function(input){
    var name=input.getAttribute("data-filter");if(input.value!==view[name]){input.value=view[name];}
  });
}
var sections=document.querySelectorAll("section.run");
function ready(section){
  var table=section.querySelector("table.cases");if(!table){return;}
  Array.prototype.forEach.call(section.querySelectorAll("[data-filter]"),function(input){
    var name=input.getAttribute("data-filter");input.value=view[name];
    input.addEventListener("input",function(){view[name]=input.value;sections.forEach(filter);syncInputs();remember();});
  });
  Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th){
    function click(){
      var key=th.getAttribute("data-key");view.desc=view.sort===key?!view.desc:false;view.sort=key;
      sort(table,key,view.desc);filter(section);remember();
    }
    th.addEventListener("click",click);
    th.addEventListener("keydown",function(e){if(e.key==="Enter"){click();}});
  });
  section.querySelector("button.show-more").addEventListener("click",function(){
    table.limit=(table.limit||SHOWN)+SHOWN;filter(section);
  });
  if(view.sort){sort(table,view.sort,view.desc);}
  filter(section);
}
Promise.all(Array.prototype.map.call(sections,function(section){
  var table=section.querySelector("table.cases");
  return (table?unpack(table):Promise.resolve()).catch(function(){table.removeAttribute("data-packed");});
})).then(function(){
  Array.prototype.forEach.call(sections,ready);
  document.body.setAttribute("data-ready","true");
});
})();
""".replace("@SHOWN@", str(SHOWN_ROWS))
