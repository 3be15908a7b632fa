"""The repair ladder: the strategies a repair of a suite's encoded cases may try, as named rungs
(:class:`Rung`), and the one rule that climbs them (:func:`climb`).

It lives in ``runs/``, not ``repair/``: two rungs need the model, not only its head (the final linear
layer is encoded again; the neighbourhood's copies are an evaluation's cases). Each rung runs the loop
once (:func:`~warp_check.repair.loop.repair_head`); :mod:`warp_check.runs.repair_cases` encodes the
cases before the climb and certifies and saves what settled after it.

The rule: the rungs are tried in the order of :func:`rungs`; each runs where it applies to the
attempts before it (:func:`applies`), and the first whose repair converges settles the ladder. A result
that settles after others names them (:func:`_settled`): the paper's loop the loop that stalled before it
on the same head, the final linear layer the dense form; its seconds add up the loops it names. Where
none converges, the suite's own cases on the adapter's head are what failed (the head the caller
asked for), their message saying what was tried after them (:func:`_failed`).

To add a strategy: a :class:`Rung`, its place in :func:`rungs`, when it applies (:func:`applies`),
what it repairs (:func:`_run`), and what its result says where it settles (:func:`_settled`).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from warp_check.cases import Kind
from warp_check.decisions import SINGLE_LABEL
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.head import DenseHead
from warp_check.pipeline.evaluation import Evaluation, evaluate
from warp_check.pipeline.neighbourhood import Neighbourhood
from warp_check.pipeline.separation import hardest_pair
from warp_check.progress import Progress
from warp_check.repair.loop import repair_head
from warp_check.repair.records import RepairResult, RepairStatus
from warp_check.repair.settings import RepairSettings


class Rung(enum.Enum):
    """A strategy of the ladder: what it repairs (its value) and, in :func:`applies`, when."""

    # Where a neighbourhood drew copies. The settings' loop alone: the next rung's smaller problem is
    # the better retry than the paper's loop (on 26 families' tiny models it never converged where the
    # defaults had not, and doubled the cost), and the suite's own cases choose the head.
    WITH_COPIES = "the suite's cases and the neighbourhood's copies"
    # Copies are drawn blind: one may land beside a suite case of the other label, and no weights meet
    # both. The copies the best iterate still misses are the ones in the way: they go, the rest stay.
    DROP_COPIES = "the suite's cases and the copies the last try's best iterate met"
    # The suite's cases alone, with the settings' loop: always tried (the neighbourhood is a help,
    # never a reason to fail).
    ADAPTER_HEAD = "the suite's cases on the adapter's head"
    # After a loop that went beyond the paper (a function-space price, a growing rank, a trust region)
    # stalled: on a small head the direction a fix needs can be the one the function-space step prices
    # highest, and the paper's loop then converges where it stalls.
    PAPER_LOOP = "the paper's loop on the head the last try stalled on"
    # After the dense form layer = 'auto' chose did not converge: the final linear layer, whose gaps are
    # linear in its update, may.
    FINAL_LAYER = "the final linear layer"


# Times the copies a failed repair still missed are dropped and the rest tried again, before the
# neighbourhood is left out whole.
DROP_ROUNDS = 2

# How a head chosen by falling back is introduced (reports and certificates: ``found_by``).
FELL_BACK = "layer = 'auto' fell back to the final linear layer"
# How a dense repair may end for the final linear layer to be tried: it may converge there.
# Nothing to repair, or NaN/Inf in the weights or v, would end the same way on it.
NOT_CONVERGING = frozenset({RepairStatus.NOT_CONVERGED, RepairStatus.INFEASIBLE, RepairStatus.SOLVER_FAILED})
COPIES = frozenset({Rung.WITH_COPIES, Rung.DROP_COPIES})


def rungs() -> tuple[Rung, ...]:
    """The ladder, in the order it is climbed (the paper's loop follows either head's own loop)."""
    return (
        Rung.WITH_COPIES,
        *(Rung.DROP_COPIES,) * DROP_ROUNDS,
        Rung.ADAPTER_HEAD,
        Rung.PAPER_LOOP,
        Rung.FINAL_LAYER,
        Rung.PAPER_LOOP,
    )


@dataclass(frozen=True, kw_only=True)
class Ladder:
    """What a climb repairs: the suite's cases encoded for the adapter's head, and how to encode again."""

    adapter: ClassifierAdapter
    evaluation: Evaluation  # the suite's own cases
    settings: RepairSettings
    hood: Neighbourhood | None = None  # the copies drawn (None: none was drawn)
    fallback: bool = True  # whether the final linear layer may be tried (False: comparisons of one layer)
    batch_size: int = 32
    cache_dir: str | Path | None = None
    progress: bool | Progress = True


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """One rung's try: the head it repaired, the cases (v that head's input), and the loop's result."""

    rung: Rung
    adapter: ClassifierAdapter  # its spec names the head repaired
    evaluation: Evaluation
    head: DenseHead
    result: RepairResult
    hood: Neighbourhood | None = None  # the copies tried beside the suite's cases (the copies' rungs)


@dataclass(frozen=True, kw_only=True)
class Climb:
    """Where a climb ended: the attempt that stands (the one that settled, or the suite's own cases on
    the adapter's head where none did), its result as reported, and the neighbourhood as it ended."""

    attempt: Attempt
    result: RepairResult  # the attempt's, its message (and seconds) naming the rungs before it
    hood: Neighbourhood | None
    tried: tuple[Rung, ...]


def climb(ladder: Ladder) -> Climb:
    """The one retry rule: each rung that applies runs, until one converges."""
    tried: list[Attempt] = []
    for rung in rungs():
        if applies(rung, ladder, tried):
            tried.append(_run(rung, ladder, tried))
            if tried[-1].result.repaired:
                return _settled(ladder, tried)
    return _failed(ladder, tried)


def applies(rung: Rung, ladder: Ladder, tried: Sequence[Attempt]) -> bool:
    """Whether ``rung`` is tried after the attempts ``tried`` (none of which converged)."""
    last = tried[-1] if tried else None
    match rung:
        case Rung.WITH_COPIES:
            return ladder.hood is not None and bool(ladder.hood.cases)
        case Rung.DROP_COPIES:
            if last is None or last.rung not in COPIES:
                return False
            missed = _missed_copies(last)
            return bool(missed) and missed != {c.id for c in last.hood.cases}
        case Rung.ADAPTER_HEAD:
            return True
        case Rung.PAPER_LOOP:
            return (
                last is not None
                and last.rung in (Rung.ADAPTER_HEAD, Rung.FINAL_LAYER)
                and last.result.status is RepairStatus.NOT_CONVERGED
                and paper_loop(last.result.settings) != last.result.settings
            )
        case Rung.FINAL_LAYER:
            spec, dense = ladder.adapter.spec, _find(tried, Rung.ADAPTER_HEAD)
            return (
                ladder.fallback
                and spec.classifier is not None
                and spec.fallback is not None
                and dense is not None
                and dense.result.status in NOT_CONVERGING
            )
    raise AssertionError(rung)  # pragma: no cover - every rung is matched


def paper_loop(settings: RepairSettings) -> RepairSettings:
    """``settings`` as the paper's loop: no function-space price, the rank fixed, λ fixed, no trust region."""
    return replace(settings, mu=0.0, max_rank=settings.rank, trust_region=False, price_growth=1.0)


def _run(rung: Rung, ladder: Ladder, tried: Sequence[Attempt]) -> Attempt:
    match rung:
        case Rung.WITH_COPIES | Rung.DROP_COPIES:
            hood = ladder.hood if rung is Rung.WITH_COPIES else tried[-1].hood.without(_missed_copies(tried[-1]))
            joined = ladder.evaluation.joined(hood.evaluation)
            head = ladder.adapter.head()
            return _attempt(rung, ladder.adapter, joined, head, ladder.settings, hood=hood, progress=ladder.progress)
        case Rung.ADAPTER_HEAD:
            head = ladder.adapter.head()
            return _attempt(rung, ladder.adapter, ladder.evaluation, head, ladder.settings, progress=ladder.progress)
        case Rung.PAPER_LOOP:
            last = tried[-1]
            settings = paper_loop(last.result.settings)
            return _attempt(rung, last.adapter, last.evaluation, last.head, settings, progress=ladder.progress)
        case Rung.FINAL_LAYER:
            return _final_layer(ladder, _find(tried, Rung.ADAPTER_HEAD))
    raise AssertionError(rung)  # pragma: no cover - every rung is matched


def _attempt(
    rung: Rung,
    adapter: ClassifierAdapter,
    evaluation: Evaluation,
    head: DenseHead,
    settings: RepairSettings,
    hood: Neighbourhood | None = None,
    progress: bool | Progress = False,
) -> Attempt:
    fix, keep, aux = (evaluation.case_set(k) for k in (Kind.MUST_FIX, Kind.MUST_KEEP, Kind.AUX))
    result = repair_head(head, fix, keep, aux, settings, progress=progress)
    return Attempt(rung=rung, adapter=adapter, evaluation=evaluation, head=head, result=result, hood=hood)


def _final_layer(ladder: Ladder, dense: Attempt) -> Attempt:
    """The final linear layer: the adapter's classifier, v then its input (encoded again)."""
    why = f"the dense form {dense.adapter.spec.quoted} did not converge ({_how_it_ended(dense.result)})"
    spec = replace(ladder.adapter.spec.fallback, found_by=f"{FELL_BACK}: {why}")
    adapter = dense.adapter.with_spec(spec)
    # ΔW of the final layer has num_classes rows: the rank cannot be more.
    settings = ladder.settings
    rank = min(settings.rank, adapter.repair_layer.out_features, adapter.repair_layer.in_features)
    at_final = evaluate(
        adapter, dense.evaluation.cases, batch_size=ladder.batch_size, cache_dir=ladder.cache_dir,
        progress=ladder.progress,
    )  # fmt: skip
    settings = replace(settings, rank=rank) if rank != settings.rank else settings
    return _attempt(Rung.FINAL_LAYER, adapter, at_final, adapter.head(), settings, progress=ladder.progress)


def _settled(ladder: Ladder, tried: Sequence[Attempt]) -> Climb:
    """The last attempt converged: its result, naming the loops it followed."""
    last = tried[-1]
    result = last.result
    if last.rung is Rung.PAPER_LOOP:
        stalled = tried[-2].result
        note = (
            f" (the paper's loop: mu 0, rank {stalled.settings.rank} fixed, λ fixed, after the defaults stalled: "
            f"{stalled.message})"
        )
        result = replace(result, message=result.message + note, seconds=stalled.seconds + result.seconds)
    if _find(tried, Rung.FINAL_LAYER) is not None:
        dense = _find(tried, Rung.ADAPTER_HEAD)
        layer = f"the final linear layer '{last.adapter.spec.repair_layer}'"
        message = f"{result.message}, on {layer} after the dense form {dense.adapter.spec.quoted} did not converge"
        result = replace(result, message=message, seconds=dense.result.seconds + result.seconds)
    hood = last.hood if last.rung in COPIES else _hood_after(ladder, tried)
    return Climb(attempt=last, result=result, hood=hood, tried=tuple(a.rung for a in tried))


def _failed(ladder: Ladder, tried: Sequence[Attempt]) -> Climb:
    """No rung converged: the suite's cases on the adapter's head, saying what else was tried."""
    dense = _find(tried, Rung.ADAPTER_HEAD)
    result = _with_why(dense, ladder.fallback, _find(tried, Rung.FINAL_LAYER))
    return Climb(attempt=dense, result=result, hood=_hood_after(ladder, tried), tried=tuple(a.rung for a in tried))


def _hood_after(ladder: Ladder, tried: Sequence[Attempt]) -> Neighbourhood | None:
    """The neighbourhood as the suite's own cases were repaired: left out, saying why, where its copies
    were tried and none of their rungs converged."""
    copies = [a for a in tried if a.rung in COPIES]
    if not copies:
        return ladder.hood
    result = _with_why(copies[-1], False, None)
    return replace(copies[-1].hood, left_out=f"{result.status.value}: {result.message}")


def _with_why(attempt: Attempt, fallback: bool, final: Attempt | None) -> RepairResult:
    """``attempt``'s failed result, its message saying what may help: what the final linear layer did
    where it was tried, how a named head falls back, or else the pair of cases it must grow most to
    separate."""
    result, spec = attempt.result, attempt.adapter.spec
    if final is not None:
        layer = f"the final linear layer '{final.adapter.spec.repair_layer}'"
        tried = f"{layer} was repaired instead and did not converge either ({_how_it_ended(final.result)})"
        tried += _why_final_stalls(final.adapter, final.evaluation, final.result)
        return replace(result, message=f"{result.message}; {tried}")
    if fallback and result.status in NOT_CONVERGING and spec.classifier is not None:
        # A head the user named (no fallback): no silent change, but say what may help.
        hint = (
            f"a named head does not fall back by itself: layer = 'final' repairs the final linear layer "
            f"'{spec.classifier}' instead (its gap is linear in the update)"
        )
        return replace(result, message=f"{result.message}; {hint}")
    if result.status in NOT_CONVERGING:  # the final linear layer itself stalled
        why = _why_final_stalls(attempt.adapter, attempt.evaluation, result)
        return replace(result, message=result.message + why)
    return result


def _find(tried: Sequence[Attempt], rung: Rung) -> Attempt | None:
    return next((a for a in tried if a.rung is rung), None)


def _missed_copies(attempt: Attempt) -> set[str]:
    """The copies ``attempt``'s best iterate missed."""
    return {m.id for m in attempt.result.misses} & {c.id for c in attempt.hood.cases}


def _why_final_stalls(adapter: ClassifierAdapter, evaluation: Evaluation, result: RepairResult) -> str:
    """The pair of cases the final linear layer must grow most to separate, as a clause of the failure
    message, where it must grow at all ('' otherwise). Defined for one class per case: another kind
    of decision gets no such clause."""
    if adapter.decision is not SINGLE_LABEL:
        return ""
    settings, excluded = result.settings, set(result.excluded_keep)
    rows = [
        i
        for i, c in enumerate(evaluation.cases)
        if c.kind is Kind.MUST_FIX or (c.kind is Kind.MUST_KEEP and c.id not in excluded)
    ]
    cases = [evaluation.cases[i] for i in rows]
    pair = hardest_pair(
        adapter.head().W,
        evaluation.encoded.V[rows].astype(np.float64),
        np.array([c.label for c in cases], dtype=np.int64),
        np.array([settings.gamma_s if c.kind is Kind.MUST_FIX else settings.gamma_h for c in cases]),
        tuple(c.id for c in cases),
        result.misses,
    )
    if pair is None or not pair.growth > 1:
        return ""
    names = getattr(getattr(adapter.model, "config", None), "id2label", None) or {}
    return "; " + pair.describe(adapter.spec.repair_layer, names)


def _how_it_ended(result: RepairResult) -> str:
    """A repair that did not converge, in one clause: status, iterations, the case furthest short."""
    ended = f"{result.status.value} after {len(result.iterations)} iteration(s)"
    if not result.misses:
        return ended
    worst = max(result.misses, key=lambda m: m.short_by)
    return (
        f"{ended}, {len(result.misses)} case(s) short of their margin, worst '{worst.id}' "
        f"gap {worst.gap:.4g} < {worst.needs}"
    )
