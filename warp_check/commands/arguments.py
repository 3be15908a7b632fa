"""What every ``warp-check`` command shares: exit codes, the parser, declared options as arguments
(:func:`add_declared`, :class:`Use`), the command record (:class:`Command`) and a suite with its cache.

A command's arguments that are run options are the declarations of ``warp_check.options``, each taken
by name (its flag, value kind and check are the declaration's; :class:`Use` gives this command's words
or default); only a command's own verbs (what to import, which recipe) are declared in its module."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_check import (
    Progress,
    ProgressStyle,
    SettingsError,
    Suite,
    TrafficSample,
    WarpError,
    default_cache_dir,
    frontend,
    load_suite,
    load_traffic,
    workdir,
)
from warp_check.frontend import (
    BadValue,
    Option,
    Problem,
    ValueKind,
    check_report_destination,
    check_traffic_overrides,
    model_cache_dir,
    overriding,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
PROGRESS_OPTIONS = ("progress", "progress_after")  # every command that runs a model's


def suite_options() -> tuple[str, ...]:
    """Every suite command's options: the model and its cache, how the result is printed, and every option
    that overrides a key of warp.toml's [model] (where and how the encoder runs)."""
    model = tuple(option.name for option in overriding("model"))
    return ("model", "revision", "cache", "no_cache", "json", "quiet", *model, *PROGRESS_OPTIONS)


def setting_flags() -> dict[str, str]:
    """How a user changes each repair setting from the command line (for errors and advice)."""
    return frontend.setting_flags(cli=True)


class Parser(argparse.ArgumentParser):
    """argparse's parser with the usage exit code, and a record of the arguments made from declarations
    (``declared``: dest -> Option), so that a test can tell them from a command's own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.declared: dict[str, Option] = {}
        self.commands: dict[str, argparse.ArgumentParser] = {}  # the top parser's: each command's own

    def error(self, message: str):  # argparse's own exit code for usage errors is 2 as well
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {with_choice_meant(message)}\n")

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        """argparse's, but an argument no command takes is refused by the command it was given to (its
        usage, not the top level's), with the flag it likely meant (argparse suggests none before 3.14)."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            chosen = self.commands.get(getattr(parsed, "command", None) or "", self)
            chosen.error(unrecognised(chosen, extra))
        return parsed


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<choices>.*)\)$")


def with_choice_meant(message: str) -> str:
    """argparse's "invalid choice" (a command's name, a value of a fixed set), with the choice a
    mistyped one likely meant."""
    found = _INVALID_CHOICE.search(message)
    if found is None:
        return message
    choices = re.findall(r"'([^']*)'", found["choices"])
    close = difflib.get_close_matches(found["given"], choices, n=1, cutoff=0.6)
    return f"{message}; did you mean {close[0]!r}?" if close else message


def unrecognised(parser: argparse.ArgumentParser, extra: list[str]) -> str:
    """argparse's "unrecognized arguments", with "did you mean" for each flag close to one of ``parser``'s."""
    flags = [flag for action in parser._actions for flag in action.option_strings]
    hints = []
    for token in extra:
        flag = token.split("=", 1)[0]
        close = difflib.get_close_matches(flag, flags, n=1, cutoff=0.75) if flag.startswith("--") else []
        if close:
            hints.append(f"{flag}: did you mean {close[0]}?")
    return f"unrecognized arguments: {' '.join(extra)}" + "".join(f"; {hint}" for hint in hints)


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


def _parsed_by(option: Option) -> Callable[[str], Any]:
    """argparse's type for a declared option: its value, or the command's words for a bad one."""

    def parse(text: str) -> Any:
        try:
            return option.parse(text)
        except BadValue as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc.rule}") from None  # after "argument --flag: "

    return parse


@dataclass(frozen=True, kw_only=True)
class Use:
    """How one command takes a declared option, where it differs from the declaration: its words for it
    (``help``, ``metavar``), a ``default`` other than None, or that it is ``required``. The flag, the
    value's kind and how it is read stay the declaration's."""

    name: str
    help: str | None = None
    metavar: str | None = None
    default: Any = None
    required: bool = False


def add_declared(parser: argparse.ArgumentParser, use: str | Use) -> None:
    """The declared option ``use`` names as one of the command's arguments."""
    use = Use(name=use) if isinstance(use, str) else use
    option = frontend.OPTION[use.name]
    given: dict[str, Any] = {"dest": option.name, "help": use.help or option.cli_help or option.help}
    if option.kind is ValueKind.FLAG:
        given["action"] = "store_true"
    else:
        given["metavar"] = use.metavar or option.metavar or "DIR"
        given["default"] = use.default
        given["required"] = use.required
        if option.kind not in (ValueKind.PATH, ValueKind.MODEL, ValueKind.TEXT):
            given["type"] = _parsed_by(option)
    parser.add_argument(*option.cli, **given)
    if isinstance(parser, Parser):
        parser.declared[option.name] = option


@dataclass(frozen=True, kw_only=True)
class Command:
    """One ``warp-check`` command: its positionals, the declared options it takes, its own arguments."""

    name: str
    run: Callable[[argparse.Namespace], int]
    help: str
    description: str | None = None
    positionals: tuple[tuple[str, str, str | None], ...] = ()  # (dest, metavar, help)
    options: tuple[str | Use, ...] = ()
    arguments: Callable[[argparse.ArgumentParser], None] | None = None  # the command's own

    def add_to(self, sub: Any) -> None:
        parser = sub.add_parser(self.name, help=self.help, description=self.description)
        for dest, metavar, help_text in self.positionals:
            parser.add_argument(dest, metavar=metavar, help=help_text)
        for option in self.options:
            add_declared(parser, option)
        if self.arguments is not None:
            self.arguments(parser)
        parser.set_defaults(run=self.run)


SUITE = ("suite", "SUITE", "a suite folder or its warp.toml")


def traffic_loader(args: argparse.Namespace) -> Callable[[Suite], TrafficSample | None]:
    """The suite's traffic with ``--traffic`` / ``--max-change`` over its [traffic] (checked here, before
    anything loads: a SettingsError names the flag's setting)."""
    values = {option.key: getattr(args, option.name, None) for option in overriding("traffic")}
    check_traffic_overrides(values)
    values["path"] = Path(values["path"]) if values.get("path") else None
    return lambda suite: load_traffic(suite, **values)


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
    compute = {option.key: getattr(args, option.name, None) for option in overriding("model")}
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
