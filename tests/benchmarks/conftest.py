"""Import ``benchmarks`` from the checkout, wherever pytest runs from.

The benchmarks are a package of the checkout, run from its root (``python -m benchmarks.X``),
not part of the installed distribution, so plain ``pytest`` does not see them; and with
``tests/`` on sys.path, ``import benchmarks`` would find this test folder as a namespace package
instead. So the checkout's package is registered by its path here, once, before the test
modules import ``benchmarks.X`` (no sys.path entry is added).
"""

from __future__ import annotations

import importlib.util
import sys

from testkit import REPO


def _import_checkout_benchmarks() -> None:
    init = REPO / "benchmarks" / "__init__.py"
    if getattr(sys.modules.get("benchmarks"), "__file__", None) == str(init):
        return  # already imported from the checkout (python -m pytest from its root)
    spec = importlib.util.spec_from_file_location("benchmarks", init, submodule_search_locations=[str(init.parent)])
    assert spec is not None and spec.loader is not None, init
    module = importlib.util.module_from_spec(spec)
    sys.modules["benchmarks"] = module
    spec.loader.exec_module(module)


_import_checkout_benchmarks()
