"""A report's per-part table, where a kind of decision decides several things per case: per part
(a label of a multi-label suite), how many decisions on it the must_fix and must_keep cases state,
how the model answers them (before and after repair, or now, for a check), and what Cert 4's changes
on the traffic did to it (texts that turned the label on, or off).

The kind owns the table: what a part is called (its ``part_word``; None: an answer is one decision,
and the case table says it all), its traffic columns (``change_columns``) and which parts a change
counts under (``part_changes``). Each case's parts are its verdict's
(:class:`~warp_check.runs.result.PartVerdict`); a run whose verdicts carry none (an audit, a
certificate read back) has no table.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from warp_check.cases import Kind
from warp_check.certificates.traffic.verdicts import TrafficNote
from warp_check.decisions import DECISIONS, DecisionKind
from warp_check.reports.summary import when_words
from warp_check.runs.details import traffic_of
from warp_check.runs.modes import RunStatus
from warp_check.runs.result import RunResult


@dataclass(frozen=True, kw_only=True)
class PartRow:
    """One part's figures. Where the run knows no answers before (a check), ``fixed`` and ``kept`` count
    the decisions right now and ``lost`` those wrong now; ``wrong_before`` is None."""

    name: str
    fix: int  # must_fix decisions on it
    wrong_before: int | None  # of those, wrong before repair (or on the baseline)
    fixed: int  # of those, wrong before and right after (no before: right now)
    keep: int  # must_keep decisions on it
    kept: int  # of those, right before and after (no before: right now)
    lost: int  # of those, right before and wrong after (no before: wrong now)
    changes: tuple[int, ...]  # Cert 4's changed texts, per change column of the kind


@dataclass(frozen=True, kw_only=True)
class PartTable:
    """The table: what a part is called, whether the run knows answers before, the traffic's change
    columns (() where the run measured no traffic), and a row per part."""

    word: str
    before: tuple[str, str] | None  # ("before repair", "after repair"), ("on the baseline", "now"); None: a check
    change_columns: tuple[str, ...]
    rows: tuple[PartRow, ...]

    @property
    def headers(self) -> tuple[str, ...]:
        if self.before is None:
            cases = ("must_fix", "must_fix wrong now", "must_keep", "must_keep wrong now")
        else:
            was = self.before[0]
            cases = ("must_fix", f"wrong {was}", "fixed", "must_keep", "kept", "lost")
        return (self.word, *cases, *(f"traffic: {c}" for c in self.change_columns))

    def cells(self, row: PartRow) -> tuple[str, ...]:
        if self.before is None:
            cases = (row.fix, row.fix - row.fixed, row.keep, row.lost)
        else:
            cases = (row.fix, row.wrong_before, row.fixed, row.keep, row.kept, row.lost)
        return (row.name, *(str(n) for n in cases), *(str(n) for n in row.changes))

    @property
    def caption(self) -> str:
        """What the table counts, in a sentence."""
        counted = (
            "decisions the cases state on it"
            if self.before is None
            else f"decisions the cases state on it, and how the model answers them {self.before[0]} and "
            f"{self.before[1]} (fixed: wrong {self.before[0]}, right {self.before[1]}; kept / lost: right "
            f"{self.before[0]}, right / wrong {self.before[1]})"
        )
        traffic = "; traffic: the texts of Cert 4's sample the repair changed, by what it did to the "
        traffic += self.word
        return f"Per {self.word}: {counted}" + (traffic if self.change_columns else "") + "."


def kind_of(run: RunResult) -> DecisionKind | None:
    """The kind of decision the run's cases state (None: one this process does not know)."""
    return DECISIONS.get(run.details.decision)


def part_table(run: RunResult) -> PartTable | None:
    """The run's per-part table, where its kind has one and its verdicts carry their parts."""
    kind = kind_of(run)
    if kind is None or kind.part_word is None or run.status is RunStatus.ERROR:
        return None
    answers = [
        (v.kind, p.name, p.right_before, p.right)
        for v in run.verdicts
        if v.kind in (Kind.MUST_FIX, Kind.MUST_KEEP)
        for p in v.parts
    ]
    if not answers:
        return None
    note = traffic_of(run.details)
    changes = _changes(kind, note) if note is not None else {}
    before = any(p.gap_before is not None for v in run.verdicts for p in v.parts)
    columns = kind.change_columns if note is not None else ()
    counts: dict[str, list[int]] = {}  # per part: fix, wrong before, fixed, keep, kept, lost (in one pass)
    for case_kind, name, was, now in answers:  # right or not (None: not known) before and after
        row = counts.setdefault(name, [0] * 6)
        if case_kind is Kind.MUST_FIX:
            row[0] += 1
            row[1] += was is False
            row[2] += (was is False or not before) and now is True
        else:
            row[3] += 1
            row[4] += (was is True or not before) and now is True
            row[5] += (was is True or not before) and now is False
    for name in changes:
        counts.setdefault(name, [0] * 6)
    was, now = when_words(run)
    return PartTable(
        word=kind.part_word,
        before=(was or "before", now or "after") if before else None,
        change_columns=columns,
        rows=tuple(
            PartRow(
                name=name,
                fix=fix,
                wrong_before=wrong if before else None,
                fixed=fixed,
                keep=keep,
                kept=kept,
                lost=lost,
                changes=tuple(changes.get(name, [0] * len(columns))),
            )
            for name, (fix, wrong, fixed, keep, kept, lost) in counts.items()
        ),
    )


def _changes(kind: DecisionKind, note: TrafficNote) -> dict[str, list[int]]:
    """Per part's name, Cert 4's changed texts under each of the kind's change columns."""
    counts: dict[str, list[int]] = {}
    for before, after in _decoded(kind, note):
        for change in kind.part_changes(before, after):
            row = counts.setdefault(note.label_name(change.part), [0] * len(kind.change_columns))
            row[change.column] += 1
    return counts


def _decoded(kind: DecisionKind, note: TrafficNote) -> Iterator[tuple[object, object]]:
    """Each changed text's predictions before and after, as the kind predicts (its record keeps codes)."""
    if not note.changes:
        return
    codes = [c.before for c in note.changes] + [c.after for c in note.changes]
    classes = max([*note.labels.values(), *(int(code).bit_length() - 1 for code in codes), 0]) + 1
    decoded = kind.decode(codes, classes)
    n = len(note.changes)
    yield from zip(decoded[:n], decoded[n:], strict=True)


__all__ = ["PartRow", "PartTable", "kind_of", "part_table"]
