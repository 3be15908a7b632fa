"""The ``[model]`` table: where the classifier's folder is (a path or a factory), its head's
layer, its labels, checked from its files without loading it.

Whether the head is really dense → activation → linear is checked when the model loads
(:func:`warp_check.runs.session.load_adapter`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_check.decisions import DECISIONS, DecisionKind, LabelSpace, deciding_config, logit_of
from warp_check.errors import ModelError, SettingsError, SuiteError, reraise_interrupt
from warp_check.model.activation_names import exact_name
from warp_check.model.engines.settings import ENGINE_NAMES, LOCAL, Engine, EngineSettings, RaySettings, require_engine
from warp_check.model.hub_cache import COMMIT, nearest, resolve_hub_model
from warp_check.model.loading import read_config
from warp_check.suite.toml_lines import SuiteToml

_MODEL_KEYS = (
    "path",
    "factory",
    "id",
    "revision",
    "allow_moving_revision",
    "layer",
    "max_length",
    "batch_size",
    "device",
    "threads",
    "engine",
    "ray",
    "decision",
    "thresholds",
)
_RAY_KEYS = ("address", "num_workers", "num_cpus", "num_gpus", "batch_size", "max_restarts")

# What ClassifierAdapter's device argument takes (whether torch sees it is checked when it loads).
DEVICE_NAME = re.compile(r"auto|cpu|cuda(:\d+)?")


_LAYER_KEYS = ("repair_layer", "activation", "classifier")


@dataclass(frozen=True, kw_only=True)
class ModelSettings:
    """``[model]``: where the classifier is and how to read it."""

    path: str | None = None  # as written in warp.toml
    factory: str | None = None  # "file.py:function", as written
    id: str | None = None  # a Hub model, "org/name", read from the Hugging Face cache
    revision: str | None = None  # its commit (or, allowed, a branch or tag)
    allow_moving_revision: bool = False
    layer: str | tuple[str] | tuple[str, str, str] = "auto"  # "auto", "final", (final_layer,) or the three names
    max_length: int = 128
    batch_size: int = 32
    device: str = "auto"  # where the encoder runs: auto (CUDA when torch sees it), cpu, cuda, cuda:N
    threads: int | None = None  # torch CPU threads while encoding; None: the cores, shared among xdist workers
    engine: EngineSettings = LOCAL  # where the encoder pass runs: engine = "local" | "ray", and [model.ray]
    decision: str | None = None  # a registered kind of decision's name; None: the one the config's problem_type names
    # Per label, the probability above which it is on (a kind that decides by thresholds: multi_label).
    thresholds: tuple[tuple[str, float], ...] = ()


def read_model_table(loader: SuiteToml, data: dict[str, Any], *, overridden: bool) -> ModelSettings:
    table = data.get("model")
    if table is None:
        if overridden:
            return ModelSettings()
        raise loader.error("model", "missing [model] table: give model.path (a local folder) or model.factory")
    if not isinstance(table, dict):
        raise loader.error("model", f"must be a table ([model]), got {type(table).__name__}")
    loader.unknown(table, _MODEL_KEYS, "model")
    path, factory, hub_id = table.get("path"), table.get("factory"), table.get("id")
    given = [key for key, value in (("path", path), ("factory", factory), ("id", hub_id)) if value is not None]
    if len(given) > 1:
        raise loader.error(
            f"model.{given[1]}", f"give one of model.path, model.factory or model.id, not {' and '.join(given)}"
        )
    if not given and not overridden:
        raise loader.error(
            "model", "missing field 'path': give model.path (a local folder), model.factory or model.id (a Hub model)"
        )
    revision = table.get("revision")
    allow_moving = table.get("allow_moving_revision", False)
    if hub_id is None and (revision is not None or "allow_moving_revision" in table):
        raise loader.error(
            "model.revision" if revision is not None else "model.allow_moving_revision", "applies to model.id only"
        )
    if not isinstance(allow_moving, bool):
        raise loader.error("model.allow_moving_revision", f"must be true or false, got {allow_moving!r}")
    if hub_id is not None:
        if not isinstance(hub_id, str) or not re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", hub_id):
            raise loader.error("model.id", f"{hub_id!r} is not a Hub model id of the form 'org/name'")
        if revision is None:
            raise loader.error(
                "model.revision", "a Hub model needs model.revision: the commit to test (a branch moves under the gate)"
            )
        if not isinstance(revision, str) or not revision.strip():
            raise loader.error("model.revision", f"must be a non-empty string, got {revision!r}")
        if not COMMIT.fullmatch(revision) and not allow_moving:
            raise loader.error(
                "model.revision",
                f"{revision!r} is a branch or tag, which can move under the gate: pin the commit (40 hex digits), "
                "or set allow_moving_revision = true",
            )
    for key, value in (("path", path), ("factory", factory)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise loader.error(f"model.{key}", f"must be a non-empty string, got {value!r}")
    if factory is not None and not re.fullmatch(r"[^:]+\.py:[A-Za-z_][A-Za-z0-9_]*", factory):
        raise loader.error(
            "model.factory", f"{factory!r} is not of the form 'file.py:function' (a file beside warp.toml)"
        )
    layer = _layer(loader, table.get("layer", "auto"))
    counts = {}
    for key, default in (("max_length", 128), ("batch_size", 32)):
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise loader.error(f"model.{key}", f"must be an integer >= 1, got {value!r}")
        counts[key] = value
    device = table.get("device", "auto")
    if not isinstance(device, str) or not DEVICE_NAME.fullmatch(device):
        raise loader.error("model.device", f"{device!r} is not a device: give 'auto', 'cpu', 'cuda' or 'cuda:N'")
    threads = table.get("threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise loader.error("model.threads", f"must be an integer >= 1, got {threads!r}")
    decision = table.get("decision")
    if decision is not None and decision not in DECISIONS:
        known = ", ".join(map(repr, DECISIONS))
        raise loader.error("model.decision", f"{decision!r} is not a registered kind of decision; use one of {known}")
    return ModelSettings(
        path=path,
        decision=decision,
        thresholds=_thresholds(loader, table.get("thresholds")),
        device=device,
        threads=threads,
        engine=_engine(loader, table),
        factory=factory,
        id=hub_id,
        revision=revision,
        allow_moving_revision=allow_moving,
        layer=layer,
        **counts,
    )


def _engine(loader: SuiteToml, table: dict[str, Any]) -> EngineSettings:
    """``engine`` and ``[model.ray]``; engine "ray" without Ray installed is refused here, before any work."""
    name = table.get("engine", Engine.LOCAL.value)
    if not isinstance(name, str) or name not in ENGINE_NAMES:
        raise loader.error("model.engine", f"{name!r} is not an engine: give {' or '.join(map(repr, ENGINE_NAMES))}")
    given = table.get("ray", {})
    if not isinstance(given, dict):
        raise loader.error("model.ray", f"must be a table ([model.ray]), got {type(given).__name__}")
    loader.unknown(given, _RAY_KEYS, "model.ray")
    try:
        ray = RaySettings(**given)
    except SettingsError as exc:
        raise loader.error(f"model.ray.{exc.field}", exc.of_key) from None
    try:
        require_engine(Engine(name))
    except SettingsError as exc:
        raise loader.error("model.engine", exc.of_key) from None
    return EngineSettings(kind=Engine(name), ray=ray)


def _layer(loader: SuiteToml, value: Any) -> str | tuple[str] | tuple[str, str, str]:
    usage = (
        'give "auto" (found from the model), "final" (repair the final linear layer), "ffn_output" (a token '
        "classifier's last feed-forward output layer), "
        "[repair_layer, activation, classifier], {repair_layer = ..., activation = ..., classifier = ...} "
        "or [final_layer]"
    )
    if value in ("auto", "final", "ffn_output"):
        return value
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str) and value[0].strip():
        return (value[0],)  # the final-linear form on a named layer
    if isinstance(value, dict):
        loader.unknown(value, _LAYER_KEYS, "model.layer")
        missing = [k for k in _LAYER_KEYS if k not in value]
        if missing:
            raise loader.error("model.layer", f"missing {', '.join(missing)}: {usage}")
        value = [value[k] for k in _LAYER_KEYS]
    if not isinstance(value, list) or len(value) != 3 or not all(isinstance(v, str) and v.strip() for v in value):
        raise loader.error("model.layer", f"{value!r} is not a layer: {usage}")
    try:
        exact_name(value[1])
    except KeyError as exc:
        raise loader.error("model.layer", exc.args[0]) from None
    return (value[0], value[1], value[2])


def check_model_dir(
    loader: SuiteToml, folder: Path, dotted: str, *, overridden: bool, written: str | None = None
) -> None:
    shown = str(folder) if overridden or written is None else written
    what = "the model folder" if overridden else "model folder"
    if not folder.exists():
        hint = (
            "; relative paths are read from the folder of warp.toml; a Hub model is model.id = 'org/name' with "
            "model.revision, read from the local Hugging Face cache (never downloaded: hf download org/name)"
            if not overridden
            else ""
        )
        raise loader.error(dotted, f"{what} {shown!r} does not exist{nearest(folder)}{hint}")
    if not folder.is_dir():
        raise loader.error(dotted, f"{what} {shown!r} is not a folder")
    if not (folder / "config.json").is_file():
        raise loader.error(dotted, f"{what} {shown!r} has no config.json: not a Hugging Face model folder")
    if not any(folder.glob("*.safetensors")) and not any(folder.glob("pytorch_model*.bin")):
        raise loader.error(dotted, f"{what} {shown!r} has no weights (*.safetensors)")


def run_factory(loader: SuiteToml, spec: str) -> Path:
    """Import ``file.py`` beside warp.toml and call ``function()``: it returns the model folder.

    Trust model: a suite is code the user chose to run, like a conftest.py (which can import
    anything too), so the file its factory names runs, wherever it is (suites may share one).
    Nothing else in a suite is ever executed, and model folders are data: they are read with
    safetensors (or ``weights_only`` torch.load) and never with remote code.
    """
    file_name, _, function = spec.rpartition(":")
    source = loader.resolve(loader.toml.parent / file_name, "model.factory", file_name)
    if not source.is_file():
        raise loader.error("model.factory", f"factory file {file_name!r} does not exist (relative to warp.toml)")
    module_name = "_warp_factory_" + hashlib.sha256(str(source).encode()).hexdigest()[:16]
    folder = str(source.parent)
    sys.path.insert(0, folder)  # so the factory can import modules beside it
    try:
        module_spec = importlib.util.spec_from_file_location(module_name, source)
        if module_spec is None or module_spec.loader is None:
            raise loader.error("model.factory", f"cannot import {file_name!r}")
        module = importlib.util.module_from_spec(module_spec)
        try:
            module_spec.loader.exec_module(module)
            build = getattr(module, function, None)
            if not callable(build):
                raise loader.error("model.factory", f"{file_name!r} has no function {function!r}")
            result = build()
        except SuiteError:
            raise
        except Exception as exc:  # the factory is user code: report it, never a traceback
            reraise_interrupt(exc)
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == source]
            where = f" (at {file_name} line {frames[-1].lineno})" if frames else ""
            raise loader.error("model.factory", f"factory {spec!r} raised {type(exc).__name__}: {exc}{where}") from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    if not isinstance(result, (str, Path)):
        raise loader.error(
            "model.factory", f"factory {spec!r} returned {type(result).__name__}; it must return a folder path"
        )
    return loader.resolve(loader.toml.parent / Path(result).expanduser(), "model.factory", str(result))


def labels_of(loader: SuiteToml, data: dict[str, Any], model_dir: Path) -> tuple[dict[str, int], int | None]:
    id2label, num_classes = model_labels(loader, model_dir)
    table = data.get("labels")
    if table is None:
        return {name: i for i, name in sorted(id2label.items())}, num_classes
    if isinstance(table, list):  # labels = ["negative", "positive"]: position = class id
        if not all(isinstance(n, str) and n.strip() for n in table) or len(set(table)) != len(table):
            raise loader.error("labels", f"a list of labels must hold distinct non-empty names, got {table!r}")
        table = {name: i for i, name in enumerate(table)}
    if not isinstance(table, dict):
        raise loader.error("labels", "must be a table of name = class id ([labels] negative = 0) or a list of names")
    if not table:
        raise loader.error("labels", "is empty: name at least one class, or leave [labels] out")
    seen: dict[int, str] = {}
    for name, index in table.items():
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise loader.error(f"labels.{name}", f"class id must be an integer >= 0, got {index!r}")
        if num_classes is not None and index >= num_classes:
            raise loader.error(
                f"labels.{name}", f"class id {index} is out of range: the model has {num_classes} classes"
            )
        if index in seen:
            raise loader.error(f"labels.{name}", f"class id {index} is already the label '{seen[index]}'")
        seen[index] = name
    return dict(table), num_classes


def _thresholds(loader: SuiteToml, table: Any) -> tuple[tuple[str, float], ...]:
    if table is None:
        return ()
    if not isinstance(table, dict):
        raise loader.error("model.thresholds", f"must be a table {{label = probability}}, got {table!r}")
    for label, p in table.items():
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 < p < 1.0:
            raise loader.error(
                f"model.thresholds.{label}", f"must be a probability strictly between 0 and 1, got {p!r}"
            )
    return tuple((str(label), float(p)) for label, p in table.items())


def decision_of(
    loader: SuiteToml, settings: ModelSettings, model_dir: Path, labels: dict[str, int] | None = None
) -> DecisionKind:
    """The suite's kind of decision (see :func:`kind_of`), with ``[model] thresholds`` bound to it."""
    kind = kind_of(loader, settings, model_dir)
    if not settings.thresholds:
        return kind
    space = LabelSpace(names=labels or {}, num_classes=None)
    thresholds: dict[int, float] = {}
    for label, p in settings.thresholds:
        try:
            class_id = space.class_id(int(label) if label.isdigit() else label)
        except ValueError as exc:
            raise loader.error(f"model.thresholds.{label}", str(exc)) from None
        thresholds[class_id] = logit_of(p)
    try:
        return kind.bound(thresholds)
    except ValueError as exc:
        raise loader.error("model.thresholds", str(exc)) from None


def kind_of(loader: SuiteToml, settings: ModelSettings, model_dir: Path) -> DecisionKind:
    """The suite's kind of decision: ``[model] decision``, else the one the model's config names by
    its ``architectures`` (a token classifier) or ``problem_type`` (single label where it names none)."""
    try:
        config = read_config(model_dir)
    except ModelError as exc:
        raise loader.error("model.path", str(exc)) from None
    problem_type = config.get("problem_type")
    kind = deciding_config(config.get("architectures"), problem_type)
    if settings.decision is not None:
        named = DECISIONS[settings.decision]
        if named.per_word != (kind is not None and kind.per_word):
            model = "a token classifier (a tag per word)" if named.per_word is False else "a classifier of whole texts"
            raise loader.error(
                "model.decision",
                f"{settings.decision!r} cannot decide this model: it is {model} (architectures "
                f"{config.get('architectures')!r}); leave [model] decision out to use the model's own",
            )
        return named
    if kind is None:
        known = ", ".join(map(repr, DECISIONS))
        why = f"no registered kind of decision decides problem_type {problem_type!r}; name one of {known}"
        raise loader.error("model.decision", why)
    return kind


def model_labels(loader: SuiteToml, model_dir: Path) -> tuple[dict[int, str], int | None]:
    try:
        config = read_config(model_dir)
    except ModelError as exc:
        raise loader.error("model.path", str(exc)) from None
    raw = config.get("id2label")
    id2label: dict[int, str] = {}
    if isinstance(raw, dict):
        for key, value in raw.items():
            try:
                id2label[int(key)] = str(value)
            except (TypeError, ValueError):
                continue
    num = config.get("num_labels")
    if not isinstance(num, int) or isinstance(num, bool):
        num = len(id2label) or None
    return id2label, num


def hub_folder(loader: SuiteToml, settings: ModelSettings) -> tuple[Path, str]:
    """The Hub model's folder in the Hugging Face cache, and the commit it is: read offline only
    (a suite never downloads; fetch it once with hf download ORG/NAME --revision R)."""
    try:
        return resolve_hub_model(settings.id or "", settings.revision or "")
    except ModelError as exc:
        raise loader.error("model.id", str(exc)) from None
