"""The comparison of two releases as ``index.html`` shows it: a run of the model under test judged
against a baseline model (``warp-check diff``, ``--warp-baseline``).

Verdict first: the share of the traffic's predictions the release changes with its bound and budget
(Cert 4 between the two models), the regressions and fixes on the suite, and the paired test with its
p-values. Then the flip matrices (the traffic's changes by label pair, the suite's answers of the
baseline against this model's), the changed traffic texts with both predictions, and the regressed
and fixed cases with both gaps. The page around it is the report's (:mod:`warp_check.reports.html`):
its frame, CSS and escaping, so a comparison reads as every other report does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from warp_check.certificates.traffic.changes import ARROW
from warp_check.certificates.traffic.verdicts import TrafficNote
from warp_check.certify.certificate import percent
from warp_check.reports.markup import TRAFFIC_ROWS, esc, facts, inline, text_cell
from warp_check.reports.summary import CaseRow, Fact, case_row
from warp_check.runs.details import CheckDetails
from warp_check.runs.paired import PairedTest
from warp_check.runs.result import RunResult, Verdict

CASE_ROWS = 500  # regressed or fixed cases a table lists (report.json has them all)


@dataclass(frozen=True, kw_only=True)
class FlipMatrix:
    """Counts by (the baseline's answer, this model's answer): ``rows`` and ``columns`` name them in order."""

    title: str
    caption: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    counts: dict[tuple[str, str], int]


def is_comparison(run: RunResult) -> bool:
    """A run judged against a baseline model, with the paired test the comparison measured."""
    return isinstance(run.details, CheckDetails) and run.details.paired_test is not None


def regressed(verdict: Verdict) -> bool:
    """Right on the baseline (or on a label of it), wrong now: a failure that is no expected one."""
    return "baseline_gap" in verdict.properties and not verdict.passed and verdict.expected_failure is None


def fixed(verdict: Verdict) -> bool:
    """Wrong on the baseline, right now."""
    old = verdict.properties.get("baseline_gap")
    return verdict.passed and isinstance(old, (int, float)) and old <= 0


def comparison_facts(run: RunResult, paired: PairedTest, note: TrafficNote | None) -> list[Fact]:
    """The verdict's figures: traffic changed (bound, budget), regressions, fixes, the paired test."""
    facts = []
    if note is not None:
        budget = "no budget (max_change) given" if note.max_change is None else f"budget {percent(note.max_change)}"
        share = note.changed / note.n if note.n else 0.0
        facts.append(
            Fact(
                name="traffic changed",
                value=f"at most {percent(note.bound)} of predictions",
                detail=f"{note.changed} of {note.n} texts changed ({percent(share)}), bound at "
                f"{percent(note.confidence, digits=3)} confidence; {budget}"
                + ("" if note.within_budget else ": OVER it"),
                good=None if note.max_change is None else note.within_budget,
            )
        )
    verdicts = [v for v in run.verdicts if "baseline_gap" in v.properties]
    lost, gained = sum(map(regressed, verdicts)), sum(map(fixed, verdicts))
    still = sum(v.expected_failure is not None for v in verdicts)
    facts += [
        Fact(name="regressions", value=f"{lost} cases", detail="right on the baseline, wrong now", good=not lost),
        Fact(name="fixes", value=f"{gained} cases", detail="wrong on the baseline, right now"),
        Fact(name="still wrong", value=f"{still} cases", detail="wrong on the baseline too: expected failures"),
    ]
    gate = "reported, not gating" if paired.worse_p is None else f"gate worse_p = {paired.worse_p:g}"
    facts.append(
        Fact(
            name="paired test",
            value=f"p = {paired.p_value:.3g} two-sided; p = {paired.p_worse:.3g} that this model is worse",
            detail=f"exact McNemar on {paired.cases} cases: {paired.right_to_wrong} right → wrong, "
            f"{paired.wrong_to_right} wrong → right; {gate}",
            good=None if paired.worse_p is None else paired.passed,
        )
    )
    return facts


def traffic_matrix(note: TrafficNote) -> FlipMatrix | None:
    """The traffic's changes by (baseline's label, this model's label), where the kind's changes are pairs."""
    pairs = {tuple(key.split(ARROW, 1)): count for key, count in note.by_pair.items() if ARROW in key}
    if not pairs:
        return None
    return FlipMatrix(
        title="Traffic changed, by label pair",
        caption=f"Texts of the traffic's measured part ({note.n:,}) whose prediction changed: the baseline's label "
        "in the row, this model's in the column; unchanged texts are not counted.",
        rows=tuple(sorted({old for old, _ in pairs})),
        columns=tuple(sorted({new for _, new in pairs})),
        counts={(old, new): count for (old, new), count in pairs.items()},
    )


def suite_matrix(run: RunResult) -> FlipMatrix | None:
    """The suite's cases by (the baseline's prediction, this model's), where each is one label."""
    counts: dict[tuple[str, str], int] = {}
    for verdict in run.verdicts:
        old, new = verdict.properties.get("baseline_predicted"), verdict.properties.get("predicted")
        if not (isinstance(old, str) and isinstance(new, str)):
            continue
        counts[old, new] = counts.get((old, new), 0) + 1
    if not counts:
        return None
    labels = tuple(sorted({label for pair in counts for label in pair}))
    return FlipMatrix(
        title="Suite answers, baseline against this model",
        caption="Every suite case both models answered: the baseline's prediction in the row, this model's in the "
        "column; off the diagonal the two disagree.",
        rows=labels,
        columns=labels,
        counts=counts,
    )


def _matrix_html(matrix: FlipMatrix) -> str:
    head = "".join(f'<th scope="col">{inline(c)}' for c in matrix.columns)
    body = "".join(
        f"<tr><td>{inline(row)}" + "".join(f"<td>{matrix.counts.get((row, column), 0):,}" for column in matrix.columns)
        for row in matrix.rows
    )
    return (
        f"<h4>{esc(matrix.title)}</h4>"
        f'<div class="scroll parts"><table class="parts flips"><thead><tr><th scope="col">baseline ↓ · this model →'
        f"{head}</thead><tbody>{body}</tbody></table></div>"
        f'<p class="meta">{esc(matrix.caption)}</p>'
    )


def _moves_html(note: TrafficNote) -> str:
    """Changes that are not label pairs (several labels per text: a label turned on or off), by count."""
    moves = {key: count for key, count in note.by_pair.items() if ARROW not in key}
    if not moves:
        return ""
    body = "".join(f"<tr><td>{inline(key)}<td>{count:,}" for key, count in moves.items())
    return (
        "<h4>Traffic changed, by label</h4>"
        '<table class="plain"><thead><tr><th scope="col">change (+ on, − off)<th scope="col">texts</thead>'
        f"<tbody>{body}</tbody></table>"
    )


def _changes_html(note: TrafficNote) -> str:
    if not note.changes:
        return ""
    shown = note.changes[:TRAFFIC_ROWS]
    body = "".join(
        f"<tr><td>{change.index}<td>{text_cell(change.text, change.text_pair)}"
        f"<td>{inline(note.prediction_words(change.before))}<td>{inline(note.prediction_words(change.after))}"
        for change in shown
    )
    more = len(note.changes) - len(shown)
    return (
        f"<h4>Traffic texts whose prediction changed ({len(note.changes):,})</h4>"
        '<table class="plain changed"><thead><tr><th scope="col">#<th scope="col">text<th scope="col">baseline'
        f'<th scope="col">this model</thead><tbody>{body}</tbody></table>'
        + (f'<p class="meta">{more:,} more changed text(s) in report.json.</p>' if more else "")
    )


def _gap(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def _cases_html(title: str, rows: Sequence[CaseRow]) -> str:
    if not rows:
        return ""
    shown = rows[:CASE_ROWS]
    body = "".join(
        f"<tr><td>{inline(r.case_id)}<td>{text_cell(r.text, r.text_pair)}<td>{inline(r.label)}"
        f"<td>{inline(r.predicted_before or '–')} <small>gap {_gap(r.gap_before)}</small>"
        f"<td>{inline(r.predicted_after or '–')} <small>gap {_gap(r.gap_after)}</small>"
        for r in shown
    )
    more = len(rows) - len(shown)
    return (
        f"<h4>{esc(title)} ({len(rows):,})</h4>"
        '<table class="plain"><thead><tr><th scope="col">case<th scope="col">text<th scope="col">label'
        f'<th scope="col">baseline<th scope="col">this model</thead><tbody>{body}</tbody></table>'
        + (f'<p class="meta">{more:,} more in report.json.</p>' if more else "")
    )


def comparison_html(run: RunResult) -> str:
    """The comparison's part of a run's section: figures first, then the flips, then the texts and cases."""
    details = run.details
    assert isinstance(details, CheckDetails) and details.paired_test is not None
    note = details.traffic
    out = [f"<h3>Against the baseline</h3>{facts(comparison_facts(run, details.paired_test, note))}"]
    if note is not None:
        items = [f"<li>{inline(note.sample_line())}</li>", f"<li>{inline(str(note))}</li>"]
        if run.traffic is not None:
            items.append(f"<li>{esc(run.traffic.reported.value)}: {inline(run.traffic.message)}</li>")
        out.append(f'<h3>Traffic (Cert 4 against the baseline)</h3><ul class="traffic">{"".join(items)}</ul>')
    matrices = [m for m in (traffic_matrix(note) if note else None, suite_matrix(run)) if m is not None]
    out += [_matrix_html(m) for m in matrices]
    if note is not None:
        out += [_moves_html(note), _changes_html(note)]
    rows = [(v, case_row(run, v)) for v in run.verdicts if "baseline_gap" in v.properties]
    lost = [row for v, row in rows if regressed(v)]
    gained = [row for v, row in rows if fixed(v)]
    out += [_cases_html("Regressions: right on the baseline, wrong now", lost)]
    out += [_cases_html("Fixes: wrong on the baseline, right now", gained)]
    return "".join(out)


__all__ = [
    "CASE_ROWS", "FlipMatrix", "comparison_facts", "comparison_html", "fixed", "is_comparison", "regressed",
    "suite_matrix", "traffic_matrix",
]  # fmt: skip
