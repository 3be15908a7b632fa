"""The plugin's options: one ``warp`` group on the command line, each also an ini option, all made
from the core's declarations (``warp_check.frontend.OPTIONS``, and the option of each run mode).

The command line wins over the ini file; both override the suite's own warp.toml. Relative
paths on the command line are read from the directory pytest was started in, in the ini
file from the ini file's directory. What the plugin read is one record, :class:`WarpOptions`: every
declared option's value by its name, so an option added to the declarations reaches the plugin, and
the suite's settings by its warp.toml key, without a line here. ``pytest --help`` must stay light: what this imports of
warp_check is standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import warp_check
from warp_check import CERTIFICATE_NAME, ModelSource, Progress, SettingsError, frontend
from warp_check.frontend import BadValue, Option, RunMode, ValueKind


def declared() -> tuple[Option, ...]:
    """pytest's options: the declared ones, then any a run mode brings that is not among them."""
    options = [option for option in frontend.OPTIONS if option.in_pytest]
    for mode in frontend.MODES:
        if mode.selected_by is not None and mode.selected_by not in options:
            options.append(mode.selected_by)
    return tuple(options)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup(
        "warp",
        "warp-check: behavioural suites (warp.toml) and WARP repair; "
        f"every option: {frontend.DOCS_URL}reference/options/",
    )
    for option in declared():
        help_text = f"{option.help} (ini: {option.ini})"
        if option.kind is ValueKind.FLAG:
            group.addoption(option.flag, action="store_true", dest=option.ini, default=None, help=help_text)
        else:
            metavar = option.metavar or "PATH"
            group.addoption(option.flag, dest=option.ini, default=None, metavar=metavar, help=help_text)
        parser.addini(option.ini, option.help, type="bool" if option.kind is ValueKind.FLAG else "string", default=None)


def _default_mode() -> RunMode:
    """The mode no option chooses (check)."""
    return next(mode for mode in frontend.MODES if mode.selected_by is None)


@dataclass(frozen=True, kw_only=True)
class WarpOptions:
    """What the plugin was told: the run mode the options choose, and each option's value by its declared
    name (:func:`declared`; None, or False for a flag: not given), checked and resolved: paths absolute, a
    Hub id read from the local cache (``model``, ``baseline``: a folder or a ModelSource), ``certificate``
    the file, ``revision`` only where no ``model`` is given, ``cache`` None and ``no_cache`` True for 'none'."""

    mode: RunMode = field(default_factory=_default_mode)
    values: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        """The value of the option named ``name`` (None or False where it was not given)."""
        if name not in self.values and name != "no_cache" and name not in {o.name for o in declared()}:
            raise KeyError(f"{name!r} is not an option of the plugin")
        return self.values.get(name)

    def overrides(self, section: str) -> dict[str, Any]:
        """What the options given override of warp.toml's ``section`` table, by its key: the keywords of
        ``Suite.with_compute`` (``model``), ``Suite.settings`` (``repair``) and ``load_traffic`` (``traffic``)."""
        given = ((option.key, self.values.get(option.name)) for option in frontend.overriding(section))
        return {key: value for key, value in given if value is not None}

    @property
    def flags(self) -> dict[str, str]:
        """How a user changes each repair setting from pytest (for advice in failure messages)."""
        return frontend.setting_flags(cli=False)

    @property
    def given(self) -> bool:
        return self.mode != _default_mode() or any(
            value is not None and value is not False for value in self.values.values()
        )


def _raw(config: pytest.Config, option: Option) -> tuple[Any, Path | None, str]:
    """(value, base directory for relative paths, how to name it in an error)."""
    value = config.getoption(option.ini)
    if value is not None:
        return value, Path(config.invocation_params.dir), option.flag
    value = config.getini(option.ini)
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    return value, base, f"ini option {option.ini}"


def _read(config: pytest.Config, option: Option) -> Any:
    """The option's value, checked (None: not given); a bad one is a UsageError."""
    value, base, where = _raw(config, option)
    if option.kind is ValueKind.FLAG:
        return bool(value)
    if value in (None, ""):
        return None
    if option.kind is ValueKind.PATH:
        return (base / Path(str(value)).expanduser()).resolve()
    if option.kind is ValueKind.MODEL:
        return _model(str(value), base)
    try:
        return option.parse(str(value))
    except BadValue as exc:
        raise pytest.UsageError(f"{where}={str(value)!r}: {exc.rule}") from None


def _model(value: str, base: Path | None) -> Path | str:
    """A model option's folder (relative to ``base``), or the Hub id it names where no such folder
    exists (a folder that exists wins)."""
    folder = ((base or Path.cwd()) / Path(value).expanduser()).resolve()
    if folder.exists() or not frontend.HUB_ID.fullmatch(value.partition("@")[0]):
        return folder
    return value


def _folder(model: Any) -> Any:
    """The folder a model option names (a Hub model's snapshot), or the value as it is."""
    return model.folder if isinstance(model, ModelSource) else model


def _resolved(model: Path | str | None, revision: str | None, flag: str) -> Path | ModelSource | None:
    """A Hub id read from the local Hugging Face cache (at ``revision``); a folder as it is. A
    UsageError naming ``flag`` where the cache does not hold the model."""
    if not isinstance(model, str):
        return model
    try:
        return warp_check.resolve_model(model, revision)
    except warp_check.ModelError as exc:
        raise pytest.UsageError(f"{flag}: {exc}") from None


def read_options(config: pytest.Config) -> WarpOptions:
    """Options from the command line and ini file, checked; a mistake is a UsageError."""
    cache_raw, _, _ = _raw(config, frontend.OPTION["cache"])
    no_cache = str(cache_raw).strip().lower() == "none" if cache_raw not in (None, "") else False
    values = {option.name: _read(config, option) for option in declared() if option.name != "cache"}
    values["cache"] = None if no_cache else _read(config, frontend.OPTION["cache"])
    values["no_cache"] = no_cache
    revision = values["revision"]
    if revision is not None and isinstance(values["model"], Path):
        raise pytest.UsageError(f"--warp-revision: {values['model']} is a local folder; a revision applies to a Hub id")
    values["model"] = _resolved(values["model"], revision, "--warp-model")
    values["baseline"] = _resolved(values["baseline"], None, "--warp-baseline")
    certificate = values["certificate"]
    if certificate is not None and certificate.is_dir():
        values["certificate"] = certificate / CERTIFICATE_NAME
    chosen = [
        (mode, _folder(values[mode.selected_by.name]))
        for mode in frontend.MODES
        if mode.selected_by is not None and values[mode.selected_by.name]
    ]
    if values["repair"]:  # a repair takes the baseline as where its restored regressions come from
        chosen = [(mode, value) for mode, value in chosen if mode.selected_by.name != "baseline"]
    if values["model"] is not None:
        values["revision"] = None  # read into the model: it names the suites' own [model] id only without one
    options = WarpOptions(
        mode=chosen[0][0].chosen_with(chosen[0][1], values) if chosen else _default_mode(), values=values
    )
    _check(options, [mode for mode, _ in chosen])
    return options


def _check(options: WarpOptions, chosen: list[RunMode]) -> None:
    try:
        Progress.chosen(options["progress"], after_s=options["progress_after"])
    except SettingsError as exc:
        flag = "--warp-progress" if exc.field == "style" else "--warp-progress-after"
        raise pytest.UsageError(f"{flag}: {exc.of_key}") from None
    if options["repair"] and options["certificate"] is not None:
        raise pytest.UsageError(
            "--warp-repair and --warp-certificate exclude each other: repair writes a new certificate, "
            "--warp-certificate audits an existing one"
        )
    if options["baseline"] is not None and options["certificate"] is not None:
        raise pytest.UsageError(
            "--warp-baseline gates a model on regressions (or, with --warp-repair, names where restored regressions "
            "come from): it does not go with --warp-certificate"
        )
    if options["worse_p"] is not None and getattr(options.mode, "worse_p", None) is None:
        raise pytest.UsageError("--warp-worse-p gates a model against its baseline: give --warp-baseline (no repair)")
    if options["certificate"] is not None and not options["certificate"].is_file():
        raise pytest.UsageError(f"--warp-certificate: no certificate file at {options['certificate']}")
    if options["model"] is not None and not _folder(options["model"]).is_dir():
        raise pytest.UsageError(
            f"--warp-model: {options['model']} is not a folder (a Hugging Face model folder, or a Hub id org/name)"
        )
    if options["baseline"] is not None and not _folder(options["baseline"]).is_dir():
        raise pytest.UsageError(
            f"--warp-baseline: {options['baseline']} is not a folder (the last release's model, or its Hub id org/name)"
        )
    if options["baseline"] is not None and options["certificate"] is not None:
        raise pytest.UsageError(
            "--warp-baseline gates a model on regressions, or with --warp-repair restores them: it does not go "
            "with --warp-certificate (an audit checks the certificate's own claims)"
        )
    if len(chosen) > 1:
        flags = " and ".join(mode.selected_by.flag for mode in chosen if mode.selected_by is not None)
        raise pytest.UsageError(f"{flags} choose different run modes: give one")
    if options["record"] is not None and options["record"].is_dir():
        raise pytest.UsageError(f"--warp-record: {options['record']} is a folder; name a JSONL file (new or existing)")
    traffic_given = options.overrides("traffic")
    if traffic_given:
        try:
            frontend.check_traffic_overrides(traffic_given)
        except SettingsError as exc:
            raise pytest.UsageError(f"--warp-max-change: {exc}") from None
        traffic = traffic_given.get("path")
        if traffic is not None and not traffic.is_file():
            raise pytest.UsageError(f"--warp-traffic: no such file: {traffic}")
    overrides = options.overrides("repair")
    if overrides:
        # Only checked here, so that a bad flag stops pytest at once; the suite's settings take them later.
        try:
            frontend.check_repair_overrides(overrides)
        except SettingsError as exc:
            raise pytest.UsageError(f"{options.flags[exc.field]}: {exc}") from None
        gamma_s, gamma_h = overrides.get("gamma_s"), overrides.get("gamma_h")
        if gamma_s is not None and gamma_h is not None and gamma_h > gamma_s:
            raise pytest.UsageError(
                f"--warp-gamma-h {gamma_h:g} > --warp-gamma-s {gamma_s:g}: the must_keep margin "
                "cannot exceed the must_fix margin; lower --warp-gamma-h"
            )
