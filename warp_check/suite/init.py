"""A suite from nothing: ``warp.toml`` for a model, and its two empty case files.

``warp-check init SUITE --model M`` writes what a user would otherwise copy from the docs: the
model (a folder, relative to the suite, or a Hub id pinned to the commit the local cache holds),
its labels as the model names them, a must_keep and a must_fix file. Nothing existing is
overwritten: a folder that holds any of the three files is refused. A new folder appears whole or
not at all (written beside it, then renamed); in an existing one the case files are created
exclusively and ``warp.toml``, written last, is renamed into place. The suite written is read back
by the loader before the call returns; one it would not load is removed again.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from warp_check.cases import Kind
from warp_check.errors import ModelError, SuiteError
from warp_check.files import as_if_created, write_text_atomically
from warp_check.model.hub_cache import ModelSource, resolve_model
from warp_check.model.loading import read_config
from warp_check.suite import template
from warp_check.suite.loader import SUITE_FILE, Suite, load_suite
from warp_check.validation import is_decimal
from warp_check.version import DOCS_URL

CASE_FILES: tuple[tuple[str, Kind, str], ...] = (
    ("must_keep.jsonl", Kind.MUST_KEEP, "cases the model must keep right"),
    ("must_fix.jsonl", Kind.MUST_FIX, "cases the model gets wrong, which a repair must fix"),
)
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SURROGATE = re.compile("[\ud800-\udfff]")  # a config's "\\ud800", or a file name that is not UTF-8


@dataclass(frozen=True, kw_only=True)
class NewSuite:
    """What :func:`init_suite` wrote: the suite as the loader reads it back, and its model."""

    suite: Suite
    model: ModelSource
    case_files: tuple[Path, ...]
    generic_labels: bool = False  # the model names no classes: its labels are transformers' LABEL_0...


def init_suite(folder: str | Path, model: str | Path | ModelSource, *, revision: str | None = None) -> NewSuite:
    """Write a suite for ``model`` (a folder, or a Hub id read from the local Hugging Face cache at
    ``revision``, default main) into ``folder``: ``warp.toml`` and empty case files. Raises
    SuiteError where ``folder`` already holds a suite or one of its files, ModelError where the
    model is not a readable Hugging Face folder."""
    folder = Path(folder).expanduser()
    source = resolve_model(model, revision)
    labels = _labels(source.folder)
    _check_target(folder)
    for name in [SUITE_FILE, *(name for name, _, _ in CASE_FILES)]:
        if os.path.lexists(folder / name):
            raise SuiteError(
                "already exists: warp-check init never overwrites a suite; add cases with warp-check import, "
                "or give a new folder",
                path=folder / name,
            )
    text = suite_toml(folder, source, labels)
    made = None if folder.exists() else _first_missing(folder)  # what to remove again where this fails
    written: list[Path] = []
    try:
        written = _write_into(folder, text) if made is None else _write_new(folder, text)
        try:
            suite = load_suite(folder, empty=True)
        except SuiteError as exc:
            raise ModelError(
                f"the suite written for this model does not load, so it was removed again: {exc}"
            ) from None
    except BaseException:
        if made is not None and written:  # the folder is this call's own, whole
            shutil.rmtree(made, ignore_errors=True)
        elif made is not None:  # never written: only the empty folders made above it go (another may own it)
            for parent in folder.parents:
                if not parent.is_relative_to(made) or _not_removed(parent):
                    break
        for path in written:
            path.unlink(missing_ok=True)
        raise
    return NewSuite(
        suite=suite,
        model=source,
        case_files=tuple(folder / name for name, _, _ in CASE_FILES),
        generic_labels=generic_labels(labels),
    )


def generic_labels(labels: dict[int, str]) -> bool:
    """Whether ``labels`` are the names transformers makes up for a model that names no classes (LABEL_0...)."""
    return bool(labels) and all(name == f"LABEL_{index}" for index, name in labels.items())


def _check_target(folder: Path) -> None:
    """A SuiteError where ``folder`` cannot be the suite's folder: a file, a symlink to nothing (or a
    loop), or below a path that is not a folder."""
    nearest = next(p for p in (folder, *folder.parents) if os.path.lexists(p) or p == Path(p.anchor or "."))
    if os.path.islink(nearest):
        try:
            nearest.resolve(strict=True)
        except (OSError, RuntimeError) as exc:  # RuntimeError: Python < 3.13's "Symlink loop"
            loops = isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP
            what = "loops" if loops else "does not exist"
            raise SuiteError(
                f"a symlink to {os.readlink(nearest)!r}, which {what}: give a new folder for the suite, or make the "
                "folder the link names first",
                path=nearest,
            ) from None
    if nearest.exists() and not nearest.is_dir():
        if nearest == folder:
            raise SuiteError("exists and is not a folder: give a new folder for the suite", path=folder)
        raise SuiteError(f"is not a folder, so the suite's folder {folder.name!r} cannot be made in it", path=nearest)


def _not_removed(folder: Path) -> bool:
    try:
        folder.rmdir()
    except OSError:
        return True
    return False


def _first_missing(folder: Path) -> Path:
    """The highest of ``folder`` and the folders above it that do not exist yet: what writing it makes."""
    missing = folder
    for parent in folder.parents:
        if os.path.lexists(parent):
            break
        missing = parent
    return missing


def suite_toml(folder: Path, source: ModelSource, labels: dict[int, str]) -> str:
    """The ``warp.toml`` text for a suite in ``folder`` on ``source``'s model with ``labels``: every
    table a suite reads, each key at its default with a note (``suite/template.py``), ``[traffic]``
    commented out (it needs a file)."""
    lines = [
        "# A warp-check suite: `warp-check import` adds cases, `pytest` runs them.",
        "# Every setting is here at its default; a line that starts with '#' is one left unset.",
        f"# Every key: {DOCS_URL}reference/warp-toml/",
        "",
        template.noted_line(f"# name = {_string(folder.name)}", template.TOP_NOTES["name"]),
        template.noted_line('# description = "…"', template.TOP_NOTES["description"]),
        "",
    ]
    if source.hub is None:
        given: dict[str, str] = {"path": _relative(source.folder, folder)}
        notes: dict[str, str] = {}
    else:
        given = {"id": source.hub.id, "revision": source.hub.commit}
        asked = "" if source.hub.revision == source.hub.commit else f" ({source.hub.revision} when the suite was made)"
        notes = {"revision": f"the commit tested{asked}"}
    for name in (*given.values(), *notes.values()):
        _string(name)  # a lone surrogate: refused before anything is written
    settings, rest = template.tables()[:2], template.tables()[2:]
    lines += [*settings[0].lines(given, notes=notes), "", *settings[1].lines(), ""]
    if labels:
        if generic_labels(labels):
            note = "transformers' made-up names (the model names no classes): rename them as you like"
        else:
            note = "the model's id2label: the names the case files use"
        lines.append(template.noted_line("[labels]", note))
        lines += [f"{_key(name)} = {index}" for index, name in sorted(labels.items())]
        lines.append("")
    for name, kind, what in CASE_FILES:
        path = template.noted_line(f"path = {_string(name)}", what)
        lines += ["[[cases]]", path, f"kind = {_string(kind.value)}", ""]
    for table in rest:
        lines += [*table.lines(), ""]
    return "\n".join(lines)


def _labels(model_dir: Path) -> dict[int, str]:
    """The model's id2label (class id → name); a model folder that is not one is a ModelError."""
    if not model_dir.is_dir():
        raise ModelError(f"model folder {str(model_dir)!r} is not a folder")
    weights = any(model_dir.glob("*.safetensors")) or any(model_dir.glob("pytorch_model*.bin"))
    if not weights:
        raise ModelError(f"model folder {str(model_dir)!r} has no weights (*.safetensors): not a Hugging Face model")
    raw = read_config(model_dir).get("id2label")
    labels: dict[int, str] = {}
    for key, value in (raw or {}).items() if isinstance(raw, dict) else ():
        if isinstance(key, str) and is_decimal(key) and isinstance(value, str) and value.strip():
            if _SURROGATE.search(value):
                raise ModelError(
                    f"model folder {str(model_dir)!r}: config.json: id2label names class {key} {value!r}, which is "
                    "not valid Unicode (a lone surrogate): correct the name there"
                )
            labels[int(key)] = value
    if len(set(labels.values())) != len(labels):
        return {}  # two classes of one name: the suite's labels default to the model's (class ids in the files)
    return labels


def _relative(target: Path, folder: Path) -> str:
    """``target`` as written in ``folder``'s warp.toml: relative where the two share a folder below the
    root (a project that moves as a whole), absolute otherwise (a model in a cache of its own)."""
    target, base = target.resolve(), folder.resolve()
    try:
        shared = os.path.commonpath([target, base])
    except ValueError:  # another drive (Windows): no relative path exists
        return target.as_posix()
    if Path(shared) == Path(target.anchor):
        return target.as_posix()
    return Path(os.path.relpath(target, base)).as_posix()


def _string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's (characters beyond the BMP kept as they are), and
    DEL, which JSON leaves bare and TOML does not take, escaped too."""
    if _SURROGATE.search(text):
        raise ModelError(f"{text!r} cannot be written in warp.toml: it is not valid Unicode (a lone surrogate)")
    return template.toml_value(text)


def _key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else _string(name)


def _write_new(folder: Path, text: str) -> list[Path]:
    """The suite written into a folder beside ``folder``, then renamed to it: all or nothing."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tmp-"))
    try:
        as_if_created(staging, directory=True)
        for name, _, _ in CASE_FILES:
            _create_empty(staging / name)
        write_text_atomically(staging / SUITE_FILE, text)
        os.rename(staging, folder)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return [folder / SUITE_FILE, *(folder / name for name, _, _ in CASE_FILES)]


def _write_into(folder: Path, text: str) -> list[Path]:
    """The case files created exclusively in an existing folder, then warp.toml renamed into place;
    what was written is removed again where a later step fails."""
    written: list[Path] = []
    try:
        for name, _, _ in CASE_FILES:
            _create_empty(folder / name)
            written.append(folder / name)
        write_text_atomically(folder / SUITE_FILE, text)
        written.append(folder / SUITE_FILE)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    return written


def _create_empty(path: Path) -> None:
    with open(path, "x", encoding="utf-8"):  # "x": never over a file that appeared meanwhile
        pass


__all__ = ["CASE_FILES", "NewSuite", "init_suite", "suite_toml"]
