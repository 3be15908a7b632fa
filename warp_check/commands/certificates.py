"""``warp-check verify``: a certificate re-checked from scratch, alone, on a suite (audit mode) or
along the whole chain of repairs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from warp_check import (
    CERTIFICATE_NAME,
    RunJob,
    check_suite,
    load_adapter,
    load_suite,
    mode_named,
    verify,
    verify_chain,
)
from warp_check.commands.arguments import EXIT_FAILED, EXIT_OK, add_declared, add_progress, model_cache, progress_of
from warp_check.commands.results import finish


def verify_arguments(verify: argparse.ArgumentParser) -> None:
    verify.add_argument(
        "--certificate", metavar="FILE", help="the certificate (default MODEL_DIR/warp_certificate.json)"
    )
    verify.add_argument("--suite", metavar="SUITE", help="also check that the certificate covers this suite's cases")
    add_declared(
        verify,
        "cache",
        help="representation cache folder, or 'none' (default: as check caches it: the suite's <suite>/.warp/cache "
        "with --suite or for a model in a suite's .warp folder, else ~/.cache/warp-check/cache)",
    )
    add_declared(verify, "no_cache")
    add_declared(verify, "json", help="print the checks as JSON")
    add_progress(verify)
    verify.add_argument(
        "--chain",
        action="store_true",
        help="re-check the whole history: every model it was repaired from, back to the first (with --suite: "
        "the drawdown on the suite's cases since the first model)",
    )


def verify_command(args: argparse.Namespace) -> int:
    if args.chain:
        return _verify_chain(args)
    model_dir = Path(args.model_dir)
    certificate = Path(args.certificate) if args.certificate else None
    if args.suite:
        suite = load_suite(args.suite, model=model_dir)
        audit = mode_named("audit")
        job = RunJob(
            suite=suite,
            load_model=load_adapter,
            cache_dir=model_cache(args, model_dir, suite),
            certificate=certificate or model_dir / CERTIFICATE_NAME,
            progress=progress_of(args),
        )
        return finish(args, audit, audit.run(job))
    cache = model_cache(args, model_dir)
    verification = verify(model_dir, certificate, cache_dir=cache, progress=progress_of(args))
    failures = verification.failures()
    if args.json:
        checks: list[dict[str, Any]] = [
            {"name": c.name, "ok": c.ok, "detail": c.detail, "case": c.case_id} for c in verification.checks
        ]
        print(json.dumps({"model_dir": str(model_dir), "ok": verification.ok, "checks": checks}, indent=2))
    else:
        print(f"{model_dir}: {len(verification.checks)} checks, {len(failures)} failed")
        for check in failures:
            where = f" [{check.case_id}]" if check.case_id else ""
            print(f"  FAILED {check.name}{where}: {check.detail}")
        print("certificate holds" if verification.ok else "certificate does NOT hold")
    return EXIT_OK if verification.ok else EXIT_FAILED


def _verify_chain(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite, model=args.model_dir) if args.suite else None
    cache = model_cache(args, args.model_dir, suite)
    chain = verify_chain(args.model_dir, cache_dir=cache)
    rows = []
    for link in chain.links:
        checks = [*(link.verification.checks if link.verification else ()), *link.checks]
        rows.append(
            {
                "model_dir": str(link.model_dir),
                "ok": link.ok,
                "repaired": link.verification is not None,
                "failed": [{"name": c.name, "detail": c.detail, "case": c.case_id} for c in checks if not c.ok],
            }
        )
    drawdown = _drawdown(args.suite, chain.root, Path(args.model_dir), cache) if args.suite else None
    if args.json:
        print(json.dumps({"ok": chain.ok, "links": rows, "drawdown": drawdown}, indent=2))
    else:
        for row in rows:
            what = "certificate holds" if row["repaired"] else "the first model of the chain"
            print(f"{row['model_dir']}: {what if row['ok'] else 'does NOT hold'}")
            for failed in row["failed"]:
                where = f" [{failed['case']}]" if failed["case"] else ""
                print(f"  FAILED {failed['name']}{where}: {failed['detail']}")
        if drawdown is not None:
            lost = drawdown["lost"]
            print(
                f"drawdown since the first model: {len(lost)} of the {drawdown['right_first']} suite case(s) it got "
                "right are wrong now" + (f": {', '.join(lost[:10])}" if lost else "")
            )
        print(f"chain of {len(rows)} model(s): " + ("every link holds" if chain.ok else "a link does NOT hold"))
    lost = bool(drawdown and drawdown["lost"])
    return EXIT_OK if chain.ok and not lost else EXIT_FAILED


def _drawdown(suite_path: str, first: Path, last: Path, cache: Path | None) -> dict[str, Any]:
    """The suite's cases the first model of the chain got right, and which of them the last gets wrong."""
    answers = []
    for folder in (first, last):
        suite = load_suite(suite_path, model=folder)
        answers.append({v.case_id: v.passed for v in check_suite(suite, cache_dir=cache).verdicts})
    right_first = [case for case, right in answers[0].items() if right]
    return {"right_first": len(right_first), "lost": [case for case in right_first if not answers[1].get(case, False)]}
