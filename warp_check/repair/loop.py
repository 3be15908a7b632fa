"""A repair of one head (paper Algorithm 1 with GSN-FT), from cached representations: what is measured
and decided before the loop (non-finite input, must_keep cases already wrong, GSN-FT), the loop
(:mod:`warp_check.repair.iterations`, on the data of :mod:`warp_check.repair.state`), and the result.

What is tried after a loop that does not converge (the paper's loop, the final linear layer, fewer
neighbourhood copies) is the repair ladder's (:mod:`warp_check.pipeline.ladder`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from warp_check.model.head import DenseHead, top_left_singular_vectors
from warp_check.progress import Progress, as_progress
from warp_check.repair import iterations, screen
from warp_check.repair.gsn import gsn_finetune
from warp_check.repair.linearise import gaps
from warp_check.repair.records import (
    CaseSet,
    GsnFtRecord,
    IterationRecord,
    Miss,
    RepairResult,
    RepairStatus,
    mean,
)
from warp_check.repair.settings import RepairSettings, check_rank
from warp_check.repair.state import Ending, LoopState, Stacked


def repair_head(
    head: DenseHead,
    fix: CaseSet,
    keep: CaseSet,
    aux: CaseSet | None = None,
    settings: RepairSettings | None = None,
    *,
    progress: bool | Progress = False,
) -> RepairResult:
    """Run GSN-FT (if needed) and the iterative QP repair once, with ``settings``; never raises for a
    failed repair (a rank past the layer's is a SettingsError, before any work). ``progress`` shows
    the loop's iterations.

    A result whose status is not CONVERGED says which cases miss their margin and by how much; its
    ``head_after`` must not be shipped (the artefact writer refuses it). What is tried after a loop
    that did not converge (the paper's loop, the final linear layer) is the repair ladder's
    (:mod:`warp_check.pipeline.ladder`).
    """
    settings = settings or RepairSettings()
    check_rank(settings.rank, head.W.shape)
    shown = as_progress(progress)
    if settings.blas_threads is None:
        return _Repair(head, fix, keep, aux, settings).run(shown)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=settings.blas_threads, user_api="blas"):
        return _Repair(head, fix, keep, aux, settings).run(shown)


class _Repair:
    """One repair: the cases, the head being repaired, what is measured before the loop, and the result."""

    def __init__(self, head: DenseHead, fix: CaseSet, keep: CaseSet, aux: CaseSet | None, settings: RepairSettings):
        self.start = time.perf_counter()
        self.head, self.settings = head, settings
        self.all_fix, self.all_keep = fix, keep  # every case, copies too: the result speaks of each
        (self.fix, fix_copies), (self.keep, keep_copies) = fix.merged(), keep.merged()
        self.copies = fix_copies | keep_copies  # a copy's id → the id of the case the loop constrains
        self.aux = aux if aux is not None else CaseSet.empty(head.d_in)
        self.gaps_keep0 = gaps(head, self.keep.V, self.keep.labels)
        # each must_keep row's margin, from its gap on the input model (Cert 2 reads the same gap before)
        self.bars = settings.keep_bars(self.gaps_keep0)
        # Over the constrained rows only, each copy then given its case's number: a copy's gap is
        # its case's by construction (a matrix of another shape may sum in another order).
        self.gaps_before = self.every_case(np.concatenate([gaps(head, self.fix.V, self.fix.labels), self.gaps_keep0]))
        U0 = top_left_singular_vectors(head.W, settings.rank)
        self.kappa_before = self.each(
            dict(zip(self.fix.ids, head.gsn_kappa(self.fix.V, self.fix.labels, U0).tolist(), strict=True))
        )
        self.excluded: tuple[str, ...] = ()
        self.gsn = GsnFtRecord(False, "not run")
        self.held_outside, self.round = 0, 0  # repair.screen's: cases held outside the loop, rounds run
        self.held: screen.Screening | None = None  # the cases the loop holds (None: every kept one)
        self.joined_between = 0  # cases that joined the loop between two steps of a round

    def run(self, progress: Progress) -> RepairResult:
        bad = self.non_finite()
        if bad:
            message = "non-finite values (NaN/Inf) in " + ", ".join(bad) + ": the model cannot be repaired"
            return self.finish(RepairStatus.INVALID_INPUT, message, self.head)
        kept = self.exclude_wrong_keep()
        work_head = self.gsn_finetune_if_needed()
        with progress.step("repair", unit="iteration") as step:
            ending, records = self.rounds(work_head, kept, step)
        status = ending.status
        if status is RepairStatus.NOTHING_TO_REPAIR and self.gsn.applied:
            status = RepairStatus.CONVERGED  # GSN-FT changed the head: that is the repair
        return self.finish(status, ending.message, work_head.with_weight(ending.W), ending.misses, records)

    def rounds(self, head: DenseHead, kept: np.ndarray, shown) -> tuple[Ending, list[IterationRecord]]:
        """The loop over every kept must_keep case, or, for more than resident_keep of them, in rounds
        over the cases at risk, the others checked after each (:mod:`warp_check.repair.screen`)."""
        settings = self.settings
        gap = self.gaps_keep0 if head is self.head else gaps(head, self.keep.V, self.keep.labels)
        self.held = screen.screening(gap, kept, settings, self.bars)
        if self.held is None:
            part, bars = (self.keep, self.bars) if np.all(kept) else (self.keep.select(kept), self.bars[kept])
            stacked = iterations.stack(head=head, fix=self.fix, kept=part, settings=settings, keep_bars=bars)
            state = iterations.start(stacked=stacked)
            return iterations.run(stacked=stacked, state=state, shown=shown), state.records
        metric = screen.metric(self.keep, kept, settings, head)
        records: list[IterationRecord] = []
        W, rank = head.W, None
        while True:
            self.round += 1
            self.held_outside = self.outside_count()
            # handed to the loop, not kept here: cases joining between steps replace it (repair.screen)
            # and this frame must not keep the round's first v and whitened v alive beside them
            handed = [
                iterations.stack(
                    head=head.with_weight(W), fix=self.fix, kept=self.keep.rows(self.held.resident), settings=settings,
                    metric=metric, held_outside=self.held_outside, keep_bars=self.bars[self.held.resident],
                )
            ]  # fmt: skip
            # the rank the last round grew to: the cases joining are more of the same problem (a million
            # isotropic cases: rank 64; back at rank 2 the first QP of the next round stalled)
            state = iterations.start(stacked=handed[0], rank=rank)
            first = len(records) + 1
            ending = iterations.run(stacked=handed.pop(), state=state, shown=shown, first=first, between=self.join)
            records, rank = records + state.records, state.ranks.rank
            state = None  # the round's Z (8·d_out bytes a case): not beside the next round's
            checked = screen.check(head.with_weight(ending.W), self.keep, self.held.outside, settings, self.bars)
            if ending.status not in (RepairStatus.CONVERGED, RepairStatus.NOTHING_TO_REPAIR):
                return replace(ending, misses=ending.misses + checked.misses), records
            if not checked.short.size:
                return replace(ending, message=ending.message + self.screened_note(len(records))), records
            if len(records) >= settings.max_iter:
                message = (
                    f"not converged: {len(checked.short)} must_keep case(s) held outside the loop fell short of "
                    f"γ_h in its last round and max_iter ({settings.max_iter}) is used up; raise max_iter, or "
                    f"resident_keep (now {settings.resident_keep}) to hold more cases in the loop"
                )
                ending = replace(ending, status=RepairStatus.NOT_CONVERGED, message=message, misses=checked.misses)
                return ending, records
            self.held, W = self.held.joined(checked.joining(settings.resident_keep)), ending.W

    def join(self, stacked: Stacked, state: LoopState) -> Stacked:
        """Between two steps of a round: the cases held outside that the last step left short of γ_h
        join the loop now, not after the round has converged without them (a million cases: each
        round's first step leaves thousands outside short, and a round re-converged in 4 steps)."""
        short = screen.short(stacked.head.with_weight(state.W), self.keep, self.held.outside, self.settings, self.bars)
        if not short.size:
            return stacked
        self.held = self.held.joined(short)
        self.held_outside = self.outside_count()
        self.joined_between += int(short.size)
        return iterations.join(
            stacked=stacked, state=state, kept=self.keep.rows(short), held_outside=self.held_outside,
            keep_bars=self.bars[short],
        )  # fmt: skip

    def outside_count(self) -> int:
        """The suite's must_keep cases (copies too) held outside the loop now."""
        return int(np.sum(self.keep.copies[self.held.outside]))

    def screened_note(self, iterations_run: int) -> str:
        return (
            f"; {self.held_outside} must_keep case(s) held outside the loop, every one checked at the repaired "
            f"weights ({self.round} round{'s' if self.round > 1 else ''} of {iterations_run} iteration(s)"
            f"{f'; {self.joined_between} joined the loop between steps' if self.joined_between else ''})"
        )

    # -- before the loop -------------------------------------------------------------------------
    def non_finite(self) -> list[str]:
        head = self.head
        bad = [
            name
            for name, a in (("W", head.W), ("b", head.b), ("W_c", head.Wc), ("b_c", head.bc))
            if not np.all(np.isfinite(a))
        ]
        cases = (("must_fix", self.fix), ("must_keep", self.keep), ("aux", self.aux))
        return bad + [f"representations of {kind}" for kind, s in cases if not screen.finite(s.V)]

    def exclude_wrong_keep(self) -> np.ndarray:
        """must_keep cases the model already gets wrong cannot be "kept": they are left out. The rest, as a mask."""
        right = self.gaps_keep0 > 0
        wrong = {i for i, ok in zip(self.keep.ids, right, strict=True) if not ok}
        self.excluded = tuple(i for i in self.all_keep.ids if self.copies.get(i, i) in wrong)
        return right

    def gsn_finetune_if_needed(self) -> DenseHead:
        """GSN-FT when the must_fix cases' mean κ is below the threshold and there are aux cases."""
        mean_kappa, settings = mean(self.kappa_before.values()), self.settings
        self.gsn = GsnFtRecord(False, "no aux cases")
        if self.head.fixed_head:
            if len(self.aux):
                reason = (
                    "only the repair layer's weight may change in this head (the final-linear or FFN-output form, "
                    "or a missing bias)"
                )
                self.gsn = GsnFtRecord(False, reason)
            return self.head
        if len(self.aux) and len(self.fix) and mean_kappa < settings.gsn_threshold:
            work_head, self.gsn = gsn_finetune(self.head, self.fix, self.aux, settings)
            return work_head
        if len(self.aux):
            self.gsn = GsnFtRecord(False, f"mean κ {mean_kappa:.4g} ≥ gsn_threshold {settings.gsn_threshold:g}")
        return self.head

    # -- the result -------------------------------------------------------------------------------
    def finish(
        self,
        status: RepairStatus,
        message: str,
        head_after: DenseHead,
        misses: tuple[Miss, ...] = (),
        records: Sequence[IterationRecord] = (),
    ) -> RepairResult:
        fix, keep, settings = self.fix, self.keep, self.settings
        gaps_after = np.concatenate([gaps(head_after, fix.V, fix.labels), gaps(head_after, keep.V, keep.labels)])
        U = top_left_singular_vectors(head_after.W, settings.rank)
        kappa = head_after.gsn_kappa(self.fix.V, self.fix.labels, U)
        kappa_after = dict(zip(self.fix.ids, kappa.tolist(), strict=True))
        return RepairResult(
            status=status,
            message=message,
            head_before=self.head,
            head_after=head_after,
            settings=settings,
            iterations=tuple(records),
            gaps_before=self.gaps_before,
            gaps_after=self.every_case(gaps_after),
            kappa_before=self.kappa_before,
            kappa_after=self.each(kappa_after),
            excluded_keep=self.excluded,
            misses=self.each_miss(misses),
            gsn_ft=self.gsn,
            seconds=time.perf_counter() - self.start,
            merged=len(self.copies),
            held_outside=self.held_outside,
            rounds=max(self.round, 1),
        )

    def every_case(self, constrained: np.ndarray) -> dict[str, float]:
        """A value per case of the suite, in its order, from one per constrained row (fix, then keep)."""
        by_id = _by_id(self.fix.ids + self.keep.ids, constrained)
        return {i: by_id[self.copies.get(i, i)] for i in self.all_fix.ids + self.all_keep.ids}

    def each(self, by_id: dict[str, float]) -> dict[str, float]:
        """A value per constrained case, given to each of its copies too."""
        return by_id | {copy: by_id[case] for copy, case in self.copies.items() if case in by_id}

    def each_miss(self, misses: Sequence[Miss]) -> tuple[Miss, ...]:
        """The misses of the constrained cases, each followed by its copies' (which miss as it does)."""
        copies_of: dict[str, list[str]] = {}
        for copy, case in self.copies.items():
            copies_of.setdefault(case, []).append(copy)
        return tuple(m2 for m in misses for m2 in (m, *(replace(m, id=c) for c in copies_of.get(m.id, ()))))


def _by_id(ids: tuple[str, ...], values: np.ndarray) -> dict[str, float]:
    return dict(zip(ids, values.tolist(), strict=True))
