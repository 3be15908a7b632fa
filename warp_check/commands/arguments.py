"""What every ``warp-check`` command shares: exit codes, the parser, declared options as arguments
(:func:`add_declared`), the command record (:class:`Command`) and a suite with its cache."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_check import (
    OPTION,
    BadValue,
    Problem,
    Progress,
    ProgressStyle,
    SettingsError,
    Suite,
    TrafficSample,
    ValueKind,
    WarpError,
    check_report_destination,
    check_traffic_overrides,
    default_cache_dir,
    load_suite,
    load_traffic,
    model_cache_dir,
    overriding,
    setting_flags,
    workdir,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
PROGRESS_OPTIONS = ("progress", "progress_after")  # every command that runs a model's
FLAGS = setting_flags(cli=True)  # how a user changes each repair setting from the command line
# Every suite command's.
SUITE_OPTIONS = (
    "model", "revision", "cache", "no_cache", "json", "quiet", "device", "engine", "batch_size", "threads",
    *PROGRESS_OPTIONS,
)  # fmt: skip

class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own exit code for usage errors is 2 as well
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def count(text: str, minimum: int = 1) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {BadValue(text, Problem.NOT_INTEGER).rule}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{text!r}: {BadValue(text, Problem.TOO_SMALL, minimum=minimum).rule}")
    return value


def count_or_zero(text: str) -> int:
    return count(text, minimum=0)


def count_or_all(text: str) -> int | None:
    return None if text == "all" else count(text, minimum=0)


def _parsed_by(name: str) -> Callable[[str], Any]:
    """argparse's type for the declared option ``name``: its value, or the command's words for a bad one."""
    option = OPTION[name]

    def parse(text: str) -> Any:
        try:
            return option.parse(text)
        except BadValue as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc.rule}") from None  # after "argument --flag: "

    return parse


def add_declared(parser: argparse.ArgumentParser, name: str, **changes: Any) -> None:
    """The declared option ``name`` as one of the command's arguments (``changes``: this command's help...)."""
    option = OPTION[name]
    given: dict[str, Any] = {"dest": name, "help": option.cli_help or option.help}
    if option.kind is ValueKind.FLAG:
        given["action"] = "store_true"
    else:
        given["metavar"] = option.metavar or "DIR"
        if option.kind not in (ValueKind.PATH, ValueKind.MODEL, ValueKind.TEXT):
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
            add_declared(parser, name, **changes)
        if self.arguments is not None:
            self.arguments(parser)
        parser.set_defaults(run=self.run)


SUITE = ("suite", "SUITE", "a suite folder or its warp.toml")


def traffic_loader(args: argparse.Namespace) -> Callable[[Suite], TrafficSample | None]:
    """The suite's traffic with ``--traffic`` / ``--max-change`` over its [traffic] (checked here, before
    anything loads: a SettingsError names the flag's setting)."""
    values = {option.name: getattr(args, option.name, None) for option in overriding("traffic")}
    check_traffic_overrides(values)
    path = Path(values["traffic"]) if values["traffic"] else None
    return lambda suite: load_traffic(suite, path=path, max_change=values["max_change"])


def add_progress(parser: argparse.ArgumentParser) -> None:
    """--progress and --progress-after, for a command whose arguments are its own."""
    for name in PROGRESS_OPTIONS:
        add_declared(parser, name)


def progress_of(args: argparse.Namespace) -> Progress:
    """The progress the command's arguments ask for, on stderr: -q shows lines, not a bar; --json
    shows none unless --progress is given (its output is for programs)."""
    style = getattr(args, "progress", None)
    if style is None and getattr(args, "json", False):
        style = ProgressStyle.OFF
    try:
        return Progress.chosen(
            style, after_s=getattr(args, "progress_after", None), quiet=getattr(args, "quiet", False)
        )
    except SettingsError as exc:
        flag = "--progress" if exc.field == "style" else "--progress-after"
        raise WarpError(f"{flag}: {exc.of_key}") from None


def suite_and_cache(args: argparse.Namespace, *, load: Callable[..., Suite] = load_suite) -> tuple[Suite, Path | None]:
    """The suite the command names (``load`` reads it) with its cache folder; a report that cannot be
    written is refused first."""
    if getattr(args, "report", None):
        check_report_destination(args.report)  # a report that cannot be written fails before the work
    compute = {option.name: getattr(args, option.name, None) for option in overriding("model")}
    suite = load(args.suite, model=args.model, revision=getattr(args, "revision", None)).with_compute(**compute)
    return suite, cache_of(args, suite)


def cache_of(args: argparse.Namespace, suite: Suite) -> Path | None:
    """The representation cache the command's ``--cache`` names: the suite's own by default, None for
    ``--no-cache`` or 'none'."""
    if no_cache(args):
        return None
    if args.cache is None:
        workdir(suite)
        return default_cache_dir(suite)
    return Path(args.cache)


def no_cache(args: argparse.Namespace) -> bool:
    """Whether the command is told to use no representation cache (``--no-cache`` or ``--cache none``)."""
    cache = getattr(args, "cache", None)
    return bool(getattr(args, "no_cache", False)) or (cache is not None and cache.strip().lower() == "none")


def model_cache(args: argparse.Namespace, model_dir: str | Path, suite: Suite | None = None) -> Path | None:
    """The cache a command on a model folder reads and fills: ``--cache``, else as a check would
    (:func:`warp_check.model_cache_dir`); None where the user said none."""
    if no_cache(args):
        return None
    if args.cache is not None:
        return Path(args.cache)
    if suite is not None:
        workdir(suite)
    return model_cache_dir(model_dir, suite)
