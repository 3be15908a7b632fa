"""Audit mode: a certificate's claims recomputed on a model folder, for the suite's cases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from warp_check.cases import Kind
from warp_check.certify.falsify import AttackSettings
from warp_check.certify.verify import verify
from warp_check.runs.messages import num
from warp_check.runs.result import Mode, RunResult, Verdict, suite_details
from warp_check.suite.loader import Suite


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
                    message=f"certificate holds on this model ({held}); gap {num(claim.get('gap_after'))}",
                    properties=properties,
                )
            )
    extra = sorted(set(claims) - {c.id for c in suite.cases})
    details = suite_details(suite) | {
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
