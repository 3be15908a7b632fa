"""The HTML report's plots as inline SVG, drawn here: no matplotlib, no image files, no network.

Each plot's size is bounded whatever the number of cases: a sorted curve is drawn through at
most :data:`MAX_POINTS` of its quantiles (a sorted curve thinned that way keeps its shape), and
a histogram has at most 30 bars.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from warp_check.cases import Kind
from warp_check.reports.summary import CaseRow

MAX_POINTS = 300
WIDTH, HEIGHT = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 30, 44  # the legend sits in the top margin
COLOURS = {Kind.MUST_FIX: "#c0392b", Kind.MUST_KEEP: "#1f6fb2"}


@dataclass(frozen=True, kw_only=True)
class Series:
    """One line of a plot: its points, its colour and its name in the legend."""

    name: str
    points: tuple[tuple[float, float], ...]
    colour: str
    dashed: bool = False
    faint: bool = False  # drawn lighter: what the other series are compared with


@dataclass(frozen=True, kw_only=True)
class Level:
    """A horizontal reference line (zero, a margin) with its label."""

    name: str
    y: float


MIN_HISTOGRAM = 10  # fixed cases a histogram of radii needs to show a distribution


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 5 × 10^k steps) covering [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step) * step
    return [round(first + i * step, 12) for i in range(int((high - first) / step + 1e-9) + 1)]


def thinned(values: Sequence[float], limit: int = MAX_POINTS) -> list[tuple[float, float]]:
    """(x in [0, 1], value) of the sorted ``values``, at most ``limit`` of them, first and last kept."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return []
    if n == 1:
        return [(0.5, ordered[0])]
    picks = range(n) if n <= limit else sorted({round(i * (n - 1) / (limit - 1)) for i in range(limit)})
    return [(i / (n - 1), ordered[i]) for i in picks]


class _Frame:
    """Data coordinates to pixels for one plot."""

    def __init__(self, x: tuple[float, float], y: tuple[float, float]) -> None:
        (self.x0, self.x1), (self.y0, self.y1) = x, y

    def px(self, x: float) -> float:
        span = self.x1 - self.x0 or 1.0
        return LEFT + (x - self.x0) / span * (WIDTH - LEFT - RIGHT)

    def py(self, y: float) -> float:
        span = self.y1 - self.y0 or 1.0
        return HEIGHT - BOTTOM - (y - self.y0) / span * (HEIGHT - TOP - BOTTOM)


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _tick_label(value: float) -> str:
    return f"{value:.3g}"


def _axes(
    frame: _Frame, *, x_label: str, y_label: str, x_ticks: Sequence[float] | None, counts: bool = False
) -> list[str]:
    """The frame, ticks and labels; ``counts``: the y axis counts cases, so only whole ticks."""
    out = [
        f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{HEIGHT - TOP - BOTTOM}" '
        'fill="none" stroke="#bbb"/>'
    ]
    for t in nice_ticks(frame.y0, frame.y1):
        if counts and not float(t).is_integer():
            continue
        y = _fmt(frame.py(t))
        out.append(f'<line x1="{LEFT - 4}" x2="{LEFT}" y1="{y}" y2="{y}" stroke="#555"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y}" text-anchor="end" dominant-baseline="middle">{_tick_label(t)}</text>')
    for t in x_ticks or ():
        x = _fmt(frame.px(t))
        base = HEIGHT - BOTTOM
        out.append(f'<line x1="{x}" x2="{x}" y1="{base}" y2="{base + 4}" stroke="#555"/>')
        out.append(f'<text x="{x}" y="{base + 15}" text-anchor="middle">{_tick_label(t)}</text>')
    out.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 8}" text-anchor="middle">{_esc(x_label)}</text>')
    mid = (TOP + HEIGHT - BOTTOM) / 2
    out.append(f'<text x="14" y="{mid}" text-anchor="middle" transform="rotate(-90 14 {mid})">{_esc(y_label)}</text>')
    return out


def _levels(frame: _Frame, levels: Sequence[Level]) -> list[str]:
    out = []
    for level in levels:
        if not frame.y0 <= level.y <= frame.y1:
            continue
        y = _fmt(frame.py(level.y))
        zero = level.y == 0
        dash = "" if zero else ' stroke-dasharray="5 4"'
        colour = "#222" if zero else "#777"
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}" stroke="{colour}"{dash}/>')
        # Zero is labelled under its line on the left, the margins over theirs on the right: apart when close.
        where = f'x="{LEFT + 4}" dy="11"' if zero else f'x="{WIDTH - RIGHT - 4}" dy="-3" text-anchor="end"'
        out.append(f'<text {where} y="{y}" fill="{colour}">{_esc(level.name)}</text>')
    return out


def _dash(s: Series) -> str:
    return (' stroke-dasharray="4 3"' if s.dashed else "") + (' stroke-opacity="0.5"' if s.faint else "")


def _legend(series: Sequence[Series]) -> list[str]:
    """The series' names in the top margin, in rows that stay inside the plot's width."""
    out, x, y = [], LEFT, TOP - 12 if _legend_width(series) <= WIDTH - RIGHT - LEFT else TOP - 21
    for s in series:
        if x > LEFT and x + _legend_width([s]) > WIDTH - RIGHT:
            x, y = LEFT, y + 13
        out.append(f'<line x1="{x}" x2="{x + 18}" y1="{y}" y2="{y}" stroke="{s.colour}" stroke-width="2"{_dash(s)}/>')
        out.append(f'<text x="{x + 22}" y="{y}" dominant-baseline="middle">{_esc(s.name)}</text>')
        x += 30 + 6.5 * len(s.name)
    return out


def _legend_width(series: Sequence[Series]) -> float:
    return sum(30 + 6.5 * len(s.name) for s in series)


def _svg(body: list[str], label: str) -> str:
    """An ``<svg>`` element for an HTML page: no xmlns, the HTML parser gives it its namespace (and the
    page then names no URL at all)."""
    return (
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{_esc(label)}" class="plot">' + "".join(body) + "</svg>"
    )


def _span(values: Sequence[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    pad = (high - low) * 0.06 or 1.0
    return low - pad, high + pad


def line_plot(
    series: Sequence[Series], levels: Sequence[Level], *, x_label: str, y_label: str, x_range: tuple[float, float],
    x_ticks: Sequence[float] | None, label: str,
) -> str:  # fmt: skip
    """Lines through each series' points, reference levels, axes and a legend."""
    ys = [y for s in series for _, y in s.points] + [level.y for level in levels]
    frame = _Frame(x_range, _span(ys))
    body = _axes(frame, x_label=x_label, y_label=y_label, x_ticks=x_ticks) + _levels(frame, levels)
    for s in series:
        if not s.points:
            continue
        dash = _dash(s)
        if len(s.points) == 1:
            ((x, y),) = s.points
            body.append(f'<circle cx="{_fmt(frame.px(x))}" cy="{_fmt(frame.py(y))}" r="3" fill="{s.colour}"/>')
            continue
        coords = " ".join(f"{_fmt(frame.px(x))},{_fmt(frame.py(y))}" for x, y in s.points)
        body.append(f'<polyline points="{coords}" fill="none" stroke="{s.colour}" stroke-width="1.8"{dash}/>')
    return _svg(body + _legend(series), label)


def gaps_plot(
    rows: Sequence[CaseRow], *, gamma_s: float | None, gamma_h: float | None, when: tuple[str, str] = ("", "")
) -> str | None:
    """Each kind's gaps sorted, before (faint, dashed) and after (solid), ``when`` naming the two
    ("before repair", "after repair"); None without gaps."""
    series = []
    for kind, name in ((Kind.MUST_FIX, "must_fix"), (Kind.MUST_KEEP, "must_keep")):
        before = [r.gap_before for r in rows if r.kind is kind and r.gap_before is not None]
        after = [r.gap_after for r in rows if r.kind is kind and r.gap_after is not None]
        if before and after:
            series.append(
                Series(
                    name=f"{name} {when[0] or 'before'}",
                    points=tuple(thinned(before)),
                    colour=COLOURS[kind],
                    dashed=True,
                    faint=True,
                )
            )
        if after:
            series.append(Series(name=f"{name} {when[1] or 'after'}" if before else name, points=tuple(thinned(after)),
                                 colour=COLOURS[kind]))  # fmt: skip
    if not series:
        return None
    levels = [Level(name="0: right above, wrong below", y=0.0)]
    for value, name in ((gamma_s, "γ_s fix margin"), (gamma_h, "γ_h keep margin")):
        if value is not None and math.isfinite(value):
            levels.append(Level(name=f"{name} {value:g}", y=value))
    return line_plot(
        series, levels, x_label="cases of each kind, least to most confident (share of the kind)",
        y_label="gap (confidence in the label)", x_range=(0.0, 1.0), x_ticks=[0, 0.25, 0.5, 0.75, 1],
        label=f"sorted gaps of {len(rows)} cases",
    )  # fmt: skip


def radius_plot(rows: Sequence[CaseRow]) -> str | None:
    """Histogram of the must_fix cases' certified radii; None where fewer than MIN_HISTOGRAM cases have one."""
    radii = [r.radius for r in rows if r.kind is Kind.MUST_FIX and r.radius is not None]
    if len(radii) < MIN_HISTOGRAM:  # a few bars say less than the table's column of radii
        return None
    low, high = min(radii), max(radii)
    bins = max(5, min(30, len(radii)))
    width = (high - low) / bins or (abs(high) or 1.0) / bins
    counts = [0] * bins
    for r in radii:
        counts[min(bins - 1, int((r - low) / width))] += 1
    frame = _Frame((low, low + width * bins), (0.0, max(counts) * 1.08))
    ticks = nice_ticks(frame.x0, frame.x1)
    body = _axes(frame, x_label="how far the fix holds (certified radius; larger is safer)",
                 y_label="fixed cases", x_ticks=ticks, counts=True)  # fmt: skip
    for i, count in enumerate(counts):
        if not count:
            continue
        x0, x1 = frame.px(low + i * width), frame.px(low + (i + 1) * width)
        y = frame.py(count)
        body.append(
            f'<rect x="{_fmt(x0)}" y="{_fmt(y)}" width="{_fmt(max(x1 - x0 - 1, 1))}" '
            f'height="{_fmt(frame.py(0) - y)}" fill="#2e8b57"><title>{count} case(s) with radius '
            f"{low + i * width:.3g} to {low + (i + 1) * width:.3g}</title></rect>"
        )
    return _svg(body, f"certified radius of {len(radii)} fixed cases")


def convergence_plot(
    history: Sequence[tuple[int, float | None, float | None]], *, gamma_s: float | None, gamma_h: float | None
) -> str | None:
    """The smallest must_fix and must_keep gap per iteration ((iteration, fix, keep) rows)."""
    if not history:
        return None
    if len(history) > MAX_POINTS:
        step = len(history) / MAX_POINTS
        history = [history[int(i * step)] for i in range(MAX_POINTS)] + [history[-1]]
    series = []
    for index, name, kind in ((1, "weakest must_fix", Kind.MUST_FIX), (2, "weakest must_keep", Kind.MUST_KEEP)):
        points = tuple((float(h[0]), float(h[index])) for h in history if h[index] is not None)
        if points:
            series.append(Series(name=name, points=points, colour=COLOURS[kind]))
    if not series:
        return None
    levels = [Level(name="0", y=0.0)]
    for value, name in ((gamma_s, "γ_s"), (gamma_h, "γ_h")):
        if value is not None and math.isfinite(value):
            levels.append(Level(name=f"{name} {value:g}", y=value))
    first, last = history[0][0], history[-1][0]
    x_range = (float(first), float(last)) if last > first else (first - 0.5, first + 0.5)
    ticks = [t for t in nice_ticks(*x_range) if float(t).is_integer()]
    return line_plot(
        series, levels, x_label="step of the repair", y_label="smallest gap", x_range=x_range, x_ticks=ticks,
        label=f"convergence over {len(history)} iterations",
    )  # fmt: skip


def price_plot(points: Sequence[tuple[float, int]], *, budget: float | None, total: int) -> str | None:
    """What a traffic budget buys: must_fix cases bought (y) against the share of the traffic's tune part
    their repair changes (x, a share), each point one measured repair, ``budget`` (the user's max_change, a
    share) a vertical line; ``total``: the suite's must_fix cases. None without a point."""
    if not points:
        return None
    ordered = sorted(points, key=lambda p: (p[1], p[0]))
    xs = [100 * x for x, _ in ordered] + ([100 * budget] if budget is not None else [])
    frame = _Frame((0.0, max(max(xs) * 1.08, 1.0)), (0.0, max(total, 1) * 1.05))
    body = _axes(frame, x_label="predictions changed on the traffic's tune part (%)",
                 y_label="must_fix cases bought", x_ticks=nice_ticks(frame.x0, frame.x1), counts=True)  # fmt: skip
    colour = COLOURS[Kind.MUST_FIX]
    if len(ordered) > 1:
        coords = " ".join(f"{_fmt(frame.px(100 * x))},{_fmt(frame.py(y))}" for x, y in ordered)
        body.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="1.8"/>')
    for x, y in ordered:
        body.append(
            f'<circle cx="{_fmt(frame.px(100 * x))}" cy="{_fmt(frame.py(y))}" r="3" fill="{colour}">'
            f"<title>{y} of {total} case(s): {100 * x:.2f} % changed</title></circle>"
        )
    if budget is not None:
        x = _fmt(frame.px(100 * budget))
        body.append(f'<line x1="{x}" x2="{x}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" stroke="#777" stroke-dasharray="5 4"/>')
        body.append(f'<text x="{x}" y="{TOP + 11}" dx="4" fill="#777">max_change {100 * budget:g} %</text>')
    series = [Series(name="cases bought, cheapest first", points=(), colour=colour)]
    return _svg(body + _legend(series), f"price list: must_fix cases bought against predictions changed, of {total}")
