"""``warp-check verify``: a certificate re-checked from scratch, alone, on a suite (audit mode) or
along the whole chain of repairs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from warp_check import (
    CERTIFICATE_NAME,
    ChainVerification,
    Drawdown,
    Link,
    LinkAnswers,
    Suite,
    TrafficSettings,
    chain_drawdown,
    load_adapter,
    load_suite,
    read_traffic,
    release_history,
    resolve_model,
    verify,
    verify_chain,
)
from warp_check.commands.arguments import (
    EXIT_FAILED,
    EXIT_OK,
    PROGRESS_OPTIONS,
    Use,
    count_or_zero,
    model_cache,
    progress_of,
    traffic_loader,
)
from warp_check.commands.results import finish
from warp_check.frontend import RunJob, check_traffic_overrides, mode_named

# The declared options verify takes (warp_check.options); its own arguments follow.
VERIFY_OPTIONS = (
    Use(name="certificate", metavar="FILE", help="the certificate (default MODEL_DIR/warp_certificate.json)"),
    Use(
        name="cache",
        help="representation cache folder, or 'none' (default: as check caches it: the suite's <suite>/.warp/cache "
        "with --suite or for a model in a suite's .warp folder, else ~/.cache/warp-check/cache)",
    ),
    "no_cache",
    Use(name="revision", help="revision of MODEL_DIR where it is a Hub id (default main)"),
    Use(name="json", help="print the checks as JSON"),
    Use(
        name="traffic",
        help="recompute Cert 4 on this traffic file (with --suite: overrides its [traffic]; alone: column 'text'); "
        "it must be the sample the repair measured",
    ),
    Use(name="max_change", help="also hold Cert 4's bound to this budget (a share: 0.01 is one percent)"),
    *PROGRESS_OPTIONS,
)


def verify_arguments(verify: argparse.ArgumentParser) -> None:
    verify.add_argument("--suite", metavar="SUITE", help="also check that the certificate covers this suite's cases")
    verify.add_argument(
        "--chain",
        action="store_true",
        help="re-check the whole history: every model it was repaired from, back to the first; past a model "
        "without a certificate, the baseline its child's certificate names, or --from (with --suite: every model "
        "checked with the suite's cases, what each link lost and gained, and the drawdown since the first model)",
    )
    verify.add_argument(
        "--from",
        dest="came_from",
        action="append",
        default=[],
        metavar="OLD",
        help="--chain: where a model without a certificate came from (the release it was fine-tuned from); "
        "give it once for each such model, newest first",
    )
    verify.add_argument(
        "--accept-drawdown",
        type=count_or_zero,
        default=0,
        metavar="N",
        help="--chain --suite: exit 0 with up to N suite cases the first model got right and the newest gets "
        "wrong (default 0)",
    )


def verify_command(args: argparse.Namespace) -> int:
    args.model_dir = str(resolve_model(args.model_dir, args.revision).folder)  # a Hub id: its snapshot
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
            load_traffic=traffic_loader(args),
        )
        return finish(args, audit, audit.run(job))
    traffic = None
    if args.traffic:  # no suite: the file alone (column 'text'); verify leaves the certificate's cases out
        check_traffic_overrides({"max_change": args.max_change})
        traffic = read_traffic(TrafficSettings(path=Path(args.traffic), max_change=args.max_change))
    cache = model_cache(args, model_dir)
    verification = verify(model_dir, certificate, cache_dir=cache, progress=progress_of(args), traffic=traffic)
    failures = verification.failures()
    if args.json:
        checks: list[dict[str, Any]] = [
            {"name": c.name, "ok": c.ok, "detail": c.detail, "case": c.case_id}
            for c in verification.checks + verification.traffic
        ]
        print(json.dumps({"model_dir": str(model_dir), "ok": verification.ok, "checks": checks}, indent=2))
    else:
        print(f"{model_dir}: {len(verification.checks) + len(verification.traffic)} checks, {len(failures)} failed")
        for check in failures:
            where = f" [{check.case_id}]" if check.case_id else ""
            print(f"  FAILED {check.name}{where}: {check.detail}")
        if verification.traffic_record is not None and all(c.ok for c in verification.traffic):
            print(f"  Cert 4 holds: the repair {verification.traffic_record.sentence()}")
        claim = verification.certificate.traffic
        if claim is not None and traffic is None:
            claimed = f"{claim.changed} of {claim.n} changed on {claim.source}"
            print(f"  Cert 4 not re-checked ({claimed}): give --traffic FILE")
        left_out = verification.left_out
        if verification.holds and left_out:  # the last line is the verdict the exit code gives
            wrong = f"{len(left_out)} must_keep case(s) it left out are wrong on the model"
            print(f"certificate holds, but FAILED: {wrong}")
        else:
            print("certificate holds" if verification.holds else "certificate does NOT hold")
    return EXIT_OK if verification.ok else EXIT_FAILED


def _verify_chain(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite, model=args.model_dir) if args.suite else None
    cache = model_cache(args, args.model_dir, suite)
    chain = verify_chain(args.model_dir, cache_dir=cache, came_from=args.came_from)
    history = chain_drawdown(args.suite, chain, cache_dir=cache) if args.suite else None
    answers = {a.model_dir: a for a in history.links} if history is not None else {}
    rows = [_link_row(link, answers.get(link.model_dir), checked=history is not None, first=link is chain.links[-1])
            for link in chain.links]  # fmt: skip
    if suite is not None:
        _with_traffic(rows, args, suite, chain, cache)
    lost = list(history.lost) if history is not None else []
    accepted = len(lost) <= args.accept_drawdown
    links_hold = all(row["ok"] for row in rows)
    if args.json:
        drawdown = None
        if history is not None:
            drawdown = {"right_first": history.right_first, "lost": lost, "accepted": args.accept_drawdown}
            drawdown["lost_deferred"] = list(history.lost_deferred)
        print(json.dumps({"ok": links_hold and accepted, "links": rows, "drawdown": drawdown}, indent=2))
    else:
        _print_chain(rows, history, lost, args.accept_drawdown)
    return EXIT_OK if links_hold and accepted else EXIT_FAILED


def _with_traffic(
    rows: list[dict[str, Any]], args: argparse.Namespace, suite: Suite, chain: ChainVerification, cache: Path | None
) -> None:
    """Each link's Cert 4 against the model before it, where the suite has traffic (or --traffic gives it),
    measured as ``warp-check history`` measures it; over max_change, the link fails."""
    traffic = traffic_loader(args)(suite)
    if traffic is None:
        return
    models = [link.model_dir for link in reversed(chain.links)]
    releases = release_history(args.suite, models, traffic=traffic, cache_dir=cache, progress=progress_of(args))
    for row, step in zip(reversed(rows), releases.releases, strict=True):
        if step.traffic is None:
            continue
        row["traffic"] = step.traffic.to_json() | {"said": step.traffic.sentence()}
        if not step.traffic.within_budget:
            row["failed"].append({"name": "Cert 4 against the model before", "detail": step.traffic.sentence(),
                                  "case": None})  # fmt: skip
            row["ok"] = False


def _link_row(link: Link, answers: LinkAnswers | None, *, checked: bool, first: bool) -> dict[str, Any]:
    """One model of the chain as the command shows it: its checks, and on the suite what it lost and gained."""
    # A case a link left out is the drawdown's to judge (--suite), not a claim of its certificate.
    checks = [*(link.verification.failed_claims() if link.verification else ()), *link.checks]
    failed = [{"name": c.name, "detail": c.detail, "case": c.case_id} for c in checks if not c.ok]
    if not link.certified and not first and not checked:
        failed.append({
            "name": "uncertified",
            "detail": "no certificate vouches for this model: give --suite to check it with the suite's cases",
            "case": None,
        })  # fmt: skip
    row: dict[str, Any] = {
        "model_dir": str(link.model_dir),
        "ok": not failed,
        "repaired": link.certified,
        "reached_by": link.reached_by,
        "failed": failed,
    }
    if answers is not None:
        row |= {"right": len(answers.right), "checked": answers.checked, "lost": list(answers.lost),
                "gained": list(answers.gained)}  # fmt: skip
    return row


REACHED = {
    "given": "",
    "repaired from": "",
    "baseline": " (reached as the baseline the newer model's certificate names)",
    "--from": " (reached by --from)",
}


def _print_chain(rows: list[dict[str, Any]], history: Drawdown | None, lost: list[str], accept: int) -> None:
    for i, row in enumerate(rows):
        if row["repaired"]:
            what = "certificate holds" if row["ok"] else "certificate does NOT hold"
        elif i == len(rows) - 1:
            what = "the first model of the chain (no certificate)"
        else:
            what = "no certificate (a model from elsewhere)" + (": checked with the suite" if "right" in row else "")
        print(f"{row['model_dir']}: {what}{REACHED.get(row['reached_by'], '')}")
        if "traffic" in row:
            print(f"  traffic: against {rows[i + 1]['model_dir']} it {row['traffic']['said']}")
        if "right" in row:
            since = "" if i == len(rows) - 1 else (
                f"; against {rows[i + 1]['model_dir']}: lost {len(row['lost'])}, gained {len(row['gained'])}"
            )  # fmt: skip
            print(f"  suite: {row['right']} of {row['checked']} case(s) right{since}")
            if row["lost"]:
                print(f"  lost: {', '.join(row['lost'][:10])}" + (" …" if len(row["lost"]) > 10 else ""))
        for failed in row["failed"]:
            where = f" [{failed['case']}]" if failed["case"] else ""
            print(f"  FAILED {failed['name']}{where}: {failed['detail']}")
    if history is not None:
        accepted = f" (accepted: up to {accept})" if lost and len(lost) <= accept else ""
        print(
            f"drawdown since the first model {rows[-1]['model_dir']}: {len(lost)} of the {history.right_first} suite "
            "case(s) it got right are wrong now"
            + (f": {', '.join(lost[:10])}" if lost else "")
            + accepted
            + (f" ({len(history.lost_deferred)} of them deferred)" if history.lost_deferred else "")
        )
    unvouched = sum(not row["repaired"] for row in rows[:-1])
    without = f"; {unvouched} model(s) without a certificate" + (" checked with the suite" if history else "")
    holds = "every link holds" if all(row["ok"] for row in rows) else "a link does NOT hold"
    # The last line is the verdict the exit code gives: a drawdown over what is accepted fails the chain.
    over = (
        f"; FAILED: a drawdown of {len(lost)} case(s), over the {accept} accepted (--accept-drawdown N accepts up to N)"
        if len(lost) > accept
        else ""
    )
    print(f"chain of {len(rows)} model(s): {holds}{without if unvouched else ''}{over}")
