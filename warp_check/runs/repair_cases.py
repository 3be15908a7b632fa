"""Repairing a model on a list of cases, end to end: encode them, climb the repair ladder
(:mod:`warp_check.runs.ladder`), certify what settled from the repaired weights, save it.

The repair mode of a suite (:mod:`warp_check.runs.repair`), ``warp-check compare`` and the library
call :func:`repair_cases`, so cases are repaired alike inside and outside pytest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

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
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.encode import check_no_conflicts
from warp_check.model.hashing import parameter_hashes, upstream_sha256
from warp_check.model.specs import HeadSpec
from warp_check.progress import Progress
from warp_check.repair.records import RepairResult
from warp_check.repair.settings import RepairSettings, SynonymUse, check_rank
from warp_check.runs.evaluation import Evaluation, evaluate
from warp_check.runs.ladder import Ladder, climb
from warp_check.runs.neighbourhood import Neighbourhood, draw_neighbourhood
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
    progress: bool | Progress = True,
    evaluation: Evaluation | None = None,
    destination: Destination | None = None,
    fallback: bool = True,
) -> RepairOutcome:
    """Encode, climb the repair ladder (:mod:`~warp_check.runs.ladder`), certify what settled from the
    repaired weights and, if asked, save atomically.

    Where the adapter's head has a fallback (``layer = "auto"`` chose a dense form) and the dense
    repair does not converge, the final linear layer is repaired instead, and the outcome's
    ``spec`` says so and why; ``fallback=False`` keeps to the adapter's head (comparisons of one
    layer). Nothing is written when ``out_dir`` is None, when no repair converges, or when
    nothing needed repair. ``destination`` is ``out_dir`` as the caller found it when its run
    started (:func:`~warp_check.certify.artefact.claim_destination`); by default, as found here.
    """
    settings = settings or RepairSettings()
    layer = adapter.repair_layer  # the rank this model allows, before any encoding or solving
    check_rank(settings.rank, (layer.out_features, layer.in_features), adapter.spec.repair_layer)
    if out_dir is not None and destination is None:  # refuse a bad destination before the work, not after
        destination = claim_destination(out_dir, adapter.source)
    evaluation = evaluation or evaluate(adapter, cases, batch_size=batch_size, cache_dir=cache_dir, progress=progress)
    check_no_conflicts(evaluation.cases, evaluation.encoded.input_keys, adapter.max_length)
    hood = None
    if settings.neighbours.enabled and _needs_repair(evaluation, settings):
        hood = draw_neighbourhood(
            adapter, evaluation, settings.neighbours, batch_size=batch_size, cache_dir=cache_dir, progress=progress
        )
        if hood.perturbed:  # the certificate records what was drawn: "auto" as whether WordNet was there
            drew = replace(settings.neighbours, synonyms=hood.synonyms is SynonymUse.USED)
            settings = replace(settings, neighbours=drew)
    ladder = Ladder(
        adapter=adapter,
        evaluation=evaluation,
        settings=settings,
        hood=hood,
        fallback=fallback,
        batch_size=batch_size,
        cache_dir=cache_dir,
        progress=progress,
    )
    ended = climb(ladder)
    outcome = _certify_save(ended.attempt.adapter, ended.attempt.evaluation, ended.result, out_dir, destination, attack)
    return replace(outcome, neighbourhood=ended.hood)


def _needs_repair(evaluation: Evaluation, settings: RepairSettings) -> bool:
    """Whether a suite case misses its margin (a must_keep case the model gets wrong is left out)."""
    kinds = np.array([c.kind for c in evaluation.cases])
    gaps = evaluation.gaps
    fix_short = (kinds == Kind.MUST_FIX) & (gaps < settings.gamma_s)
    keep_short = (kinds == Kind.MUST_KEEP) & (gaps > 0) & (gaps < settings.gamma_h)
    return bool(np.any(fix_short | keep_short))


def _certify_save(
    adapter: ClassifierAdapter,
    evaluation: Evaluation,
    result: RepairResult,
    out_dir: str | Path | None,
    destination: Destination | None,
    attack: AttackSettings | None,
) -> RepairOutcome:
    """The outcome of ``adapter``'s head repaired to ``result``: certified and saved where it converged."""
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
