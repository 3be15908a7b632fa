"""The test suite's kit (tests/testkit: tiny models, suite builder), for the benchmarks that build
tiny models the way the tests do. It is a folder of the checkout, not an installed package, so it
is imported by its path, once."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from benchmarks import REPO

_KIT = REPO / "tests" / "testkit"


def testkit(name: str) -> ModuleType:
    """``testkit.<name>``, the same module the tests import."""
    if "testkit" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "testkit", _KIT / "__init__.py", submodule_search_locations=[str(_KIT)]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules["testkit"] = module
        spec.loader.exec_module(module)
    return importlib.import_module(f"testkit.{name}")
