"""``warp-check``: the plugin's jobs outside pytest.

    warp-check check  SUITE  [--model DIR]                    the gate: the model as it is
    warp-check repair SUITE  [--out DIR] [--rank R] ...        repair, save, certify
                     [--baseline OLD]                         restore the must_keep cases OLD got right
    warp-check verify MODEL_DIR [--certificate FILE]           re-check a certificate from scratch
                     [--chain --suite S [--from OLD]]         every model back to the first, and the drawdown
    warp-check report SOURCE --out DIR                         report.md + JSON + plots
    warp-check compare SUITE [--heldout F] [--general F] ...   WARP beside LoRA and full fine-tuning
    warp-check attack SUITE --recipe NAME [--out F] [--max N]  must_fix cases from a TextAttack recipe
    warp-check diff OLD NEW SUITE [--traffic F] [--worse-p P]  regressions of NEW against OLD, the paired test,
                                                               Cert 4 of NEW against OLD on the traffic
    warp-check history SUITE MODEL... [--traffic F] [--report D] each release against the one before it
    warp-check init SUITE --model DIR|ORG/NAME [--revision R]  a new suite: warp.toml and empty case files
    warp-check import SUITE FILE [--out F] [--format ...]       cases from CSV/TSV/JSONL/Parquet/AdvGLUE
                     [--split-by-model | --drop-wrong]         labelled rows sorted by the model (wrong: must_fix)
                     [--predicted]                            unlabelled text: must_keep cases the model labels
    warp-check promote SUITE --from REPAIRED [--dry-run]       fixed must_fix cases become must_keep
                      [--cache DIR]                          v read and stored there (default: the suite's)
    warp-check neighbours SUITE [--per-keep-case N] [--out F]  perturbed cases the model gets wrong
    warp-check tune SUITE [--traffic F] [--max-change X]       the strongest repair within a traffic budget
                    [--folds K] [--write]

Exit codes: 0 everything holds; 1 a case fails, the repair did not converge or a certificate
does not hold (compare: a WARP run did not converge; the table is still printed; tune: no
candidate fits the budget); 2 a usage mistake or an input that cannot be read (suite, model, certificate).
attack: 0 when the recipe ran to the end, whatever it found (0 successes is a finding, not an
error); 2 also for a recipe that cannot run here (unknown, needs the network, missing
warp-check[attack] or NLTK data), refused before anything is built or written; 130 on Ctrl-C,
after writing the cases found until then.
Suites and case verdicts come from :mod:`warp_check.runs`, so the words are pytest's.

The commands are a table (:func:`commands`): one for each run mode that names a command
(``warp_check.frontend.MODES``: check, repair), then the others, whose arguments and work live in
:mod:`warp_check.commands`. Every argument that is a run option is its declaration in
``warp_check.options`` (the plugin's too), taken by name; a command declares only its own verbs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import textwrap
import warnings
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from warp_check import (
    CERTIFICATE_NAME,
    REPORT_HTML,
    REPORT_JSON,
    Certificate,
    SettingsError,
    WarpError,
    WarpWarning,
    __version__,
    check,
    frontend,
    load_adapter,
    load_suite,
    read_report,
    resolve_model,
    run_from_certificate,
    write_report,
)
from warp_check.commands.arguments import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROGRESS_OPTIONS,
    SUITE,
    Command,
    Parser,
    Use,
    progress_of,
    setting_flags,
    suite_and_cache,
    suite_options,
    traffic_loader,
)
from warp_check.commands.cases import (
    ATTACK_OPTIONS,
    IMPORT_OPTIONS,
    NEIGHBOURS_OPTIONS,
    PROMOTE_OPTIONS,
    attack_arguments,
    attack_command,
    import_arguments,
    import_command,
    neighbours_arguments,
    neighbours_command,
    promote_arguments,
    promote_command,
)
from warp_check.commands.certificates import VERIFY_OPTIONS, verify_arguments, verify_command
from warp_check.commands.compare import COMPARE_OPTIONS, compare_arguments, compare_command
from warp_check.commands.defer import defer_arguments, defer_command
from warp_check.commands.history import HISTORY_OPTIONS, history_arguments, history_command
from warp_check.commands.init import INIT_OPTIONS, init_command
from warp_check.commands.results import finish
from warp_check.commands.tune import tune_arguments, tune_command
from warp_check.frontend import (
    DOCS_URL,
    SUITE_FILE,
    RunJob,
    RunMode,
    check_report_destination,
    ctrl_c_never_lost,
    flag_error,
    from_interrupt,
    mode_named,
    overriding,
    warm_entry,
    write_text,
)


def _mode_command(mode: RunMode) -> Command:
    """The command that runs ``mode`` on a suite."""
    assert mode.command is not None
    return Command(
        name=mode.command,
        run=partial(_run_mode, mode),
        help=mode.command_help,
        positionals=(SUITE,),
        options=(*suite_options(), *mode.cli_options),
    )


class _WholeWords(argparse.HelpFormatter):
    """--help's text wrapped between words only: a URL (or a flag) is never cut at its hyphens."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        text = " ".join(text.split())
        return textwrap.fill(
            text, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False
        )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="warp-check",
        description="Test and repair text classifiers against behavioural suites (WARP), outside pytest.",
        epilog=f"Documentation: {DOCS_URL} (every command and option: {DOCS_URL}reference/commands/)",
        formatter_class=_WholeWords,
    )
    parser.add_argument("--version", action="version", version=f"warp-check {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for command in commands():
        command.add_to(sub)
    parser.commands = dict(sub.choices)
    for name, command in parser.commands.items():  # the page that documents each command, under its --help
        command.epilog = f"Documentation: {DOCS_URL}reference/commands/#warp-check-{name}"
        command.formatter_class = _WholeWords
    return parser


def commands() -> tuple[Command, ...]:
    """The commands, in the order --help lists them: a command for each run mode that has one, then the rest."""
    modes = tuple(_mode_command(mode) for mode in frontend.MODES if mode.command is not None)
    return modes + (
        Command(
            name="verify",
            run=verify_command,
            help="re-check a repaired model's certificate from scratch",
            positionals=(("model_dir", "MODEL_DIR", "the repaired model: a folder, or a Hub id org/name"),),
            options=VERIFY_OPTIONS,
            arguments=verify_arguments,
        ),
        Command(
            name="report",
            run=_report,
            help="write index.html, report.md, report.json and plots",
            description="SOURCE is a suite (runs it on the model as it is), a warp_certificate.json, a repaired "
            "model folder holding one, or a report.json written before (re-rendered).",
            positionals=(("source", "SOURCE", None),),
            options=(
                Use(name="out", required=True, help="folder for the report"),
                Use(name="model", help="for a suite: model folder or Hub id instead of its [model]"),
                "revision",
                Use(name="cache", help="for a suite: representation cache folder, or 'none'"),
                *PROGRESS_OPTIONS,
            ),
        ),
        Command(
            name="compare",
            run=compare_command,
            help="WARP beside same-layer LoRA and all-layers fine-tuning on the suite's cases (paper Table 3)",
            description="Trains the baselines on copies of the model in memory; writes nothing unless --out is given.",
            positionals=(SUITE,),
            options=COMPARE_OPTIONS,
            arguments=compare_arguments,
        ),
        Command(
            name="diff",
            run=_diff,
            help="gate NEW on regressions against OLD: a case fails only if OLD got it right and NEW does not",
            positionals=(
                ("old", "OLD", "the baseline model (the last release): a folder, or a Hub id org/name[@revision]"),
                ("new", "NEW", "the model under test: a folder, or a Hub id (with --revision)"),
                ("suite", "SUITE", None),
            ),
            options=(
                Use(name="revision", help="revision of NEW where it is a Hub id (default main)"),
                Use(name="cache", help="representation cache folder, or 'none' (default <suite>/.warp)"),
                "no_cache",
                Use(
                    name="traffic",
                    help="unlabelled texts like the model's traffic (overrides [traffic] path): Cert 4 bounds the "
                    "share of predictions NEW changes against OLD on them",
                ),
                Use(
                    name="max_change",
                    help="the most NEW may change of OLD's predictions on the traffic, as a share (0.01: one "
                    "percent), bounded at [traffic] confidence; over it the run fails (overrides [traffic] max_change)",
                ),
                "worse_p",
                Use(name="report", help="also write index.html, report.md, report.json and plots here"),
                "json",
                Use(name="quiet", help="print only the summary, not every regression"),
                *PROGRESS_OPTIONS,
            ),
        ),
        Command(
            name="history",
            run=history_command,
            help="releases one after another on a suite: pass counts, regressions, fixes, the paired test and "
            "Cert 4's traffic bound, each against the release before it",
            description="MODEL...: the releases, oldest first; a repaired model folder alone: its certificate "
            "chain. Exit 1 where a release fails --worse-p or --max-change against the one before it.",
            positionals=(SUITE,),
            options=HISTORY_OPTIONS,
            arguments=history_arguments,
        ),
        Command(
            name="init",
            run=init_command,
            help="start a suite: warp.toml for a model (a folder or a Hub id) and empty case files",
            description="Writes SUITE/warp.toml (the model, its labels from its id2label, a must_keep and a must_fix "
            "file) and the two empty JSONL files; refuses a folder that holds any of them. Fill it with import.",
            positionals=(("suite", "SUITE", "the new suite's folder (created if needed)"),),
            options=INIT_OPTIONS,
        ),
        Command(
            name="import",
            run=import_command,
            help="append cases from a CSV, TSV, JSONL, Parquet or AdvGLUE dev.json file to a suite's JSONL file",
            positionals=(
                ("suite", "SUITE", "the suite whose labels the cases must use"),
                ("source", "FILE", "the file to read"),
            ),
            options=IMPORT_OPTIONS,
            arguments=import_arguments,
        ),
        Command(
            name="neighbours",
            run=neighbours_command,
            help="add perturbed copies of the suite's cases that the model gets wrong, as must_fix cases",
            positionals=(SUITE,),
            options=(*suite_options(), *NEIGHBOURS_OPTIONS),
            arguments=neighbours_arguments,
        ),
        Command(
            name="tune",
            run=tune_command,
            help="choose the repair settings that fix most unseen must_fix cases within a traffic budget",
            description="Scores a fixed grid of settings (mu, gamma_s, neighbourhood copies, traffic texts as "
            "guards) by k-fold over the must_fix cases, each bounded on the traffic's tune part (never the part "
            "Cert 4 uses); exit 1 when none fits the budget.",
            positionals=(SUITE,),
            options=(*suite_options(), *(option.name for option in overriding("traffic"))),
            arguments=tune_arguments,
        ),
        Command(
            name="promote",
            run=promote_command,
            help="move the must_fix cases a certified repair fixed into the suite's must_keep file",
            positionals=(("suite", "SUITE", None),),
            options=PROMOTE_OPTIONS,
            arguments=promote_arguments,
        ),
        Command(
            name="defer",
            run=defer_command,
            help="move the must_fix cases a traffic budget cannot buy into the suite's deferred file, or back",
            description="Cases go by id, or --from the report.json of a repair over its budget (the cases it "
            "names). Deferred cases stay the suite's: every check runs them as known failures, no repair sees "
            "them. --restore IDS (or --all) puts them back at their lines. Every file is written, or none.",
            positionals=(SUITE,),
            arguments=defer_arguments,
        ),
        Command(
            name="attack",
            run=attack_command,
            help="add must_fix cases found by a TextAttack recipe on the suite's clean cases (warp-check[attack])",
            description="Attacks each clean case; every attack that flips the model's label, re-checked on the "
            "model, is appended as a must_fix case (source = recipe, original = the clean case's id). Case ids "
            "come from the text, so a second run adds nothing new. Offline recipes: "
            "DeepWordBugGao2018, Pruthi2019, PWWSRen2019, LEAP2023.",
            positionals=(SUITE,),
            options=ATTACK_OPTIONS,
            arguments=attack_arguments,
        ),
    )


def main(argv: Sequence[str] | None = None) -> int:
    with _output_never_fails():
        args = build_parser().parse_args(argv)
        with warnings.catch_warnings():
            warnings.simplefilter("always", WarpWarning)  # each one a line, not Python's two-line format
            warnings.showwarning = _show_warning
            return _run(args)


class _Output:
    """stdout or stderr for one command: what the stream cannot encode goes as ASCII (``->`` for
    an arrow, ``\\u00e9`` for any other character), and once the stream is closed or its reader
    left (``| head -1``) the rest is dropped. Output is what the work says, never the work: the
    run goes on to its end and its exit code, and nothing half written is left behind."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.gone = stream is None  # a process started with the stream closed has None

    def write(self, text: str) -> int:
        self.gone = self.gone or not write_text(self._stream, text)
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self.gone = True

    def isatty(self) -> bool:
        try:
            return not self.gone and bool(self._stream.isatty())
        except (OSError, ValueError, AttributeError):
            return False

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def _output_never_fails():
    """sys.stdout and sys.stderr as :class:`_Output` while a command runs."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Output(saved[0]), _Output(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    if issubclass(category, WarpWarning):
        print(f"warp-check: warning: {message}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _run(args: argparse.Namespace) -> int:
    try:
        with ctrl_c_never_lost():
            return args.run(args)
    except KeyboardInterrupt:  # Ctrl-C: one line, what was half written is already removed
        return _interrupted()
    except Exception as exc:
        if from_interrupt(exc):
            return _interrupted()  # Ctrl-C that a library re-raised as its own error (pybind11: ImportError)
        if isinstance(exc, WarpError):
            said = flag_error(exc, cli=True) if isinstance(exc, SettingsError) else None
            print(f"warp-check {args.command}: error: {said or exc}", file=sys.stderr)
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


def _run_mode(mode: RunMode, args: argparse.Namespace) -> int:
    """``mode``'s command: the suite run by the mode, printed as the mode says."""
    suite, cache = suite_and_cache(args, load=load_suite)
    overrides = {o.key: getattr(args, o.name) for o in overriding("repair") if o.name in mode.cli_options}
    flags = setting_flags()
    if overrides:
        try:  # the suite's settings with the flags, checked before anything loads
            suite.settings(**overrides)
        except SettingsError as exc:
            print(f"warp-check {args.command}: error: {flags.get(exc.field, exc.field)}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    out = getattr(args, "out", None)
    job = RunJob(
        suite=suite,
        load_model=load_adapter,
        cache_dir=cache,
        # An earlier check of this exact folder answers without loading the model.
        warm=warm_entry(suite, cache) if mode.recalls_checks else None,
        out_dir=Path(out) if out else None,
        baseline=Path(args.baseline) if getattr(args, "baseline", None) else None,
        overrides=overrides,
        flags=flags,
        progress=progress_of(args),
        load_traffic=traffic_loader(args) if mode.measures_traffic else None,
    )
    return finish(args, mode, mode.run(job))


def _report(args: argparse.Namespace) -> int:
    check_report_destination(args.out)  # a folder that cannot be written is refused before the work
    source = Path(args.source)
    if source.is_dir() and (source / CERTIFICATE_NAME).is_file() and not (source / SUITE_FILE).is_file():
        source = source / CERTIFICATE_NAME
    if source.is_file() and source.name == REPORT_JSON:
        runs = read_report(source)
    elif source.is_file() and source.suffix == ".json":
        runs = [run_from_certificate(Certificate.read(source), source=str(source))]
    else:
        suite, cache = suite_and_cache(_suite_args(args), load=load_suite)
        runs = [check(suite, load_adapter(suite), cache_dir=cache, progress=progress_of(args))]
    path = write_report(args.out, runs)
    print(f"report: {path}\nreport page: {path.parent / REPORT_HTML}")
    return EXIT_OK


def _suite_args(args: argparse.Namespace) -> argparse.Namespace:
    return argparse.Namespace(suite=args.source, model=args.model, revision=args.revision, cache=args.cache)


def _diff(args: argparse.Namespace) -> int:
    args.model = args.new
    suite, cache = suite_and_cache(args, load=load_suite)
    mode = mode_named("baseline").chosen_with(resolve_model(args.old).folder, {"worse_p": args.worse_p})
    job = RunJob(
        suite=suite,
        load_model=load_adapter,
        cache_dir=cache,
        warm=warm_entry(suite, cache),
        progress=progress_of(args),
        load_traffic=traffic_loader(args),
    )
    return finish(args, mode, mode.run(job))


def console() -> None:
    """The ``warp-check`` command: :func:`main`, then exit with its code. A Ctrl-C that arrives once
    the work is done, while Python shuts down, is ignored: it would end the process by the signal,
    with no message, after everything was written and said."""
    _no_closed_standard_files()
    code = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _flush_at_exit()
    sys.exit(code)


def _no_closed_standard_files() -> None:
    """A process started with stdin, stdout or stderr closed (``2>&-``) gets /dev/null there: else
    the next file it opens takes that number, and what a library writes on stderr lands in it."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            if getattr(sys, name) is None:
                setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False))  # noqa: SIM115 - for the process's life


def _flush_at_exit() -> None:
    """Flush stdout and stderr now; where the reader left, point the file at /dev/null, so that
    Python's own flush at exit neither prints a BrokenPipeError nor changes the exit code."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, stream.fileno())
                os.close(null)


if __name__ == "__main__":
    console()
