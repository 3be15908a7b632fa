"""Names a package module exports, each loaded from its defining module on first use (PEP 562), so
that importing the exporting module costs only the standard library."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(
    table: Mapping[str, str], namespace: dict[str, Any], *, keep: bool = True
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` for ``table`` (name -> ``module`` or ``module:attribute``
    where it is named otherwise there). ``keep``: a loaded name stays in ``namespace``; without it each
    access reads the defining module again, so a table replaced there (a test adding a row) is seen."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = where.partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
        if keep:
            namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
