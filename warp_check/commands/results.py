"""A suite run's result, printed or as JSON, as its run mode shows it; the exit code it gives."""

from __future__ import annotations

import argparse
import json

from warp_check import REPORT_HTML, Kind, RunResult, write_report
from warp_check.commands.arguments import EXIT_FAILED, EXIT_OK
from warp_check.frontend import RunMode, run_verdict


def finish(args: argparse.Namespace, mode: RunMode, result: RunResult) -> int:
    """Write the report asked for, print the result (JSON or ``mode``'s lines), give the exit code."""
    if getattr(args, "report", None):
        path = write_report(args.report, [result])
        if not args.json:
            print(f"report: {path}\nreport page: {path.parent / REPORT_HTML}")
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print_result(mode, result, quiet=getattr(args, "quiet", False))
    return EXIT_OK if result.passed else EXIT_FAILED


def print_result(mode: RunMode, result: RunResult, *, quiet: bool) -> None:
    details = result.details
    print(mode.header(result, result.suite))
    if details.model:
        print("\n".join(mode.model_lines(details)))
    for kind, row in result.counts().items():
        if kind is not Kind.DEFERRED:  # known failures: the verdict's own line counts them
            print(f"  {kind.value:<9}  {row}")
    aux = details.counts.get(Kind.AUX)
    if aux:
        print(f"  aux        {aux} case(s): GSN-FT data, not tests")
    for line in mode.result_lines(result):
        print(line)
    print(f"  {result.message}")
    for line in run_verdict(result).lines():
        print(f"  {line}")
    failing = [v for v in result.verdicts if not v.passed and v.expected_failure is None]
    if failing and not quiet:
        print(f"\n{len(failing)} failing case(s):")
        for verdict in failing:
            print(f"  {verdict.case_id} ({verdict.kind.value}): {verdict.message}")
    print("PASSED" if result.passed else "FAILED")
