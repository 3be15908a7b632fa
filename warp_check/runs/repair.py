"""Repair mode: repair on every case of the suite, save the certified model, and give each case
its certificate's verdict, recomputed from the repaired weights.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warp_check import advice
from warp_check.cases import Kind
from warp_check.certify.artefact import claim_destination
from warp_check.certify.cases import CaseCertificate, summarise
from warp_check.certify.falsify import AttackSettings
from warp_check.repair.settings import RepairSettings
from warp_check.runs.messages import labelled, num
from warp_check.runs.pipeline import Evaluation, certify_result, check_settings, evaluate, repair_cases
from warp_check.runs.result import Mode, RunResult, Verdict, suite_details
from warp_check.suite.loader import Suite

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter
    from warp_check.repair.records import RepairResult


def repair(
    suite: Suite,
    adapter: ClassifierAdapter,
    settings: RepairSettings,
    *,
    out_dir: str | Path,
    cache_dir: str | Path | None = None,
    progress: bool = False,
    attack: AttackSettings | None = None,
    flags: Mapping[str, str] | None = None,
) -> RunResult:
    """Repair on every case of the suite, save the artefact into ``out_dir`` when it converged,
    and give each case its certificate verdict, computed from the repaired weights.

    ``flags`` names, per setting, how the user changes it (for advice in failure messages).
    Raises ArtefactError when ``out_dir`` may not be written (before any work is done).
    """
    check_settings(adapter, settings)
    destination = claim_destination(out_dir, adapter.source)  # fail fast, before a long repair
    flags = dict(flags or {})
    start = time.perf_counter()
    evaluation = evaluate(
        adapter, suite.cases, batch_size=suite.model.batch_size, cache_dir=cache_dir, progress=progress
    )
    encode_seconds = time.perf_counter() - start
    outcome = repair_cases(
        adapter,
        suite.cases,
        settings,
        out_dir=out_dir,
        evaluation=evaluation,
        attack=attack,
        progress=progress,
        destination=destination,
    )
    result = outcome.result
    records = list(outcome.certificates)
    lip = outcome.lipschitz
    if result.status.value == "nothing_to_repair":
        records, lip = _certify_unchanged(suite, evaluation, result, attack)
    by_id = {r.id: r for r in records}
    misses = {m.id: m for m in result.misses}
    verdicts = []
    for case in suite.cases:
        if case.kind is Kind.AUX:
            continue
        verdicts.append(_repair_verdict(suite, case, result, by_id.get(case.id), misses, flags))
    details = suite_details(suite) | {
        "head": adapter.spec.chain,
        "encoded": evaluation.encoded.encoded,
        "from_cache": evaluation.encoded.from_cache,
        "encode_seconds": encode_seconds,
        "status": result.status.value,
        "repair_message": result.message,
        "iterations": len(result.iterations),
        "repair_seconds": result.seconds,
        "kappa_before": result.mean_kappa_before,
        "kappa_after": result.mean_kappa_after,
        "gsn_ft": {"applied": result.gsn_ft.applied, "reason": result.gsn_ft.reason},
        "certs": _cert_counts(records),
        "excluded": list(result.excluded_keep),
        "artefact": str(outcome.artefact) if outcome.artefact is not None else None,
        "history": [
            {
                "iteration": r.iteration,
                "min_gap_fix": r.min_gap_fix,
                "min_gap_keep": r.min_gap_keep,
                "fix_met": r.fix_met,
                "keep_met": r.keep_met,
                "step_norm": r.step_norm,
                "seconds": r.seconds,
            }
            for r in result.iterations
        ],
        "settings": result.settings.to_dict(),
        "gamma_s": settings.gamma_s,
        "gamma_h": settings.gamma_h,
        "lipschitz": lip.L if lip is not None else None,
    }
    ok = result.repaired or result.status.value == "nothing_to_repair"
    message = result.message
    if result.status.value == "nothing_to_repair":
        message = "nothing to repair: every case already meets its margin; nothing was written"
    elif not ok:
        message = f"repair failed ({result.status.value}): {result.message}; nothing was written"
    return RunResult(
        suite=str(suite.toml),
        name=suite.name,
        mode=Mode.REPAIR,
        ok=ok,
        status=result.status.value,
        message=message,
        verdicts=tuple(verdicts),
        details=details,
    )


def _certify_unchanged(suite: Suite, evaluation: Evaluation, result: RepairResult, attack: AttackSettings | None):
    """Cert 1–3 on the unchanged model, when nothing needed repair (so the items still assert)."""
    return certify_result([c for c in suite.cases if c.kind is not Kind.AUX], evaluation, result, attack)


def _cert_counts(records: list[CaseCertificate]) -> dict[str, str]:
    return summarise(records) if records else {}


def _repair_verdict(suite, case, result, record, misses, flags) -> Verdict:
    settings = result.settings
    gap_before = result.gaps_before.get(case.id)
    gap_after = result.gaps_after.get(case.id)
    properties: dict[str, Any] = {
        "label": suite.label_name(case.label),
        "gap_before": gap_before,
        "gap_after": gap_after,
        "gap": gap_after,
    }
    if record is not None:
        properties |= {
            "gap_after": record.gap_after,
            "gap": record.gap_after,
            "eps_star": record.eps_star,
            "eps_local": record.eps_local,
            "radius": record.certified_radius,
            "attack_min_gap": record.attack_min_gap,
            "flip_radius": record.flip_radius,
        }

    def verdict(passed: bool, message: str) -> Verdict:
        return Verdict(case_id=case.id, kind=case.kind.value, passed=passed, message=message, properties=properties)

    if case.id in result.excluded_keep:
        after = f"; after repair its gap is {num(gap_after)}" if result.repaired else ""
        return verdict(
            False,
            f"the original model already got this must_keep case wrong (gap {num(gap_before)} before repair, "
            f"labelled {labelled(suite, case.label)}), so it was left out of the repair's constraints{after}. "
            "Check its label, or move it to a must_fix file to have it repaired",
        )
    status = result.status.value
    if not (result.repaired or status == "nothing_to_repair"):
        miss = misses.get(case.id)
        margin = "γ_s" if case.kind is Kind.MUST_FIX else "γ_h"
        if miss is not None:
            return verdict(
                False,
                f"repair failed ({status}), nothing was written: this {case.kind.value} case's gap "
                f"{num(miss.gap)} misses its margin {margin} = {num(miss.target)} by {num(miss.short_by)}; "
                + advice.for_failed_case(settings, case.kind.value, status, flags),
            )
        return verdict(
            False,
            f"repair failed ({status}), nothing was written: {result.message}. This case met its margin "
            f"{margin} at the last iterate (gap {num(gap_after)}), but there is no repaired model to check",
        )
    unchanged = " (nothing needed repair: checked on the original weights)" if status == "nothing_to_repair" else ""
    if record is None:
        return verdict(False, f"no certificate was computed for this case{unchanged}")
    if case.kind is Kind.MUST_FIX:
        problems = []
        if not record.cert1:
            problems.append(
                f"Cert 1 fails: gap {num(record.gap_after)} < γ_s = {num(settings.gamma_s)} "
                f"(short by {num(settings.gamma_s - record.gap_after)})"
            )
        if not record.cert3:
            if not (record.eps_star or 0) > 0:
                problems.append(f"Cert 3 fails: the certified radius ε* = {num(record.eps_star)} is not positive")
            else:
                problems.append(
                    f"Cert 3 fails: the v-space attack found gap {num(record.attack_min_gap)} ≤ 0 inside the "
                    f"certified ball of radius {num(record.certified_radius)}"
                )
        if problems:
            return verdict(False, "; ".join(problems) + unchanged)
        return verdict(
            True,
            f"Cert 1: gap {num(record.gap_after)} ≥ γ_s = {num(settings.gamma_s)}; Cert 3: no flip within radius "
            f"{num(record.certified_radius)} (ε* {num(record.eps_star)}, local {num(record.eps_local)}; "
            f"attack's smallest gap {num(record.attack_min_gap)}){unchanged}",
        )
    if not record.cert2:
        if record.gap_after <= 0:
            what = f"the label changed: gap {num(record.gap_after)} ≤ 0 after repair (was {num(gap_before)})"
        else:
            what = (
                f"gap {num(record.gap_after)} < γ_h = {num(settings.gamma_h)} "
                f"(short by {num(settings.gamma_h - record.gap_after)})"
            )
        return verdict(False, f"Cert 2 fails: {what}{unchanged}")
    return verdict(
        True,
        f"Cert 2: label {labelled(suite, case.label)} kept with gap {num(record.gap_after)} ≥ γ_h = "
        f"{num(settings.gamma_h)} (was {num(gap_before)}){unchanged}",
    )
