"""The ``warp-check`` section of the terminal summary, built from what the reports carried
back (so it reads the same under pytest-xdist as in a serial run)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .state import WarpSession


def _num(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:.4g}"


def _relative(path: str, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


def lines(state: WarpSession) -> list[str]:
    root = state.config.rootpath
    out: list[str] = []
    for suite_path, run in state.runs.items():
        details = run.get("details", {})
        cases = state.cases.get(suite_path, [])
        mode = run["mode"]
        out.append(f"suite '{run['name']}' ({_relative(suite_path, root)}): {mode} mode")
        head = f" ({details['head']})" if details.get("head") else ""
        out.append(f"  model: {details.get('model', '?')}{head}")
        counts = details.get("counts", {})
        for kind in ("must_fix", "must_keep"):
            outcomes = [c["outcome"] for c in cases if c["kind"] == kind]
            ran = f"{outcomes.count('passed')} passed, {outcomes.count('failed')} failed"
            total = counts.get(kind, len(outcomes))
            of = f" (of {total} in the suite)" if total != len(outcomes) else ""
            out.append(f"  {kind:<9}  {ran}{of}")
        if counts.get("aux"):
            out.append(f"  aux        {counts['aux']} case(s): GSN-FT data, not tests")
        if "encoded" in details:
            out.append(
                f"  encoder: {details['encoded']} case(s) encoded, {details.get('from_cache', 0)} from the cache"
                + (f", {details['encode_seconds']:.2f} s" if details.get("encode_seconds") is not None else "")
                + ("; model not loaded (same folder as the last check)" if details.get("model_loaded") is False else "")
            )
        out.extend(_mode_lines(run, details))
        if details.get("computed_by") not in (None, "main"):
            out.append(f"  computed once, by xdist worker {details['computed_by']}")
    if state.report_path is not None:
        out.append(f"report: {state.report_path}")
    if state.report_error is not None:
        out.append(f"report NOT written: {state.report_error}")
    return out


def _mode_lines(run: dict[str, Any], details: dict[str, Any]) -> list[str]:
    mode, status = run["mode"], run["status"]
    if mode == "check" or status == "error":
        return [f"  {run['message']}"] if status == "error" else []
    if mode == "audit":
        out = [f"  audit: {run['message']}", f"  certificate: {details.get('certificate', '?')}"]
        if details.get("not_in_suite"):
            out.append(f"  {len(details['not_in_suite'])} certified case(s) are not in this suite")
        return out
    out = []
    iterations = details.get("iterations", 0)
    seconds = details.get("repair_seconds")
    took = f"{iterations} iteration(s), {seconds:.2f} s" if seconds is not None else f"{iterations} iteration(s)"
    if status == "converged":
        out.append(f"  repair: converged in {took}")
    elif status == "nothing_to_repair":
        out.append("  repair: nothing to repair: every case already meets its margin; nothing was written")
    else:
        why = details.get("repair_message") or run["message"]
        out.append(f"  repair: FAILED ({status}) after {took}: {why}; nothing was written")
    gsn = details.get("gsn_ft") or {}
    gsn_text = "applied" if gsn.get("applied") else f"not applied ({gsn.get('reason', 'n/a')})"
    out.append(
        f"  mean GSN κ: {_num(details.get('kappa_before'))} before, {_num(details.get('kappa_after'))} after; "
        f"GSN-FT {gsn_text}"
    )
    certs = details.get("certs") or {}
    if certs:
        out.append(
            f"  certificates: Cert 1 {certs.get('cert1', '-')}, Cert 2 {certs.get('cert2', '-')}, "
            f"Cert 3 {certs.get('cert3', '-')} (γ_s = {_num(details.get('gamma_s'))}, "
            f"γ_h = {_num(details.get('gamma_h'))})"
        )
    if details.get("excluded"):
        out.append(
            f"  {len(details['excluded'])} must_keep case(s) left out: the original model already got them wrong"
        )
    if details.get("artefact"):
        out.append(f"  repaired model: {details['artefact']} (with warp_certificate.json)")
    elif status != "error":
        out.append("  repaired model: none written")
    return out
