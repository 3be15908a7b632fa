"""The history of a line of releases as a page (``warp-check history --report DIR``): the verdict first,
then a table of the releases (pass counts, regressions and fixes against the release before, the paired
test, Cert 4's traffic bound) and an inline SVG trend of the pass share and the traffic bound, in the
report's offline style (:func:`~warp_check.reports.html.page_frame`); ``history.json`` beside it.
"""

from __future__ import annotations

from pathlib import Path

from warp_check.certify.certificate import percent
from warp_check.files import write_json_atomic, write_text_atomically
from warp_check.reports.folder import check_report_destination
from warp_check.reports.html import REPORT_HTML, page_frame
from warp_check.reports.markup import esc, inline
from warp_check.reports.svg import Level, Series, line_plot
from warp_check.runs.releases_history import ReleaseHistory, ReleaseStep
from warp_check.version import __version__

HISTORY_JSON = "history.json"
NAMED = 10  # regressed cases a row names (history.json has them all)
HEADS = (
    "#", "model", "suite right", "regressions", "fixes", "paired p (two-sided / worse)", "traffic changed", "budget",
)  # fmt: skip
# On a narrow screen each release is a block, each figure named by its column's head.
_NARROW = (
    "<style>@media (max-width:700px){table.releases thead{display:none}"
    "table.releases tr{display:block;border-top:1px solid #ddd;padding:4px 0}"
    "table.releases td{display:block;border:0;padding:1px 6px}"
    'table.releases td::before{content:attr(data-label) ": ";color:#666}}'
    ".releases tr.failed td{background:#fff6f5}</style>"
)


def _row(i: int, step: ReleaseStep) -> str:
    paired = step.paired_test
    traffic = step.traffic
    lost = ", ".join(step.regressions[:NAMED]) + (" …" if len(step.regressions) > NAMED else "")
    cells = [
        str(i),
        inline(step.model_dir),
        f"{step.right:,} of {step.checked:,} ({percent(step.pass_share, digits=3)})",
        "–" if paired is None else f"{len(step.regressions):,}" + (f" <small>{inline(lost)}</small>" if lost else ""),
        "–" if paired is None else f"{len(step.fixes):,}",
        "–" if paired is None else f"{paired.p_value:.3g} / {paired.p_worse:.3g}",
        "–" if traffic is None else esc(f"{traffic.changed:,} of {traffic.n:,}; at most {percent(traffic.bound)}"),
        "–" if traffic is None or traffic.max_change is None else ("within" if traffic.within_budget else "OVER"),
    ]
    tone = "" if step.passed else ' class="failed"'
    return f"<tr{tone}>" + "".join(f'<td data-label="{head}">{cell}' for head, cell in zip(HEADS, cells, strict=True))


def trend_plot(history: ReleaseHistory) -> str:
    """The pass share and the traffic bound per release, as inline SVG."""
    n = len(history.releases)
    series = [
        Series(
            name="suite pass share",
            points=tuple((float(i), s.pass_share) for i, s in enumerate(history.releases, 1)),
            colour="#1f6fb2",
        )
    ]
    bounds = tuple((float(i), s.traffic.bound) for i, s in enumerate(history.releases, 1) if s.traffic is not None)
    if bounds:
        series.append(Series(name="traffic changed, bound", points=bounds, colour="#c0392b"))
    budgets = {s.traffic.max_change for s in history.releases if s.traffic is not None and s.traffic.max_change}
    levels = [Level(name=f"max_change {percent(b)}", y=b) for b in sorted(budgets)]
    x_range = (1.0, float(n)) if n > 1 else (0.5, 1.5)
    return line_plot(
        series, levels, x_label="release (oldest first)", y_label="share", x_range=x_range,
        x_ticks=[float(i) for i in range(1, n + 1)], label=f"pass share and traffic bound over {n} release(s)",
    )  # fmt: skip


def history_html(history: ReleaseHistory, *, created: str) -> str:
    head = "".join(f'<th scope="col">{esc(h)}' for h in HEADS)
    body = "".join(_row(i, step) for i, step in enumerate(history.releases, 1))
    traffic = f"; traffic {inline(history.traffic)}" if history.traffic else "; no traffic measured"
    header = (
        f'<p class="meta">warp-check {esc(__version__)}, {esc(created)}. Suite {inline(history.suite)}{traffic}. '
        f"Each release against the one before it; every figure is in {HISTORY_JSON} beside this page.</p>"
    )
    main = (
        f'{_NARROW}<section class="history"><h2>Releases</h2>'
        f'<div class="table"><table class="plain releases"><thead><tr>{head}</thead><tbody>{body}</tbody></table></div>'
        f'<h3>Trend</h3><div class="plots"><figure>{trend_plot(history)}<figcaption><b>Release after release.</b> '
        "The share of the suite's cases each release gets right, and the bound on the share of the traffic's "
        "predictions it changes against the release before it (Cert 4, exact one-sided).</figcaption></figure></div>"
        "</section>"
    )
    return page_frame("warp-check history", passed=history.passed, verdict=esc(history.verdict()),
                      header=header, main=main)  # fmt: skip


def write_history_report(out_dir: str | Path, history: ReleaseHistory, *, created: str) -> Path:
    """index.html and history.json into ``out_dir``; returns the page's path."""
    out = check_report_destination(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / HISTORY_JSON, {"warp_check_version": __version__, "created": created} | history.to_dict())
    return write_text_atomically(out / REPORT_HTML, history_html(history, created=created))


__all__ = ["HISTORY_JSON", "history_html", "trend_plot", "write_history_report"]
