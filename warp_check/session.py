"""One run of a suite — check, repair or audit — and the verdict on each of its cases.

The pytest plugin and the ``warp-check`` command both get their results from here, so a case
passes or fails for the same reason and with the same words inside and outside pytest. A
:class:`RunResult` is plain data (JSON round trip), so pytest-xdist workers can share one
repair instead of each running their own.

Modes:

* ``check``: the model as it is. must_keep passes when the model predicts its label; so does
  must_fix (an unrepaired model fails its must_fix cases: that is the gate).
* ``repair``: repair, save, then must_fix asserts Cert 1 + Cert 3 (incl. no attack flip in the
  certified ball) and must_keep Cert 2 + unchanged label, on the repaired weights.
* ``audit``: the claims of a certificate, recomputed on a model folder.
"""

from __future__ import annotations

import enum
import functools
import json
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cases import Case, Kind
from .errors import ModelError
from .files import write_text_atomically

if TYPE_CHECKING:  # pragma: no cover
    from .certify import AttackSettings, CaseCertificate
    from .model import ClassifierAdapter
    from .pipeline import Evaluation
    from .repair import RepairResult, RepairSettings
    from .suite import Suite
    from .warm import WarmEntry

WORKDIR = ".warp"  # beside warp.toml: cache/, repaired/, runs/


class Mode(str, enum.Enum):
    CHECK = "check"
    REPAIR = "repair"
    AUDIT = "audit"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """Pass or fail for one case, the sentence that says why, and numbers for reports."""

    case_id: str
    kind: str
    passed: bool
    message: str
    properties: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.case_id,
            "kind": self.kind,
            "passed": self.passed,
            "message": self.message,
            "properties": _jsonable(self.properties),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            case_id=data["id"],
            kind=data["kind"],
            passed=bool(data["passed"]),
            message=data["message"],
            properties=dict(data.get("properties") or {}),
        )


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """Everything a frontend shows about one suite run. ``ok`` is about the run as a whole
    (the repair converged, the certificate's hashes match); each case has its own verdict."""

    suite: str  # path of warp.toml
    name: str
    mode: Mode
    ok: bool
    status: str
    message: str
    verdicts: tuple[Verdict, ...]
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """What a CI gate asks: the run worked and every case passed."""
        return self.ok and all(v.passed for v in self.verdicts)

    def verdict(self, case_id: str) -> Verdict | None:
        return self._by_id.get(case_id)

    @functools.cached_property
    def _by_id(self) -> dict[str, Verdict]:  # one lookup per pytest item: keep it O(1)
        return {v.case_id: v for v in self.verdicts}

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for v in self.verdicts:
            row = out.setdefault(v.kind, {"passed": 0, "failed": 0})
            row["passed" if v.passed else "failed"] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "name": self.name,
            "mode": self.mode.value,
            "ok": self.ok,
            "status": self.status,
            "message": self.message,
            "details": _jsonable(self.details),
            "cases": [v.to_dict() for v in self.verdicts],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        return cls(
            suite=data["suite"],
            name=data["name"],
            mode=Mode(data["mode"]),
            ok=bool(data["ok"]),
            status=data["status"],
            message=data["message"],
            details=dict(data.get("details") or {}),
            verdicts=tuple(Verdict.from_dict(v) for v in data.get("cases", ())),
        )

    def write_json(self, path: str | Path) -> Path:
        return write_json_atomic(path, self.to_dict())

    @classmethod
    def read_json(cls, path: str | Path) -> RunResult:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    @classmethod
    def failed(cls, suite: Suite, mode: Mode, message: str, *, status: str = "error") -> RunResult:
        """A run that could not produce verdicts: every case fails with ``message``."""
        verdicts = tuple(
            Verdict(case_id=c.id, kind=c.kind.value, passed=False, message=message)
            for c in suite.cases
            if c.kind is not Kind.AUX
        )
        return cls(
            suite=str(suite.toml),
            name=suite.name,
            mode=mode,
            ok=False,
            status=status,
            message=message,
            verdicts=verdicts,
            details=_suite_details(suite),
        )


# -- small helpers ------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    """JSON-safe copy: non-finite floats become None, paths strings, tuples lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _jsonable(value.item())
    return value


def write_json_atomic(path: str | Path, data: Any) -> Path:
    """Write JSON to a temporary file beside ``path``, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomically(path, json.dumps(_jsonable(data), indent=2, allow_nan=False) + "\n")


def _num(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.4g}"


def workdir(suite: Suite) -> Path:
    """``<suite>/.warp``; created with a .gitignore (like .pytest_cache) when first used."""
    folder = suite.root / WORKDIR
    folder.mkdir(exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# created by warp-check: caches and repaired models\n*\n", encoding="utf-8")
    return folder


def default_cache_dir(suite: Suite) -> Path:
    return suite.root / WORKDIR / "cache"


def default_out_dir(suite: Suite) -> Path:
    return suite.root / WORKDIR / "repaired"


def _suite_details(suite: Suite) -> dict[str, Any]:
    return {
        "model": str(suite.model_dir),
        "suite_sha256": suite.digest(),
        "counts": {k.value: suite.count(k) for k in Kind},
    }


# -- loading the model ---------------------------------------------------------------------------


def load_adapter(suite: Suite) -> ClassifierAdapter:
    """Load the suite's model; a head WARP cannot repair is a SuiteError on ``model.layer``."""
    from .model import ClassifierAdapter

    try:
        return ClassifierAdapter.from_pretrained(suite.model_dir, layer=suite.layer, max_length=suite.model.max_length)
    except ModelError as exc:
        text = str(exc)
        where = "model.path" if text.startswith(("model folder", "cannot load the model")) else "model.layer"
        if suite.model.factory is not None and where == "model.path" and not suite.model_overridden:
            where = "model.factory"
        raise suite.error(where, text) from None


# -- check ------------------------------------------------------------------------------------------


def _labelled(suite: Suite, label: int) -> str:
    return repr(suite.label_name(int(label)))


def _checked_cases(suite: Suite, ids: Iterable[str] | None) -> list[Case]:
    wanted = None if ids is None else set(ids)
    return [c for c in suite.cases if c.kind is not Kind.AUX and (wanted is None or c.id in wanted)]


def check(
    suite: Suite,
    adapter: ClassifierAdapter,
    *,
    ids: Iterable[str] | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = False,
) -> RunResult:
    """The model as it is, on the must_fix and must_keep cases (only ``ids`` when given).

    With a cache, a warm entry is recorded too, so the next check of the same model folder can
    be answered by :func:`check_warm` without loading the model.
    """
    from .pipeline import evaluate

    cases = _checked_cases(suite, ids)
    start = time.perf_counter()
    evaluation = evaluate(adapter, cases, batch_size=suite.model.batch_size, cache_dir=cache_dir, progress=progress)
    seconds = time.perf_counter() - start
    if cache_dir is not None:
        from . import warm

        warm.record(
            adapter.source,
            adapter.spec.chain,
            cases,
            evaluation.logits,
            cache_dir,
            layer=suite.layer,
            max_length=suite.model.max_length,
        )
    details = {
        "head": adapter.spec.chain,
        "encoded": evaluation.encoded.encoded,
        "from_cache": evaluation.encoded.from_cache,
        "encode_seconds": seconds,
        "model_loaded": True,
    }
    return _check_result(suite, cases, evaluation.predictions, evaluation.gaps, details)


def warm_entry(suite: Suite, cache_dir: str | Path | None) -> WarmEntry | None:
    """What an earlier check recorded for the suite's model folder as it is now (None: nothing)."""
    if cache_dir is None:
        return None
    from . import warm

    return warm.lookup(suite.model_dir, suite.layer, suite.model.max_length, cache_dir)


def check_warm(
    suite: Suite, entry: WarmEntry | None, *, ids: Iterable[str] | None = None, cache_dir: str | Path | None
) -> RunResult | None:
    """:func:`check` from the cache alone, the model never loaded; None (then call :func:`check`)
    if there is no entry or cache, or a case is not in the entry. Imports neither torch nor numpy."""
    if entry is None or cache_dir is None:
        return None
    cases = _checked_cases(suite, ids)
    if any(c.label >= entry.num_classes for c in cases):
        return None  # check() says what is wrong with the label
    start = time.perf_counter()
    answers = entry.answers(cases)
    if answers is None:
        return None
    details = {
        "head": entry.head_name,
        "encoded": 0,
        "from_cache": len(cases),
        "encode_seconds": time.perf_counter() - start,
        "model_loaded": False,
    }
    predictions = [p for p, _ in answers]
    gaps = [g for _, g in answers]
    return _check_result(suite, cases, predictions, gaps, details)


def _check_result(suite: Suite, cases: list[Case], predictions: Any, gaps: Any, run: dict[str, Any]) -> RunResult:
    verdicts = []
    for i, case in enumerate(cases):
        gap = float(gaps[i])
        predicted = int(predictions[i])
        right = gap > 0
        said = f"predicted {_labelled(suite, predicted)}, labelled {_labelled(suite, case.label)}"
        if right:
            message = f"predicts its label {_labelled(suite, case.label)} (gap {_num(gap)})"
        elif case.kind is Kind.MUST_FIX:
            message = (
                f"must_fix case not fixed yet: {said} (gap {_num(gap)}, short of a correct prediction by "
                f"{_num(-gap)}); repair the model (pytest --warp-repair, or warp-check repair) and test the "
                "repaired folder"
            )
        else:
            message = (
                f"must_keep case wrong: {said} (gap {_num(gap)}); the model must already get must_keep cases "
                "right: check the label, or move the case to a must_fix file to have it repaired"
            )
        properties = {
            "label": suite.label_name(case.label),
            "predicted": suite.label_name(predicted),
            "gap": gap,
        }
        verdicts.append(
            Verdict(case_id=case.id, kind=case.kind.value, passed=right, message=message, properties=properties)
        )
    details = _suite_details(suite) | {"selected": len(cases)} | run
    wrong = sum(not v.passed for v in verdicts)
    message = f"{len(cases)} case(s) checked on the model as it is, {wrong} predicted wrong"
    return RunResult(
        suite=str(suite.toml),
        name=suite.name,
        mode=Mode.CHECK,
        ok=True,
        status="checked",
        message=message,
        verdicts=tuple(verdicts),
        details=details,
    )


# -- repair ----------------------------------------------------------------------------------------


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
    from .artefact import claim_destination
    from .pipeline import check_settings, evaluate, repair_cases

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
    details = _suite_details(suite) | {
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
    from .pipeline import certify_result

    return certify_result([c for c in suite.cases if c.kind is not Kind.AUX], evaluation, result, attack)


def _cert_counts(records: list[CaseCertificate]) -> dict[str, str]:
    from .certify import summarise

    return summarise(records) if records else {}


def _advice(settings: RepairSettings, kind: str, status: str, flags: Mapping[str, str]) -> str:
    def setting(name: str, verb: str) -> str:
        how = f"{flags[name]} or [repair] {name}" if name in flags else f"[repair] {name} in warp.toml"
        return f"{verb} {name} (now {getattr(settings, name):g}; {how})"

    if status == "infeasible" or kind == "must_keep":
        parts = [setting("gamma_h", "lower"), setting("rank", "raise")]
        tail = ", or remove must_keep cases that conflict with the must_fix ones"
    elif status == "solver_failed":
        return "raise [repair.solver] max_iter or loosen eps_abs/eps_rel in warp.toml"
    else:
        parts = [setting("rank", "raise"), setting("lam", "raise"), setting("max_iter", "raise")]
        tail = f", or {setting('gamma_s', 'lower')}"
    return "what may help: " + ", ".join(parts) + tail


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
        after = f"; after repair its gap is {_num(gap_after)}" if result.repaired else ""
        return verdict(
            False,
            f"the original model already got this must_keep case wrong (gap {_num(gap_before)} before repair, "
            f"labelled {_labelled(suite, case.label)}), so it was left out of the repair's constraints{after}. "
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
                f"{_num(miss.gap)} misses its margin {margin} = {_num(miss.target)} by {_num(miss.short_by)}; "
                + _advice(settings, case.kind.value, status, flags),
            )
        return verdict(
            False,
            f"repair failed ({status}), nothing was written: {result.message}. This case met its margin "
            f"{margin} at the last iterate (gap {_num(gap_after)}), but there is no repaired model to check",
        )
    unchanged = " (nothing needed repair: checked on the original weights)" if status == "nothing_to_repair" else ""
    if record is None:
        return verdict(False, f"no certificate was computed for this case{unchanged}")
    if case.kind is Kind.MUST_FIX:
        problems = []
        if not record.cert1:
            problems.append(
                f"Cert 1 fails: gap {_num(record.gap_after)} < γ_s = {_num(settings.gamma_s)} "
                f"(short by {_num(settings.gamma_s - record.gap_after)})"
            )
        if not record.cert3:
            if not (record.eps_star or 0) > 0:
                problems.append(f"Cert 3 fails: the certified radius ε* = {_num(record.eps_star)} is not positive")
            else:
                problems.append(
                    f"Cert 3 fails: the v-space attack found gap {_num(record.attack_min_gap)} ≤ 0 inside the "
                    f"certified ball of radius {_num(record.certified_radius)}"
                )
        if problems:
            return verdict(False, "; ".join(problems) + unchanged)
        return verdict(
            True,
            f"Cert 1: gap {_num(record.gap_after)} ≥ γ_s = {_num(settings.gamma_s)}; Cert 3: no flip within radius "
            f"{_num(record.certified_radius)} (ε* {_num(record.eps_star)}, local {_num(record.eps_local)}; "
            f"attack's smallest gap {_num(record.attack_min_gap)}){unchanged}",
        )
    if not record.cert2:
        if record.gap_after <= 0:
            what = f"the label changed: gap {_num(record.gap_after)} ≤ 0 after repair (was {_num(gap_before)})"
        else:
            what = (
                f"gap {_num(record.gap_after)} < γ_h = {_num(settings.gamma_h)} "
                f"(short by {_num(settings.gamma_h - record.gap_after)})"
            )
        return verdict(False, f"Cert 2 fails: {what}{unchanged}")
    return verdict(
        True,
        f"Cert 2: label {_labelled(suite, case.label)} kept with gap {_num(record.gap_after)} ≥ γ_h = "
        f"{_num(settings.gamma_h)} (was {_num(gap_before)}){unchanged}",
    )


# -- audit --------------------------------------------------------------------------------------------


def audit(
    suite: Suite,
    model_dir: str | Path,
    certificate: str | Path,
    *,
    cache_dir: str | Path | None = None,
    progress: bool = False,
    attack: AttackSettings | None = None,
) -> RunResult:
    """Recompute a certificate's claims on ``model_dir`` (hashes, gaps, radii) for the suite's cases."""
    from .verify import verify

    verification = verify(
        model_dir,
        certificate,
        batch_size=suite.model.batch_size,
        cache_dir=cache_dir,
        attack=attack,
        progress=progress,
    )
    claims = {c["id"]: c for c in verification.certificate["cases"] if isinstance(c, dict) and "id" in c}
    global_failures = [c.detail for c in verification.checks if c.case_id is None and not c.ok]
    checks_by_case: dict[str, list] = {}
    for check_ in verification.checks:
        checks_by_case.setdefault(check_.case_id, []).append(check_)
    verdicts = []
    for case in suite.cases:
        if case.kind is Kind.AUX:
            continue
        claim = claims.get(case.id)
        properties: dict[str, Any] = {"label": suite.label_name(case.label)}
        if claim is None:
            message = f"case {case.id!r} is not in the certificate {Path(certificate).name}: nothing certifies it"
            verdicts.append(Verdict(case_id=case.id, kind=case.kind.value, passed=False, message=message))
            continue
        properties |= {
            "gap_before": claim.get("gap_before"),
            "gap_after": claim.get("gap_after"),
            "gap": claim.get("gap_after"),
            "eps_star": claim.get("eps_star"),
            "eps_local": claim.get("eps_local"),
            "radius": max([r for r in (claim.get("eps_star"), claim.get("eps_local")) if r is not None], default=None),
        }
        problems = list(global_failures)
        differs = [
            name
            for name, ours, theirs in (
                ("text", case.text, claim.get("text")),
                ("text_pair", case.text_pair, claim.get("text_pair")),
                ("label", case.label, claim.get("label")),
                ("kind", case.kind.value, claim.get("kind")),
            )
            if ours != theirs
        ]
        if differs:
            problems.append(f"the suite's case differs from the certified one in {', '.join(differs)}")
        checks = checks_by_case.get(case.id, [])
        problems += [c.detail for c in checks if not c.ok]
        if claim.get("excluded"):
            problems.append("the certificate left this must_keep case out (the original model got it wrong)")
        if problems:
            verdicts.append(
                Verdict(
                    case_id=case.id,
                    kind=case.kind.value,
                    passed=False,
                    message="certificate does not hold: " + "; ".join(problems),
                    properties=properties,
                )
            )
        else:
            held = ", ".join(c.name for c in checks)
            verdicts.append(
                Verdict(
                    case_id=case.id,
                    kind=case.kind.value,
                    passed=True,
                    message=f"certificate holds on this model ({held}); gap {_num(claim.get('gap_after'))}",
                    properties=properties,
                )
            )
    extra = sorted(set(claims) - {c.id for c in suite.cases})
    details = _suite_details(suite) | {
        "model": str(Path(model_dir).resolve()),
        "certificate": str(Path(certificate).resolve()),
        "checks": len(verification.checks),
        "failed_checks": [c.detail for c in verification.failures()],
        "not_in_suite": extra,
        "gamma_s": verification.certificate.get("settings", {}).get("gamma_s"),
        "gamma_h": verification.certificate.get("settings", {}).get("gamma_h"),
    }
    ok = not global_failures
    message = (
        f"certificate checked on {model_dir}: {len(verification.checks)} checks, {len(verification.failures())} failed"
        if ok
        else "certificate does not hold: " + "; ".join(global_failures)
    )
    return RunResult(
        suite=str(suite.toml),
        name=suite.name,
        mode=Mode.AUDIT,
        ok=ok,
        status="verified" if verification.ok else "failed",
        message=message,
        verdicts=tuple(verdicts),
        details=details,
    )


__all__ = [
    "Mode",
    "RunResult",
    "Verdict",
    "audit",
    "check",
    "default_cache_dir",
    "default_out_dir",
    "load_adapter",
    "repair",
    "workdir",
    "write_json_atomic",
]
