"""``report.md`` + ``report.json`` + PNG plots for one or more suite runs.

A run is a :meth:`RunResult.to_dict` (each case may add its pytest ``outcome``); a certificate
converts into one with :func:`run_from_certificate`. Plots per run: the gap of each case
before and after repair, a histogram of certified radii, and convergence per iteration.
matplotlib is imported inside the functions and drawn with its Agg canvas directly (no
pyplot), so a report never touches the user's own matplotlib backend.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from warp_check.errors import WarpError
from warp_check.files import replaced_atomically, write_json_atomic, write_text_atomically
from warp_check.version import __version__

REPORT_MD = "report.md"
REPORT_JSON = "report.json"
MAX_TABLE_ROWS = 500  # the table lists failures first; report.json always has every case


def num(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:.4g}"


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


def _outcome(case: Mapping[str, Any]) -> str:
    return case.get("outcome") or ("passed" if case.get("passed") else "failed")


# -- conversions ------------------------------------------------------------------------------


def run_from_certificate(certificate: Mapping[str, Any], *, source: str = "") -> dict[str, Any]:
    """A run dict (repair mode) from a ``warp_certificate.json``: what it claims, per case."""
    settings = certificate.get("settings", {})
    repair = certificate.get("repair", {})
    cases = []
    for c in certificate.get("cases", []):
        radii = [r for r in (_finite(c.get("eps_star")), _finite(c.get("eps_local"))) if r is not None]
        held = [c.get(k) for k in ("cert1", "cert2", "cert3") if c.get(k) is not None]
        cases.append(
            {
                "id": c.get("id"),
                "kind": c.get("kind"),
                "passed": bool(held) and all(held) and not c.get("excluded"),
                "message": "excluded: wrong before repair" if c.get("excluded") else "",
                "properties": {
                    "label": c.get("label"),
                    "gap_before": c.get("gap_before"),
                    "gap_after": c.get("gap_after"),
                    "gap": c.get("gap_after"),
                    "eps_star": c.get("eps_star"),
                    "eps_local": c.get("eps_local"),
                    "radius": max(radii) if radii else None,
                },
            }
        )
    counts: dict[str, int] = {}
    for c in cases:
        counts[c["kind"]] = counts.get(c["kind"], 0) + 1
    return {
        "suite": source,
        "name": Path(source).parent.name if source else "certificate",
        "mode": "repair",
        "ok": bool(repair.get("converged")),
        "status": repair.get("status", "unknown"),
        "message": f"from the certificate {source}" if source else "from a certificate",
        "details": {
            "model": certificate.get("model", {}).get("source"),
            "counts": counts,
            "iterations": repair.get("iterations"),
            "repair_seconds": repair.get("seconds"),
            "kappa_before": repair.get("gsn_kappa_before"),
            "kappa_after": repair.get("gsn_kappa_after"),
            "certs": certificate.get("summary", {}),
            "excluded": repair.get("excluded_must_keep", []),
            "history": repair.get("history", []),
            "gamma_s": settings.get("gamma_s"),
            "gamma_h": settings.get("gamma_h"),
            "lipschitz": certificate.get("lipschitz", {}).get("L"),
            "artefact": str(Path(source).parent) if source else None,
        },
        "cases": cases,
    }


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


def _margins(axes, details: Mapping[str, Any]) -> None:
    axes.axhline(0.0, color="black", linewidth=0.8)
    for key, label, style in (("gamma_s", "γ_s", "--"), ("gamma_h", "γ_h", ":")):
        value = _finite(details.get(key))
        if value is not None:
            axes.axhline(value, color="tab:gray", linestyle=style, linewidth=0.9, label=f"{label} = {value:g}")


def plot_gaps(run: Mapping[str, Any], path: Path) -> Path | None:
    """Each case's gap before (and after) repair, must_fix cases first, sorted by gap before."""
    cases = [c for c in run.get("cases", []) if c.get("kind") in ("must_fix", "must_keep")]
    rows = []
    for c in cases:
        p = c.get("properties", {})
        before = _finite(p.get("gap_before"))
        if before is None:
            before = _finite(p.get("gap"))
        after = _finite(p.get("gap_after"))
        if before is not None or after is not None:
            rows.append((c["kind"] != "must_fix", before if before is not None else -math.inf, before, after))
    if not rows:
        return None
    rows.sort(key=lambda r: (r[0], r[1]))
    figure = _figure()
    axes = figure.add_subplot()
    x = list(range(len(rows)))
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
        for xi, b, a in zip(x, befores, afters, strict=True):
            if a is not None and b is not None:
                axes.plot([xi, xi], [b, a], color="tab:gray", linewidth=0.5, alpha=0.6)
    n_fix = sum(1 for keep, *_ in rows if not keep)
    if 0 < n_fix < len(rows):
        axes.axvline(n_fix - 0.5, color="black", linewidth=0.6, alpha=0.4)
    _margins(axes, run.get("details", {}))
    axes.set_xlabel(f"case (must_fix: first {n_fix}, then must_keep), sorted by gap")
    axes.set_ylabel("gap = logit(label) − max other")
    axes.set_title(f"{run.get('name', '')}: gap per case")
    axes.legend(loc="best", fontsize="small")
    return _save(figure, path)


def plot_radius(run: Mapping[str, Any], path: Path) -> Path | None:
    """Histogram of the certified radius (max of ε* and the local radius) of must_fix cases."""
    radii = [
        _finite(c.get("properties", {}).get("radius")) for c in run.get("cases", []) if c.get("kind") == "must_fix"
    ]
    radii = [r for r in radii if r is not None]
    star = [
        _finite(c.get("properties", {}).get("eps_star")) for c in run.get("cases", []) if c.get("kind") == "must_fix"
    ]
    star = [r for r in star if r is not None]
    if not radii:
        return None
    figure = _figure()
    axes = figure.add_subplot()
    import numpy as np

    edges = np.histogram_bin_edges(radii + star, bins=max(5, min(30, len(radii))))
    axes.hist(radii, bins=edges, color="tab:green", alpha=0.75, label="certified radius (max of ε* and local)")
    if star:
        axes.hist(star, bins=edges, histtype="step", color="black", label="paper's ε* = gap / 2L")
    axes.set_xlabel("radius in the space of v (the repair layer's input), not of text")
    axes.set_ylabel("must_fix cases")
    axes.set_title(f"{run.get('name', '')}: certified radius")
    axes.legend(loc="best", fontsize="small")
    return _save(figure, path)


def plot_convergence(run: Mapping[str, Any], path: Path) -> Path | None:
    """Smallest must_fix and must_keep gap after each iteration, against their margins."""
    history = run.get("details", {}).get("history") or []
    if not history:
        return None
    figure = _figure()
    axes = figure.add_subplot()
    its = [h.get("iteration") for h in history]
    for key, label, colour in (
        ("min_gap_fix", "smallest must_fix gap", "tab:red"),
        ("min_gap_keep", "smallest must_keep gap", "tab:blue"),
    ):
        values = [_finite(h.get(key)) for h in history]
        if any(v is not None for v in values):
            axes.plot(
                its,
                [v if v is not None else math.nan for v in values],
                marker="o",
                markersize=3,
                color=colour,
                label=label,
            )
    _margins(axes, run.get("details", {}))
    axes.set_xlabel("iteration")
    axes.set_ylabel("gap")
    axes.set_title(f"{run.get('name', '')}: convergence")
    axes.legend(loc="best", fontsize="small")
    return _save(figure, path)


# -- markdown -------------------------------------------------------------------------------------


def _run_markdown(run: Mapping[str, Any], images: Mapping[str, Path | None]) -> list[str]:
    details = run.get("details", {})
    cases = run.get("cases", [])
    out = [f"## {run.get('name', '?')} — {run.get('mode', '?')} mode", ""]
    out.append(f"- suite: `{run.get('suite', '')}`")
    if details.get("model"):
        head = f" ({details['head']})" if details.get("head") else ""
        out.append(f"- model: `{details['model']}`{head}")
    out.append(f"- status: **{run.get('status', '?')}** — {run.get('message', '')}")
    for kind in ("must_fix", "must_keep"):
        outcomes = [_outcome(c) for c in cases if c.get("kind") == kind]
        if outcomes:
            out.append(
                f"- {kind}: {len(outcomes)} case(s), {outcomes.count('passed')} passed, "
                f"{outcomes.count('failed')} failed"
            )
    if (details.get("counts") or {}).get("aux"):
        out.append(f"- aux: {details['counts']['aux']} case(s) (GSN-FT data, not tests)")
    if details.get("iterations") is not None and run.get("mode") == "repair":
        seconds = _finite(details.get("repair_seconds"))
        took = f", {seconds:.2f} s" if seconds is not None else ""
        out.append(f"- repair: {details['iterations']} iteration(s){took}")
        out.append(f"- mean GSN κ: {num(details.get('kappa_before'))} → {num(details.get('kappa_after'))}")
    if details.get("certs"):
        certs = details["certs"]
        out.append(
            f"- certificates: Cert 1 {certs.get('cert1', '–')}, Cert 2 {certs.get('cert2', '–')}, "
            f"Cert 3 {certs.get('cert3', '–')} (γ_s = {num(details.get('gamma_s'))}, "
            f"γ_h = {num(details.get('gamma_h'))}; radii are in the space of v, not of text)"
        )
    if details.get("excluded"):
        out.append(f"- must_keep left out (wrong before repair): {', '.join(map(str, details['excluded']))}")
    if details.get("artefact"):
        out.append(f"- repaired model: `{details['artefact']}`")
    out.append("")
    titles = {"gaps": "Gap per case", "radius": "Certified radius", "convergence": "Convergence"}
    for key, title in titles.items():
        image = images.get(key)
        if image is not None:
            out += [f"![{title}]({image.name})", ""]
    missing = [titles[k] for k in titles if images.get(k) is None]
    if missing:
        out += [f"_Not plotted (no data in this run): {', '.join(missing)}._", ""]
    ordered = sorted(cases, key=lambda c: (_outcome(c) == "passed", c.get("kind", ""), str(c.get("id"))))
    if ordered:
        out += [
            "| case | kind | result | gap before | gap after | radius | why |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in ordered[:MAX_TABLE_ROWS]:
            p = c.get("properties", {})
            before = p.get("gap_before", p.get("gap") if run.get("mode") == "check" else None)
            why = str(c.get("message", "")).replace("|", "\\|").replace("\n", " ")
            out.append(
                f"| `{c.get('id')}` | {c.get('kind')} | {_outcome(c)} | {num(before)} | "
                f"{num(p.get('gap_after'))} | {num(p.get('radius'))} | {why} |"
            )
        if len(ordered) > MAX_TABLE_ROWS:
            out.append(f"\n_{len(ordered) - MAX_TABLE_ROWS} more case(s) in {REPORT_JSON}._")
        out.append("")
    return out


def write_report(out_dir: str | Path, runs: Sequence[Mapping[str, Any]]) -> Path:
    """Write report.md, report.json and the PNGs into ``out_dir``; returns the report.md path.

    Every file is written to a temporary name and renamed, so a reader never sees half a file.
    """
    if not runs:
        raise WarpError("nothing to report: no suite ran")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    lines = ["# warp-check report", "", f"warp-check {__version__}, {created}.", ""]
    for run in runs:
        slug = _slug(str(run.get("name") or "suite"), taken)
        images = {
            "gaps": plot_gaps(run, out / f"{slug}-gaps.png"),
            "radius": plot_radius(run, out / f"{slug}-radius.png"),
            "convergence": plot_convergence(run, out / f"{slug}-convergence.png"),
        }
        lines += _run_markdown(run, images)
    write_json_atomic(out / REPORT_JSON, {"warp_check_version": __version__, "created": created, "runs": list(runs)})
    return write_text_atomically(out / REPORT_MD, "\n".join(lines).rstrip() + "\n")


__all__ = [
    "REPORT_JSON",
    "REPORT_MD",
    "plot_convergence",
    "plot_gaps",
    "plot_radius",
    "run_from_certificate",
    "write_report",
]
