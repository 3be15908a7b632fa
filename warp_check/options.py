"""The options a user gives a run, each declared once: its name, value kind, help, pytest flag and
ini key, ``warp-check`` flag and the warp.toml key it overrides.

The pytest plugin (``pytest_warp.options``) and the ``warp-check`` command (``warp_check.cli``) make
their options, ini lines, arguments and overrides from :data:`OPTIONS`. A value is checked here
(:meth:`Option.parse`); each front end words a bad one its own way (:class:`BadValue` says what is
wrong). Standard library only: ``pytest --help`` reads this.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from warp_check.errors import SettingsError
from warp_check.model.engines.settings import ENGINE_NAMES, Engine, ray_installed
from warp_check.progress import PROGRESS_AFTER_S
from warp_check.repair.settings import MEASURED_KEEP_PER_CASE, MEASURED_PER_CASE, NeighbourSettings, RepairSettings
from warp_check.suite.model_source import DEVICE_NAME
from warp_check.validation import share

_NAME = re.compile(r"[a-z][a-z0-9_]*")
_SECTIONS = ("model", "repair", "traffic")  # the warp.toml tables an option may override


class ValueKind(enum.Enum):
    """What an option's value is, and so how it is read and checked."""

    FLAG = "flag"  # on when given
    PATH = "path"  # a file or folder
    MODEL = "model"  # a model folder, or a Hub id (org/name) read from the local Hugging Face cache
    TEXT = "text"  # a word checked where it is used
    INTEGER = "integer"
    COUNT = "count"  # an integer >= 1
    NATURAL = "natural"  # an integer >= 0
    NUMBER = "number"  # a finite float
    SHARE = "share"  # a float in (0, 1]: a share of predictions
    DEVICE = "device"  # auto, cpu, cuda or cuda:N
    ENGINE = "engine"  # local or ray (ray: only where Ray is installed)


class Problem(enum.Enum):
    """What is wrong with a value (each front end words it)."""

    NOT_INTEGER = "not_integer"
    TOO_SMALL = "too_small"
    NOT_NUMBER = "not_number"
    NOT_FINITE = "not_finite"
    NOT_DEVICE = "not_device"
    NOT_ENGINE = "not_engine"
    NO_RAY = "no_ray"  # engine ray asked for, and Ray is not installed
    NOT_SHARE = "not_share"  # not a number in (0, 1]: ``why`` says what a share is


class BadValue(ValueError):
    """``text`` is not a value of the option: ``problem`` says why (``minimum`` for TOO_SMALL; ``why``:
    the rule the value misses, in words both front ends print as they are)."""

    def __init__(self, text: str, problem: Problem, *, minimum: int = 1, why: str = "") -> None:
        super().__init__(f"{text!r}: {problem.value}")
        self.text = text
        self.problem = problem
        self.minimum = minimum
        self.why = why

    @property
    def rule(self) -> str:
        """The rule the value misses, in the words both front ends print after it (one input, one
        verdict: ``--rank '0': must be an integer >= 1`` and ``--warp-rank='0': ...`` alike)."""
        return _RULES[self.problem].format(minimum=self.minimum, why=self.why)


_RULES = {
    Problem.NOT_INTEGER: "must be an integer",
    Problem.TOO_SMALL: "must be an integer >= {minimum}",
    Problem.NOT_NUMBER: "must be a number",
    Problem.NOT_FINITE: "must be a finite number",
    Problem.NOT_DEVICE: "must be a device: auto, cpu, cuda or cuda:N",
    Problem.NOT_ENGINE: "must be an engine: local or ray",
    Problem.NO_RAY: "needs Ray, which is not installed: pip install 'warp-check[ray]'",
    Problem.NOT_SHARE: "{why}",
}


@dataclass(frozen=True, kw_only=True)
class Option:
    """One option. ``help`` is pytest's text, ``cli_help`` the command's (default ``help``).

    pytest spells it ``--warp-<name>`` (ini ``warp_<name>``) where ``in_pytest``; the command
    spells it ``cli`` (``None``: not a command-line argument). ``toml`` is the warp.toml key it
    overrides (``section.key``), if any.
    """

    name: str
    kind: ValueKind
    help: str
    metavar: str | None = None
    in_pytest: bool = True
    cli: tuple[str, ...] = ()
    cli_help: str | None = None
    toml: str | None = None

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise SettingsError("name", self.name, "must be a lower-case identifier")
        if not isinstance(self.kind, ValueKind):
            raise SettingsError("kind", self.kind, "must be a ValueKind")
        if any(not flag.startswith("-") for flag in self.cli):
            raise SettingsError("cli", self.cli, "flags start with '-'")
        if self.toml is not None and (self.toml.count(".") != 1 or self.toml.split(".")[0] not in _SECTIONS):
            raise SettingsError("toml", self.toml, f"must be section.key, section one of {', '.join(_SECTIONS)}")
        if not (self.in_pytest or self.cli):
            raise SettingsError("cli", self.cli, "an option that is not pytest's must have a command-line flag")

    @property
    def flag(self) -> str:
        """pytest's flag, e.g. ``--warp-gamma-s``."""
        return "--warp-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        """pytest's ini key (also the option's dest), e.g. ``warp_gamma_s``."""
        return "warp_" + self.name

    @property
    def section(self) -> str | None:
        """The warp.toml table the option overrides (``model``, ``repair``), or None."""
        return None if self.toml is None else self.toml.split(".")[0]

    @property
    def key(self) -> str | None:
        """The key of its table the option overrides (``rank`` for ``repair.rank``), or None: the keyword
        ``Suite.settings``, ``Suite.with_compute`` and ``Suite.traffic_settings`` take it by."""
        return None if self.toml is None else self.toml.split(".")[1]

    def parse(self, text: str) -> Any:
        """The value ``text`` gives (paths and words as they are); BadValue if it is not one."""
        if self.kind in (ValueKind.INTEGER, ValueKind.COUNT, ValueKind.NATURAL):
            try:
                number = int(text)
            except ValueError:
                raise BadValue(text, Problem.NOT_INTEGER) from None
            minimum = {ValueKind.COUNT: 1, ValueKind.NATURAL: 0}.get(self.kind)
            if minimum is not None and number < minimum:
                raise BadValue(text, Problem.TOO_SMALL, minimum=minimum)
            return number
        if self.kind is ValueKind.NUMBER:
            try:
                number = float(text)
            except ValueError:
                raise BadValue(text, Problem.NOT_NUMBER) from None
            if not math.isfinite(number):
                raise BadValue(text, Problem.NOT_FINITE)
            return number
        if self.kind is ValueKind.SHARE:
            try:
                return share(text)  # 0.01 or 1%
            except ValueError as exc:
                raise BadValue(text, Problem.NOT_SHARE, why=str(exc)) from None
        if self.kind is ValueKind.DEVICE and not DEVICE_NAME.fullmatch(text):
            raise BadValue(text, Problem.NOT_DEVICE)
        if self.kind is ValueKind.ENGINE:
            if text not in ENGINE_NAMES:
                raise BadValue(text, Problem.NOT_ENGINE)
            if Engine(text) is Engine.RAY and not ray_installed():  # refused before any work
                raise BadValue(text, Problem.NO_RAY)
        return text


OPTIONS: tuple[Option, ...] = (
    Option(
        name="model",
        kind=ValueKind.MODEL,
        metavar="DIR|ORG/NAME",
        help="model to test instead of each suite's [model]: a local folder, or a Hub id read from the local "
        "Hugging Face cache, never downloaded (a folder that exists wins)",
        cli=("--model",),
        cli_help="model to use instead of the suite's [model]: a folder, or a Hub id (org/name) read from the local "
        "Hugging Face cache (a folder that exists wins)",
    ),
    Option(
        name="revision",
        kind=ValueKind.TEXT,
        metavar="REV",
        help="revision (commit, branch or tag) of the Hub id given to --warp-model (default main), or without it of "
        "each suite's [model] id; the certificate records the commit read",
        cli=("--revision",),
        cli_help="revision (commit, branch or tag) of the Hub id given to --model (default main), or without it of "
        "the suite's [model] id",
    ),
    Option(
        name="repair",
        kind=ValueKind.FLAG,
        help="repair the model, save it, and assert Cert 1–3 on the repaired weights",
    ),
    Option(
        name="out",
        kind=ValueKind.PATH,
        help="where --warp-repair saves the repaired model (default <suite>/.warp/repaired)",
        cli=("--out",),
        cli_help="where the repaired model goes (default <suite>/.warp/repaired)",
    ),
    Option(
        name="certificate",
        kind=ValueKind.PATH,
        help="audit: turn this warp_certificate.json's claims into tests on --warp-model "
        "(default: the certificate's folder)",
        cli=("--certificate",),
        cli_help="the certificate to check (default: the model's warp_certificate.json)",
    ),
    Option(
        name="report",
        kind=ValueKind.PATH,
        help="write index.html, report.md, report.json and PNG plots into this folder",
        cli=("--report",),
        cli_help="also write index.html, report.md, report.json and plots here",
    ),
    Option(
        name="baseline",
        kind=ValueKind.MODEL,
        metavar="DIR|ORG/NAME[@REV]",
        help="regression-only gate: a case fails only if this model (the last release: a folder, or a Hub id read "
        "from the local Hugging Face cache) got it right and the model under test does not; cases both get wrong "
        "are xfail. With --warp-repair: the must_keep cases it got right and the model gets wrong are restored "
        "(repaired back) instead of left out",
        cli=("--baseline",),
        cli_help="the last release's model (a folder or a Hub id): the must_keep cases it got right and the model "
        "gets wrong are restored (repaired back) instead of left out (default: the first model of the model's "
        "certificate chain)",
    ),
    Option(
        name="cache",
        kind=ValueKind.PATH,
        help="representation cache folder, or 'none' (default <suite>/.warp/cache)",
        cli=("--cache",),
    ),
    Option(
        name="record",
        kind=ValueKind.PATH,
        metavar="FILE",
        help="append the counterexamples that hypothesis tests using warp_check.invariance find to this JSONL file, "
        "as must_fix cases (deduplicated) for the next --warp-repair",
    ),
    Option(
        name="device",
        kind=ValueKind.DEVICE,
        metavar="DEVICE",
        help="where the encoder runs: auto, cpu, cuda or cuda:N (overrides [model] device; default auto: CUDA when "
        "torch sees it)",
        cli=("--device",),
        cli_help="auto, cpu, cuda or cuda:N (overrides [model] device)",
        toml="model.device",
    ),
    Option(
        name="engine",
        kind=ValueKind.ENGINE,
        metavar="local|ray",
        help="where the encoder pass runs: local (this process) or ray (Ray Data workers, [model.ray]; needs "
        "pip install 'warp-check[ray]'); overrides [model] engine",
        cli=("--engine",),
        cli_help="local or ray: where the encoder pass runs (overrides [model] engine; ray needs the ray extra)",
        toml="model.engine",
    ),
    Option(
        name="batch_size",
        kind=ValueKind.COUNT,
        metavar="N",
        help="cases per encoder batch (overrides [model] batch_size)",
        cli=("--batch-size",),
        cli_help="cases per encoder batch ([model] batch_size)",
        toml="model.batch_size",
    ),
    Option(
        name="threads",
        kind=ValueKind.COUNT,
        metavar="N",
        help="torch CPU threads while encoding (overrides [model] threads; default: the cores, shared among xdist "
        "workers)",
        cli=("--threads",),
        cli_help="torch CPU threads while encoding ([model] threads)",
        toml="model.threads",
    ),
    Option(
        name="rank",
        kind=ValueKind.INTEGER,
        metavar="R",
        help="repair rank r (overrides [repair] rank)",
        cli=("--rank",),
        cli_help="rank r (overrides [repair] rank)",
        toml="repair.rank",
    ),
    Option(
        name="gamma_s",
        kind=ValueKind.NUMBER,
        metavar="G",
        help="must_fix margin γ_s (overrides [repair] gamma_s)",
        cli=("--gamma-s",),
        cli_help="must_fix margin (overrides [repair] gamma_s)",
        toml="repair.gamma_s",
    ),
    Option(
        name="gamma_h",
        kind=ValueKind.NUMBER,
        metavar="G",
        help="must_keep margin γ_h (overrides [repair] gamma_h)",
        cli=("--gamma-h",),
        cli_help="must_keep margin (overrides [repair] gamma_h)",
        toml="repair.gamma_h",
    ),
    Option(
        name="keep_margin",
        kind=ValueKind.TEXT,
        metavar="own|gamma_h",
        help="the margin a must_keep case right before the repair is held to: own (default: its own gap before, "
        "up to γ_h; a right case is not lifted) or gamma_h (every one lifted to γ_h; overrides [repair] keep_margin)",
        cli=("--keep-margin",),
        cli_help="own (default): a must_keep case below γ_h is held at its own gap before the repair, not lifted; "
        "gamma_h: lifted to γ_h (overrides [repair] keep_margin)",
        toml="repair.keep_margin",
    ),
    Option(
        name="neighbours",
        kind=ValueKind.TEXT,
        metavar="off|on|N|all",
        help=f"the repair's neighbourhood (off by default): off, on ({MEASURED_PER_CASE} copies a must_fix case, "
        f"{MEASURED_KEEP_PER_CASE} a must_keep one), or on with how many must_keep cases nearest the boundary "
        "are perturbed (N or all; overrides [repair.neighbours])",
        cli=("--neighbours",),
        cli_help=f"the repair's neighbourhood (off by default): off, on ({MEASURED_PER_CASE} copies a must_fix case, "
        f"{MEASURED_KEEP_PER_CASE} a must_keep one), or on with how many must_keep cases nearest the boundary are "
        "perturbed (overrides [repair.neighbours])",
        toml="repair.neighbours",
    ),
    # Cert 4: unlabelled traffic, and the share of its predictions a repair may change.
    Option(
        name="traffic",
        kind=ValueKind.PATH,
        metavar="FILE",
        help="unlabelled texts like the model's traffic (CSV, TSV, JSONL, Parquet: column 'text'; overrides "
        "[traffic] path): a repair bounds the share of predictions it changes on them (Cert 4)",
        cli=("--traffic",),
        cli_help="unlabelled texts like the model's traffic (overrides [traffic] path): Cert 4 bounds the share of "
        "predictions the repair changes on them",
        toml="traffic.path",
    ),
    Option(
        name="max_change",
        kind=ValueKind.SHARE,
        metavar="X",
        help="the most a repair may change of the predictions on the traffic, as a share (0.01: one percent), "
        "bounded at [traffic] confidence; a repair over it fails the traffic item and writes nothing (overrides "
        "[traffic] max_change)",
        cli=("--max-change",),
        cli_help="the most the repair may change of the predictions on the traffic, as a share (0.01: one percent); "
        "over it, nothing is written and the run fails (overrides [traffic] max_change)",
        toml="traffic.max_change",
    ),
    # Against a baseline: the paired test on the suite's cases as a gate.
    Option(
        name="worse_p",
        kind=ValueKind.SHARE,
        metavar="P",
        help="with --warp-baseline: fail the run where the paired test (exact McNemar on the cases the two models "
        "answer differently) gives a one-sided p below P that the model under test is worse (e.g. 0.05); without "
        "it the test is reported, never gating",
        cli=("--worse-p",),
        cli_help="fail where the paired test (exact McNemar on the cases OLD and NEW answer differently) gives a "
        "one-sided p below P that NEW is worse (e.g. 0.05); without it the test is reported, never gating",
    ),
    Option(
        name="seed",
        kind=ValueKind.NATURAL,
        metavar="N",
        in_pytest=False,
        cli=("--seed",),
        help="seed of the command's random draws",
    ),
    Option(
        name="dry_run",
        kind=ValueKind.FLAG,
        in_pytest=False,
        cli=("--dry-run",),
        help="say what would be written, write nothing",
    ),
    Option(
        name="no_cache",
        kind=ValueKind.FLAG,
        in_pytest=False,
        cli=("--no-cache",),
        help="read and write no representation cache (the same as --cache none)",
    ),
    # How long steps show their progress (warp_check.progress).
    Option(
        name="progress",
        kind=ValueKind.TEXT,
        metavar="auto|bar|lines|off",
        help="progress of steps that run longer than --warp-progress-after seconds (encoding, neighbourhood, "
        "repair iterations), on pytest's terminal: auto (default) a bar on a terminal, one line per step where "
        "the output is not a terminal or with -q; bar; lines; off",
        cli=("--progress",),
        cli_help="progress of steps that run longer than --progress-after seconds, on stderr: auto (default) a "
        "bar on a terminal, one line per step where stderr is not a terminal or with -q; bar; lines; off "
        "(--json: off unless given)",
    ),
    Option(
        name="progress_after",
        kind=ValueKind.NUMBER,
        metavar="S",
        help=f"seconds a step runs before its progress shows (default {PROGRESS_AFTER_S:g}; 0: every step)",
        cli=("--progress-after",),
    ),
    Option(name="json", kind=ValueKind.FLAG, in_pytest=False, cli=("--json",), help="print the result as JSON"),
    Option(
        name="quiet",
        kind=ValueKind.FLAG,
        in_pytest=False,
        cli=("-q", "--quiet"),
        help="print only the summary, not every failing case",
    ),
)

OPTION: Mapping[str, Option] = {option.name: option for option in OPTIONS}


def overriding(section: str, options: Iterable[Option] | None = None) -> tuple[Option, ...]:
    """The options (default: :data:`OPTIONS`) that override a key of warp.toml's ``section`` (``model``:
    where the encoder runs, for Suite.with_compute; ``repair``: for Suite.settings; ``traffic``)."""
    return tuple(option for option in (OPTIONS if options is None else options) if option.section == section)


def setting_flags(*, cli: bool) -> dict[str, str]:
    """How a user changes each repair setting (by its [repair] key), and names the baseline: pytest's flags
    or the command's (for errors, and advice in failure messages)."""
    named = (*overriding("repair"), OPTION["baseline"])  # the baseline: where a repair's restored cases come from
    return {option.key or option.name: option.cli[-1] if cli else option.flag for option in named}


def flag_error(exc: SettingsError, *, cli: bool) -> str | None:
    """``exc`` said of the flag that gave its value, where its field is an option a front end takes a
    model by (``--model``, ``--warp-baseline``): "--model: 'x' is neither a folder ..."; None where it
    is not (the error names its field itself)."""
    option = OPTION.get(exc.field)
    if option is None or option.kind is not ValueKind.MODEL:
        return None
    return f"{option.cli[-1] if cli and option.cli else option.flag}: {exc.why}"


def check_traffic_overrides(values: Mapping[str, Any]) -> None:
    """Traffic overrides (None: not given) checked as the suite's [traffic] will take them; a
    SettingsError names the setting."""
    max_change = values.get("max_change")
    if max_change is not None:
        try:
            share(max_change)
        except ValueError as exc:
            raise SettingsError("max_change", max_change, str(exc)) from None


def check_repair_overrides(values: Mapping[str, Any]) -> None:
    """Repair overrides (None: not given) checked as the suite's settings will take them, so that a bad
    one stops a run at once; a SettingsError names the setting."""
    given = {name: value for name, value in values.items() if value is not None}
    RepairSettings(**{name: value for name, value in given.items() if name != "neighbours"})
    if "neighbours" in given:
        NeighbourSettings().overridden(given["neighbours"])
