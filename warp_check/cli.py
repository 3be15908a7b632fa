"""``warp-check``: the plugin's jobs outside pytest.

    warp-check check  SUITE  [--model DIR]                    the gate: the model as it is
    warp-check repair SUITE  [--out DIR] [--rank R] ...        repair, save, certify
    warp-check verify MODEL_DIR [--certificate FILE]           re-check a certificate from scratch
    warp-check report SOURCE --out DIR                         report.md + JSON + plots

Exit codes: 0 everything holds; 1 a case fails, the repair did not converge or a certificate
does not hold; 2 a usage mistake or an input that cannot be read (suite, model, certificate).
Suites and case verdicts come from :mod:`warp_check.session`, so the words are pytest's.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
FLAGS = {"rank": "--rank", "gamma_s": "--gamma-s", "gamma_h": "--gamma-h"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own exit code for usage errors is 2 as well
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(
        prog="warp-check",
        description="Test and repair text classifiers against behavioural suites (WARP), outside pytest.",
    )
    parser.add_argument("--version", action="version", version=f"warp-check {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    def suite_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("suite", metavar="SUITE", help="a suite folder or its warp.toml")
        p.add_argument("--model", metavar="DIR", help="model folder to use instead of the suite's [model]")
        p.add_argument(
            "--cache", metavar="DIR", help="representation cache folder, or 'none' (default <suite>/.warp/cache)"
        )
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        p.add_argument("-q", "--quiet", action="store_true", help="print only the summary, not every failing case")

    check = sub.add_parser("check", help="run the suite against the model as it is (the CI gate)")
    suite_args(check)
    check.add_argument("--report", metavar="DIR", help="also write report.md, report.json and plots here")

    repair = sub.add_parser("repair", help="repair the model on the suite, save it with its certificate")
    suite_args(repair)
    repair.add_argument("--out", metavar="DIR", help="where the repaired model goes (default <suite>/.warp/repaired)")
    repair.add_argument("--rank", type=int, metavar="R", help="rank r (overrides [repair] rank)")
    repair.add_argument(
        "--gamma-s", type=_finite_float, metavar="G", help="must_fix margin (overrides [repair] gamma_s)"
    )
    repair.add_argument(
        "--gamma-h", type=_finite_float, metavar="G", help="must_keep margin (overrides [repair] gamma_h)"
    )
    repair.add_argument("--report", metavar="DIR", help="also write report.md, report.json and plots here")

    verify = sub.add_parser("verify", help="re-check a repaired model's certificate from scratch")
    verify.add_argument("model_dir", metavar="MODEL_DIR", help="the repaired model folder")
    verify.add_argument(
        "--certificate", metavar="FILE", help="the certificate (default MODEL_DIR/warp_certificate.json)"
    )
    verify.add_argument("--suite", metavar="SUITE", help="also check that the certificate covers this suite's cases")
    verify.add_argument("--cache", metavar="DIR", help="representation cache folder (default: none)")
    verify.add_argument("--json", action="store_true", help="print the checks as JSON")

    report = sub.add_parser(
        "report",
        help="write report.md, report.json and plots",
        description="SOURCE is a suite (runs it on the model as it is), a warp_certificate.json, a repaired "
        "model folder holding one, or a report.json written before (re-rendered).",
    )
    report.add_argument("source", metavar="SOURCE")
    report.add_argument("--out", metavar="DIR", required=True, help="folder for the report")
    report.add_argument("--model", metavar="DIR", help="for a suite: model folder instead of its [model]")
    report.add_argument("--cache", metavar="DIR", help="for a suite: representation cache folder, or 'none'")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .errors import WarpError

    try:
        return {"check": _check, "repair": _repair, "verify": _verify, "report": _report}[args.command](args)
    except WarpError as exc:
        print(f"warp-check {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # a folder that cannot be written, a path that is a file, ...: a message
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        print(f"warp-check {args.command}: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # pragma: no cover - interactive
        print("warp-check: interrupted", file=sys.stderr)
        return 130


# -- commands ---------------------------------------------------------------------------------


def _load(args: argparse.Namespace):
    from . import session
    from .suite import load_suite

    suite = load_suite(args.suite, model=args.model)
    if args.cache is None:
        session.workdir(suite)
        cache = session.default_cache_dir(suite)
    else:
        cache = None if args.cache.strip().lower() == "none" else Path(args.cache)
    return suite, cache


def _check(args: argparse.Namespace) -> int:
    from . import session

    suite, cache = _load(args)
    result = session.check(suite, session.load_adapter(suite), cache_dir=cache, progress=not args.json)
    return _finish(args, result)


def _repair(args: argparse.Namespace) -> int:
    from . import session
    from .errors import SettingsError

    suite, cache = _load(args)
    try:
        settings = suite.settings(rank=args.rank, gamma_s=args.gamma_s, gamma_h=args.gamma_h)
    except SettingsError as exc:
        print(f"warp-check repair: error: {FLAGS.get(exc.field, exc.field)}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.out) if args.out else session.default_out_dir(suite)
    adapter = session.load_adapter(suite)
    result = session.repair(suite, adapter, settings, out_dir=out, cache_dir=cache, progress=not args.json, flags=FLAGS)
    return _finish(args, result)


def _finish(args: argparse.Namespace, result) -> int:
    if getattr(args, "report", None):
        from .report import write_report

        path = write_report(args.report, [result.to_dict()])
        if not args.json:
            print(f"report: {path}")
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        _print_result(result, quiet=args.quiet)
    return EXIT_OK if result.passed else EXIT_FAILED


def _print_result(result, *, quiet: bool) -> None:
    details = result.details
    print(f"suite '{result.name}' ({result.suite}): {result.mode.value} mode")
    if details.get("model"):
        print(f"  model: {details['model']}" + (f" ({details['head']})" if details.get("head") else ""))
    for kind, row in result.counts().items():
        print(f"  {kind:<9}  {row['passed']} passed, {row['failed']} failed")
    if (details.get("counts") or {}).get("aux"):
        print(f"  aux        {details['counts']['aux']} case(s): GSN-FT data, not tests")
    certs = details.get("certs") or {}
    if certs:
        print(f"  certificates: Cert 1 {certs.get('cert1')}, Cert 2 {certs.get('cert2')}, Cert 3 {certs.get('cert3')}")
    if result.mode.value == "repair":
        print(f"  repaired model: {details.get('artefact') or 'none written'}")
    print(f"  {result.message}")
    failing = [v for v in result.verdicts if not v.passed]
    if failing and not quiet:
        print(f"\n{len(failing)} failing case(s):")
        for verdict in failing:
            print(f"  {verdict.case_id} ({verdict.kind}): {verdict.message}")
    print("PASSED" if result.passed else "FAILED")


def _verify(args: argparse.Namespace) -> int:
    from . import session
    from .verify import verify

    model_dir = Path(args.model_dir)
    certificate = Path(args.certificate) if args.certificate else None
    if args.suite:
        from .artefact import CERTIFICATE_NAME
        from .suite import load_suite

        suite = load_suite(args.suite, model=model_dir)
        result = session.audit(
            suite, model_dir, certificate or model_dir / CERTIFICATE_NAME, cache_dir=args.cache, progress=not args.json
        )
        if args.json:
            print(json.dumps(result.to_dict(), indent=2))
        else:
            _print_result(result, quiet=False)
        return EXIT_OK if result.passed else EXIT_FAILED
    verification = verify(model_dir, certificate, cache_dir=args.cache, progress=not args.json)
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


def _report(args: argparse.Namespace) -> int:
    from . import session
    from .artefact import CERTIFICATE_NAME, read_certificate
    from .errors import WarpError
    from .report import REPORT_JSON, run_from_certificate, write_report
    from .suite import SUITE_FILE

    source = Path(args.source)
    if source.is_dir() and (source / CERTIFICATE_NAME).is_file() and not (source / SUITE_FILE).is_file():
        source = source / CERTIFICATE_NAME
    if source.is_file() and source.name == REPORT_JSON:
        try:
            runs = json.loads(source.read_text(encoding="utf-8"))["runs"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise WarpError(f"{source}: not a warp-check report.json ({exc})") from None
    elif source.is_file() and source.suffix == ".json":
        runs = [run_from_certificate(read_certificate(source), source=str(source))]
    else:
        suite, cache = _load(_suite_args(args))
        runs = [session.check(suite, session.load_adapter(suite), cache_dir=cache).to_dict()]
    path = write_report(args.out, runs)
    print(f"report: {path}")
    return EXIT_OK


def _suite_args(args: argparse.Namespace) -> argparse.Namespace:
    return argparse.Namespace(suite=args.source, model=args.model, cache=args.cache)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
