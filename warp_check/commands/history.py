"""``warp-check history``: a line of releases on one suite, each against the one before it (pass counts,
regressions, fixes, the paired test, Cert 4's traffic bound), as a table, JSON, or a page."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
from pathlib import Path

from warp_check import (
    CERTIFICATE_NAME,
    ReleaseHistory,
    chain_models,
    load_suite,
    release_history,
    resolve_model,
    write_history_report,
)
from warp_check.commands.arguments import (
    EXIT_FAILED,
    EXIT_OK,
    PROGRESS_OPTIONS,
    Use,
    cache_of,
    progress_of,
    traffic_loader,
)
from warp_check.frontend import check_report_destination

HISTORY_OPTIONS = (
    Use(name="cache", help="representation cache folder, or 'none' (default <suite>/.warp)"),
    "no_cache",
    Use(
        name="traffic",
        help="unlabelled texts like the model's traffic (overrides [traffic] path): Cert 4 bounds the share of "
        "predictions each release changes against the one before it",
    ),
    Use(
        name="max_change",
        help="the most a release may change of the one before it's predictions on the traffic, as a share "
        "(0.01: one percent); over it the history fails (overrides [traffic] max_change)",
    ),
    Use(
        name="worse_p",
        help="fail where the paired test of a release against the one before gives a one-sided p below P that it "
        "is worse (e.g. 0.05); without it the test is reported, never gating",
    ),
    Use(name="report", help="also write index.html (the table and a trend plot) and history.json here"),
    Use(name="json", help="print the history as JSON"),
    *PROGRESS_OPTIONS,
)


def history_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "models",
        nargs="+",
        metavar="MODEL",
        help="the releases, oldest first: folders or Hub ids; one repaired model folder alone stands for its "
        "certificate chain (each certificate names the model it was repaired from)",
    )
    parser.add_argument(
        "--from",
        dest="came_from",
        action="append",
        default=[],
        metavar="OLD",
        help="a chain: where a model without a certificate came from (as verify --chain takes it)",
    )


def history_command(args: argparse.Namespace) -> int:
    if args.report:
        check_report_destination(args.report)  # a report that cannot be written is refused before the work
    models = [resolve_model(model).folder for model in args.models]
    if len(models) == 1 and (args.came_from or (Path(models[0]) / CERTIFICATE_NAME).is_file()):
        models = list(chain_models(models[0], came_from=args.came_from))
    suite = load_suite(args.suite, model=models[0])
    traffic = traffic_loader(args)(suite)
    history = release_history(
        args.suite,
        models,
        traffic=traffic,
        worse_p=args.worse_p,
        cache_dir=cache_of(args, suite),
        progress=progress_of(args),
    )
    if args.report:
        created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        page = write_history_report(args.report, history, created=created)
        if not args.json:
            print(f"history page: {page}")
    if args.json:
        print(json.dumps(history.to_dict(), indent=2))
    else:
        print_history(history)
    return EXIT_OK if history.passed else EXIT_FAILED


def history_table(history: ReleaseHistory) -> list[str]:
    """The history as the terminal shows it: a row per release, oldest first, then the verdict."""
    head = ("#", "right", "lost", "fixed", "p", "p worse", "traffic changed", "bound", "budget", "model")
    rows = [head]
    for i, step in enumerate(history.releases, 1):
        paired, traffic = step.paired_test, step.traffic
        rows.append((
            str(i),
            f"{step.right}/{step.checked}",
            "–" if paired is None else str(len(step.regressions)),
            "–" if paired is None else str(len(step.fixes)),
            "–" if paired is None else f"{paired.p_value:.3g}",
            "–" if paired is None else f"{paired.p_worse:.3g}" + ("" if paired.passed else " FAILED"),
            "–" if traffic is None else f"{traffic.changed}/{traffic.n}",
            "–" if traffic is None else f"{100 * traffic.bound:.3g} %",
            "–" if traffic is None or traffic.max_change is None else ("within" if traffic.within_budget else "OVER"),
            str(step.model_dir),
        ))  # fmt: skip
    widths = [max(len(row[c]) for row in rows) for c in range(len(head) - 1)]
    return ["  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]) for row in rows]


def print_history(history: ReleaseHistory) -> None:
    traffic = f"traffic {history.traffic}" if history.traffic else "no traffic"
    print(f"{len(history.releases)} release(s) on {history.suite}, each against the one before it ({traffic})")
    for line in history_table(history):
        print(f"  {line}")
    for i, step in enumerate(history.releases, 1):
        if step.regressions:
            named = ", ".join(step.regressions[:10]) + (" …" if len(step.regressions) > 10 else "")
            print(f"  release {i} lost: {named}")
        if step.traffic is not None:
            print(f"  release {i}: Cert 4 against release {i - 1}: it {step.traffic.sentence()}")
    print(history.verdict())


__all__ = ["HISTORY_OPTIONS", "history_arguments", "history_command", "history_table"]
