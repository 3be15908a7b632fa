"""``report.md`` + ``report.json`` + PNG plots + ``index.html`` for one or more suite runs.

A run is a :class:`RunResult` (its verdicts may carry pytest's outcome); a certificate
converts into one with :func:`run_from_certificate`. Plots per run: the gap of each case
before and after repair, a histogram of certified radii, and convergence per iteration.
matplotlib is imported inside the functions and drawn with its Agg canvas directly (no
pyplot), so a report never touches the user's own matplotlib backend. The page
(:mod:`warp_check.reports.html`) draws its own plots and needs none of these files.
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from warp_check.cases import Kind
from warp_check.certificates import CERTIFICATES
from warp_check.certificates.numbers import CaseNumbers
from warp_check.certify.certificate import Certificate
from warp_check.errors import WarpError
from warp_check.files import replaced_atomically, write_json_atomic, write_text_atomically
from warp_check.json_bounded import read_json
from warp_check.reports.html import REPORT_HTML, render_html
from warp_check.reports.parts import part_table
from warp_check.reports.summary import CAPTIONS, budget_markdown, certificate_facts, headline
from warp_check.reports.svg import MIN_HISTOGRAM
from warp_check.reports.tokens import sentences_markdown
from warp_check.runs.details import AuditDetails, CertificateDetails, CheckDetails, Details, RepairDetails, traffic_of
from warp_check.runs.messages import num
from warp_check.runs.modes import Mode, RunStatus
from warp_check.runs.result import Outcome, RunResult, Verdict, tally
from warp_check.version import __version__

REPORT_MD = "report.md"
REPORT_JSON = "report.json"
MAX_TABLE_ROWS = 500  # the table lists failures first; report.json always has every case
PNG_POINTS = 2000  # cases a PNG plot draws at most (evenly spaced, the wrong ones kept)
TEXT_CHARS = 80  # a case's text in the Markdown table; index.html and report.json show more
_cell = functools.partial(num, missing="–", show_inf=False)  # a table shows a dash where there is no number


def _finite(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _slug(name: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "suite"
    slug, n = base, 2
    while slug in taken:
        slug, n = f"{base}-{n}", n + 1
    taken.add(slug)
    return slug


def _repair_facts(details: Details) -> RepairDetails | CertificateDetails | None:
    """What a repair run, or a certificate, says of the repair; None for other runs."""
    return details if isinstance(details, (RepairDetails, CertificateDetails)) else None


def _margins_of(details: Details) -> tuple[float | None, float | None]:
    """(γ_s, γ_h) where the run knows them."""
    if isinstance(details, (RepairDetails, CertificateDetails, AuditDetails)):
        return details.gamma_s, details.gamma_h
    return None, None


# -- conversions ------------------------------------------------------------------------------


def run_from_certificate(certificate: Certificate, *, source: str = "") -> RunResult:
    """A repair-mode run from a ``warp_certificate.json``: what it claims, per case."""
    verdicts = []
    for c in certificate.cases:
        held = [h for cert in CERTIFICATES if (h := cert.holds(c)) is not None]
        verdicts.append(
            Verdict(
                case_id=c.id,
                kind=c.kind,
                passed=bool(held) and all(held) and not c.excluded,
                message="excluded: wrong before repair" if c.excluded else "",
                text=c.text,
                text_pair=c.text_pair,
                properties=CaseNumbers.of(c, label=c.label).properties(),
            )
        )
    return RunResult(
        suite=source,
        name=Path(source).parent.name if source else "certificate",
        mode=Mode.REPAIR,
        ok=certificate.repair.converged,
        status=RunStatus.of_repair(certificate.repair.status),
        message=f"from the certificate {source}" if source else "from a certificate",
        verdicts=tuple(verdicts),
        details=CertificateDetails.of(certificate, artefact=str(Path(source).parent) if source else None),
    )


# -- plots --------------------------------------------------------------------------------------


def _figure(width: float = 7.0, height: float = 3.6):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save(figure, path: Path) -> Path:
    with replaced_atomically(path, suffix=".png") as tmp:
        figure.savefig(tmp, format="png")
    return path


def _margins(axes, details: Details) -> None:
    axes.axhline(0.0, color="black", linewidth=0.8)
    for margin, label, style in zip(_margins_of(details), ("γ_s", "γ_h"), ("--", ":"), strict=True):
        value = _finite(margin)
        if value is not None:
            axes.axhline(value, color="tab:gray", linestyle=style, linewidth=0.9, label=f"{label} = {value:g}")


def _plotted(rows: Sequence[tuple[bool, float, float | None, float | None]]) -> list[int]:
    """Which of the sorted ``rows`` a PNG draws: all up to PNG_POINTS, else that many evenly
    spaced (the ends kept) and up to as many whose gap after is below 0. A plot 770 pixels wide
    shows no more, and matplotlib takes minutes over 50,000 points."""
    if len(rows) <= PNG_POINTS:
        return list(range(len(rows)))
    step = len(rows) / PNG_POINTS
    spaced = {int(i * step) for i in range(PNG_POINTS)} | {len(rows) - 1}
    wrong = [i for i, r in enumerate(rows) if r[3] is not None and r[3] < 0][:PNG_POINTS]
    return sorted(spaced.union(wrong))


def plot_gaps(run: RunResult, path: Path) -> Path | None:
    """Each case's gap before (and after) repair, must_fix cases first, sorted by gap before."""
    rows = []
    for v in run.verdicts:
        if v.kind not in (Kind.MUST_FIX, Kind.MUST_KEEP):
            continue
        before = _finite(v.properties.get("gap_before"))
        if before is None:
            before = _finite(v.properties.get("gap"))
        after = _finite(v.properties.get("gap_after"))
        if before is not None or after is not None:
            rows.append((v.kind is not Kind.MUST_FIX, before if before is not None else -math.inf, before, after))
    if not rows:
        return None
    rows.sort(key=lambda r: (r[0], r[1]))
    n_fix, total = sum(1 for keep, *_ in rows if not keep), len(rows)
    x = _plotted(rows)
    rows = [rows[i] for i in x]
    figure = _figure()
    axes = figure.add_subplot()
    colours = ["tab:red" if not keep else "tab:blue" for keep, *_ in rows]
    befores = [r[2] for r in rows]
    afters = [r[3] for r in rows]
    has_after = any(a is not None for a in afters)
    label_before = "gap before repair" if has_after else "gap"
    axes.scatter(x, [b if b is not None else math.nan for b in befores], s=12, c="tab:gray", label=label_before)
    if has_after:
        axes.scatter(
            x,
            [a if a is not None else math.nan for a in afters],
            s=14,
            c=colours,
            label="gap after repair (red: must_fix, blue: must_keep)",
        )
        moved = [(xi, b, a) for xi, b, a in zip(x, befores, afters, strict=True) if a is not None and b is not None]
        if moved:  # one collection, not a line per case
            xs, bs, as_ = zip(*moved, strict=True)
            axes.vlines(xs, bs, as_, color="tab:gray", linewidth=0.5, alpha=0.6)
    if 0 < n_fix < total:
        axes.axvline(n_fix - 0.5, color="black", linewidth=0.6, alpha=0.4)
    _margins(axes, run.details)
    axes.set_xlabel(f"case (must_fix: first {n_fix}, then must_keep), sorted by gap")
    axes.set_ylabel("gap: confidence in the label (right above 0)")
    axes.set_title(f"{run.name}: {CAPTIONS['gaps'].title.lower()}")
    axes.legend(loc="best", fontsize="small")
    return _save(figure, path)


def plot_radius(run: RunResult, path: Path) -> Path | None:
    """Histogram of the certified radius (max of ε* and the local radius) of must_fix cases."""
    fix = [v.properties for v in run.verdicts if v.kind is Kind.MUST_FIX]
    radii = [r for r in (_finite(p.get("radius")) for p in fix) if r is not None]
    star = [r for r in (_finite(p.get("eps_star")) for p in fix) if r is not None]
    if len(radii) < MIN_HISTOGRAM:  # a few bars say less than the table's column of radii
        return None
    figure = _figure()
    axes = figure.add_subplot()
    import numpy as np  # with matplotlib, which needs it anyway: only when a report is drawn

    edges = np.histogram_bin_edges(radii + star, bins=max(5, min(30, len(radii))))
    axes.hist(radii, bins=edges, color="tab:green", alpha=0.75, label="certified radius (max of ε* and local)")
    if star:
        axes.hist(star, bins=edges, histtype="step", color="black", label="paper's ε* = gap / 2L")
    axes.set_xlabel("how far the fix holds (certified radius; larger is safer)")
    axes.set_ylabel("fixed cases")
    axes.set_title(f"{run.name}: {CAPTIONS['radius'].title.lower()}")
    axes.legend(loc="best", fontsize="small")
    return _save(figure, path)


def plot_convergence(run: RunResult, path: Path) -> Path | None:
    """Smallest must_fix and must_keep gap after each iteration, against their margins."""
    facts = _repair_facts(run.details)
    history = facts.history if facts is not None else ()
    if not history:
        return None
    figure = _figure()
    axes = figure.add_subplot()
    its = [h.iteration for h in history]
    for values, label, colour in (
        ([h.min_gap_fix for h in history], "smallest must_fix gap", "tab:red"),
        ([h.min_gap_keep for h in history], "smallest must_keep gap", "tab:blue"),
    ):
        values = [_finite(v) for v in values]
        if any(v is not None for v in values):
            axes.plot(
                its,
                [v if v is not None else math.nan for v in values],
                marker="o",
                markersize=3,
                color=colour,
                label=label,
            )
    _margins(axes, run.details)
    from matplotlib.ticker import MaxNLocator  # with matplotlib: only when a report is drawn

    axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no 1.2, 1.4, ...
    axes.set_xlabel("step of the repair")
    axes.set_ylabel("smallest gap")
    axes.set_title(f"{run.name}: {CAPTIONS['convergence'].title.lower()}")
    axes.legend(loc="best", fontsize="small")
    return _save(figure, path)


# -- markdown -------------------------------------------------------------------------------------


def _run_markdown(run: RunResult, images: Mapping[str, Path | None]) -> list[str]:
    said = headline(run).said
    out = [f"## {run.name} — {run.mode.value} mode", "", f"**{said.sentence}**", ""]
    if said.written_words:
        out.append(f"- written: {said.written_words}")
    if said.deferred:
        out.append(f"- deferred: {said.deferred}")
    if said.next:
        out.append(f"- next: {said.next}")
    out += [f"- suite: `{run.suite}`", *_facts_markdown(run), ""]
    out += _traffic_markdown(run)  # what the verdict rests on first (the cases a budget cannot buy), then per
    out += _parts_markdown(run)  # part, then plots and cases
    out += sentences_markdown(run, markdown_text)
    titles = {"gaps": "Gap per case", "radius": "Certified radius", "convergence": "Convergence"}
    for key, title in titles.items():
        image = images.get(key)
        if image is not None:
            caption = CAPTIONS[key]
            out += [f"![{title}]({image.name})", "", f"{caption.plain}", f"<sub>{caption.technical}</sub>", ""]
    missing = [titles[k] for k in titles if images.get(k) is None]
    if missing:
        out += [f"_Not plotted (no data in this run, or fewer than {MIN_HISTOGRAM} radii): {', '.join(missing)}._", ""]
    return out + _table_markdown(run)


def _parts_markdown(run: RunResult) -> list[str]:
    """The per-part table (per label, or per class), where the run's kind of decision has one."""
    table = part_table(run)
    if table is None:
        return []
    out = [f"### Per {table.word}", "", "| " + " | ".join(table.headers) + " |", "|---" * len(table.headers) + "|"]
    for row in table.rows:
        name, *figures = table.cells(row)
        out.append("| " + " | ".join([markdown_text(name), *figures]) + " |")
    return out + ["", table.caption, ""]


def _traffic_markdown(run: RunResult) -> list[str]:
    """Cert 4: the bound, its verdict, and the texts whose prediction the repair changed."""
    note = traffic_of(run.details)
    if note is None:
        return []
    out = ["### Traffic (Cert 4)", "", f"- {note.sample_line()}", f"- {note}"]
    if run.traffic is not None:
        out.append(f"- {run.traffic.reported.value}: {run.traffic.message}")
    out.append("")
    if note.changes:
        out += ["| # | text | before → after |", "|---|---|---|"]
        for change in note.changes[:MAX_TABLE_ROWS]:
            text = change.text if change.text_pair is None else f"{change.text} / {change.text_pair}"
            text = text.replace("|", "\\|").replace("\n", " ")
            before, after = note.prediction_words(change.before), note.prediction_words(change.after)
            out.append(f"| {change.index} | {text} | {before} → {after} |")
        if len(note.changes) > MAX_TABLE_ROWS:
            out.append(f"\n_{len(note.changes) - MAX_TABLE_ROWS} more changed text(s) in {REPORT_JSON}._")
        out.append("")
    return out + budget_markdown(note)


def _facts_markdown(run: RunResult) -> list[str]:
    """The run's bullet list: model, status, cases by kind, then what the repair and its certificates say."""
    details, out = run.details, []
    if details.model:
        head = details.head if isinstance(details, (CheckDetails, RepairDetails)) else None
        out.append(f"- model: `{details.model}`" + (f" ({head})" if head else ""))
    out.append(f"- status: **{run.status.value}** — {run.message}")
    for kind, row in tally(run.verdicts, (Kind.MUST_FIX, Kind.MUST_KEEP)).items():
        if row.total:
            out.append(f"- {kind.value}: {row.total} case(s), {row}")
    if details.counts.get(Kind.AUX):
        out.append(f"- aux: {details.counts[Kind.AUX]} case(s) (GSN-FT data, not tests)")
    out += [f"- {fact.name}: {fact.value}" for fact in certificate_facts(run)]
    facts = _repair_facts(details)
    if facts is None:
        return out
    if run.mode is Mode.REPAIR:
        seconds = _finite(facts.repair_seconds)
        took = f", {seconds:.2f} s" if seconds is not None else ""
        out.append(f"- repair: {facts.iterations} iteration(s){took}")
        out.append(f"- mean GSN κ: {_cell(facts.kappa_before)} → {_cell(facts.kappa_after)}")
    if isinstance(facts, RepairDetails) and facts.neighbourhood is not None:
        out.append(f"- neighbourhood: {facts.neighbourhood}")
    if facts.certs is not None:
        out.append(
            f"- certificates: {facts.certs} (γ_s = {_cell(facts.gamma_s)}, γ_h = {_cell(facts.gamma_h)}; a "
            "case's radius says how far the fix holds, measured inside the model, not in edited words)"
        )
    if isinstance(facts, RepairDetails) and facts.restored:
        out.append(
            f"- restored {len(facts.restored)} regression(s) against the baseline {facts.baseline}: "
            f"{', '.join(facts.restored)}"
        )
    if facts.excluded:
        out.append(f"- must_keep left out (wrong before repair): {', '.join(facts.excluded)}")
    if facts.artefact:
        out.append(f"- repaired model: `{facts.artefact}`")
    return out


def _table_markdown(run: RunResult) -> list[str]:
    """One row per case, failures first."""
    ordered = sorted(run.verdicts, key=lambda v: (v.reported is Outcome.PASSED, v.kind.value, v.case_id))
    if not ordered:
        return []
    out = [
        "| case | kind | text | result | gap before | gap after | radius | why |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in ordered[:MAX_TABLE_ROWS]:
        p = v.properties
        before = p.get("gap_before", p.get("gap") if run.mode is Mode.CHECK else None)
        why = v.message.replace("|", "\\|").replace("\n", " ")
        out.append(
            f"| `{v.case_id}` | {v.kind.value} | {markdown_text(v.text, v.text_pair)} | {v.reported.value} | "
            f"{_cell(before)} | {_cell(p.get('gap_after'))} | {_cell(p.get('radius'))} | {why} |"
        )
    if len(ordered) > MAX_TABLE_ROWS:
        out.append(f"\n_{len(ordered) - MAX_TABLE_ROWS} more case(s) in {REPORT_JSON}._")
    out.append("")
    return out


_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def markdown_text(text: str | None, pair: str | None = None) -> str:
    """A case's text for a Markdown table cell: on one line, cut to TEXT_CHARS, every character
    Markdown or HTML would read as markup escaped (a case's text is anyone's input)."""
    if not text:
        return "–"
    full = " ".join((text if pair is None else f"{text} ‖ {pair}").split())
    shown = _MARKDOWN_SPECIAL.sub(r"\\\1", full if len(full) <= TEXT_CHARS else full[: TEXT_CHARS - 1] + "…")
    # A right-to-left override would reorder the rest of its row: the text is isolated (FSI … PDI).
    return f"\u2068{shown}\u2069" if _BIDI.search(shown) else shown


def check_report_destination(out_dir: str | Path) -> Path:
    """Refuse, before any work, a report folder that is a file or cannot be made."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise WarpError(f"report folder {str(out)!r} exists and is not a folder: choose another report folder")
    existing = out if out.exists() else next((p for p in out.parents if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise WarpError(f"report folder {str(out)!r}: {str(existing)!r} is a file, not a folder")
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise WarpError(f"report folder {str(out)!r} cannot be written ({str(existing)!r} is not writable)")
    return out


def read_report(path: str | Path) -> list[RunResult]:
    """The runs of a ``report.json`` written before, read within the bounds of every JSON warp-check
    reads from a user's folder; anything else is a :class:`WarpError` naming the file."""
    data = read_json(path, error=WarpError, what="report.json")
    try:
        return [RunResult.from_dict(run, path=path) for run in data["runs"]]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise WarpError(f"{path}: not a warp-check report.json ({exc})") from None


def write_report(out_dir: str | Path, runs: Sequence[RunResult]) -> Path:
    """Write report.md, report.json, the PNGs and index.html into ``out_dir``; returns the report.md path.

    Every file is drawn in a hidden folder inside ``out_dir`` first and moved into place only once
    all are done: a report that fails (a full disk, a Ctrl-C) leaves the one before intact, and a
    reader never sees half a file.
    """
    if not runs:
        raise WarpError("nothing to report: no suite ran")
    out = check_report_destination(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".report-", dir=out))
    try:
        drawn, stale = _draw_report(staging, runs)
        for path in drawn:  # the report.md last: where it is new, so is everything it names
            os.replace(path, out / path.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for name in stale:  # an earlier report's plot of these runs that this one has no data for
        (out / name).unlink(missing_ok=True)
    return out / REPORT_MD


def _draw_report(folder: Path, runs: Sequence[RunResult]) -> tuple[list[Path], list[str]]:
    """The report's files written into ``folder`` (report.md last), and the plot file names it did not draw."""
    taken: set[str] = set()
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    lines = ["# warp-check report", "", f"warp-check {__version__}, {created}.", ""]
    slugs, drawn, stale = [], [], []
    for run in runs:
        slug = _slug(run.name or "suite", taken)
        slugs.append(slug)
        plots = {"gaps": plot_gaps, "radius": plot_radius, "convergence": plot_convergence}
        images = {key: plot(run, folder / f"{slug}-{key}.png") for key, plot in plots.items()}
        drawn += [image for image in images.values() if image is not None]
        stale += [f"{slug}-{key}.png" for key, image in images.items() if image is None]
        lines += _run_markdown(run, images)
    runs_json = [run.to_dict() for run in runs]
    drawn.append(
        write_json_atomic(
            folder / REPORT_JSON, {"warp_check_version": __version__, "created": created, "runs": runs_json}
        )
    )
    page = render_html(runs, slugs, version=__version__, created=created)
    drawn.append(write_text_atomically(folder / REPORT_HTML, page))
    drawn.append(write_text_atomically(folder / REPORT_MD, "\n".join(lines).rstrip() + "\n"))
    return drawn, stale


__all__ = [
    "REPORT_HTML",
    "REPORT_JSON",
    "check_report_destination",
    "REPORT_MD",
    "plot_convergence",
    "plot_gaps",
    "plot_radius",
    "run_from_certificate",
    "write_report",
]
