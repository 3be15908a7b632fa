"""Cert 4's table of warp.toml, ``[traffic]``: unlabelled text like the model's traffic, and the budget a
repair must keep on it (:class:`TrafficSettings`).

The file itself is read when a run needs it (:mod:`.reading`, with the readers of ``warp-check
import``); here the table is checked, key by key, when the suite loads::

    [traffic]
    path = "traffic.jsonl"    # CSV, TSV, JSONL, Parquet or AdvGLUE's dev.json, as `warp-check import` reads
    text = "text"             # the column of the text (and text_pair = "..." of a second text)
    max_change = 0.01         # optional: a repair may change at most this share of predictions
    confidence = 0.95         # of the bound on that share (Cert 4)

Standard library only: suites load without numpy. The suite loader, a floor above, hands in the
warp.toml it is reading (:class:`TomlBeingRead`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Protocol

from warp_check.errors import SettingsError, SuiteError
from warp_check.validation import SHARE_RULE, share

DEFAULT_CONFIDENCE = 0.95
# What a budget and its confidence must be, in the same words wherever they are given.
MAX_CHANGE_RULE = SHARE_RULE
CONFIDENCE_RULE = "must be a number strictly between 0 and 1, e.g. 0.95"


@dataclass(frozen=True, kw_only=True)
class TrafficSettings:
    """Where the traffic is, which columns hold its texts, and the budget a repair must keep on it.

    ``max_change``: the most a repair may change of the model's predictions on traffic like this,
    as a share (``0.01``, or ``"1%"`` as written: kept as the share), bounded at ``confidence`` (None:
    measured and reported, never gating)."""

    path: Path
    format: str | None = None  # None: told by the file's name, as `warp-check import` tells it
    text: str = "text"
    text_pair: str | None = None
    task: str | None = None  # AdvGLUE's dev.json: which task
    max_change: float | None = None
    confidence: float = DEFAULT_CONFIDENCE

    def __post_init__(self) -> None:
        if not isinstance(self.path, Path):
            raise SettingsError("path", self.path, "must be a path")
        for name in ("format", "text", "text_pair", "task"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise SettingsError(name, value, "must be a non-empty string")
        if not isinstance(self.text, str):
            raise SettingsError("text", self.text, "must be a column name")
        if self.max_change is not None:
            try:
                object.__setattr__(self, "max_change", share(self.max_change))
            except ValueError as exc:
                raise SettingsError("max_change", self.max_change, str(exc)) from None
        if not _number(self.confidence) or not 0 < self.confidence < 1:
            raise SettingsError("confidence", self.confidence, CONFIDENCE_RULE)
        object.__setattr__(self, "confidence", float(self.confidence))

    def overridden(self, *, path: Path | None = None, max_change: float | None = None) -> TrafficSettings:
        """These settings with a run's overrides (None: keep these)."""
        changes: dict[str, Any] = {k: v for k, v in (("path", path), ("max_change", max_change)) if v is not None}
        return replace(self, **changes) if changes else self


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_TYPES = {"path": str, "format": str, "text": str, "text_pair": str, "task": str, "max_change": float}
_TYPES["confidence"] = float
KEYS = tuple(f.name for f in fields(TrafficSettings))


class TomlBeingRead(Protocol):
    """What reading the table needs of the warp.toml being loaded (the suite loader's ``SuiteToml``):
    its path, and errors that name a key's line."""

    toml: Path

    def error(self, dotted: str | None, message: str, line: int | None = None) -> SuiteError: ...

    def resolve(self, path: Path, dotted: str, written: str) -> Path: ...

    def unknown(self, table: Mapping[str, Any], known: tuple[str, ...], prefix: str) -> None: ...


def read_traffic_table(loader: TomlBeingRead, data: dict[str, Any]) -> TrafficSettings | None:
    """warp.toml's ``[traffic]``, every key checked (file, line, key); None where there is none."""
    table = data.get("traffic")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise loader.error("traffic", "must be a table ([traffic])")
    loader.unknown(table, KEYS, "traffic")
    if "path" not in table:
        raise loader.error("traffic", "[traffic] needs path = the file of unlabelled texts")
    for key, value in table.items():
        wanted = _TYPES[key]
        # nan and inf are TOML floats: TrafficSettings says what range they miss.
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        written_as_percent = key == "max_change" and isinstance(value, str)  # "1%": TrafficSettings reads it
        if (isinstance(value, str) if wanted is str else number) or written_as_percent:
            continue
        if wanted is str:
            raise loader.error(f"traffic.{key}", f"must be a string, got {value!r}")
        rule = MAX_CHANGE_RULE if key == "max_change" else CONFIDENCE_RULE
        raise loader.error(f"traffic.{key}", f"{value!r}: {rule} (a number, not {type(value).__name__})")
    written = table["path"]
    path = loader.resolve(loader.toml.parent / Path(written).expanduser(), "traffic.path", written)
    if not path.is_file():
        raise loader.error("traffic.path", f"{written!r}: no such file ({path})")
    try:
        return TrafficSettings(**(table | {"path": path}))
    except SettingsError as exc:
        raise loader.error(f"traffic.{exc.field}", exc.of_key) from None


def traffic_for_run(
    settings: TrafficSettings | None, *, path: Path | None = None, max_change: float | None = None, where: Path
) -> TrafficSettings | None:
    """The traffic a run measures: the suite's, with the run's overrides; a path given alone makes
    settings of its own (column ``text``). A budget without any traffic is an error."""
    if settings is None and path is None:
        if max_change is not None:
            raise SettingsError(
                "max_change", max_change, f"a budget needs traffic: give --traffic or [traffic] in {where}"
            )
        return None
    if path is not None and not Path(path).is_file():
        raise SuiteError("no such traffic file", path=path, field="traffic")
    if settings is None:
        assert path is not None
        return TrafficSettings(path=Path(path), max_change=max_change)
    return settings.overridden(path=path, max_change=max_change)


__all__ = [
    "CONFIDENCE_RULE",
    "DEFAULT_CONFIDENCE",
    "MAX_CHANGE_RULE",
    "TomlBeingRead",
    "TrafficSettings",
    "read_traffic_table",
    "traffic_for_run",
]
