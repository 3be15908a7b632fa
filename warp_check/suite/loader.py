"""A suite on disk: ``warp.toml`` plus JSONL case files, loaded into validated objects.

Every mistake becomes a :class:`~warp_check.errors.SuiteError` that names the file, the line
and the field, so pytest can show it as a collection error and ``warp-check`` as a one-line
message. Nothing heavy is imported here: the model folder is checked from its files
(``config.json``, weights) without loading it; whether its head is really
dense → activation → linear is checked when it is loaded (:func:`warp_check.runs.session.load_adapter`).

Layout (paths are relative to the folder that holds ``warp.toml``)::

    name = "reviews"                       # optional; default: the folder's name
    deferred = "deferred.jsonl"            # optional: must_fix cases a budget could not buy (warp-check defer)
    [model]
    path = "model"                         # a local Hugging Face folder ...
    # factory = "models.py:build"          # ... or a function that returns one
    layer = "auto"                         # or [repair_layer, activation, classifier]
    max_length = 128
    batch_size = 32
    [labels]                               # optional; default: the model's id2label
    negative = 0
    positive = 1
    [[cases]]
    path = "keep.jsonl"
    kind = "must_keep"                     # must_fix | must_keep | aux (a line may override)
    [repair]                               # RepairSettings fields; [repair.solver]: SolverSettings
    rank = 2
    [repair.solver]                        # the settings every QP backend shares
    backend = "auto"                       # or a registered backend's name (warp_check.qp.registry)
    [repair.solver.ipm]                    # a backend's own settings, under its name
    tolerance = 1e-6                       # (the flat keys, ipm_tolerance = 1e-6 in [repair.solver], are read too)
    [repair.neighbours]                    # NeighbourSettings: perturbed cases repaired too
    keep_cases = 500
    [traffic]                              # TrafficSettings: unlabelled text like the model's traffic
    path = "traffic.jsonl"                 # (warp_check.certificates.traffic.settings)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warp_check.cases import Case, Kind
from warp_check.certificates.traffic.settings import TrafficSettings, read_traffic_table, traffic_for_run
from warp_check.decisions import SINGLE_LABEL, DecisionKind
from warp_check.errors import ModelError, SettingsError, SuiteError
from warp_check.model.engines.settings import require_engine
from warp_check.model.hub_cache import HUB_ID, HubModel, ModelSource, resolve_model
from warp_check.model.specs import HeadSpec
from warp_check.qp.settings import SolverSettings
from warp_check.repair import advice
from warp_check.repair.settings import NeighbourSettings, RepairSettings
from warp_check.suite.case_files import STARTS_WITH_BOM, CaseFile, Location, read_case_tables, read_cases
from warp_check.suite.deferred_file import DeferredCase, read_deferred, read_deferred_table
from warp_check.suite.model_source import (
    ModelSettings,
    check_model_dir,
    decision_of,
    hub_folder,
    labels_of,
    read_model_table,
    run_factory,
)
from warp_check.suite.toml_lines import KeyLines, SuiteToml, key_at, toml_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

SUITE_FILE = "warp.toml"
_TOP_KEYS = ("name", "description", "model", "labels", "cases", "repair", "traffic", "deferred")


# -- the objects ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Suite:
    """A loaded, validated suite. ``cases`` keep the order of the files and their lines."""

    toml: Path  # absolute path of warp.toml
    name: str
    description: str | None
    model: ModelSettings
    model_dir: Path  # resolved model folder (after factory / override)
    model_overridden: bool
    hub: HubModel | None = None  # the Hub model model_dir is a snapshot of (model.id, or a Hub id given for it)
    labels: dict[str, int]  # name -> class id
    num_classes: int | None  # from the model's config.json, when it says
    case_files: tuple[CaseFile, ...]
    cases: tuple[Case, ...]
    locations: dict[str, Location]  # case id -> JSONL file and line
    repair: RepairSettings
    key_lines: dict[str, int] = field(default_factory=dict)  # "model.layer" -> line in warp.toml
    traffic: TrafficSettings | None = None  # [traffic]: unlabelled text a repair's changes are bounded on
    decision: DecisionKind = SINGLE_LABEL  # what the model decides and a case's label states ([model] decision)
    deferred_file: Path | None = None  # warp.toml's ``deferred``: must_fix cases a budget could not buy
    deferred: tuple[DeferredCase, ...] = ()  # its cases: checked as known failures, never repaired

    @property
    def root(self) -> Path:
        return self.toml.parent

    @property
    def model_commit(self) -> str | None:
        """The Hub commit ``model_dir`` holds (None: a local folder)."""
        return None if self.hub is None else self.hub.commit

    @property
    def layer(self) -> Any:
        """The ``layer`` argument for :meth:`ClassifierAdapter.from_pretrained`."""
        if isinstance(self.model.layer, str):
            return self.model.layer
        if len(self.model.layer) == 1:
            return HeadSpec.final_linear(self.model.layer[0], found_by="named in warp.toml: [final_layer]")
        repair_layer, activation, classifier = self.model.layer
        return HeadSpec(repair_layer=repair_layer, activation=activation, classifier=classifier)

    def label_name(self, label: int) -> str:
        for name, index in self.labels.items():
            if index == label:
                return name
        return str(label)

    def label_as_written(self, answer: Any) -> Any:
        """A case's answer as a case file writes it: its label's name (or class id) for one class,
        else the kind's answer fields (several labels: ``{"labels": [...]}``)."""
        if self.decision is SINGLE_LABEL:
            return self.label_name(answer)
        return self.decision.answer_record(answer, self.label_name, self.num_classes)

    def answer_name(self, answer: Any) -> str:
        """A case's answer in words, as its kind of decision states it with the suite's label names."""
        return self.decision.stated(answer, self.label_name)

    def case(self, case_id: str) -> Case:
        for case in self.cases:
            if case.id == case_id:
                return case
        raise KeyError(case_id)

    def count(self, kind: Kind) -> int:
        if kind is Kind.DEFERRED:
            return len(self.deferred)
        return sum(1 for c in self.cases if c.kind is kind)

    def error(self, field_name: str, message: str) -> SuiteError:
        """A SuiteError about a warp.toml field, pointing at the line of its key."""
        return SuiteError(message, path=self.toml, line=self.key_lines.get(field_name), field=field_name)

    def settings(self, **overrides: Any) -> RepairSettings:
        """The suite's repair settings with ``overrides``, by their [repair] key (None: keep the suite's;
        ``neighbours`` as :meth:`NeighbourSettings.overridden` reads a command line's word). The front ends
        give every option that overrides a [repair] key (``warp_check.options``) by that key."""
        changes = _replaced(self.repair, "repair", overrides, words={"neighbours": self.repair.neighbours.overridden})
        settings = dataclasses.replace(self.repair, **changes) if changes else self.repair
        if self.decision.per_word and settings.neighbours.enabled:
            raise SettingsError(
                "neighbours", settings.neighbours.per_case, _not_per_word("a neighbourhood of perturbed copies")
            )
        if settings.gamma_h > settings.gamma_s:
            name = "gamma_h" if "gamma_h" in changes or "gamma_s" not in changes else "gamma_s"
            raise SettingsError(name, getattr(settings, name), advice.margins_out_of_order(settings))
        return settings

    def traffic_settings(self, *, path: Path | None = None, max_change: float | None = None) -> TrafficSettings | None:
        """The traffic a run measures Cert 4 on: ``[traffic]`` with the run's overrides (None: keep the
        suite's); None where there is none."""
        return traffic_for_run(self.traffic, path=path, max_change=max_change, where=self.toml)

    def refuse_per_word(self, command: str) -> None:
        """Refuse ``command`` on a suite whose model decides per word, where it is not built for one yet."""
        if self.decision.per_word:
            raise SettingsError("command", command, _not_per_word(f"warp-check {command}"))

    def with_compute(self, **overrides: Any) -> Suite:
        """This suite with where and how its encoder runs overridden, by their [model] key (None: keep the
        suite's); an engine whose package is not installed is a SettingsError (before any work)."""
        changes = _replaced(self.model, "model", overrides, words={"engine": self.model.engine.using})
        if "engine" in changes:
            require_engine(changes["engine"].kind)
        return dataclasses.replace(self, model=dataclasses.replace(self.model, **changes)) if changes else self

    def digest(self) -> str:
        """SHA-256 over warp.toml, every case and the model folder: names this suite's content."""
        h = hashlib.sha256()
        h.update(self.toml.read_bytes())
        h.update(str(self.model_dir).encode())
        for case in (*self.cases, *(d.case for d in self.deferred)):
            h.update(json.dumps(dataclasses.asdict(case), sort_keys=True, default=str).encode())
        return h.hexdigest()


def _replaced(record: Any, table: str, overrides: dict[str, Any], *, words: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``record`` (a warp.toml table's settings) that ``overrides`` change, None left out;
    a key in ``words`` is a command line's word its function reads into the field's value."""
    fields = {f.name for f in dataclasses.fields(record)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise SettingsError(unknown[0], overrides[unknown[0]], f"is not a key of [{table}]")
    given = {key: value for key, value in overrides.items() if value is not None}
    return {key: words[key](value) if key in words else value for key, value in given.items()}


# -- where keys are in the TOML text --------------------------------------------------------


# -- loading --------------------------------------------------------------------------------


def find_suite_file(path: str | Path) -> Path:
    """``warp.toml`` itself, or the one inside a folder."""
    path = Path(path)
    if path.is_dir():
        path = path / SUITE_FILE
    if not path.is_file():
        raise SuiteError(f"no suite here: {SUITE_FILE} not found", path=path)
    if path.suffix.lower() != ".toml":  # a case file given for its suite: say so, not "invalid TOML"
        raise SuiteError(f"not a suite: give the suite's folder or its {SUITE_FILE}", path=path)
    return path.resolve()


def load_suite(
    path: str | Path,
    *,
    model: str | Path | ModelSource | None = None,
    revision: str | None = None,
    empty: bool = False,
) -> Suite:
    """Load and validate a suite; ``model`` replaces the suite's ``[model]``: a folder, or a Hub id
    read from the local Hugging Face cache at ``revision`` (a folder that exists wins). ``revision``
    without ``model`` tests another revision of the suite's own ``model.id``. ``empty``: a suite
    being filled (``warp-check init``, then ``import``) loads without cases, its case files
    perhaps not written yet.

    Raises :class:`SuiteError` (file, line, field) for every mistake.
    """
    toml = find_suite_file(path)
    loader = SuiteToml(toml, model_given=None if model is None else str(model))
    try:
        raw = toml.read_bytes()
    except OSError as exc:
        raise SuiteError(f"cannot read the file ({exc.strerror or exc})", path=toml) from None
    text = toml_text(raw, toml)
    if text.startswith("\ufeff"):
        raise SuiteError(STARTS_WITH_BOM, path=toml, line=1)
    loader.keys = KeyLines(text)
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise SuiteError("invalid TOML: arrays or tables nested too deeply", path=toml) from None
    except ValueError as exc:
        if not isinstance(exc, tomllib.TOMLDecodeError):  # Python refuses integers of more than 4300 digits
            m = re.search(r"\d{4300}", text)
            line = text[: m.start()].count("\n") + 1 if m else None
            raise SuiteError(
                "invalid TOML: a number with more than 4300 digits", path=toml, line=line, field=key_at(text, line)
            ) from None
        message = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", message)
        line = int(m[1]) if m else getattr(exc, "lineno", None)
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", message)
        if m:
            message += f" (column {m[2]})"
        raise SuiteError(f"invalid TOML: {message}", path=toml, line=line, field=key_at(text, line)) from None

    loader.unknown(data, _TOP_KEYS, "")
    name = data.get("name", toml.parent.name)
    if not isinstance(name, str) or not name.strip():
        raise loader.error("name", f"must be a non-empty string, got {name!r}")
    description = data.get("description")
    if description is not None and not isinstance(description, str):
        raise loader.error("description", f"must be a string, got {description!r}")

    model_settings = read_model_table(loader, data, overridden=model is not None)
    model_dir, hub = _model_folder(loader, model_settings, model, revision)
    labels, num_classes = labels_of(loader, data, model_dir)
    case_files = read_case_tables(loader, data, empty=empty)
    kind = decision_of(loader, model_settings, model_dir, labels)
    cases, locations = read_cases(loader, case_files, labels, num_classes, decision=kind, empty=empty)
    deferred_file = read_deferred_table(loader, data, case_files)
    deferred = (
        () if deferred_file is None else read_deferred(loader, deferred_file, labels, num_classes, kind, locations)
    )
    repair = _repair_settings(loader, data)
    traffic = read_traffic_table(loader, data)
    if kind.per_word and repair.neighbours.enabled:
        raise loader.error(
            "repair.neighbours", _not_per_word("a neighbourhood of perturbed copies ([repair.neighbours])")
        )
    return Suite(
        toml=toml,
        name=name.strip(),
        description=description,
        model=model_settings,
        model_dir=model_dir,
        model_overridden=model is not None,
        hub=hub,
        labels=labels,
        num_classes=num_classes,
        case_files=case_files,
        cases=cases,
        locations=locations,
        repair=repair,
        key_lines=dict(loader.keys.lines),
        traffic=traffic,
        decision=kind,
        deferred_file=deferred_file,
        deferred=deferred,
    )


def _not_per_word(what: str) -> str:
    return (
        f"{what} is not built for a token classifier yet (decision token_tags: a tag per word); a token "
        "suite runs check, repair, the audit, verify, diff, history, report, tune, compare, neighbours and "
        "import --predicted"
    )


def _model_folder(
    loader: SuiteToml, settings: ModelSettings, model: str | Path | ModelSource | None, revision: str | None
) -> tuple[Path, HubModel | None]:
    """The model's folder, and the Hub model it is a snapshot of: ``model`` where given (a folder, or
    a Hub id at ``revision``), else the suite's ``[model]`` (``revision`` moving its model.id)."""
    if model is not None:
        # Given by a flag (or the API's model=): refused naming it, not warp.toml's [model] it overrides.
        try:
            return _given_model(loader, model, revision)
        except SuiteError as exc:
            raise SettingsError("model", str(model), exc.message) from None
        except ModelError as exc:
            raise SettingsError("model", str(model), str(exc)) from None
    if revision is not None:
        if settings.id is None:
            raise loader.error("model", f"revision {revision!r} applies to a Hub model ([model] id), not to this one")
        settings = dataclasses.replace(settings, revision=revision)
    if settings.path is not None:
        written = settings.path
        model_dir = loader.resolve(loader.toml.parent / Path(written).expanduser(), "model.path", written)
        check_model_dir(loader, model_dir, "model.path", overridden=False, written=settings.path)
        return model_dir, None
    if settings.id is not None:
        model_dir, commit = hub_folder(loader, settings)
        check_model_dir(loader, model_dir, "model.id", overridden=False, written=str(model_dir))
        return model_dir, HubModel(id=settings.id, revision=settings.revision or commit, commit=commit)
    model_dir = run_factory(loader, settings.factory or "")
    check_model_dir(loader, model_dir, "model.factory", overridden=False, written=str(model_dir))
    return model_dir, None


def _given_model(
    loader: SuiteToml, model: str | Path | ModelSource, revision: str | None
) -> tuple[Path, HubModel | None]:
    local = not isinstance(model, ModelSource) and (
        os.path.lexists(Path(model).expanduser()) or not HUB_ID.fullmatch(str(model).partition("@")[0])
    )
    if local and revision is None:
        model_dir = loader.resolve(Path(model).expanduser(), "model.path", str(model))
        check_model_dir(loader, model_dir, "model.path", overridden=True)
        return model_dir, None
    source = resolve_model(model, revision)
    check_model_dir(loader, source.folder, "model.path", overridden=True)
    return source.folder, source.hub


def _field_types(cls: type) -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(cls)}


def _check_type(loader: SuiteToml, dotted: str, value: Any, type_name: str) -> None:
    ok = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "str": isinstance(value, str),
    }.get(type_name, True)
    if not ok:
        wanted = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string"}[type_name]
        raise loader.error(dotted, f"must be {wanted}, got {value!r}")


def _repair_settings(loader: SuiteToml, data: dict[str, Any]) -> RepairSettings:
    table = data.get("repair", {})
    if not isinstance(table, dict):
        raise loader.error("repair", "must be a table ([repair])")
    types = _field_types(RepairSettings)
    loader.unknown(table, tuple(types), "repair")
    values = dict(table)
    if "neighbours" in values:
        values["neighbours"] = _nested_settings(loader, "repair.neighbours", values["neighbours"], NeighbourSettings)
    if "solver" in values:
        values["solver"] = _solver_settings(loader, values["solver"])
    for key, value in values.items():
        if key not in ("solver", "neighbours"):
            _check_type(loader, f"repair.{key}", value, types[key])
    try:
        settings = RepairSettings(**values)
    except SettingsError as exc:
        raise loader.error(f"repair.{exc.field}", exc.of_key) from None
    if settings.gamma_h > settings.gamma_s:
        name = "gamma_h" if "gamma_h" in values else "gamma_s"
        raise loader.error(f"repair.{name}", advice.margins_out_of_order(settings))
    return settings


def _checked_table(loader: SuiteToml, dotted: str, table: Any, cls: type) -> dict[str, Any]:
    """A settings table inside [repair]: a table, of ``cls``'s fields only, each of its type."""
    if not isinstance(table, dict):
        raise loader.error(dotted, f"must be a table ([{dotted}])")
    types = _field_types(cls)
    loader.unknown(table, tuple(types), dotted)
    for key, value in table.items():
        _check_type(loader, f"{dotted}.{key}", value, types[key])
    return table


def _nested_settings(loader: SuiteToml, dotted: str, table: Any, cls: type) -> Any:
    """A settings table inside [repair] ([repair.neighbours]), checked field by field."""
    try:
        return cls(**_checked_table(loader, dotted, table, cls))
    except SettingsError as exc:
        raise loader.error(f"{dotted}.{exc.field}", exc.of_key) from None


def _solver_settings(loader: SuiteToml, table: Any) -> SolverSettings:
    """[repair.solver]: the shared settings, each backend's table under its name ([repair.solver.ipm]),
    and the flat keys (``ipm_tolerance``) older suites wrote; SolverSettings.from_json reads both."""
    dotted = "repair.solver"
    if not isinstance(table, dict):
        raise loader.error(dotted, f"must be a table ([{dotted}])")
    loader.unknown(table, SolverSettings.keys(), dotted)
    for key, value in table.items():
        kind = SolverSettings.key_type(key)
        if isinstance(kind, type):
            _checked_table(loader, f"{dotted}.{key}", value, kind)
        else:
            _check_type(loader, f"{dotted}.{key}", value, kind)
    try:
        return SolverSettings.from_json(table)
    except SettingsError as exc:
        raise loader.error(f"{dotted}.{exc.field}", exc.of_key) from None


__all__ = ["SUITE_FILE", "Suite", "find_suite_file", "load_suite"]
