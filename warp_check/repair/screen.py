"""Must_keep cases held outside the loop: a suite of more than ``resident_keep`` must_keep cases keeps
in the loop only the cases at risk, and checks the others' true gaps a block at a time.

Why: the loop holds, per case, v (float32 from a model), its whitened copy and Z = V Wᵀ + b in
float64 (20·d bytes: 15 GB at a million cases of d = 768), and linearises every case it holds each
iteration. A case far above its margin costs the QP nothing (its row is never active) and its gap
moves only as far as the step moves its output, which the step's metric prices over every must_keep
case, held or not.

So the loop runs in **rounds**. A round is the loop (:mod:`warp_check.repair.iterations`) on the
must_fix cases and the must_keep cases it holds, to convergence. Between two of its steps, the
cases held outside whose gap the last step took below γ_h (:func:`short`, one float32 pass) join it
at once, with the loop's state as it is: a step that breaks cases outside breaks them early, and
waiting for the round's end made each round converge again from the start (a million isotropic
cases: two rounds of 6 and 4 steps). After a round, every case held outside is checked at the
round's W (:func:`check`: float64 gaps from its v as stored, float32 where it came so, a block at a
time; the saved arithmetic where the gap is near the margin). Where none is short, the repair has
converged on every case; where some are, they and every case now at risk (gap below γ_h +
``screen_margin``), nearest first, to ``resident_keep`` joining, join the loop, and the next round
starts from the round's W.
The rounds share max_iter: each takes at least one iteration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from warp_check.model.blocks import blocks
from warp_check.model.head import DenseHead
from warp_check.repair.metric import StepMetric
from warp_check.repair.records import CaseSet, Miss
from warp_check.repair.settings import RepairSettings
from warp_check.repair.state import held_gaps


@dataclass(frozen=True, kw_only=True, eq=False)
class Screening:
    """Which kept must_keep cases (positions in the loop's must_keep CaseSet) the loop holds, and
    which it checks from outside."""

    resident: np.ndarray
    outside: np.ndarray

    def joined(self, rows: np.ndarray) -> Screening:
        """``rows`` (outside ones) moved into the loop, in the order the loop's rows stay in."""
        return Screening(resident=np.concatenate([self.resident, rows]), outside=np.setdiff1d(self.outside, rows))


def bars_of(keep: CaseSet, bars: np.ndarray | None, settings: RepairSettings) -> np.ndarray:
    """Each must_keep case's margin: ``bars`` (RepairSettings.keep_bars), or γ_h each where None."""
    return np.full(len(keep), settings.gamma_h) if bars is None else bars


def screening(
    gap: np.ndarray, kept: np.ndarray, settings: RepairSettings, bars: np.ndarray | None = None
) -> Screening | None:
    """The cases the loop holds, from each must_keep case's ``gap`` at the head it starts from, over
    the ``kept`` ones (a mask); None where every kept case fits (at most ``resident_keep``): then
    the loop holds them all, as it always did. ``bars``: each case's margin (None: γ_h each).

    Held: every case short of its margin (the loop must lift it), then the smallest gaps below
    margin + screen_margin, to resident_keep cases in all."""
    index = np.flatnonzero(kept)
    if index.size <= settings.resident_keep:
        return None
    at = gap[index]
    bar = np.full(index.size, settings.gamma_h) if bars is None else bars[index]
    short = index[at < bar]
    near = np.flatnonzero((at >= bar) & (at < bar + settings.screen_margin))
    room = max(settings.resident_keep - short.size, 0)
    above = at[near] if bars is None else at[near] - bar[near]  # nearest their margin first
    nearest = index[near[np.argsort(above, kind="stable")[:room]]]
    resident = np.sort(np.concatenate([short, nearest]))
    return Screening(resident=resident, outside=np.setdiff1d(index, resident))


def moment(keep: CaseSet, kept: np.ndarray, head: DenseHead) -> np.ndarray | None:
    """S, the kept cases' mean v vᵀ in float64 (v: the repair layer's input, ``head.repaired_input``; the
    step's metric covers every one, held or not), summed a block at a time; None where no case is kept."""
    index = np.flatnonzero(kept)
    if not index.size:
        return None
    S = np.zeros((head.d_in, head.d_in))
    for rows in blocks(index.size):
        V = np.asarray(head.repaired_input(keep.V[index[rows]]), dtype=np.float64)
        S += V.T @ V
    return S / index.size


def metric(keep: CaseSet, kept: np.ndarray, settings: RepairSettings, head: DenseHead) -> StepMetric:
    return StepMetric.of_moment(settings.rho, settings.mu, moment(keep, kept, head) if settings.mu else None)


@dataclass(frozen=True, kw_only=True, eq=False)
class Check:
    """The cases held outside the loop, checked at one W: those short of γ_h as saved (with the room a
    half-precision model needs), and those at risk (below γ_h + screen_margin), as positions."""

    short: np.ndarray
    at_risk: np.ndarray  # nearest their margin first
    misses: tuple[Miss, ...]

    def joining(self, at_most: int) -> np.ndarray:
        """The cases that join the loop: every short one, then the nearest at risk, to ``at_most`` in all
        (a round that moved many cases toward their margin must not bring them all in at once)."""
        others = self.at_risk[~np.isin(self.at_risk, self.short)]
        return np.union1d(self.short, others[: max(at_most - self.short.size, 0)])


def check(
    head: DenseHead, keep: CaseSet, outside: np.ndarray, settings: RepairSettings, bars: np.ndarray | None = None
) -> Check:
    """Every case of ``outside`` at ``head`` (the round's W): float64 gaps a block at a time, and the
    saved arithmetic's gap and room for those below their margin + screen_margin (far above what the
    saved arithmetic moves a gap by, so the others meet their margin as saved too). ``bars``: each
    must_keep case's margin (None: γ_h each)."""
    bar = bars_of(keep, bars, settings)
    gap = gaps_at(head, keep, outside)
    near = np.flatnonzero(gap < bar[outside] + settings.screen_margin)
    near = near[np.argsort(gap[near] if bars is None else gap[near] - bar[outside[near]], kind="stable")]
    rows = outside[near]
    held, room = np.empty(rows.size), np.empty(rows.size)
    for part in blocks(rows.size):
        V = np.asarray(keep.V[rows[part]], dtype=np.float64)
        held[part], room[part] = held_gaps(head, V, keep.labels[rows[part]], gap[near][part])
    short = held < bar[rows] + room
    dtype = head.storage_dtype
    misses = tuple(
        Miss(keep.ids[i], "must_keep", float(h), float(bar[i]), room=float(r), dtype=dtype if r > 0 else None)
        for i, h, r in zip(rows[short], held[short], room[short], strict=True)
    )
    return Check(short=rows[short], at_risk=rows, misses=misses)


def short(
    head: DenseHead, keep: CaseSet, outside: np.ndarray, settings: RepairSettings, bars: np.ndarray | None = None
) -> np.ndarray:
    """The cases of ``outside`` whose gap at ``head`` is below their margin (``bars``; None: γ_h each), a
    block at a time (between two
    steps: they join the loop). In float32 (DenseHead.logits_in), about half the time of float64: a case
    its rounding misses is found by the round's end, which checks every case in float64 and as
    saved (:func:`check`), and one it takes that holds costs the loop a row, never a verdict."""
    bar = bars_of(keep, bars, settings)
    found = [outside[:0]]
    for rows in blocks(outside.size):
        index = outside[rows]
        gap = head.decision.margins(head.logits_in(keep.V[index], np.dtype(np.float32)), keep.labels[index]).gap
        found.append(index[gap < bar[index]])
    return np.concatenate(found)


def gaps_at(head: DenseHead, keep: CaseSet, index: np.ndarray) -> np.ndarray:
    """The float64 gaps of the cases at ``index``, a block at a time (no copy of their v)."""
    gap = np.empty(index.size)
    for rows in blocks(index.size):
        gap[rows] = head.gaps(keep.V[index[rows]], keep.labels[index[rows]])[0]
    return gap


def finite(V: np.ndarray) -> bool:
    """No NaN or Inf in V, a block of rows at a time (no n × d mask of a million rows)."""
    return all(np.isfinite(V[rows]).all() for rows in blocks(V.shape[0]))
