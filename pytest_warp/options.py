"""The plugin's options: one ``warp`` group on the command line, each also an ini option.

The command line wins over the ini file; both override the suite's own warp.toml. Relative
paths on the command line are read from the directory pytest was started in, in the ini
file from the ini file's directory. ``pytest --help`` must stay light: what this imports of
warp_check is standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.repair.settings import MEASURED_KEEP_PER_CASE, MEASURED_PER_CASE
from warp_check.runs.modes import Mode
from warp_check.suite.model_source import DEVICE_NAME

# (flag, ini name, ini type, help)
_OPTIONS: tuple[tuple[str, str, str, str], ...] = (
    ("--warp-model", "warp_model", "string", "model folder to test instead of each suite's [model] (a local folder)"),
    ("--warp-repair", "warp_repair", "bool", "repair the model, save it, and assert Cert 1–3 on the repaired weights"),
    (
        "--warp-out",
        "warp_out",
        "string",
        "where --warp-repair saves the repaired model (default <suite>/.warp/repaired)",
    ),
    (
        "--warp-certificate",
        "warp_certificate",
        "string",
        "audit: turn this warp_certificate.json's claims into tests on --warp-model "
        "(default: the certificate's folder)",
    ),
    ("--warp-report", "warp_report", "string", "write report.md, report.json and PNG plots into this folder"),
    (
        "--warp-baseline",
        "warp_baseline",
        "string",
        "regression-only gate: a case fails only if this model folder (the last release) got it right and the "
        "model under test does not; cases both get wrong are xfail",
    ),
    ("--warp-cache", "warp_cache", "string", "representation cache folder, or 'none' (default <suite>/.warp/cache)"),
    (
        "--warp-record",
        "warp_record",
        "string",
        "append the counterexamples that hypothesis tests using warp_check.invariance find to this JSONL file, "
        "as must_fix cases (deduplicated) for the next --warp-repair",
    ),
    (
        "--warp-device",
        "warp_device",
        "string",
        "where the encoder runs: auto, cpu, cuda or cuda:N (overrides [model] device; default auto: CUDA when "
        "torch sees it)",
    ),
    ("--warp-batch-size", "warp_batch_size", "string", "cases per encoder batch (overrides [model] batch_size)"),
    (
        "--warp-threads",
        "warp_threads",
        "string",
        "torch CPU threads while encoding (overrides [model] threads; default: the cores, shared among xdist "
        "workers)",
    ),
    ("--warp-rank", "warp_rank", "string", "repair rank r (overrides [repair] rank)"),
    ("--warp-gamma-s", "warp_gamma_s", "string", "must_fix margin γ_s (overrides [repair] gamma_s)"),
    ("--warp-gamma-h", "warp_gamma_h", "string", "must_keep margin γ_h (overrides [repair] gamma_h)"),
    (
        "--warp-neighbours",
        "warp_neighbours",
        "string",
        f"the repair's neighbourhood (off by default): off, on ({MEASURED_PER_CASE} copies a must_fix case, "
        f"{MEASURED_KEEP_PER_CASE} a must_keep one), or on with how many must_keep cases nearest the boundary "
        "are perturbed (N or all; overrides [repair.neighbours])",
    ),
)


# How a user changes each repair setting from pytest (for errors, and advice in failure messages).
FLAGS = {
    "rank": "--warp-rank",
    "gamma_s": "--warp-gamma-s",
    "gamma_h": "--warp-gamma-h",
    "neighbours": "--warp-neighbours",
}
LOOP = ("rank", "gamma_s", "gamma_h")  # the loop's own settings among them

_METAVARS = {
    "warp_rank": "R",
    "warp_gamma_s": "G",
    "warp_gamma_h": "G",
    "warp_record": "FILE",
    "warp_device": "DEVICE",
    "warp_batch_size": "N",
    "warp_threads": "N",
    "warp_neighbours": "off|on|N|all",
}


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("warp", "warp-check: behavioural suites (warp.toml) and WARP repair")
    for flag, name, ini_type, help_text in _OPTIONS:
        if ini_type == "bool":
            group.addoption(flag, action="store_true", dest=name, default=None, help=f"{help_text} (ini: {name})")
        else:
            metavar = _METAVARS.get(name, "PATH")
            group.addoption(flag, dest=name, default=None, metavar=metavar, help=f"{help_text} (ini: {name})")
        parser.addini(name, help_text, type=ini_type, default=None)


@dataclass(frozen=True, kw_only=True)
class WarpOptions:
    model: Path | None = None
    repair: bool = False
    out: Path | None = None
    certificate: Path | None = None
    report: Path | None = None
    cache: Path | None = None
    no_cache: bool = False
    record: Path | None = None
    baseline: Path | None = None
    device: str | None = None
    batch_size: int | None = None
    threads: int | None = None
    rank: int | None = None
    gamma_s: float | None = None
    gamma_h: float | None = None
    neighbours: str | None = None

    @property
    def mode(self) -> Mode:
        return Mode.REPAIR if self.repair else Mode.AUDIT if self.certificate is not None else Mode.CHECK

    @property
    def flags(self) -> dict[str, str]:
        """How a user changes each repair setting from pytest (for advice in failure messages)."""
        return dict(FLAGS)

    def compute(self) -> dict[str, Any]:
        """Where and how the encoder runs, for Suite.with_compute (None: the suite's own)."""
        return {"device": self.device, "batch_size": self.batch_size, "threads": self.threads}

    def overrides(self) -> dict[str, Any]:
        return {"rank": self.rank, "gamma_s": self.gamma_s, "gamma_h": self.gamma_h, "neighbours": self.neighbours}

    @property
    def given(self) -> bool:
        return self != WarpOptions()


def _raw(config: pytest.Config, name: str) -> tuple[Any, Path | None, str]:
    """(value, base directory for relative paths, how to name it in an error)."""
    value = config.getoption(name)
    flag = "--" + name.replace("_", "-")
    if value is not None:
        return value, Path(config.invocation_params.dir), flag
    value = config.getini(name)
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    return value, base, f"ini option {name}"


def _path(config: pytest.Config, name: str) -> Path | None:
    value, base, _ = _raw(config, name)
    if value in (None, ""):
        return None
    return (base / Path(str(value)).expanduser()).resolve()


def _number(config: pytest.Config, name: str, cast: type) -> Any:
    value, _, where = _raw(config, name)
    if value in (None, ""):
        return None
    try:
        number = cast(value)
    except (TypeError, ValueError):
        kind = "an integer" if cast is int else "a number"
        raise pytest.UsageError(f"{where}={value!r}: must be {kind}") from None
    if cast is float and not math.isfinite(number):
        raise pytest.UsageError(f"{where}={value!r}: must be a finite number")
    return number


def _count(config: pytest.Config, name: str) -> int | None:
    number = _number(config, name, int)
    if number is not None and number < 1:
        raise pytest.UsageError(f"{_raw(config, name)[2]}={number}: must be an integer >= 1")
    return number


def _text(config: pytest.Config, name: str) -> str | None:
    value, _, _ = _raw(config, name)
    return None if value in (None, "") else str(value)


def _device(config: pytest.Config) -> str | None:
    value, _, where = _raw(config, "warp_device")
    if value in (None, ""):
        return None
    if not DEVICE_NAME.fullmatch(str(value)):
        raise pytest.UsageError(f"{where}={value!r}: give auto, cpu, cuda or cuda:N")
    return str(value)


def read_options(config: pytest.Config) -> WarpOptions:
    """Options from the command line and ini file, checked; a mistake is a UsageError."""
    cache_raw, _, _ = _raw(config, "warp_cache")
    no_cache = str(cache_raw).strip().lower() == "none" if cache_raw not in (None, "") else False
    certificate = _path(config, "warp_certificate")
    if certificate is not None and certificate.is_dir():
        certificate = certificate / CERTIFICATE_NAME
    options = WarpOptions(
        model=_path(config, "warp_model"),
        repair=bool(_raw(config, "warp_repair")[0]),
        out=_path(config, "warp_out"),
        certificate=certificate,
        report=_path(config, "warp_report"),
        cache=None if no_cache else _path(config, "warp_cache"),
        no_cache=no_cache,
        record=_path(config, "warp_record"),
        baseline=_path(config, "warp_baseline"),
        device=_device(config),
        batch_size=_count(config, "warp_batch_size"),
        threads=_count(config, "warp_threads"),
        rank=_number(config, "warp_rank", int),
        gamma_s=_number(config, "warp_gamma_s", float),
        gamma_h=_number(config, "warp_gamma_h", float),
        neighbours=_text(config, "warp_neighbours"),
    )
    if options.repair and options.certificate is not None:
        raise pytest.UsageError(
            "--warp-repair and --warp-certificate exclude each other: repair writes a new certificate, "
            "--warp-certificate audits an existing one"
        )
    if options.certificate is not None and not options.certificate.is_file():
        raise pytest.UsageError(f"--warp-certificate: no certificate file at {options.certificate}")
    if options.model is not None and not options.model.is_dir():
        raise pytest.UsageError(f"--warp-model: {options.model} is not a folder (a local Hugging Face model folder)")
    if options.baseline is not None and not options.baseline.is_dir():
        raise pytest.UsageError(f"--warp-baseline: {options.baseline} is not a folder (the last release's model)")
    if options.baseline is not None and options.mode is not Mode.CHECK:
        raise pytest.UsageError(
            "--warp-baseline gates a model on regressions: it goes with a plain run, not with --warp-repair or "
            "--warp-certificate"
        )
    if options.record is not None and options.record.is_dir():
        raise pytest.UsageError(f"--warp-record: {options.record} is a folder; name a JSONL file (new or existing)")
    if any(v is not None for v in options.overrides().values()):
        from warp_check.errors import SettingsError
        from warp_check.repair.settings import NeighbourSettings, RepairSettings

        # Only checked here, so that a bad flag stops pytest at once; the suite's settings take them later.
        try:
            RepairSettings(**{k: v for k, v in options.overrides().items() if v is not None and k in LOOP})
            if options.neighbours is not None:
                NeighbourSettings().overridden(options.neighbours)
        except SettingsError as exc:
            raise pytest.UsageError(f"{FLAGS[exc.field]}: {exc}") from None
        if options.gamma_s is not None and options.gamma_h is not None and options.gamma_h > options.gamma_s:
            raise pytest.UsageError(
                f"--warp-gamma-h {options.gamma_h:g} > --warp-gamma-s {options.gamma_s:g}: the must_keep margin "
                "cannot exceed the must_fix margin; lower --warp-gamma-h"
            )
    return options
