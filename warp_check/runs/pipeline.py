"""The jobs users run, end to end: evaluate cases, repair + certify + save, from a model.

The pytest plugin and the ``warp-check`` command both call these, so a suite behaves the
same inside and outside pytest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from warp_check.cache.fingerprint import file_sha256
from warp_check.cases import Case, Kind
from warp_check.certify.artefact import Destination, claim_destination, write_artefact
from warp_check.certify.cases import certify_cases
from warp_check.certify.certificate import (
    CERTIFICATE_NAME,
    CaseCertificate,
    CaseRecord,
    Certificate,
    Lipschitz,
    ModelRecord,
    ParentRecord,
    RepairRecord,
    Summary,
)
from warp_check.certify.falsify import AttackSettings
from warp_check.errors import SettingsError
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.encode import check_no_conflicts
from warp_check.model.hashing import parameter_hashes, upstream_sha256
from warp_check.model.specs import HeadSpec
from warp_check.repair.loop import repair_head
from warp_check.repair.records import RepairResult, RepairStatus
from warp_check.repair.settings import RepairSettings, SynonymUse
from warp_check.runs.evaluation import Evaluation, evaluate
from warp_check.runs.neighbourhood import Neighbourhood, draw_neighbourhood
from warp_check.runs.separation import hardest_pair
from warp_check.version import __version__


@dataclass(frozen=True, kw_only=True)
class RepairOutcome:
    evaluation: Evaluation  # of the head repaired (``spec``): v is that head's input
    result: RepairResult
    spec: HeadSpec  # the head repaired: the adapter's, or the final linear layer it fell back to
    certificates: tuple[CaseCertificate, ...] = ()  # empty unless the repair converged
    lipschitz: Lipschitz | None = None
    certificate: Certificate | None = None  # the claims; the file written beside the model adds its hashes
    artefact: Path | None = None  # where the repaired model went (None: nothing written)
    neighbourhood: Neighbourhood | None = None  # the perturbed cases drawn (None: none was drawn)


def repair_cases(
    adapter: ClassifierAdapter,
    cases: Sequence[Case],
    settings: RepairSettings | None = None,
    *,
    out_dir: str | Path | None = None,
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
    attack: AttackSettings | None = None,
    progress: bool = True,
    evaluation: Evaluation | None = None,
    destination: Destination | None = None,
    fallback: bool = True,
) -> RepairOutcome:
    """Encode, repair, certify from the repaired weights and, if asked, save atomically.

    Where the adapter's head has a fallback (``layer = "auto"`` chose a dense form) and the dense
    repair does not converge, the final linear layer is repaired instead, and the outcome's
    ``spec`` says so and why; ``fallback=False`` keeps to the adapter's head (comparisons of one
    layer). Nothing is written when ``out_dir`` is None, when no repair converges, or when
    nothing needed repair. ``destination`` is ``out_dir`` as the caller found it when its run
    started (:func:`~warp_check.certify.artefact.claim_destination`); by default, as found here.
    """
    settings = settings or RepairSettings()
    _check_rank(adapter, settings)
    if out_dir is not None and destination is None:  # refuse a bad destination before the work, not after
        destination = claim_destination(out_dir, adapter.source)
    evaluation = evaluation or evaluate(adapter, cases, batch_size=batch_size, cache_dir=cache_dir, progress=progress)
    check_no_conflicts(evaluation.cases, evaluation.encoded.input_keys, adapter.max_length)
    encode = {"batch_size": batch_size, "cache_dir": cache_dir, "progress": progress}
    save = {"out_dir": out_dir, "destination": destination, "attack": attack, "fallback": fallback}
    hood = None
    if settings.neighbours.enabled and _needs_repair(evaluation, settings):
        hood = draw_neighbourhood(adapter, evaluation, settings.neighbours, batch_size=batch_size, cache_dir=cache_dir)
        if hood.perturbed:  # the certificate records what was drawn: "auto" as whether WordNet was there
            drew = replace(settings.neighbours, synonyms=hood.synonyms is SynonymUse.USED)
            settings = replace(settings, neighbours=drew)
        # Not falling back to another head for the neighbourhood's sake: the head the suite's own
        # cases converge on comes first.
        outcome, hood = _with_neighbourhood(adapter, evaluation, hood, settings, encode, save | {"fallback": False})
        if outcome is not None:
            return outcome
    return replace(_repair_certify_save(adapter, evaluation, settings, encode, **save), neighbourhood=hood)


# Times the copies a failed repair still missed are dropped and the rest tried again, before the
# neighbourhood is left out whole.
DROP_ROUNDS = 2


def _with_neighbourhood(
    adapter: ClassifierAdapter,
    evaluation: Evaluation,
    hood: Neighbourhood,
    settings: RepairSettings,
    encode: dict[str, Any],
    save: dict[str, Any],
) -> tuple[RepairOutcome | None, Neighbourhood]:
    """The repair of the suite's cases with ``hood``'s; None where it does not converge however many of
    its copies are dropped, the neighbourhood then saying why it was left out.

    Copies are drawn blind: one may land beside a suite case of the other label (a typo that turns
    a kept sentence into a must_fix one's twin), and no weights meet both. The copies the best
    iterate still misses are the ones in the way: they go and the rest are tried again, so one such
    copy does not cost the whole neighbourhood. The neighbourhood is a help, never a reason to fail:
    where the misses are the suite's own cases only, every copy, or the rounds run out, the suite's
    cases are repaired alone."""
    if not hood.cases:
        return None, hood
    for round_ in range(DROP_ROUNDS + 1):
        joined = evaluation.joined(hood.evaluation)
        # No paper's loop after a stall: the next round's smaller problem is the better retry (on 26
        # families' tiny models it never converged where the defaults had not, and doubled the cost).
        outcome = _repair_certify_save(adapter, joined, settings, encode, **save, paper_loop=False)
        if outcome.result.repaired:
            return replace(outcome, neighbourhood=hood), hood
        copies = {c.id for c in hood.cases}
        missed = {m.id for m in outcome.result.misses} & copies
        if not missed or missed == copies or round_ == DROP_ROUNDS:
            break
        hood = hood.without(missed)
    result = outcome.result
    return None, replace(hood, left_out=f"{result.status.value}: {result.message}")


def _needs_repair(evaluation: Evaluation, settings: RepairSettings) -> bool:
    """Whether a suite case misses its margin (a must_keep case the model gets wrong is left out)."""
    kinds = np.array([c.kind for c in evaluation.cases])
    gaps = evaluation.gaps
    fix_short = (kinds == Kind.MUST_FIX) & (gaps < settings.gamma_s)
    keep_short = (kinds == Kind.MUST_KEEP) & (gaps > 0) & (gaps < settings.gamma_h)
    return bool(np.any(fix_short | keep_short))


def _repair_certify_save(
    adapter: ClassifierAdapter,
    evaluation: Evaluation,
    settings: RepairSettings,
    encode: dict[str, Any],
    *,
    out_dir: str | Path | None,
    destination: Destination | None,
    attack: AttackSettings | None,
    fallback: bool,
    paper_loop: bool = True,
) -> RepairOutcome:
    result = _repair(adapter, evaluation, settings, paper_loop)
    if fallback and result.status in NOT_CONVERGING and adapter.spec.classifier is not None:
        final = adapter.spec.fallback
        if final is None:  # a head the user named: no silent change, but say what may help
            hint = (
                f"a named head does not fall back by itself: layer = 'final' repairs the final linear layer "
                f"'{adapter.spec.classifier}' instead (its gap is linear in the update)"
            )
            result = replace(result, message=f"{result.message}; {hint}")
        else:
            adapter, evaluation, result = _fall_back(adapter, final, evaluation, result, settings, **encode)
    elif result.status in NOT_CONVERGING:  # the final linear layer itself stalled
        result = replace(result, message=result.message + _why_final_stalls(adapter, evaluation, result))
    if not result.repaired:
        return RepairOutcome(evaluation=evaluation, result=result, spec=adapter.spec)
    ordered = [c for c in evaluation.cases if c.kind is not Kind.AUX]
    records, lip = certify_result(ordered, evaluation, result, attack)
    upstream = evaluation.encoded.upstream_sha256 or upstream_sha256(adapter)
    certificate = build_certificate(adapter, result, records, lip, ordered, upstream)
    artefact = None
    if out_dir is not None:
        repaired = adapter.with_head(result.head_after)
        artefact = write_artefact(
            repaired.model,
            adapter.tokenizer,
            certificate,
            out_dir,
            source=adapter.source,
            repair_layer=adapter.spec.repair_layer,
            expect=destination,
        )
    return RepairOutcome(
        evaluation=evaluation,
        result=result,
        spec=adapter.spec,
        certificates=tuple(records),
        lipschitz=lip,
        certificate=certificate,
        artefact=artefact,
    )


# How a head chosen by falling back is introduced (reports and certificates: ``found_by``).
FELL_BACK = "layer = 'auto' fell back to the final linear layer"
# How a dense repair may end for the final linear layer to be tried: it may converge there.
# Nothing to repair, or NaN/Inf in the weights or v, would end the same way on it.
NOT_CONVERGING = frozenset({RepairStatus.NOT_CONVERGED, RepairStatus.INFEASIBLE, RepairStatus.SOLVER_FAILED})


def _repair(
    adapter: ClassifierAdapter, evaluation: Evaluation, settings: RepairSettings, paper_loop: bool = True
) -> RepairResult:
    fix, keep, aux = (evaluation.case_set(k) for k in (Kind.MUST_FIX, Kind.MUST_KEEP, Kind.AUX))
    return repair_head(adapter.head(), fix, keep, aux, settings, paper_loop=paper_loop)


def _fall_back(
    dense: ClassifierAdapter,
    final: HeadSpec,
    evaluation: Evaluation,
    result: RepairResult,
    settings: RepairSettings,
    **encode: Any,
) -> tuple[ClassifierAdapter, Evaluation, RepairResult]:
    """The dense form did not converge: repair ``final``, its classifier as the final linear layer (v is
    then the classifier's input, encoded again). Its adapter, evaluation and result where that converges;
    else the dense ones, the message saying that the final layer stalled too."""
    why = f"the dense form {dense.spec.quoted} did not converge ({_how_it_ended(result)})"
    spec = replace(final, found_by=f"{FELL_BACK}: {why}")
    adapter = dense.with_spec(spec)
    # ΔW of the final layer has num_classes rows: the rank cannot be more.
    rank = min(settings.rank, adapter.repair_layer.out_features, adapter.repair_layer.in_features)
    at_final = evaluate(adapter, evaluation.cases, **encode)
    again = _repair(adapter, at_final, replace(settings, rank=rank) if rank != settings.rank else settings)
    layer = f"the final linear layer '{final.repair_layer}'"
    if not again.repaired:
        tried = f"{layer} was repaired instead and did not converge either ({_how_it_ended(again)})"
        tried += _why_final_stalls(adapter, at_final, again)
        return dense, evaluation, replace(result, message=f"{result.message}; {tried}")
    message = f"{again.message}, on {layer} after the dense form {dense.spec.quoted} did not converge"
    return adapter, at_final, replace(again, message=message, seconds=result.seconds + again.seconds)


def _why_final_stalls(adapter: ClassifierAdapter, evaluation: Evaluation, result: RepairResult) -> str:
    """The pair of cases the final linear layer must grow most to separate, as a clause of the failure
    message, where it must grow at all ('' otherwise)."""
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


def _check_rank(adapter: ClassifierAdapter, settings: RepairSettings) -> None:
    """The rank this model's repair layer allows, checked before any encoding or solving."""
    layer = adapter.repair_layer
    smallest = min(layer.in_features, layer.out_features)
    if settings.rank > smallest:
        raise SettingsError(
            "rank",
            settings.rank,
            f"exceeds the repair layer '{adapter.spec.repair_layer}' ({layer.out_features}×{layer.in_features}): "
            f"the rank can be at most {smallest}",
        )


def certify_result(
    cases: Sequence[Case], evaluation: Evaluation, result: RepairResult, attack: AttackSettings | None
) -> tuple[list[CaseCertificate], Lipschitz]:
    """Cert 1–3 for ``cases`` (no aux) on ``result.head_after``, from the evaluation's cached v."""
    V = evaluation.encoded.rows([c.id for c in cases]).astype(np.float64)
    return certify_cases(
        result.head_after,
        ids=tuple(c.id for c in cases),
        kinds=tuple(c.kind for c in cases),
        V=V,
        labels=np.array([c.label for c in cases], dtype=np.int64),
        gaps_before=np.array([result.gaps_before[c.id] for c in cases]),
        gamma_s=result.settings.gamma_s,
        gamma_h=result.settings.gamma_h,
        excluded=frozenset(result.excluded_keep),
        attack=attack,
    )


def build_certificate(
    adapter: ClassifierAdapter,
    result: RepairResult,
    records: Sequence[CaseCertificate],
    lip: Lipschitz,
    cases: Sequence[Case],
    upstream_sha256: str,
) -> Certificate:
    """What the repair claims; the hashes of the saved files are added when they are written."""
    by_id = {c.id: c for c in cases}
    source_layer, source_frozen = parameter_hashes(adapter.model.state_dict(), adapter.spec.repair_layer)
    parent_certificate = Path(adapter.source) / CERTIFICATE_NAME if adapter.source else None
    return Certificate(
        created=Certificate.now(),
        warp_check_version=__version__,
        model=ModelRecord(
            source=adapter.source,
            model_type=getattr(adapter.model.config, "model_type", None),
            repair_layer=adapter.spec.repair_layer,
            activation=adapter.spec.activation,
            classifier=adapter.spec.classifier,
            form=adapter.spec.form,
            found_by=adapter.spec.found_by or None,
            max_length=adapter.max_length,
            device=adapter.device,
            sha256_upstream=upstream_sha256,
            sha256_source_frozen=source_frozen,
        ),
        settings=result.settings,
        repair=RepairRecord.of(result),
        lipschitz=lip,
        radius_space=f"L2 ball around v, the input of '{adapter.spec.repair_layer}' (a representation, not text)",
        cases=tuple(CaseRecord.of(r, by_id[r.id]) for r in records),
        summary=Summary.of(records),
        parent=ParentRecord(
            sha256_repair_layer=source_layer,
            sha256_frozen=source_frozen,
            certificate_sha256=file_sha256(parent_certificate)
            if parent_certificate is not None and parent_certificate.is_file()
            else None,
        ),
    )
