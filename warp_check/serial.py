"""Frozen dataclass records to JSON-ready dicts and back: the one way a record goes to disk.

A record's JSON is its fields in declaration order (or the order a class's ``JSON_FIELDS``
declares), each written by its value: enums by value, tuples as lists, nested records as
objects, Path as str, dicts keyed by an enum by the key's value. Reading goes by the field's
type and checks every value; an error names the file and the key (``repair.history[0].seconds is
missing or not a number``).

Where the on-disk form of a field differs, ``field(metadata=on_disk(...))`` says how (:class:`Form`).
A class with its own on-disk form defines ``to_json(self)`` and ``from_json(cls, mapping)``;
these are used where present (the mapping given is a :class:`Reader`, which names the file).
:func:`view` declares the part of a record a file keeps: a field selection, not a second class
to maintain.

Standard library only: the run records are read on the warm path, without numpy.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import sys
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_check.errors import SettingsError

_FORM = "warp_check.serial"


@dataclass(frozen=True, kw_only=True)
class Form:
    """How one field is kept on disk, where that is not simply its name and value."""

    key: str | None = None  # the key on disk, where it is not the field's name
    since: bool = False  # older files lack the key: read as the field's default where missing
    finite: bool = False  # a float that is not finite is written as null
    omit_none: bool = False  # None is not written (the key is left out), and a missing key reads as None
    omit_default: bool = False  # the field's default is not written (files stay as before), a missing key reads so
    none_as_empty: bool = False  # None is written as {} and {} reads as None
    not_null: bool = False  # the field may hold None in memory, but a file must give a value
    last: bool = False  # written after every other field, whatever the class that declares it
    write: Callable[[Any], Any] | None = None  # the value's JSON, where it has its own form
    read: Callable[[Reader], Any] | None = None  # the value from the key's Reader, where it has its own form


def on_disk(**options: Any) -> dict[str, Form]:
    """``field(metadata=on_disk(...))``: the field's :class:`Form`."""
    return {_FORM: Form(**options)}


def _form(f: dataclasses.Field) -> Form:
    return f.metadata.get(_FORM) or _PLAIN


_PLAIN = Form()


def finite(value: float | None) -> float | None:
    """``value`` as a float, or None where there is no finite number (the file holds null)."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


# -- writing -----------------------------------------------------------------------------------


def _names(cls: type) -> list[str]:
    """The fields a class writes, in the order it writes them."""
    declared = getattr(cls, "JSON_FIELDS", None)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    names = list(declared) if declared is not None else list(fields)
    return [n for n in names if not _form(fields[n]).last] + [n for n in names if _form(fields[n]).last]


def to_json(record: Any, *, null_nonfinite: bool = False) -> dict[str, Any]:
    """``record``'s JSON object. ``null_nonfinite``: every float that is not finite is written as null
    (run files); otherwise only the fields whose :class:`Form` says ``finite``."""
    fields = {f.name: f for f in dataclasses.fields(record)}
    out: dict[str, Any] = {}
    for name in _names(type(record)):
        how = _form(fields[name])
        value = getattr(record, name)
        if value is None and how.omit_none:
            continue
        if how.omit_default and value == fields[name].default:
            continue
        if value is None and how.none_as_empty:
            out[how.key or name] = {}
        elif how.write is not None:
            out[how.key or name] = _write(how.write(value), null_nonfinite, null_nonfinite)
        else:
            out[how.key or name] = _write(value, null_nonfinite or how.finite, null_nonfinite)
    return out


def _write(value: Any, nulled: bool, null_nonfinite: bool) -> Any:
    if value is None or isinstance(value, (bool, int, str)) and not isinstance(value, enum.Enum):
        return value
    if isinstance(value, float):
        return value if not nulled or math.isfinite(value) else None
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value):
        if hasattr(value, "to_json") and not _generic(type(value), "to_json"):
            return value.to_json()  # the class's own form
        return to_json(value, null_nonfinite=null_nonfinite)
    if isinstance(value, Mapping):
        return {_key(k): _write(v, null_nonfinite, null_nonfinite) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_write(v, nulled, null_nonfinite) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and callable(value.item):  # a numpy scalar in a free-form mapping
        return _write(value.item(), nulled, null_nonfinite)
    raise TypeError(f"no JSON form for {type(value).__name__}: {value!r}")


def _key(key: Any) -> str:
    return key.value if isinstance(key, enum.Enum) else str(key)


class Record:
    """A record that reads and writes its own JSON through this module: ``to_json()``, ``from_json(data)``."""

    def to_json(self) -> dict[str, Any]:
        return to_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Any:
        return read(cls, data)


def _generic(cls: type, method: str) -> bool:
    """Whether ``cls`` takes ``method`` from :class:`Record` (the generic form), not its own."""

    def plain(owner: type) -> Any:
        found = getattr(owner, method)
        return getattr(found, "__func__", found)  # a classmethod's function

    return plain(cls) is plain(Record)


# -- reading -----------------------------------------------------------------------------------


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return _is_integer(value) or isinstance(value, float)


def _is_texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _is_integers(value: Any) -> bool:
    return isinstance(value, list) and all(_is_integer(x) for x in value)


_PLAIN_TYPES: dict[type, tuple[Callable[[Any], bool], str]] = {
    str: (lambda v: isinstance(v, str), "a string"),
    int: (_is_integer, "an integer"),
    float: (_is_number, "a number"),
    bool: (lambda v: isinstance(v, bool), "true or false"),
}


class Reader(Mapping[str, Any]):
    """One JSON object of a file, read key by key; every error names the file and the key.

    ``error`` is the exception a malformed value raises (a certificate's CertificateError)."""

    def __init__(self, data: Any, where: str, path: str | Path | None, error: type[Exception]) -> None:
        self.path = path
        self.where = where
        self.error = error
        if not isinstance(data, dict):
            raise self.error(f"{self._at()}{where or 'the file'} must be an object, got {type(data).__name__}")
        self.data = data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def _at(self) -> str:
        return "" if self.path is None else f"{self.path}: "

    def _key(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, key: str, what: str) -> Exception:
        return self.error(f"{self._at()}{self._key(key)} {what}")

    def _get(self, key: str, accept: Callable[[Any], bool], what: str, *, optional: bool = False) -> Any:
        value = self.data.get(key)
        if key in self.data and ((optional and value is None) or accept(value)):
            return value
        raise self.fail(key, f"is missing or not {what}{' (or null)' if optional else ''}")

    def text(self, key: str, *, optional: bool = False) -> str:
        return self._get(key, _PLAIN_TYPES[str][0], "a string", optional=optional)

    def texts(self, key: str) -> tuple[str, ...]:
        return tuple(self._get(key, _is_texts, "a list of strings"))

    def choice(self, key: str, enum_type: type[enum.Enum], *, optional: bool = False) -> Any:
        value = self.text(key, optional=optional)
        if value is None:
            return None
        try:
            return enum_type(value)
        except ValueError:
            known = ", ".join(repr(m.value) for m in enum_type)
            raise self.fail(key, f"is {value!r}, not one of {known}") from None

    def key_as(self, key: str, hint: Any) -> Any:
        """A key of this object as the type ``hint`` (an enum's value, or a string)."""
        if not _is_enum(hint):
            return key
        try:
            return hint(key)
        except ValueError:
            raise self.fail(key, f"is not one of {', '.join(repr(m.value) for m in hint)}") from None

    def object(self, key: str) -> Reader:
        if key not in self.data:
            raise self.fail(key, "is missing")
        return Reader(self.data[key], self._key(key), self.path, self.error)

    def objects(self, key: str) -> list[Reader]:
        items = self.data.get(key)
        if not isinstance(items, list):
            raise self.fail(key, "must be a list")
        return [Reader(item, f"{self._key(key)}[{i}]", self.path, self.error) for i, item in enumerate(items)]

    def value(self, key: str, hint: Any) -> Any:
        """The value at ``key`` read as the type ``hint``."""
        optional = False
        if typing.get_origin(hint) in (typing.Union, types.UnionType):
            kinds = [a for a in typing.get_args(hint) if a is not type(None)]
            optional = len(kinds) < len(typing.get_args(hint))
            hint = kinds[0] if len(kinds) == 1 else Any
            if optional and key in self.data and self.data[key] is None:
                return None
        origin = typing.get_origin(hint)
        if hint is Any:
            if key not in self.data:
                raise self.fail(key, "is missing")
            return self.data[key]
        if hint in _PLAIN_TYPES:
            accept, what = _PLAIN_TYPES[hint]
            return self._get(key, accept, what, optional=optional)
        if hint is Path:
            text = self.text(key, optional=optional)
            return None if text is None else Path(text)
        if _is_enum(hint):
            return self.choice(key, hint, optional=optional)
        if origin is tuple:
            (item,) = [a for a in typing.get_args(hint) if a is not Ellipsis]
            if item is str:
                return self.texts(key)
            if item is int:
                return tuple(self._get(key, _is_integers, "a list of integers"))
            return tuple(_read_as(reader, item) for reader in self.objects(key))
        if origin in (dict, Mapping) or hint in (dict, Mapping):
            keys, values = typing.get_args(hint) or (str, Any)
            nested = self.object(key)
            return {nested.key_as(k, keys): nested.value(k, values) for k in nested.data}
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return _read_as(self.object(key), hint)
        raise TypeError(f"no JSON reading for {hint!r} ({self._key(key)})")

    def values(self, cls: type, *, skip: Sequence[str] = ()) -> dict[str, Any]:
        """The fields of the record ``cls`` read from this object (but ``skip``), for its constructor."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in skip or not f.init:
                continue
            how = _form(f)
            key = how.key or f.name
            if key not in self.data and (how.since or how.omit_none or how.omit_default):
                continue  # an older file: the field's default
            if how.none_as_empty and self.data.get(key) == {}:
                values[f.name] = None
            elif how.read is not None:
                values[f.name] = how.read(self.object(key))
            else:
                hint = _hint(cls, f.name)
                values[f.name] = self.value(key, _non_null(hint) if how.not_null else hint)
        return values

    def record(self, cls: type, *, skip: Sequence[str] = (), **given: Any) -> Any:
        """The record ``cls`` from this object; a value its class refuses is an error naming it here."""
        values = self.values(cls, skip=skip) | given
        try:
            return cls(**values)
        except FieldError as exc:
            raise self.fail(exc.field, exc.what) from None
        except ValueError as exc:
            raise self.error(f"{self._at()}{self.where}: {exc}") from None

    def exactly(self, cls: type, *, since: tuple[str, ...] = ()) -> None:
        """Every field of the record ``cls`` is here, and nothing else: no default stands in for a
        missing setting (but for those ``since`` names, which older files lack)."""
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [name for name in names if name not in self.data and name not in since]
        if missing:
            raise self.fail(missing[0], "is missing")
        unknown = [key for key in self.data if key not in names]
        if unknown:
            raise self.fail(unknown[0], "is not a setting")

    def settings(self, cls: type, *, since: tuple[str, ...] = (), **given: Any) -> Any:
        """A settings record from exactly its fields, validated by its own class."""
        self.exactly(cls, since=since)
        try:
            return cls(**self.data | given)
        except SettingsError as exc:
            raise self.error(f"{self._at()}{self._key(str(exc))}") from None


class FieldError(ValueError):
    """A record's own check of one field: the reader names the file and the key."""

    def __init__(self, field: str, what: str) -> None:
        super().__init__(f"{field} {what}")
        self.field = field
        self.what = what


def _is_enum(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, enum.Enum)


def _non_null(hint: Any) -> Any:
    kinds = [a for a in typing.get_args(hint) if a is not type(None)]
    return kinds[0] if len(kinds) == 1 else hint


def _read_as(reader: Reader, cls: type) -> Any:
    own = getattr(cls, "from_json", None)
    if own is not None and not _generic(cls, "from_json"):
        return own(reader)
    return reader.record(cls)


def read(cls: type, data: Any, *, path: str | Path | None = None, error: type[Exception] = ValueError) -> Any:
    """The record ``cls`` from its parsed JSON ``data`` (a file at ``path``); ``error`` names what is wrong."""
    return _read_as(data if isinstance(data, Reader) else Reader(data, "", path, error), cls)


@functools.cache
def _hint(cls: type, name: str) -> Any:
    """The type of the field ``name``, evaluated in the module that declares it. Only the fields read
    are evaluated, so a record may name types it imports for type checkers alone (IterationRecord's
    QP enums, whose modules load numpy)."""
    for klass in cls.__mro__:
        hint = vars(klass).get("__annotations__", {}).get(name)
        if hint is not None:
            alone = type(name, (), {"__annotations__": {name: hint}})  # this field's annotation, no other
            return typing.get_type_hints(alone, vars(sys.modules[klass.__module__]))[name]
    raise TypeError(f"{cls.__name__} has no field {name!r}")


# -- views -------------------------------------------------------------------------------------


def view(
    source: type, name: str, fields: Sequence[str], *, finite_fields: Sequence[str] = (), doc: str, module: str
) -> type:
    """The record a file keeps of a ``source`` record: ``fields`` of it, in that order, with their types.
    ``finite_fields``: floats kept as None where they are not finite (the file holds null); ``module``:
    the ``__name__`` of the module that declares it. ``View.of(record)`` takes the fields from a
    ``source`` record."""
    hint = functools.partial(_hint, source)
    specs = [
        (n, hint(n) | None, dataclasses.field(metadata=on_disk(finite=True))) if n in finite_fields else (n, hint(n))
        for n in fields
    ]

    def of(cls: type, record: Any) -> Any:
        values = {n: getattr(record, n) for n in fields}
        return cls(**values | {n: finite(values[n]) for n in finite_fields})

    namespace = {"of": classmethod(of), "__doc__": doc, "__module__": module}
    return dataclasses.make_dataclass(name, specs, bases=(Record,), frozen=True, kw_only=True, namespace=namespace)


__all__ = ["FieldError", "Form", "Reader", "Record", "finite", "on_disk", "read", "to_json", "view"]
