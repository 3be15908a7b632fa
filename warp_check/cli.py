"""``warp-check``: the plugin's jobs outside pytest.

    warp-check check  SUITE  [--model DIR]                    the gate: the model as it is
    warp-check repair SUITE  [--out DIR] [--rank R] ...        repair, save, certify
    warp-check verify MODEL_DIR [--certificate FILE]           re-check a certificate from scratch
    warp-check report SOURCE --out DIR                         report.md + JSON + plots
    warp-check compare SUITE [--heldout F] [--general F] ...   WARP beside LoRA and full fine-tuning
    warp-check attack SUITE --recipe NAME [--out F] [--max N]  must_fix cases from a TextAttack recipe
    warp-check diff OLD NEW SUITE                              regressions of NEW against OLD only
    warp-check import SUITE FILE --out F [--format ...]         cases from CSV/TSV/JSONL/Parquet/AdvGLUE
                     [--predicted]                            unlabelled text: must_keep cases the model labels
    warp-check promote SUITE --from REPAIRED [--dry-run]       fixed must_fix cases become must_keep
    warp-check neighbours SUITE [--per-keep-case N] [--out F]  perturbed cases the model gets wrong

Exit codes: 0 everything holds; 1 a case fails, the repair did not converge or a certificate
does not hold (compare: a WARP run did not converge; the table is still printed); 2 a usage
mistake or an input that cannot be read (suite, model, certificate).
attack: 0 when the recipe ran to the end, whatever it found (0 successes is a finding, not an
error); 2 also for a recipe that cannot run here (unknown, needs the network, missing
warp-check[attack] or NLTK data), refused before anything is built or written; 130 on Ctrl-C,
after writing the cases found until then.
Suites and case verdicts come from :mod:`warp_check.runs`, so the words are pytest's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import warp_check
from warp_check import (
    CERTIFICATE_NAME,
    OPTION,
    REPORT_JSON,
    SUITE_FILE,
    BadValue,
    Certificate,
    Kind,
    Problem,
    RunJob,
    RunMode,
    RunResult,
    SettingsError,
    ValueKind,
    WarpError,
    WarpWarning,
    __version__,
    check,
    check_report_destination,
    check_suite,
    default_cache_dir,
    from_interrupt,
    load_adapter,
    load_suite,
    mode_named,
    overriding,
    run_from_certificate,
    setting_flags,
    verify,
    verify_chain,
    warm_entry,
    workdir,
    write_report,
)
from warp_check.extras.attacks import (
    STATUS_MEANING,
    STATUSES,
    RecipeSettings,
    check_out,
    check_ready,
    default_out,
    resolve_recipe,
    run_attack,
)
from warp_check.extras.baselines import TrainSettings
from warp_check.extras.compare import METHODS, CompareSettings, check_out_path, compare_suite, write_comparison
from warp_check.extras.importer import ADVGLUE_FIELDS, FORMATS, ImportSettings, format_of, import_cases
from warp_check.extras.neighbours import add_neighbours
from warp_check.extras.predictions import import_predicted
from warp_check.extras.promote import promote
from warp_check.repair.settings import KeepChoice, NeighbourSettings, SynonymUse
from warp_check.runs.details import WITHOUT_SYNONYMS

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
FLAGS = setting_flags(cli=True)  # how a user changes each repair setting from the command line
SUITE_OPTIONS = ("model", "cache", "json", "quiet", "device", "batch_size", "threads")  # every suite command's

# How the command words a bad value of a declared option (argparse puts "argument --flag: " before it).
_WORDING = {
    Problem.NOT_INTEGER: "{text!r} is not an integer",
    Problem.TOO_SMALL: "{text!r}: must be >= {minimum}",
    Problem.NOT_NUMBER: "{text!r} is not a number",
    Problem.NOT_FINITE: "{text!r} is not a finite number",
    Problem.NOT_DEVICE: "{text!r} is not a device: give auto, cpu, cuda or cuda:N",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own exit code for usage errors is 2 as well
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _count(text: str, minimum: int = 1) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{text!r}: must be >= {minimum}")
    return value


def _count_or_zero(text: str) -> int:
    return _count(text, minimum=0)


def _count_or_all(text: str) -> int | None:
    return None if text == "all" else _count(text, minimum=0)


def _parsed_by(name: str) -> Callable[[str], Any]:
    """argparse's type for the declared option ``name``: its value, or the command's words for a bad one."""
    option = OPTION[name]

    def parse(text: str) -> Any:
        try:
            return option.parse(text)
        except BadValue as exc:
            raise argparse.ArgumentTypeError(_WORDING[exc.problem].format(text=text, minimum=exc.minimum)) from None

    return parse


def _add(parser: argparse.ArgumentParser, name: str, **changes: Any) -> None:
    """The declared option ``name`` as one of the command's arguments (``changes``: this command's help...)."""
    option = OPTION[name]
    given: dict[str, Any] = {"dest": name, "help": option.cli_help or option.help}
    if option.kind is ValueKind.FLAG:
        given["action"] = "store_true"
    else:
        given["metavar"] = option.metavar or "DIR"
        if option.kind not in (ValueKind.PATH, ValueKind.TEXT):
            given["type"] = _parsed_by(name)
    parser.add_argument(*option.cli, **(given | changes))


Declared = tuple[str, dict[str, Any]]  # a declared option's name and what this command changes of it


@dataclass(frozen=True, kw_only=True)
class Command:
    """One ``warp-check`` command: its positionals, the declared options it takes, its own arguments."""

    name: str
    run: Callable[[argparse.Namespace], int]
    help: str
    description: str | None = None
    positionals: tuple[tuple[str, str, str | None], ...] = ()  # (dest, metavar, help)
    options: tuple[str | Declared, ...] = ()
    arguments: Callable[[argparse.ArgumentParser], None] | None = None  # the command's own

    def add_to(self, sub: Any) -> None:
        parser = sub.add_parser(self.name, help=self.help, description=self.description)
        for dest, metavar, help_text in self.positionals:
            parser.add_argument(dest, metavar=metavar, help=help_text)
        for option in self.options:
            name, changes = (option, {}) if isinstance(option, str) else option
            _add(parser, name, **changes)
        if self.arguments is not None:
            self.arguments(parser)
        parser.set_defaults(run=self.run)


SUITE = ("suite", "SUITE", "a suite folder or its warp.toml")


def _mode_command(mode: RunMode) -> Command:
    """The command that runs ``mode`` on a suite."""
    assert mode.command is not None
    return Command(
        name=mode.command,
        run=partial(_run_mode, mode),
        help=mode.command_help,
        positionals=(SUITE,),
        options=(*SUITE_OPTIONS, *mode.cli_options),
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="warp-check",
        description="Test and repair text classifiers against behavioural suites (WARP), outside pytest.",
    )
    parser.add_argument("--version", action="version", version=f"warp-check {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for command in commands():
        command.add_to(sub)
    return parser


def commands() -> tuple[Command, ...]:
    """The commands, in the order --help lists them: a command for each run mode that has one, then the rest."""
    modes = tuple(_mode_command(mode) for mode in warp_check.MODES if mode.command is not None)
    return modes + (
        Command(
            name="verify",
            run=_verify,
            help="re-check a repaired model's certificate from scratch",
            positionals=(("model_dir", "MODEL_DIR", "the repaired model folder"),),
            arguments=_verify_arguments,
        ),
        Command(
            name="report",
            run=_report,
            help="write report.md, report.json and plots",
            description="SOURCE is a suite (runs it on the model as it is), a warp_certificate.json, a repaired "
            "model folder holding one, or a report.json written before (re-rendered).",
            positionals=(("source", "SOURCE", None),),
            options=(
                ("out", {"required": True, "help": "folder for the report"}),
                ("model", {"help": "for a suite: model folder instead of its [model]"}),
                ("cache", {"help": "for a suite: representation cache folder, or 'none'"}),
            ),
        ),
        Command(
            name="compare",
            run=_compare,
            help="WARP beside same-layer LoRA and all-layers fine-tuning on the suite's cases (paper Table 3)",
            description="Trains the baselines on copies of the model in memory; writes nothing unless --out is given.",
            positionals=(SUITE,),
            options=("model",),
            arguments=_compare_arguments,
        ),
        Command(
            name="diff",
            run=_diff,
            help="gate NEW on regressions against OLD: a case fails only if OLD got it right and NEW does not",
            positionals=(
                ("old", "OLD", "the baseline model folder (the last release)"),
                ("new", "NEW", "the model folder under test"),
                ("suite", "SUITE", None),
            ),
            options=(
                ("cache", {"help": "representation cache folder, or 'none' (default <suite>/.warp)"}),
                "json",
                ("quiet", {"help": "print only the summary, not every regression"}),
            ),
        ),
        Command(
            name="import",
            run=_import,
            help="append cases from a CSV, TSV, JSONL, Parquet or AdvGLUE dev.json file to a suite's JSONL file",
            positionals=(
                ("suite", "SUITE", "the suite whose labels the cases must use"),
                ("source", "FILE", "the file to read"),
            ),
            arguments=_import_arguments,
        ),
        Command(
            name="neighbours",
            run=_neighbours,
            help="add perturbed copies of the suite's cases that the model gets wrong, as must_fix cases",
            positionals=(SUITE,),
            options=(
                *SUITE_OPTIONS,
                ("out", {"metavar": "FILE", "help": "JSONL file to append to (default: the must_fix file)"}),
            ),
            arguments=_neighbours_arguments,
        ),
        Command(
            name="promote",
            run=_promote,
            help="move the must_fix cases a certified repair fixed into the suite's must_keep file",
            positionals=(("suite", "SUITE", None),),
            arguments=_promote_arguments,
        ),
        Command(
            name="attack",
            run=_attack,
            help="add must_fix cases found by a TextAttack recipe on the suite's clean cases (warp-check[attack])",
            description="Attacks each clean case; every attack that flips the model's label, re-checked on the "
            "model, is appended as a must_fix case (source = recipe, original = the clean case's id). Case ids "
            "come from the text, so a second run adds nothing new. Offline recipes: "
            "DeepWordBugGao2018, Pruthi2019, PWWSRen2019, LEAP2023.",
            positionals=(SUITE,),
            arguments=_attack_arguments,
        ),
    )


def _verify_arguments(verify: argparse.ArgumentParser) -> None:
    verify.add_argument(
        "--certificate", metavar="FILE", help="the certificate (default MODEL_DIR/warp_certificate.json)"
    )
    verify.add_argument("--suite", metavar="SUITE", help="also check that the certificate covers this suite's cases")
    _add(verify, "cache", help="representation cache folder (default: none)")
    _add(verify, "json", help="print the checks as JSON")
    verify.add_argument(
        "--chain",
        action="store_true",
        help="re-check the whole history: every model it was repaired from, back to the first (with --suite: "
        "the drawdown on the suite's cases since the first model)",
    )


def _compare_arguments(compare: argparse.ArgumentParser) -> None:
    compare.add_argument("--heldout", metavar="FILE.jsonl", help="held-out adversarial cases (Atk. Gen column)")
    compare.add_argument("--general", metavar="FILE.jsonl", help="clean held-out cases (General Acc column)")
    compare.add_argument("--ranks", type=_int_list, metavar="R,R,...", help="WARP ranks (default [repair] rank)")
    compare.add_argument("--fix-size", type=int, metavar="N", help="seeded subsample of N must_fix cases")
    compare.add_argument("--keep-size", type=int, metavar="N", help="seeded subsample of N must_keep cases (0: none)")
    compare.add_argument(
        "--methods", type=_name_list, metavar="M,M,...", help="of original,lora,full_ft,warp (default: all)"
    )
    compare.add_argument("--epochs", type=int, metavar="N", help="baselines' epoch limit (default 300)")
    compare.add_argument(
        "--restore-best",
        action="store_true",
        help="baselines keep the weights of their lowest-loss epoch (default: the last epoch's, as the paper)",
    )
    compare.add_argument("--seed", type=int, default=0, metavar="N", help="subsampling and training seed (default 0)")
    compare.add_argument("--threads", type=int, metavar="N", help="torch CPU threads for the run")
    _add(compare, "cache", help="representation cache folder (default: none, nothing written)")
    _add(compare, "json", help="print the comparison as JSON")
    compare.add_argument("--out", metavar="FILE.md", help="also write the Markdown here and the JSON beside it")
    _add(compare, "quiet", help="no progress lines on stderr")


def _import_arguments(importer: argparse.ArgumentParser) -> None:
    importer.add_argument("--out", metavar="FILE", required=True, help="the JSONL case file to append to")
    importer.add_argument("--format", choices=FORMATS, help="default: from the file's name")
    importer.add_argument("--kind", choices=[k.value for k in Kind], default="must_keep")
    importer.add_argument("--text", default="text", metavar="COLUMN", help="column of the text (default text)")
    importer.add_argument("--text-pair", metavar="COLUMN", help="column of the second text, for pair tasks")
    importer.add_argument("--label", metavar="COLUMN", help="column of the label (default label)")
    importer.add_argument("--id", metavar="COLUMN", help="column of the case id (default: one made from the text)")
    importer.add_argument("--source", dest="case_source", metavar="TEXT", help="source written on every case")
    importer.add_argument("--task", choices=sorted(ADVGLUE_FIELDS), help="AdvGLUE: which task of dev.json")
    importer.add_argument(
        "--predicted",
        action="store_true",
        help="unlabelled text: label each row by the model's own prediction (no label column read) and append "
        "those predicted by at least the must_keep margin gamma_h as must_keep cases, which a repair then keeps "
        "(source prediction:FILE)",
    )


def _neighbours_arguments(neighbours: argparse.ArgumentParser) -> None:
    defaults = NeighbourSettings().drawing()
    neighbours.add_argument(
        "--per-case",
        type=_count_or_zero,
        metavar="N",
        help=f"perturbations drawn a must_fix case (default: the suite's [repair.neighbours], {defaults.per_case})",
    )
    neighbours.add_argument(
        "--per-keep-case",
        type=_count_or_zero,
        metavar="N",
        help=f"perturbations drawn a must_keep case ({defaults.keep_per_case}): those the model gets wrong become "
        "must_fix cases; 0 perturbs must_fix cases only",
    )
    neighbours.add_argument(
        "--keep-cases",
        type=_count_or_all,
        default=argparse.SUPPRESS,  # None means every one: absent means the suite's
        metavar="N",
        help=f"how many must_keep cases are perturbed ({defaults.keep_cases}; all: every one)",
    )
    neighbours.add_argument(
        "--keep-choice",
        choices=[c.value for c in KeepChoice],
        help=f"which must_keep cases: nearest the decision boundary, or a seeded sample ({defaults.keep_choice.value})",
    )
    neighbours.add_argument(
        "--synonyms",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="WordNet synonyms too, or never (default: the suite's; auto: where nltk and WordNet are installed)",
    )
    neighbours.add_argument("--seed", type=_count_or_zero, metavar="N")


def _promote_arguments(promote: argparse.ArgumentParser) -> None:
    promote.add_argument("--from", dest="repaired", metavar="REPAIRED", required=True, help="the repaired model folder")
    promote.add_argument("--dry-run", action="store_true", help="say what would move, change nothing")


def _attack_arguments(attack: argparse.ArgumentParser) -> None:
    attack.add_argument(
        "--recipe", required=True, metavar="NAME", help="TextAttack recipe (a unique prefix such as 'pwws' will do)"
    )
    attack.add_argument(
        "--from", dest="source_kind", choices=("must_keep", "aux"), default="must_keep", help="clean cases to attack"
    )
    attack.add_argument(
        "--out", metavar="FILE.jsonl", help="where new cases go (default: the suite's must_fix file, if it has one)"
    )
    attack.add_argument("--max", dest="max_cases", type=int, metavar="N", help="only the first N clean cases")
    attack.add_argument("--seed", type=int, default=0, metavar="S", help="search seed, per case (default 0)")
    attack.add_argument("--query-budget", type=int, metavar="Q", help="model queries per case (default: unbounded)")
    attack.add_argument("--threads", type=int, metavar="N", help="torch CPU threads (1 is fastest on a busy machine)")
    _add(attack, "model")
    attack.add_argument("--dry-run", action="store_true", help="attack and report, write nothing")
    _add(attack, "json")
    _add(attack, "quiet", help="no progress bar, no per-case lists")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("always", WarpWarning)  # each one a line, not Python's two-line format
        warnings.showwarning = _show_warning
        return _run(args)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    if issubclass(category, WarpWarning):
        print(f"warp-check: warning: {message}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _run(args: argparse.Namespace) -> int:
    try:
        return args.run(args)
    except KeyboardInterrupt:  # Ctrl-C: one line, what was half written is already removed
        return _interrupted()
    except Exception as exc:
        if from_interrupt(exc):
            return _interrupted()  # Ctrl-C that a library re-raised as its own error (pybind11: ImportError)
        if isinstance(exc, WarpError):
            print(f"warp-check {args.command}: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(exc, OSError):  # a folder that cannot be written, a path that is a file, ...: a message
            where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
            print(f"warp-check {args.command}: error: {exc.strerror or exc}{where}", file=sys.stderr)
            return EXIT_USAGE
        raise


def _interrupted() -> int:
    print("warp-check: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


# -- commands ---------------------------------------------------------------------------------


def _load(args: argparse.Namespace):
    if getattr(args, "report", None):
        check_report_destination(args.report)  # a report that cannot be written fails before the work
    compute = {option.name: getattr(args, option.name, None) for option in overriding("model")}
    suite = load_suite(args.suite, model=args.model).with_compute(**compute)
    if args.cache is None:
        workdir(suite)
        cache = default_cache_dir(suite)
    else:
        cache = None if args.cache.strip().lower() == "none" else Path(args.cache)
    return suite, cache


def _run_mode(mode: RunMode, args: argparse.Namespace) -> int:
    """``mode``'s command: the suite run by the mode, printed as the mode says."""
    suite, cache = _load(args)
    overrides = {o.name: getattr(args, o.name) for o in overriding("repair") if o.name in mode.cli_options}
    if overrides:
        try:  # the suite's settings with the flags, checked before anything loads
            suite.settings(**overrides)
        except SettingsError as exc:
            print(f"warp-check {args.command}: error: {FLAGS.get(exc.field, exc.field)}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    out = getattr(args, "out", None)
    job = RunJob(
        suite=suite,
        load_model=load_adapter,
        cache_dir=cache,
        # An earlier check of this exact folder answers without loading the model.
        warm=warm_entry(suite, cache) if mode.recalls_checks else None,
        out_dir=Path(out) if out else None,
        overrides=overrides,
        flags=FLAGS,
        progress=not args.json,
    )
    return _finish(args, mode, mode.run(job))


def _finish(args: argparse.Namespace, mode: RunMode, result: RunResult) -> int:
    if getattr(args, "report", None):
        path = write_report(args.report, [result])
        if not args.json:
            print(f"report: {path}")
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        _print_result(mode, result, quiet=getattr(args, "quiet", False))
    return EXIT_OK if result.passed else EXIT_FAILED


def _print_result(mode: RunMode, result: RunResult, *, quiet: bool) -> None:
    details = result.details
    print(mode.header(result, result.suite))
    if details.model:
        print("\n".join(mode.model_lines(details)))
    for kind, row in result.counts().items():
        print(f"  {kind.value:<9}  {row.passed} passed, {row.failed} failed")
    aux = details.counts.get(Kind.AUX)
    if aux:
        print(f"  aux        {aux} case(s): GSN-FT data, not tests")
    for line in mode.result_lines(result):
        print(line)
    print(f"  {result.message}")
    failing = [v for v in result.verdicts if not v.passed and v.expected_failure is None]
    expected = [v for v in result.verdicts if v.expected_failure is not None]
    if expected:
        print(f"  {len(expected)} case(s) wrong on the baseline too: expected failures, not regressions")
    if failing and not quiet:
        print(f"\n{len(failing)} failing case(s):")
        for verdict in failing:
            print(f"  {verdict.case_id} ({verdict.kind.value}): {verdict.message}")
    print("PASSED" if result.passed else "FAILED")


def _verify(args: argparse.Namespace) -> int:
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
            cache_dir=Path(args.cache) if args.cache else None,
            certificate=certificate or model_dir / CERTIFICATE_NAME,
            progress=not args.json,
        )
        return _finish(args, audit, audit.run(job))
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


def _verify_chain(args: argparse.Namespace) -> int:
    chain = verify_chain(args.model_dir, cache_dir=args.cache)
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
    drawdown = _drawdown(args.suite, chain.root, Path(args.model_dir), args.cache) if args.suite else None
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


def _drawdown(suite_path: str, first: Path, last: Path, cache: str | None) -> dict[str, Any]:
    """The suite's cases the first model of the chain got right, and which of them the last gets wrong."""
    answers = []
    for folder in (first, last):
        suite = load_suite(suite_path, model=folder)
        answers.append({v.case_id: v.passed for v in check_suite(suite, cache_dir=cache).verdicts})
    right_first = [case for case, right in answers[0].items() if right]
    return {"right_first": len(right_first), "lost": [case for case in right_first if not answers[1].get(case, False)]}


def _report(args: argparse.Namespace) -> int:
    source = Path(args.source)
    if source.is_dir() and (source / CERTIFICATE_NAME).is_file() and not (source / SUITE_FILE).is_file():
        source = source / CERTIFICATE_NAME
    if source.is_file() and source.name == REPORT_JSON:
        try:
            runs = [RunResult.from_dict(run) for run in json.loads(source.read_text(encoding="utf-8"))["runs"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise WarpError(f"{source}: not a warp-check report.json ({exc})") from None
    elif source.is_file() and source.suffix == ".json":
        runs = [run_from_certificate(Certificate.read(source), source=str(source))]
    else:
        suite, cache = _load(_suite_args(args))
        runs = [check(suite, load_adapter(suite), cache_dir=cache)]
    path = write_report(args.out, runs)
    print(f"report: {path}")
    return EXIT_OK


def _suite_args(args: argparse.Namespace) -> argparse.Namespace:
    return argparse.Namespace(suite=args.source, model=args.model, cache=args.cache)


# -- compare ----------------------------------------------------------------------------------

COMPARE_FLAGS = {
    "methods": "--methods",
    "ranks": "--ranks",
    "fix_size": "--fix-size",
    "keep_size": "--keep-size",
    "max_epochs": "--epochs",
    "restore_best": "--restore-best",
    "seed": "--seed",
    "threads": "--threads",
    "rank": "--ranks",
}


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None


def _name_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _compare(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite, model=args.model)
    if args.out:
        check_out_path(args.out, suite.model_dir)  # before the training, not after
    cache = None if args.cache is None or args.cache.strip().lower() == "none" else Path(args.cache)
    quiet = args.quiet

    def progress(message: str) -> None:
        if not quiet:
            print(f"compare: {message}", file=sys.stderr, flush=True)

    try:
        epochs = {} if args.epochs is None else {"max_epochs": args.epochs}
        train = TrainSettings(seed=args.seed, restore_best=args.restore_best, **epochs)
        settings = CompareSettings(
            methods=args.methods if args.methods is not None else METHODS,
            ranks=args.ranks,
            fix_size=args.fix_size,
            keep_size=args.keep_size,
            seed=args.seed,
            threads=args.threads,
            batch_size=suite.model.batch_size,
            train=train,
        )
        comparison = compare_suite(
            suite, settings, general=args.general, heldout=args.heldout, cache_dir=cache, progress=progress
        )
    except SettingsError as exc:
        print(f"warp-check compare: error: {COMPARE_FLAGS.get(exc.field, exc.field)}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(comparison.to_dict(), indent=2))
    else:
        print(comparison.to_markdown(), end="")
    if args.out:
        md, js = write_comparison(comparison, args.out)
        print(f"comparison: {md} and {js}", file=sys.stderr if args.json else sys.stdout)
    if not comparison.passed:
        failed = [r.title for r in comparison.rows if r.method == "warp" and not r.details.get("ok", True)]
        print(f"warp-check compare: {', '.join(failed)} did not converge", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


# -- attack ------------------------------------------------------------------------------------

ATTACK_FLAGS = {
    "max_cases": "--max",
    "seed": "--seed",
    "query_budget": "--query-budget",
    "source_kind": "--from",
    "threads": "--threads",
}


def _diff(args: argparse.Namespace) -> int:
    args.model = args.new
    suite, cache = _load(args)
    mode = mode_named("baseline").chosen_with(args.old)
    job = RunJob(
        suite=suite, load_model=load_adapter, cache_dir=cache, warm=warm_entry(suite, cache), progress=not args.json
    )
    return _finish(args, mode, mode.run(job))


def _import(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite)
    try:
        file_format = args.format or format_of(args.source)
    except SettingsError as exc:
        print(f"warp-check import: error: --format: {exc.why}", file=sys.stderr)
        return EXIT_USAGE
    if args.predicted and (args.kind != Kind.MUST_KEEP.value or args.label is not None):
        why = f"makes must_keep cases, not {args.kind}" if args.label is None else "reads no label column (--label)"
        print(f"warp-check import: error: --predicted {why}", file=sys.stderr)
        return EXIT_USAGE
    settings = ImportSettings(
        format=file_format,
        text=args.text,
        text_pair=args.text_pair,
        label=args.label or "label",
        id=args.id,
        kind=Kind(args.kind),
        source=args.case_source,
        task=args.task,
        predicted=args.predicted,
    )
    if args.predicted:
        return _import_predicted(suite, args, settings)
    result = import_cases(suite, args.source, args.out, settings)
    appended = result.appended
    print(
        f"{result.rows} row(s) read from {args.source}: {len(appended.added)} case(s) appended to {appended.path}, "
        f"{appended.duplicates} already there"
    )
    return EXIT_OK


def _import_predicted(suite, args: argparse.Namespace, settings: ImportSettings) -> int:
    workdir(suite)
    result = import_predicted(suite, args.source, args.out, settings, cache_dir=default_cache_dir(suite), progress=True)
    appended = result.appended
    labels = ", ".join(f"{count} {name}" for name, count in result.by_label) or "none"
    print(
        f"{result.rows} row(s) read from {args.source}, labelled by the model's predictions ({labels}): "
        f"{len(appended.added)} must_keep case(s) appended to {appended.path}, {appended.duplicates} already there"
    )
    if result.repeated:
        print(f"  left out: {result.repeated} the model sees as an earlier row of the file")
    if result.near_boundary:
        print(
            f"  left out: {result.near_boundary} predicted by less than the must_keep margin gamma_h = "
            f"{result.gamma_h:g} (a repair would have to move them to keep them)"
        )
    if result.in_suite:
        print(f"  left out: {result.in_suite} the model sees as cases of the suite (their labels are the suite's)")
    if result.no_text:
        print(f"  left out: {result.no_text} the model sees as no text (nothing but special and unknown tokens)")
    listed = {case_file.path.resolve() for case_file in suite.case_files}
    if appended.added and appended.path.resolve() not in listed:
        where = appended.path.resolve()
        shown = where.relative_to(suite.root) if where.is_relative_to(suite.root) else where
        print(
            f'  to use them, list the file in {suite.toml.name}: [[cases]] path = "{shown}" (they keep the '
            "model's predictions, right or wrong: read them first)"
        )
    return EXIT_OK


def _neighbours(args: argparse.Namespace) -> int:
    suite, cache = _load(args)
    out = Path(args.out) if args.out else default_out(suite)
    adapter = load_adapter(suite)
    flags = {
        "per_case": args.per_case,
        "keep_per_case": args.per_keep_case,
        "keep_choice": args.keep_choice,
        "synonyms": args.synonyms,
        "seed": args.seed,
    }
    changes = {name: value for name, value in flags.items() if value is not None}
    if hasattr(args, "keep_cases"):
        changes["keep_cases"] = args.keep_cases
    # The suite's neighbourhood, or where it draws nothing (the default) the measured counts: the
    # command is asked to draw. Its flags change either.
    settings = dataclasses.replace(suite.repair.neighbours.drawing(), **changes)
    added = add_neighbours(suite, adapter, out, settings, cache_dir=cache)
    appended = added.appended
    already = f"; {appended.duplicates} already there" if appended.duplicates else ""
    print(f"{len(appended.added)} neighbour case(s) the model gets wrong appended to {appended.path}{already}")
    if added.synonyms is SynonymUse.NOT_INSTALLED:
        print(f"  note: {WITHOUT_SYNONYMS}")
    return EXIT_OK


def _promote(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite)
    promotion = promote(suite, args.repaired, dry_run=args.dry_run)
    verb = "would move" if args.dry_run else "moved"
    print(
        f"{verb} {len(promotion.promoted)} fixed must_fix case(s) to {promotion.keep_file} "
        f"(fixed_by {promotion.certificate_sha256[:12]}…); {len(promotion.not_fixed)} not certified fixed, left as "
        "must_fix"
    )
    return EXIT_OK


def _attack(args: argparse.Namespace) -> int:
    recipe = resolve_recipe(args.recipe)  # refuses online-only and unknown recipes before any import
    try:
        settings = RecipeSettings(
            recipe=recipe.name,
            seed=args.seed,
            max_cases=args.max_cases,
            query_budget=args.query_budget,
            source_kind=args.source_kind,
            threads=args.threads,
        )
    except SettingsError as exc:
        print(f"warp-check attack: error: {ATTACK_FLAGS.get(exc.field, exc.field)}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    check_ready(recipe)
    suite = load_suite(args.suite, model=args.model)
    settings = dataclasses.replace(settings, batch_size=suite.model.batch_size)
    out = None if args.dry_run else Path(args.out) if args.out else default_out(suite)
    if out is not None:
        check_out(suite, out)  # a wrong --out is a usage error before the model loads, not after
    run = run_attack(suite, load_adapter(suite), settings, out=out, progress=not (args.quiet or args.json))
    if args.json:
        print(json.dumps({"suite": str(suite.toml), **run.to_dict()}, indent=2))
    else:
        _print_attack(suite, run, quiet=args.quiet)
    return EXIT_INTERRUPTED if run.interrupted else EXIT_OK


def _print_attack(suite, run, *, quiet: bool) -> None:
    kind, seed = run.settings.source_kind.value, run.settings.seed
    print(f"suite '{suite.name}' ({suite.toml}): {run.recipe} on {run.selected} {kind} case(s), seed {seed}")
    for status in STATUSES:
        print(f"  {status:<9} {run.count(status):>5}  {STATUS_MEANING[status]}")
    data = run.to_dict()
    print(
        f"  speed: {run.examples_per_second:.3g} case(s)/s ({run.attack_seconds:.1f} s attacking, "
        f"{data['mean_queries']:.3g} model queries per case; {run.build_seconds:.1f} s loading the recipe)"
    )
    if run.interrupted:
        print(f"  interrupted after {len(run.attempts)} of {run.selected} case(s): what was found until then is kept")
    if run.dropped:
        print(f"  dropped {len(run.dropped)} success(es): the model gets them right when re-checked (boundary flips)")
        for case_id, gap in run.dropped if not quiet else ():
            print(f"    from {case_id}: gap {gap:+.3g}")
    succeeded = run.count("succeeded")
    if run.out is None:
        print(f"  dry run: nothing written ({succeeded - len(run.dropped)} case(s) would be offered)")
    elif run.added:
        extra = f" ({run.duplicates} already there)" if run.duplicates else ""
        print(f"  wrote {len(run.added)} new must_fix case(s) to {run.out}{extra}")
    elif succeeded:
        print(f"  nothing written: every case found is already in {run.out} or the suite")
    else:
        print("  nothing written: no attack succeeded")
    for note in run.notes:
        print(f"  note: {note}")
    if run.caveat and run.added:
        print(f"  caution: {run.caveat}")


def console() -> None:
    """The ``warp-check`` command: :func:`main`, then exit with its code. A Ctrl-C that arrives once
    the work is done, while Python shuts down, is ignored: it would end the process by the signal,
    with no message, after everything was written and said."""
    code = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)


if __name__ == "__main__":
    console()
