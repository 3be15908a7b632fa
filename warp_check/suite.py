"""A suite on disk: ``warp.toml`` plus JSONL case files, loaded into validated objects.

Every mistake becomes a :class:`~warp_check.errors.SuiteError` that names the file, the line
and the field, so pytest can show it as a collection error and ``warp-check`` as a one-line
message. Nothing heavy is imported here: the model folder is checked from its files
(``config.json``, weights) without loading it; whether its head is really
dense → activation → linear is checked when it is loaded (:func:`warp_check.session.load_adapter`).

Layout (paths are relative to the folder that holds ``warp.toml``)::

    name = "reviews"                       # optional; default: the folder's name
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
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import importlib.util
import json
import re
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cases import Case, Kind
from .errors import SettingsError, SuiteError
from .settings import RepairSettings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

SUITE_FILE = "warp.toml"
CASE_FIELDS = ("id", "text", "text_pair", "label", "kind", "source", "original")
MAX_TEXT_CHARS = 100_000  # far beyond any max_length; longer is a mistake (a pasted file), not a case
_TOP_KEYS = ("name", "description", "model", "labels", "cases", "repair")
_MODEL_KEYS = ("path", "factory", "layer", "max_length", "batch_size")
_CASES_KEYS = ("path", "kind")
_LAYER_KEYS = ("repair_layer", "activation", "classifier")
_KINDS = tuple(k.value for k in Kind)


# -- the objects ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ModelSettings:
    """``[model]``: where the classifier is and how to read it."""

    path: str | None = None  # as written in warp.toml
    factory: str | None = None  # "file.py:function", as written
    layer: str | tuple[str, str, str] = "auto"  # "auto" or (repair_layer, activation, classifier)
    max_length: int = 128
    batch_size: int = 32


@dataclass(frozen=True, kw_only=True)
class CaseFile:
    """One ``[[cases]]`` table: a JSONL file and the kind its lines have by default."""

    path: Path
    kind: Kind | None
    line: int | None  # of the [[cases]] header in warp.toml


@dataclass(frozen=True, kw_only=True)
class Location:
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True, kw_only=True)
class Suite:
    """A loaded, validated suite. ``cases`` keep the order of the files and their lines."""

    toml: Path  # absolute path of warp.toml
    name: str
    description: str | None
    model: ModelSettings
    model_dir: Path  # resolved model folder (after factory / override)
    model_overridden: bool
    labels: dict[str, int]  # name -> class id
    num_classes: int | None  # from the model's config.json, when it says
    case_files: tuple[CaseFile, ...]
    cases: tuple[Case, ...]
    locations: dict[str, Location]  # case id -> JSONL file and line
    repair: RepairSettings
    key_lines: dict[str, int] = field(default_factory=dict)  # "model.layer" -> line in warp.toml

    @property
    def root(self) -> Path:
        return self.toml.parent

    @property
    def layer(self) -> Any:
        """The ``layer`` argument for :meth:`ClassifierAdapter.from_pretrained`."""
        if self.model.layer == "auto":
            return "auto"
        from .model import HeadSpec

        repair_layer, activation, classifier = self.model.layer
        return HeadSpec(repair_layer=repair_layer, activation=activation, classifier=classifier)

    def label_name(self, label: int) -> str:
        for name, index in self.labels.items():
            if index == label:
                return name
        return str(label)

    def case(self, case_id: str) -> Case:
        for case in self.cases:
            if case.id == case_id:
                return case
        raise KeyError(case_id)

    def count(self, kind: Kind) -> int:
        return sum(1 for c in self.cases if c.kind is kind)

    def error(self, field_name: str, message: str) -> SuiteError:
        """A SuiteError about a warp.toml field, pointing at the line of its key."""
        return SuiteError(message, path=self.toml, line=self.key_lines.get(field_name), field=field_name)

    def settings(
        self, *, rank: int | None = None, gamma_s: float | None = None, gamma_h: float | None = None
    ) -> RepairSettings:
        """The suite's repair settings with the given overrides (None: keep the suite's)."""
        changes = {k: v for k, v in (("rank", rank), ("gamma_s", gamma_s), ("gamma_h", gamma_h)) if v is not None}
        settings = dataclasses.replace(self.repair, **changes) if changes else self.repair
        if settings.gamma_h > settings.gamma_s:
            name = "gamma_h" if gamma_h is not None or gamma_s is None else "gamma_s"
            raise SettingsError(name, getattr(settings, name), _margins_why(settings))
        return settings

    def digest(self) -> str:
        """SHA-256 over warp.toml, every case and the model folder: names this suite's content."""
        h = hashlib.sha256()
        h.update(self.toml.read_bytes())
        h.update(str(self.model_dir).encode())
        for case in self.cases:
            h.update(json.dumps(dataclasses.asdict(case), sort_keys=True, default=str).encode())
        return h.hexdigest()


# -- where keys are in the TOML text --------------------------------------------------------

_HEADER_ARRAY = re.compile(r"^\[\[\s*([^\[\]]+?)\s*\]\]\s*(#.*)?$")
_HEADER_TABLE = re.compile(r"^\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_KEY = re.compile(r"""^((?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+))*)\s*=""")


def _dotted(text: str) -> str:
    parts = re.findall(r""""[^"]*"|'[^']*'|[A-Za-z0-9_\-]+""", text)
    return ".".join(p.strip("\"'") for p in parts)


class _KeyLines:
    """Line numbers of tables and keys in a TOML text (tomllib keeps no positions).

    ``cases[1].path`` means the key ``path`` in the second ``[[cases]]`` table.
    """

    def __init__(self, text: str) -> None:
        self.lines: dict[str, int] = {}
        counts: dict[str, int] = {}
        table = ""
        in_multiline: str | None = None
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if in_multiline is not None:
                if line.count(in_multiline) % 2 == 1:
                    in_multiline = None
                continue
            if m := _HEADER_ARRAY.match(line):
                name = _dotted(m[1])
                counts[name] = counts.get(name, -1) + 1
                table = f"{name}[{counts[name]}]"
                self.lines.setdefault(table, number)
                self.lines.setdefault(name, number)  # "cases" points at the first [[cases]]
                continue
            if m := _HEADER_TABLE.match(line):
                table = _dotted(m[1])
                # [repair.solver] after [[cases]] etc.: index array parents by their last element
                for name, count in counts.items():
                    if table.startswith(name + "."):
                        table = f"{name}[{count}]{table[len(name) :]}"
                self.lines.setdefault(table, number)
                continue
            if m := _KEY.match(line):
                key = _dotted(m[1])
                self.lines.setdefault(f"{table}.{key}" if table else key, number)
                for quote in ('"""', "'''"):
                    if line.count(quote) % 2 == 1:
                        in_multiline = quote

    def line(self, dotted: str) -> int | None:
        """The line of ``dotted`` or, failing that, of its closest enclosing table or key."""
        name = dotted
        while name:
            if name in self.lines:
                return self.lines[name]
            name = name.rpartition(".")[0]
        return None


def _key_at(text: str, line: int | None) -> str | None:
    """The dotted key written on ``line`` (under its table header), if that line holds one."""
    lines = text.splitlines()
    if line is None or not 1 <= line <= len(lines) or not (m := _KEY.match(lines[line - 1].strip())):
        return None
    for above in reversed(lines[: line - 1]):
        if header := _HEADER_ARRAY.match(above.strip()) or _HEADER_TABLE.match(above.strip()):
            return f"{_dotted(header[1])}.{_dotted(m[1])}"
    return _dotted(m[1])


# -- loading --------------------------------------------------------------------------------


class _Loader:
    def __init__(self, toml: Path) -> None:
        self.toml = toml
        self.keys = _KeyLines("")

    def error(self, dotted: str | None, message: str, line: int | None = None) -> SuiteError:
        if line is None and dotted is not None:
            line = self.keys.line(dotted)
        return SuiteError(message, path=self.toml, line=line, field=dotted)

    def unknown(self, table: Mapping[str, Any], known: tuple[str, ...], prefix: str) -> None:
        for key in table:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                where = f"[{prefix}]" if prefix else "the top level of warp.toml"
                raise self.error(
                    f"{prefix}.{key}" if prefix else key,
                    f"unknown key '{key}' in {where}{hint}; known keys: {', '.join(known)}",
                )


def find_suite_file(path: str | Path) -> Path:
    """``warp.toml`` itself, or the one inside a folder."""
    path = Path(path)
    if path.is_dir():
        path = path / SUITE_FILE
    if not path.is_file():
        raise SuiteError(f"no suite here: {SUITE_FILE} not found", path=path)
    return path.resolve()


def load_suite(path: str | Path, *, model: str | Path | None = None) -> Suite:
    """Load and validate a suite; ``model`` replaces the suite's ``[model]`` path/factory.

    Raises :class:`SuiteError` (file, line, field) for every mistake.
    """
    toml = find_suite_file(path)
    loader = _Loader(toml)
    try:
        raw = toml.read_bytes()
    except OSError as exc:
        raise SuiteError(f"cannot read the file ({exc.strerror or exc})", path=toml) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SuiteError(f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})", path=toml, line=line) from None
    loader.keys = _KeyLines(text)
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise SuiteError("invalid TOML: arrays or tables nested too deeply", path=toml) from None
    except ValueError as exc:
        if not isinstance(exc, tomllib.TOMLDecodeError):  # Python refuses integers of more than 4300 digits
            m = re.search(r"\d{4300}", text)
            line = text[: m.start()].count("\n") + 1 if m else None
            raise SuiteError(
                "invalid TOML: a number with more than 4300 digits", path=toml, line=line, field=_key_at(text, line)
            ) from None
        message = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", message)
        line = int(m[1]) if m else getattr(exc, "lineno", None)
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", message)
        if m:
            message += f" (column {m[2]})"
        raise SuiteError(f"invalid TOML: {message}", path=toml, line=line, field=_key_at(text, line)) from None

    loader.unknown(data, _TOP_KEYS, "")
    name = data.get("name", toml.parent.name)
    if not isinstance(name, str) or not name.strip():
        raise loader.error("name", f"must be a non-empty string, got {name!r}")
    description = data.get("description")
    if description is not None and not isinstance(description, str):
        raise loader.error("description", f"must be a string, got {description!r}")

    model_settings = _model_settings(loader, data, overridden=model is not None)
    if model is not None:
        model_dir = _resolve(loader, Path(model).expanduser(), "model.path", str(model))
        _check_model_dir(loader, model_dir, "model.path", overridden=True)
    elif model_settings.path is not None:
        written = model_settings.path
        model_dir = _resolve(loader, toml.parent / Path(written).expanduser(), "model.path", written)
        _check_model_dir(loader, model_dir, "model.path", overridden=False, written=model_settings.path)
    else:
        model_dir = _run_factory(loader, model_settings.factory or "")
        _check_model_dir(loader, model_dir, "model.factory", overridden=False, written=str(model_dir))
    labels, num_classes = _labels(loader, data, model_dir)
    case_files = _case_files(loader, data)
    cases, locations = _read_cases(loader, case_files, labels, num_classes)
    repair = _repair_settings(loader, data)
    return Suite(
        toml=toml,
        name=name.strip(),
        description=description,
        model=model_settings,
        model_dir=model_dir,
        model_overridden=model is not None,
        labels=labels,
        num_classes=num_classes,
        case_files=case_files,
        cases=cases,
        locations=locations,
        repair=repair,
        key_lines=dict(loader.keys.lines),
    )


def _resolve(loader: _Loader, path: Path, dotted: str, written: str) -> Path:
    """``path.resolve()``; a symlink loop is the suite's mistake, not a crash."""
    try:
        return path.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: Python < 3.13's "Symlink loop"
        raise loader.error(dotted, f"{written!r} cannot be resolved ({exc}): a symlink loop?") from None


def _model_settings(loader: _Loader, data: dict[str, Any], *, overridden: bool) -> ModelSettings:
    table = data.get("model")
    if table is None:
        if overridden:
            return ModelSettings()
        raise loader.error("model", "missing [model] table: give model.path (a local folder) or model.factory")
    if not isinstance(table, dict):
        raise loader.error("model", f"must be a table ([model]), got {type(table).__name__}")
    loader.unknown(table, _MODEL_KEYS, "model")
    path, factory = table.get("path"), table.get("factory")
    if path is not None and factory is not None:
        raise loader.error("model.factory", "give either model.path or model.factory, not both")
    if path is None and factory is None and not overridden:
        raise loader.error("model", "missing field 'path': give model.path (a local folder) or model.factory")
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
    return ModelSettings(path=path, factory=factory, layer=layer, **counts)


def _layer(loader: _Loader, value: Any) -> str | tuple[str, str, str]:
    usage = (
        'give "auto" (the per-architecture table), [repair_layer, activation, classifier] '
        "or {repair_layer = ..., activation = ..., classifier = ...}"
    )
    if value == "auto":
        return "auto"
    if isinstance(value, dict):
        loader.unknown(value, _LAYER_KEYS, "model.layer")
        missing = [k for k in _LAYER_KEYS if k not in value]
        if missing:
            raise loader.error("model.layer", f"missing {', '.join(missing)}: {usage}")
        value = [value[k] for k in _LAYER_KEYS]
    if not isinstance(value, list) or len(value) != 3 or not all(isinstance(v, str) and v.strip() for v in value):
        raise loader.error("model.layer", f"{value!r} is not a layer: {usage}")
    from .activations import get_activation

    try:
        get_activation(value[1])
    except KeyError as exc:
        raise loader.error("model.layer", exc.args[0]) from None
    return (value[0], value[1], value[2])


def _check_model_dir(
    loader: _Loader, folder: Path, dotted: str, *, overridden: bool, written: str | None = None
) -> None:
    shown = str(folder) if overridden or written is None else written
    what = "the model folder given to override model.path" if overridden else "model folder"
    if not folder.exists():
        hint = (
            "; relative paths are read from the folder of warp.toml, and hub ids are not downloaded: "
            "download the model and give its local folder"
            if not overridden
            else ""
        )
        raise loader.error(dotted, f"{what} {shown!r} does not exist{hint}")
    if not folder.is_dir():
        raise loader.error(dotted, f"{what} {shown!r} is not a folder")
    if not (folder / "config.json").is_file():
        raise loader.error(dotted, f"{what} {shown!r} has no config.json: not a Hugging Face model folder")
    if not any(folder.glob("*.safetensors")) and not any(folder.glob("pytorch_model*.bin")):
        raise loader.error(dotted, f"{what} {shown!r} has no weights (*.safetensors)")


def _run_factory(loader: _Loader, spec: str) -> Path:
    """Import ``file.py`` beside warp.toml and call ``function()``: it returns the model folder.

    Trust model: a suite is code the user chose to run, like a conftest.py (which can import
    anything too), so the file its factory names runs, wherever it is (suites may share one).
    Nothing else in a suite is ever executed, and model folders are data: they are read with
    safetensors (or ``weights_only`` torch.load) and never with remote code.
    """
    file_name, _, function = spec.rpartition(":")
    source = _resolve(loader, loader.toml.parent / file_name, "model.factory", file_name)
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
    return _resolve(loader, loader.toml.parent / Path(result).expanduser(), "model.factory", str(result))


def _labels(loader: _Loader, data: dict[str, Any], model_dir: Path) -> tuple[dict[str, int], int | None]:
    id2label, num_classes = _model_labels(loader, model_dir)
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


def _model_labels(loader: _Loader, model_dir: Path) -> tuple[dict[int, str], int | None]:
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise loader.error("model.path", f"cannot read {model_dir / 'config.json'}: {exc}") from None
    raw = config.get("id2label") if isinstance(config, dict) else None
    id2label: dict[int, str] = {}
    if isinstance(raw, dict):
        for key, value in raw.items():
            try:
                id2label[int(key)] = str(value)
            except (TypeError, ValueError):
                continue
    num = config.get("num_labels") if isinstance(config, dict) else None
    if not isinstance(num, int) or isinstance(num, bool):
        num = len(id2label) or None
    return id2label, num


def _case_files(loader: _Loader, data: dict[str, Any]) -> tuple[CaseFile, ...]:
    tables = data.get("cases")
    if tables is None:
        raise loader.error("cases", "no [[cases]] table: list at least one JSONL case file ([[cases]] path, kind)")
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise loader.error("cases", "must be an array of tables: write each case file as a [[cases]] table")
    files: list[CaseFile] = []
    seen: dict[Path, int] = {}
    for i, table in enumerate(tables):
        prefix = f"cases[{i}]"
        loader.unknown(table, _CASES_KEYS, prefix)
        rel = table.get("path")
        if rel is None:
            raise loader.error(prefix, "missing field 'path' (the JSONL file of this [[cases]] table)")
        if not isinstance(rel, str) or not rel.strip():
            raise loader.error(f"{prefix}.path", f"must be a non-empty string, got {rel!r}")
        kind = table.get("kind")
        if kind is not None and kind not in _KINDS:
            raise loader.error(f"{prefix}.kind", f"unknown kind {kind!r}; use one of {', '.join(_KINDS)}")
        path = loader.toml.parent / rel
        try:
            is_file = path.is_file()
        except OSError as exc:  # e.g. a symlink loop
            raise loader.error(f"{prefix}.path", f"case file {rel!r} cannot be read ({exc.strerror or exc})") from None
        if not is_file:
            if path.is_symlink() and not path.exists():
                what = "is a symlink that leads nowhere (a loop or a missing target)"
            else:
                what = "is not a file" if path.exists() else "does not exist (relative to warp.toml)"
            raise loader.error(f"{prefix}.path", f"case file {rel!r} {what}")
        resolved = _resolve(loader, path, f"{prefix}.path", rel)
        if resolved in seen:
            raise loader.error(f"{prefix}.path", f"case file {rel!r} is already listed in cases[{seen[resolved]}]")
        seen[resolved] = i
        files.append(CaseFile(path=path, kind=Kind(kind) if kind else None, line=loader.keys.line(prefix)))
    return tuple(files)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(ValueError):
    pass


class _CaseReader:
    """Reads JSONL case files into Cases; ids are unique across the whole suite."""

    def __init__(self, loader: _Loader, labels: dict[str, int], num_classes: int | None) -> None:
        self.loader = loader
        self.labels = labels
        self.num_classes = num_classes
        self.cases: list[Case] = []
        self.locations: dict[str, Location] = {}
        self.texts: dict[tuple[str, str | None], Case] = {}  # (text, text_pair) -> first must_fix/keep case
        names = ", ".join(repr(n) for n in labels)
        ids = f"a class id 0..{num_classes - 1}" if num_classes else "a class id"
        self.label_help = f"one of {names} or {ids}" if labels else ids

    def read(self, case_file: CaseFile) -> None:
        root = self.loader.toml.parent
        path = case_file.path
        rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise SuiteError(f"cannot read the file ({exc.strerror or exc})", path=path) from None
        for number, line in enumerate(raw.split(b"\n"), start=1):
            line = line.rstrip(b"\r")
            if line.strip():
                self.cases.append(self._case(line, case_file, rel, number))
                self.locations[self.cases[-1].id] = Location(path=path, line=number)

    def _case(self, line_bytes: bytes, case_file: CaseFile, rel: str, number: int) -> Case:
        def error(field_name: str | None, message: str) -> SuiteError:
            return SuiteError(message, path=case_file.path, line=number, field=field_name)

        try:
            line = line_bytes.decode("utf-8")
        except UnicodeDecodeError as exc:
            byte = line_bytes[exc.start]
            raise error(None, f"not valid UTF-8 (byte 0x{byte:02x} at column {exc.start + 1})") from None
        if line.startswith("\ufeff"):
            raise error(None, "starts with a byte order mark (U+FEFF): save the file as UTF-8 without a BOM")
        try:
            record = json.loads(line, object_pairs_hook=_no_duplicate_keys)
        except _DuplicateKey as exc:
            raise error(str(exc), f"field '{exc}' is given twice") from None
        except json.JSONDecodeError as exc:
            raise error(None, f"not valid JSON: {exc.msg} (column {exc.colno}); one JSON object a line") from None
        except RecursionError:
            raise error(None, "not valid JSON: nested too deeply") from None
        except ValueError:  # Python refuses integers of more than 4300 digits
            raise error(None, "not valid JSON: a number with more than 4300 digits") from None
        if not isinstance(record, dict):
            shape = '{"text": ..., "label": ...}'
            raise error(None, f"a case is a JSON object ({shape}), got {type(record).__name__}")
        for key in record:
            if key not in CASE_FIELDS:
                close = difflib.get_close_matches(key, CASE_FIELDS, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise error(key, f"unknown field{hint}; known fields: {', '.join(CASE_FIELDS)}")
        case_id = record.get("id", f"{rel}:{number}")
        if not isinstance(case_id, str) or not case_id.strip():
            raise error("id", f"must be a non-empty string, got {case_id!r}")
        if "::" in case_id or any(ch in case_id for ch in "\n\r\t"):
            raise error("id", f"{case_id!r} must not contain '::', tabs or line breaks (pytest uses '::' in test ids)")
        if case_id in self.locations:
            first = self.locations[case_id]
            raise error("id", f"duplicate id {case_id!r}: already used at {self._shown(first.path)}:{first.line}")
        for key in ("text", "label"):
            if key not in record:
                raise error(key, f"missing field '{key}'")
        text = self._text(record, "text", error)
        pair = self._text(record, "text_pair", error) if record.get("text_pair") is not None else None
        label = self._label(record["label"], error)
        kind = record.get("kind", case_file.kind.value if case_file.kind else None)
        if kind is None:
            raise error("kind", "missing field 'kind': give it on the line or as the kind of its [[cases]] table")
        if kind not in _KINDS:
            raise error("kind", f"unknown kind {kind!r}; use one of {', '.join(_KINDS)}")
        if kind != Kind.AUX.value:
            same = self.texts.get((text, pair))
            if same is not None and same.label != label:
                first = self.locations[same.id]
                raise error(
                    "label",
                    f"the same text is case {same.id!r} at {self._shown(first.path)}:{first.line} labelled "
                    f"{self._name(same.label)}, here {self._name(label)}: no model can satisfy both",
                )
        for key in ("source", "original"):
            value = record.get(key)
            if value is not None and not isinstance(value, str):
                raise error(key, f"must be a string, got {type(value).__name__}")
        case = Case(
            id=case_id,
            text=text,
            text_pair=pair,
            label=label,
            kind=Kind(kind),
            source=record.get("source"),
            origin=f"{rel}:{number}",
        )
        if case.kind is not Kind.AUX:
            self.texts.setdefault((text, pair), case)
        return case

    def _shown(self, path: Path) -> str:
        root = self.loader.toml.parent
        return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)

    def _name(self, label: int) -> str:
        names = [name for name, index in self.labels.items() if index == label]
        return repr(names[0]) if names else str(label)

    @staticmethod
    def _text(record: dict[str, Any], key: str, error: Any) -> str:
        text = record[key]
        if not isinstance(text, str):
            raise error(key, f"must be a string, got {type(text).__name__}")
        if not text.strip():
            raise error(key, "is empty: a case needs some text" if key == "text" else "is empty: leave it out")
        if len(text) > MAX_TEXT_CHARS:
            raise error(key, f"is {len(text):,} characters long (limit {MAX_TEXT_CHARS:,}): is this a case?")
        return text

    def _label(self, label: Any, error: Any) -> int:
        if isinstance(label, str):
            if label not in self.labels:
                close = difflib.get_close_matches(label, list(self.labels), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise error("label", f"unknown label {label!r}{hint}; use {self.label_help}")
            return self.labels[label]
        if isinstance(label, int) and not isinstance(label, bool):
            if self.num_classes:
                ok = 0 <= label < self.num_classes
            else:
                ok = label in set(self.labels.values()) if self.labels else label >= 0
            if not ok:
                raise error("label", f"class id {label} is not a class of the model; use {self.label_help}")
            return label
        raise error("label", f"must be a label name or a class id, got {label!r}; use {self.label_help}")


def _read_cases(
    loader: _Loader, files: tuple[CaseFile, ...], labels: dict[str, int], num_classes: int | None
) -> tuple[tuple[Case, ...], dict[str, Location]]:
    reader = _CaseReader(loader, labels, num_classes)
    for case_file in files:
        reader.read(case_file)
    if not any(c.kind is not Kind.AUX for c in reader.cases):
        raise loader.error("cases", "the suite has no must_fix or must_keep cases: there is nothing to test")
    return tuple(reader.cases), reader.locations


def _field_types(cls: type) -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(cls)}


def _check_type(loader: _Loader, dotted: str, value: Any, type_name: str) -> None:
    ok = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "str": isinstance(value, str),
    }.get(type_name, True)
    if not ok:
        wanted = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string"}[type_name]
        raise loader.error(dotted, f"must be {wanted}, got {value!r}")


def _repair_settings(loader: _Loader, data: dict[str, Any]) -> RepairSettings:
    from .settings import SolverSettings

    table = data.get("repair", {})
    if not isinstance(table, dict):
        raise loader.error("repair", "must be a table ([repair])")
    types = _field_types(RepairSettings)
    loader.unknown(table, tuple(types), "repair")
    values = dict(table)
    solver_table = values.pop("solver", None)
    if solver_table is not None:
        if not isinstance(solver_table, dict):
            raise loader.error("repair.solver", "must be a table ([repair.solver])")
        solver_types = _field_types(SolverSettings)
        loader.unknown(solver_table, tuple(solver_types), "repair.solver")
        for key, value in solver_table.items():
            _check_type(loader, f"repair.solver.{key}", value, solver_types[key])
        try:
            values["solver"] = SolverSettings(**solver_table)
        except SettingsError as exc:
            raise loader.error(f"repair.solver.{exc.field}", _why(exc)) from None
    for key, value in values.items():
        if key != "solver":
            _check_type(loader, f"repair.{key}", value, types[key])
    try:
        settings = RepairSettings(**values)
    except SettingsError as exc:
        raise loader.error(f"repair.{exc.field}", _why(exc)) from None
    if settings.gamma_h > settings.gamma_s:
        name = "gamma_h" if "gamma_h" in values else "gamma_s"
        raise loader.error(f"repair.{name}", _margins_why(settings))
    return settings


def _margins_why(settings: RepairSettings) -> str:
    return (
        f"gamma_h = {settings.gamma_h:g} > gamma_s = {settings.gamma_s:g}: a must_keep case would need a larger "
        "margin than a repaired must_fix case gets, so a case fixed now fails as must_keep on the next run; "
        "lower gamma_h or raise gamma_s"
    )


def _why(exc: SettingsError) -> str:
    """'{value!r}: why' from a SettingsError, whose text is 'field=value: why'."""
    return str(exc)[len(f"{exc.field}=") :]


__all__ = [
    "CASE_FIELDS",
    "CaseFile",
    "Location",
    "ModelSettings",
    "SUITE_FILE",
    "Suite",
    "find_suite_file",
    "load_suite",
]
