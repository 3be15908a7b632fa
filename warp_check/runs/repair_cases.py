"""Repairing a model on a list of cases, end to end: encode them, climb the repair ladder
(:mod:`warp_check.pipeline.ladder`), certify what settled from the repaired weights, save it.

The repair mode of a suite (:mod:`warp_check.runs.repair`), ``warp-check compare`` and the library
call :func:`repair_cases`, so cases are repaired alike inside and outside pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from warp_check.budget.price import budget_advice
from warp_check.cache.fingerprint import file_sha256
from warp_check.cases import Case, Kind
from warp_check.certificates import judged
from warp_check.certificates.cases import certify_cases
from warp_check.certificates.traffic.changes import measure_changes, traffic_inputs
from warp_check.certificates.traffic.sample import TrafficSample
from warp_check.certificates.traffic.verdicts import BudgetFit
from warp_check.certify.artefact import Destination, claim_destination, folder_hashes, write_artefact
from warp_check.certify.certificate import (
    CERTIFICATE_NAME,
    BaselineRecord,
    CaseCertificate,
    CaseRecord,
    Certificate,
    Lipschitz,
    ModelRecord,
    ParentRecord,
    RepairRecord,
    Summary,
    TrafficRecord,
)
from warp_check.certify.falsify import AttackSettings
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.encode import check_no_conflicts
from warp_check.model.hashing import parameter_hashes, upstream_sha256
from warp_check.model.specs import HeadSpec
from warp_check.pipeline.evaluation import Evaluation, evaluate
from warp_check.pipeline.ladder import Climb, Ladder, climb
from warp_check.pipeline.neighbourhood import Neighbourhood, draw_neighbourhood
from warp_check.progress import Progress
from warp_check.releases.restore import Reference
from warp_check.repair.records import RepairResult
from warp_check.repair.settings import RepairSettings, SynonymUse, check_rank
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
    traffic: TrafficRecord | None = None  # Cert 4, where traffic was given and the repair converged
    budget_fit: BudgetFit | None = None  # over the budget: the must_fix cases it cannot buy, and the price list

    @property
    def over_budget(self) -> bool:
        """Whether Cert 4's bound exceeds the traffic's budget (then nothing was written)."""
        return self.traffic is not None and not self.traffic.within_budget


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
    traffic: TrafficSample | None = None,
    label_name: Callable[[int], str] | None = None,
    reference: Reference | None = None,
) -> RepairOutcome:
    """Encode, climb the repair ladder (:mod:`~warp_check.pipeline.ladder`), certify what settled from the
    repaired weights and, if asked, save atomically.

    Where the adapter's head has a fallback (``layer = "auto"`` chose a dense form) and the dense
    repair does not converge, the final linear layer is repaired instead, and the outcome's
    ``spec`` says so and why; ``fallback=False`` keeps to the adapter's head (comparisons of one
    layer). Nothing is written when ``out_dir`` is None, when no repair converges, or when
    nothing needed repair. ``destination`` is ``out_dir`` as the caller found it when its run
    started (:func:`~warp_check.certify.artefact.claim_destination`); by default, as found here.

    With ``traffic``, Cert 4 (the predictions the repair changes on the sample's bound part, and the
    bound on their share) is measured before anything is written and recorded in the certificate;
    where the bound exceeds the sample's ``max_change`` nothing is written (``outcome.over_budget``).
    ``label_name`` names classes in its counts by label pair (default: the model's id2label).

    ``reference``: the suite's baseline (:mod:`~warp_check.releases.restore`); its ``restored`` must_keep
    cases are repaired as must_fix cases and certified so, and the certificate names it.
    """
    settings = settings or RepairSettings()
    layer = adapter.repair_layer  # the rank this model allows, before any encoding or solving
    check_rank(settings.rank, (layer.out_features, layer.in_features), adapter.spec.repair_layer)
    if out_dir is not None and destination is None:  # refuse a bad destination before the work, not after
        destination = claim_destination(out_dir, adapter.source)
    evaluation = evaluation or evaluate(adapter, cases, batch_size=batch_size, cache_dir=cache_dir, progress=progress)
    check_no_conflicts(adapter, evaluation.cases, evaluation.encoded.input_keys)
    restored = frozenset(reference.restored) if reference is not None else frozenset()
    evaluation = _restoring(evaluation, restored)
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
    names = label_name or adapter.label_name
    measure = _traffic_measure(traffic, names, batch_size, cache_dir, progress)
    outcome = _certify_save(
        ended.attempt.adapter,
        ended.attempt.evaluation,
        ended.result,
        out_dir,
        destination,
        attack,
        reference,
        measure,
    )
    fit = None
    if outcome.over_budget:
        assert traffic is not None and traffic.max_change is not None
        fit = budget_advice(
            _settled_ladder(ladder, ended), traffic, traffic.max_change, progress=progress,
            repaired=ended.result.head_after,
        )  # fmt: skip
    return replace(outcome, neighbourhood=ended.hood, budget_fit=fit)


def _settled_ladder(ladder: Ladder, ended: Climb) -> Ladder:
    """``ladder`` on the head the climb settled on: the suite's cases encoded for it, and the copies
    the settled repair kept (none where it settled without them or on the final linear layer)."""
    attempt = ended.attempt
    if attempt.adapter is not ladder.adapter:  # the final linear layer: the suite's cases as encoded for it
        return replace(ladder, adapter=attempt.adapter, evaluation=attempt.evaluation, hood=None,
                       settings=attempt.result.settings)  # fmt: skip
    hood = ended.hood if ended.hood is not None and ended.hood.left_out is None and ended.hood.cases else None
    return replace(ladder, hood=hood)


def _traffic_measure(
    traffic: TrafficSample | None,
    label_name: Callable[[int], str],
    batch_size: int,
    cache_dir: str | Path | None,
    progress: bool,
) -> Callable[[ClassifierAdapter, RepairResult], TrafficRecord] | None:
    """Cert 4 of a repaired head of an adapter, from the sample's v (None: no traffic given)."""
    if traffic is None:
        return None

    def measure(adapter: ClassifierAdapter, result: RepairResult) -> TrafficRecord:
        inputs = traffic_inputs(adapter, traffic, batch_size=batch_size, cache_dir=cache_dir, progress=progress)
        return measure_changes(adapter.head(), result.head_after, inputs, traffic, label_name=label_name)

    return measure


def _restoring(evaluation: Evaluation, restored: frozenset[str]) -> Evaluation:
    """The evaluation the ladder repairs: the ``restored`` must_keep cases as must_fix cases (their kind
    comes back for certification, :func:`_suite_kinds`)."""
    if not restored:
        return evaluation
    cases = tuple(replace(c, kind=Kind.MUST_FIX) if c.id in restored else c for c in evaluation.cases)
    return replace(evaluation, cases=cases)


def _suite_kinds(cases: Sequence[Case], restored: frozenset[str]) -> list[Case]:
    """``cases`` (no aux) with the kinds the suite gives them: a restored case is must_keep again."""
    return [replace(c, kind=Kind.MUST_KEEP) if c.id in restored else c for c in cases if c.kind is not Kind.AUX]


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
    reference: Reference | None,
    measure: Callable[[ClassifierAdapter, RepairResult], TrafficRecord] | None = None,
) -> RepairOutcome:
    """The outcome of ``adapter``'s head repaired to ``result``: certified (Cert 4 too, where
    ``measure`` is given) and saved where it converged and kept within the traffic's budget."""
    if not result.repaired:
        return RepairOutcome(evaluation=evaluation, result=result, spec=adapter.spec)
    restored = frozenset(reference.restored) if reference is not None else frozenset()
    ordered = _suite_kinds(evaluation.cases, restored)
    records, lip = certify_result(ordered, evaluation, result, attack, restored=restored)
    upstream = evaluation.encoded.upstream_sha256 or upstream_sha256(adapter)
    certificate = build_certificate(adapter, result, records, lip, ordered, upstream, reference=reference)
    traffic = measure(adapter, result) if measure is not None else None
    certificate = replace(certificate, traffic=traffic)
    artefact = None
    # Measured before writing: a repair over its budget leaves no artefact that could pass for a good one.
    if out_dir is not None and (traffic is None or traffic.within_budget):
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
        traffic=traffic,
    )


def certify_result(
    cases: Sequence[Case],
    evaluation: Evaluation,
    result: RepairResult,
    attack: AttackSettings | None,
    *,
    restored: frozenset[str] = frozenset(),
) -> tuple[list[CaseCertificate], Lipschitz]:
    """Cert 1–3 for ``cases`` (no aux, their suite's kinds) on ``result.head_after``, from the
    evaluation's cached v, and every further certificate's verdict; ``restored`` must_keep cases
    certified as must_fix cases are."""
    V = evaluation.encoded.rows([c.id for c in cases])  # float32: read in float64 a block at a time
    records, lip = certify_cases(
        result.head_after,
        ids=tuple(c.id for c in cases),
        kinds=tuple(c.kind for c in cases),
        V=V,
        labels=evaluation.answers(cases),
        gaps_before=np.array([result.gaps_before[c.id] for c in cases]),
        gamma_s=result.settings.gamma_s,
        gamma_h=result.settings.gamma_h,
        keep_margin=result.settings.keep_margin,
        excluded=frozenset(result.excluded_keep),
        restored=restored,
        attack=attack,
    )
    return judged(records, result.settings), lip  # and the further certificates' verdicts


def build_certificate(
    adapter: ClassifierAdapter,
    result: RepairResult,
    records: Sequence[CaseCertificate],
    lip: Lipschitz,
    cases: Sequence[Case],
    upstream_sha256: str,
    *,
    reference: Reference | None = None,
) -> Certificate:
    """What the repair claims; the hashes of the saved files are added when they are written.
    ``reference``: the suite's baseline the repair restored regressions against (named in it)."""
    by_id = {c.id: c for c in cases}
    source_layer, source_frozen = parameter_hashes(adapter.model.state_dict(), adapter.spec.repair_layer)
    parent_certificate = Path(adapter.source) / CERTIFICATE_NAME if adapter.source else None
    return Certificate(
        created=Certificate.now(),
        warp_check_version=__version__,
        model=ModelRecord(
            source=adapter.source,
            hub_id=adapter.hub.id if adapter.hub else None,
            hub_revision=adapter.hub.revision if adapter.hub else None,
            hub_commit=adapter.hub.commit if adapter.hub else None,
            model_type=getattr(adapter.model.config, "model_type", None),
            repair_layer=adapter.spec.repair_layer,
            activation=adapter.spec.activation,
            classifier=adapter.spec.classifier,
            form=adapter.spec.form,
            found_by=adapter.spec.found_by or None,
            max_length=adapter.max_length,
            device=adapter.device,
            decision=adapter.decision.name,
            thresholds={str(k): v for k, v in sorted(adapter.decision.thresholds.items())} or None,
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
        baseline=_baseline_record(reference, adapter.spec.repair_layer),
    )


def _baseline_record(reference: Reference | None, repair_layer: str) -> BaselineRecord | None:
    """The suite's baseline as the certificate names it: its folder, its weights' hashes, its certificate's."""
    if reference is None:
        return None
    layer, frozen = folder_hashes(reference.model_dir, repair_layer)
    certificate = reference.model_dir / CERTIFICATE_NAME
    return BaselineRecord(
        source=str(reference.model_dir),
        chosen_by=reference.chosen_by,
        sha256_repair_layer=layer,
        sha256_frozen=frozen,
        certificate_sha256=file_sha256(certificate) if certificate.is_file() else None,
        restored=tuple(reference.restored),
    )
