"""The jobs users run, end to end: evaluate cases, repair + certify + save, from a model.

The pytest plugin and the ``warp-check`` command both call these, so a suite behaves the
same inside and outside pytest.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from warp_check.cases import Case, Kind
from warp_check.certify.artefact import FORMAT, Destination, claim_destination, write_artefact
from warp_check.certify.bounds import Lipschitz
from warp_check.certify.cases import CaseCertificate, certify_cases, summarise
from warp_check.certify.falsify import AttackSettings
from warp_check.errors import ModelError, SettingsError
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.encode import Encoded, check_no_conflicts, encode_cases
from warp_check.model.head import answers_from_logits
from warp_check.repair.loop import repair_head
from warp_check.repair.records import CaseSet, RepairResult
from warp_check.repair.settings import RepairSettings
from warp_check.version import __version__


@dataclass(frozen=True)
class Evaluation:
    """The model's answer on each case: prediction, gap to its label, cached v."""

    cases: tuple[Case, ...]
    encoded: Encoded
    predictions: np.ndarray
    gaps: np.ndarray
    logits: np.ndarray  # float64, (cases, classes): what a warm entry remembers (warp_check.warm)

    def passed(self, case_id: str) -> bool:
        return bool(self.gaps[self._index[case_id]] > 0)

    @property
    def _index(self) -> dict[str, int]:
        return {c.id: i for i, c in enumerate(self.cases)}

    def case_set(self, kind: Kind) -> CaseSet:
        rows = [i for i, c in enumerate(self.cases) if c.kind is kind]
        return CaseSet(
            tuple(self.cases[i].id for i in rows),
            self.encoded.V[rows].astype(np.float64),
            np.array([self.cases[i].label for i in rows], dtype=np.int64),
        )


def evaluate(
    adapter: ClassifierAdapter,
    cases: Sequence[Case],
    *,
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> Evaluation:
    num_classes = adapter.num_classes
    for case in cases:
        if case.label >= num_classes:
            raise ValueError(f"case {case.id!r}: label {case.label} out of range for {num_classes} classes")
    encoded = encode_cases(adapter, cases, batch_size=batch_size, cache_dir=cache_dir, progress=progress)
    bad = [case.id for case, row in zip(cases, encoded.V, strict=True) if not np.isfinite(row).all()]
    if bad:
        shown = ", ".join(repr(i) for i in bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise ModelError(
            f"the encoder gives NaN/Inf representations at '{adapter.spec.repair_layer}' for {len(bad)} case(s) "
            f"({shown}): the model overflows on these inputs; nothing can be checked or repaired on them"
        )
    labels = np.array([c.label for c in cases], dtype=np.int64)
    logits = adapter.head().logits(encoded.V.astype(np.float64))
    predictions, gaps = answers_from_logits(logits, labels)
    return Evaluation(tuple(cases), encoded, predictions, gaps, logits)


@dataclass(frozen=True)
class RepairOutcome:
    evaluation: Evaluation
    result: RepairResult
    certificates: tuple[CaseCertificate, ...]  # empty unless the repair converged
    lipschitz: Lipschitz | None
    certificate: dict[str, Any] | None  # the JSON written beside the model
    artefact: Path | None  # where the repaired model went (None: nothing written)


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
) -> RepairOutcome:
    """Encode, repair, certify from the repaired weights and, if asked, save atomically.

    Nothing is written when ``out_dir`` is None, when the repair does not converge, or
    when nothing needed repair. ``destination`` is ``out_dir`` as the caller found it when its
    run started (:func:`~warp_check.artefact.claim_destination`); by default, as found here.
    """
    settings = settings or RepairSettings()
    check_settings(adapter, settings)
    if out_dir is not None and destination is None:  # refuse a bad destination before the work, not after
        destination = claim_destination(out_dir, adapter.source)
    evaluation = evaluation or evaluate(adapter, cases, batch_size=batch_size, cache_dir=cache_dir, progress=progress)
    check_no_conflicts(evaluation.cases, evaluation.encoded.input_keys, adapter.max_length)
    fix, keep, aux = (evaluation.case_set(k) for k in (Kind.MUST_FIX, Kind.MUST_KEEP, Kind.AUX))
    result = repair_head(adapter.head(), fix, keep, aux, settings)
    if not result.repaired:
        return RepairOutcome(evaluation, result, (), None, None, None)
    ordered = [c for c in evaluation.cases if c.kind is not Kind.AUX]
    records, lip = certify_result(ordered, evaluation, result, attack)
    certificate = build_certificate(adapter, result, records, lip, ordered, evaluation.encoded.upstream_sha256)
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
    return RepairOutcome(evaluation, result, tuple(records), lip, certificate, artefact)


def check_settings(adapter: ClassifierAdapter, settings: RepairSettings) -> None:
    """What the settings ask of this model's head, checked before any encoding or solving."""
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
        kinds=tuple(c.kind.value for c in cases),
        V=V,
        labels=np.array([c.label for c in cases], dtype=np.int64),
        gaps_before=np.array([result.gaps_before[c.id] for c in cases]),
        gamma_s=result.settings.gamma_s,
        gamma_h=result.settings.gamma_h,
        excluded=frozenset(result.excluded_keep),
        attack=attack,
    )


def _finite(value: float | None) -> float | None:
    if value is None or not np.isfinite(value):
        return None
    return float(value)


def build_certificate(
    adapter: ClassifierAdapter,
    result: RepairResult,
    records: Sequence[CaseCertificate],
    lip: Lipschitz,
    cases: Sequence[Case],
    upstream_sha256: str,
) -> dict[str, Any]:
    by_id = {c.id: c for c in cases}
    from warp_check.model.hashing import parameter_hashes

    _, source_frozen = parameter_hashes(adapter.model.state_dict(), adapter.spec.repair_layer)
    return {
        "format": FORMAT,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "warp_check_version": __version__,
        "model": {
            "source": adapter.source,
            "model_type": getattr(adapter.model.config, "model_type", None),
            "repair_layer": adapter.spec.repair_layer,
            "activation": adapter.spec.activation,
            "classifier": adapter.spec.classifier,
            "max_length": adapter.max_length,
            "sha256_upstream": upstream_sha256,
            "sha256_source_frozen": source_frozen,
            # filled in by write_artefact from the files it wrote:
            "sha256_repair_layer": None,
            "sha256_frozen": None,
        },
        "settings": result.settings.to_dict(),
        "repair": {
            "status": result.status.value,
            "converged": result.repaired,
            "iterations": len(result.iterations),
            "qp_status": [r.qp_status for r in result.iterations],
            "qp_form": [r.qp_form for r in result.iterations],
            "qp_backend": [r.qp_backend for r in result.iterations],
            "history": [
                {
                    "iteration": r.iteration,
                    "min_gap_fix": _finite(r.min_gap_fix),
                    "min_gap_keep": _finite(r.min_gap_keep),
                    "fix_met": r.fix_met,
                    "keep_met": r.keep_met,
                    "step_norm": r.step_norm,
                    "step_fraction": r.step_fraction,
                    "promised_fix_shortfall": r.promised_fix_shortfall,
                    "full_step_fix_shortfall": r.full_step_fix_shortfall,
                    "promised_keep_missed": r.promised_keep_missed,
                    "full_step_keep_missed": r.full_step_keep_missed,
                    "seconds": r.seconds,
                }
                for r in result.iterations
            ],
            "gsn_kappa_before": _finite(result.mean_kappa_before),
            "gsn_kappa_after": _finite(result.mean_kappa_after),
            "gsn_ft": {
                "applied": result.gsn_ft.applied,
                "reason": result.gsn_ft.reason,
                "chosen_step": result.gsn_ft.chosen_step,
                "changed": ["repair_layer.bias", "classifier"] if result.gsn_ft.applied else [],
            },
            "excluded_must_keep": list(result.excluded_keep),
            "seconds": result.seconds,
        },
        "lipschitz": {"L": lip.L, "norm_W": lip.norm_W, "norm_Wc": lip.norm_Wc, "L_sigma": lip.L_sigma},
        "radius_space": f"L2 ball around v, the input of '{adapter.spec.repair_layer}' (a representation, not text)",
        "cases": [
            {
                "id": r.id,
                "kind": r.kind,
                "label": r.label,
                "text": by_id[r.id].text,
                "text_pair": by_id[r.id].text_pair,
                "gap_before": r.gap_before,
                "gap_after": r.gap_after,
                "cert1": r.cert1,
                "cert2": r.cert2,
                "cert3": r.cert3,
                "eps_star": _finite(r.eps_star),
                "eps_local": _finite(r.eps_local),
                "attack_min_gap": _finite(r.attack_min_gap),
                "flip_radius": _finite(r.flip_radius),
                "excluded": r.excluded,
            }
            for r in records
        ],
        "summary": summarise(list(records)),
    }
