"""Check mode: the model as it is. must_keep passes when the model predicts its label; so does
must_fix (an unrepaired model fails its must_fix cases: that is the gate).

A check that loaded the model records its logits per case (:mod:`warp_check.cache.warm`), so
the next check of the same folder is answered without loading it (:func:`check_warm`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warp_check.cache import warm
from warp_check.cache.warm import WarmEntry
from warp_check.cases import Case, Kind
from warp_check.progress import Progress
from warp_check.releases.load import load_adapter
from warp_check.runs.deferred import deferred_verdict
from warp_check.runs.details import CheckDetails
from warp_check.runs.messages import labelled, num
from warp_check.runs.modes import Mode, RunStatus
from warp_check.runs.result import RunResult, Verdict, part_verdicts
from warp_check.suite.loader import Suite

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter


def _checked_cases(suite: Suite, ids: Iterable[str] | None) -> list[Case]:
    wanted = None if ids is None else set(ids)
    cases = [*suite.cases, *(d.case for d in suite.deferred)]  # deferred: run, shown as known failures
    return [c for c in cases if c.kind is not Kind.AUX and (wanted is None or c.id in wanted)]


def check(
    suite: Suite,
    adapter: ClassifierAdapter,
    *,
    ids: Iterable[str] | None = None,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = False,
) -> RunResult:
    """The model as it is, on the must_fix and must_keep cases (only ``ids`` when given).

    With a cache, a warm entry is recorded too, so the next check of the same model folder can
    be answered by :func:`check_warm` without loading the model.
    """
    # numpy and the model's code load only here: a warm check imports this module without them
    from warp_check.pipeline.evaluation import evaluate

    cases = _checked_cases(suite, ids)
    evaluation = evaluate(adapter, cases, batch_size=suite.model.batch_size, cache_dir=cache_dir, progress=progress)
    if cache_dir is not None:
        warm.record(
            adapter.source,
            adapter.spec.chain,
            cases,
            evaluation.logits,
            cache_dir,
            layer=suite.layer,
            max_length=suite.model.max_length,
            decision=suite.decision.name,
        )
    details = CheckDetails.of(
        suite,
        selected=len(cases),
        head=adapter.spec.chain,
        encoded=evaluation.encoded.encoded,
        from_cache=evaluation.encoded.from_cache,
        encode_seconds=evaluation.seconds,
        model_loaded=True,
        identical=evaluation.encoded.identical,
    )
    return _check_result(suite, cases, evaluation.predictions, evaluation.gaps, details, logits=evaluation.logits)


def check_suite(
    suite: Suite,
    *,
    ids: Iterable[str] | None = None,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = False,
) -> RunResult:
    """:func:`check_warm` where an earlier check of this exact model folder answers, else the model
    loaded and :func:`check`."""
    recalled = check_warm(suite, warm_entry(suite, cache_dir), ids=ids, cache_dir=cache_dir)
    return recalled or check(suite, load_adapter(suite), ids=ids, cache_dir=cache_dir, progress=progress)


def warm_entry(suite: Suite, cache_dir: str | Path | None) -> WarmEntry | None:
    """What an earlier check recorded for the suite's model folder as it is now (None: nothing)."""
    if cache_dir is None:
        return None
    return warm.lookup(suite.model_dir, suite.layer, suite.model.max_length, cache_dir, decision=suite.decision.name)


def check_warm(
    suite: Suite, entry: WarmEntry | None, *, ids: Iterable[str] | None = None, cache_dir: str | Path | None
) -> RunResult | None:
    """:func:`check` from the cache alone, the model never loaded; None (then call :func:`check`)
    if there is no entry or cache, or a case is not in the entry. Imports neither torch nor numpy."""
    if entry is None or cache_dir is None:
        return None
    cases = _checked_cases(suite, ids)
    if any(max(suite.decision.classes_of(c.label)) >= entry.num_classes for c in cases):
        return None  # check() says what is wrong with the label
    start = time.perf_counter()
    answers = entry.answers(cases, suite.decision)
    if answers is None:
        return None
    details = CheckDetails.of(
        suite,
        selected=len(cases),
        head=entry.head_name,
        encoded=0,
        from_cache=len(cases),
        encode_seconds=time.perf_counter() - start,
        model_loaded=False,
    )
    predictions = [p for p, _ in answers]
    gaps = [g for _, g in answers]
    # Each case's logits only where its kind reads parts from them (a million single-label cases need none).
    logits = [entry.logits[warm.case_sha256(c)] for c in cases] if suite.decision.part_word is not None else None
    return _check_result(suite, cases, predictions, gaps, details, logits=logits)


def _check_result(
    suite: Suite, cases: list[Case], predictions: Any, gaps: Any, details: CheckDetails, *, logits: Any
) -> RunResult:
    """The verdicts of ``cases`` from their predictions and gaps, and their parts from each case's row
    of ``logits`` (None: no parts to read)."""
    verdicts = []
    for i, case in enumerate(cases):
        gap = float(gaps[i])
        predicted = predictions[i]
        right = gap > 0
        label = labelled(suite, case.label)
        quoted = lambda c: repr(suite.label_name(c))  # noqa: E731
        said = f"predicted {suite.decision.said(predicted, quoted)}, labelled {label}"
        subject = suite.decision.subject(case.text)  # a kind deciding per word: which word
        if subject is not None:
            said = f"{subject} {said}"
        wrong_words = None if right else suite.decision.wrong_words(predicted, case.label, quoted)
        if wrong_words:
            said += f" ({wrong_words})"
        if right:
            message = f"predicts its label {label} (gap {num(gap)})"
        elif case.kind is Kind.MUST_FIX:
            message = (
                f"must_fix case not fixed yet: {said} (gap {num(gap)}, short of a correct prediction by "
                f"{num(-gap)}); repair the model (pytest --warp-repair, or warp-check repair) and test the "
                "repaired folder"
            )
        else:
            message = (
                f"must_keep case wrong: {said} (gap {num(gap)}); the model must already get must_keep cases "
                "right: check the label, or move the case to a must_fix file to have it repaired"
            )
        properties = {
            "label": suite.answer_name(case.label),
            "predicted": suite.decision.said(predicted, suite.label_name),
            "gap": gap,
        }
        if subject is not None:
            properties["subject"] = subject
        if case.kind is Kind.DEFERRED:
            verdicts.append(deferred_verdict(suite, case, right=right, said=said, gap=gap, properties=properties))
            continue
        if wrong_words:  # where a kind decides several things at once, which of them are wrong
            properties["wrong"] = suite.decision.wrong_words(predicted, case.label, suite.label_name)
            wrong_parts = suite.decision.wrong_parts(predicted, case.label)
            properties["wrong_labels"] = [suite.label_name(c) for c in wrong_parts]
        parts = part_verdicts(suite.decision, case.label, logits[i], suite.label_name) if logits is not None else ()
        verdicts.append(Verdict.of(case, passed=right, message=message, properties=properties, parts=parts))
    wrong = sum(not v.passed for v in verdicts)
    message = f"{len(cases)} case(s) checked on the model as it is, {wrong} predicted wrong"
    return RunResult(
        suite=str(suite.toml),
        name=suite.name,
        mode=Mode.CHECK,
        ok=True,
        status=RunStatus.CHECKED,
        message=message,
        verdicts=tuple(verdicts),
        details=details,
    )
