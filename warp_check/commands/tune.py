"""``warp-check tune SUITE``: the grid of repair settings scored by k-fold over the must_fix cases and
the traffic's tune part, the strongest within the budget chosen and, with ``--write``, written."""

from __future__ import annotations

import argparse
import json
import sys

from warp_check import SettingsError, SuiteError, TuneResult, load_adapter, tune, write_choice
from warp_check.commands.arguments import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    count,
    progress_of,
    suite_and_cache,
    traffic_loader,
)
from warp_check.frontend import TUNE_FOLDS, check_tune


def tune_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--folds",
        type=lambda text: count(text, minimum=2),
        default=TUNE_FOLDS,
        metavar="K",
        help=f"folds of the must_fix cases: each is repaired without it and scored (default {TUNE_FOLDS})",
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="write the chosen settings into the suite's warp.toml ([repair] keys; guards as traffic_guards.jsonl)",
    )


def tune_command(args: argparse.Namespace) -> int:
    suite, cache = suite_and_cache(args)
    try:  # what would refuse the run or its write, said before minutes of repairs
        check_tune(suite, folds=args.folds, write=args.write)
    except SettingsError as exc:
        return _usage(args, f"--folds: {exc}")
    sample = traffic_loader(args)(suite)
    if sample is None:
        return _usage(
            args,
            "no traffic: tune bounds each candidate's changes on the traffic's tune part; give --traffic FILE or a "
            "[traffic] table",
        )
    adapter = load_adapter(suite)
    try:
        result = tune(suite, adapter, sample, folds=args.folds, cache_dir=cache, progress=progress_of(args))
    except SettingsError as exc:
        return _usage(args, str(exc))
    written, refused = None, None
    if args.write and result.chosen is not None:
        try:
            written = write_choice(suite, result)
        except (SuiteError, OSError) as exc:  # the table is still shown: the run's minutes are not lost
            refused = str(exc) if isinstance(exc, SuiteError) else f"{exc.strerror or exc} ({exc.filename})"
    if args.json:
        print(json.dumps(_as_json(result, written), indent=2))
    else:
        print("\n".join(table_lines(result)))
        if written is not None:
            toml, guards = written
            print(f"written: {toml}" + (f" and {guards}" if guards else ""))
    if refused is not None:
        return _usage(args, f"--write failed: {refused}")
    return EXIT_OK if result.chosen is not None else EXIT_FAILED


def _usage(args: argparse.Namespace, message: str) -> int:
    print(f"warp-check {args.command}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def table_lines(result: TuneResult) -> list[str]:
    """The candidates as a table, then the choice (or why there is none)."""
    budget = "none" if result.budget is None else f"{result.budget:.2%}"
    counted = result.counted()
    lines = [
        f"{len(result.scores)} candidates, {result.folds} folds over {result.must_fix} must_fix {counted['must_fix']}; "
        f"{result.tune_texts:,} tune-part {counted['measured']} measured ({len(result.guard_pool):,} "
        f"{counted['guards']} may guard); budget {budget}",
        f"  {'candidate':<28} {'fix (unseen)':>14} {'change bound':>13}      {'changed':>11} {'guards':>7} {'time':>8}",
    ]
    for score in result.scores:
        mark = "*" if score is result.chosen else " "
        over = "" if score.within(result.budget) or score.failed else " over"
        lines.append(
            f"{mark} {score.candidate.name:<28} {score.fix_rate:>13.1%} {score.bound:>12.2%}{over:<5} "
            f"{score.changed:>5}/{score.measured:<5} {score.guards:>7} {score.seconds:>7.1f}s"
        )
        if score.failed:
            lines.append(f"    {score.failed}")
    lines.append(f"{result.message} ({result.seconds:.0f} s in all)")
    return lines


def _as_json(result: TuneResult, written) -> dict:
    return {
        "budget": result.budget,
        "folds": result.folds,
        "must_fix": result.must_fix,
        "tune_texts": result.tune_texts,
        "counted": result.counted(),
        "seconds": round(result.seconds, 3),
        "candidates": [s.as_json(result.budget) for s in result.scores],
        "chosen": result.chosen.candidate.name if result.chosen else None,
        "message": result.message,
        "written": [str(p) for p in written if p is not None] if written else [],
    }
