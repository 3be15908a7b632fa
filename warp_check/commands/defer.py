"""``warp-check defer``: move the must_fix cases a traffic budget could not buy into the suite's deferred
file (named by id, or those a run's report names), or put them back (``--restore``)."""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

from warp_check import (
    TRAFFIC,
    RunResult,
    SuiteError,
    WarpError,
    budget_reason,
    defer_cases,
    load_suite,
    read_report,
    restore_deferred,
)
from warp_check.commands.arguments import EXIT_OK

CANNOT_BUY = "cannot buy"  # the traffic verdict's property naming the must_fix cases a budget cannot buy


def defer_arguments(defer: argparse.ArgumentParser) -> None:
    defer.add_argument("ids", nargs="*", metavar="ID", help="the must_fix cases to defer, by id")
    defer.add_argument(
        "--from",
        dest="report",
        metavar="REPORT",
        help="the report.json of a run over its traffic budget (or its --json output): defer the must_fix cases "
        "it names as those the budget cannot buy",
    )
    defer.add_argument(
        "--restore",
        nargs="*",
        metavar="ID",
        help="put these deferred cases (or with --all, every one) back at their lines in the case files they came from",
    )
    defer.add_argument("--all", dest="every", action="store_true", help="with --restore: every deferred case")


def defer_command(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite)
    if args.restore is not None:
        if args.report is not None or args.ids or args.every == bool(args.restore):
            raise WarpError("--restore takes the deferred case ids to put back, or --all (not --from)")
        moved = restore_deferred(suite, None if args.every else args.restore)
        files = ", ".join(str(path) for path in moved.case_files)
        left = len(suite.deferred) - len(moved.moved)
        print(
            f"put back {len(moved.moved)} deferred case(s) into {files}; {left} still deferred in {moved.deferred_file}"
        )
        return EXIT_OK
    if args.every or (args.report is None) == (not args.ids):
        raise WarpError("give the must_fix case ids to defer, or --from REPORT (not both); --all goes with --restore")
    today = datetime.date.today()
    if args.report is not None:
        ids, max_change = cannot_buy(Path(args.report), suite.toml)
        reason = budget_reason(max_change, today)
    else:
        ids, reason = args.ids, f"it was deferred by hand on {today.isoformat()}"
    moved = defer_cases(suite, ids, reason=reason)
    added = f" (warp.toml now names it: deferred = {moved.deferred_file.name!r})" if moved.toml_changed else ""
    print(
        f"deferred {len(moved.moved)} must_fix case(s) into {moved.deferred_file}{added}: every check runs them as "
        f"known failures; warp-check defer {args.suite} --restore --all puts them back"
    )
    return EXIT_OK


def cannot_buy(report: Path, toml: Path) -> tuple[list[str], float | None]:
    """The must_fix cases the run of the suite at ``toml`` in ``report`` (a report.json, or a run's --json
    output) says its budget cannot buy, and that budget; a report naming none is a WarpError."""
    try:
        data = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise WarpError(f"{report}: cannot read it as a run's report ({exc})") from None
    runs = read_report(report) if isinstance(data, dict) and "runs" in data else [RunResult.read_json(report)]
    mine = [run for run in runs if Path(run.suite).resolve() == toml] or (runs if len(runs) == 1 else [])
    traffic = mine[0].traffic if mine else None
    named = traffic.properties.get(CANNOT_BUY) if traffic is not None else None
    if not named:
        raise SuiteError(
            f"names no must_fix case its budget cannot buy for this suite ({toml}): give the report of a repair "
            f"over its traffic budget (its {TRAFFIC} verdict lists them), or name the cases",
            path=report,
            field=f"{TRAFFIC}.properties.{CANNOT_BUY}",
        )
    return str(named).split(), traffic.properties.get("max_change")


__all__ = ["cannot_buy", "defer_arguments", "defer_command"]
