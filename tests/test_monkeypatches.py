"""A test replaces the product's own code only where no outside test reaches the case, and says why.

Every ``monkeypatch.setattr`` whose target is warp-check's own code (a module, class or object of
``warp_check`` or ``pytest_warp``, or anything the file did not import from elsewhere) carries a
``# internal: <why no outside test reaches this>`` comment on its line or the line above. Patches of
the user's environment (``os``, ``sys``, ``signal``, ``torch``, ``nltk``, a Hugging Face class, a full
disk) need none, nor does a public name of the top-level package set on it (a registration table).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import pytest_warp
import warp_check

TESTS = Path(__file__).resolve().parent
PROJECT = ("warp_check", "pytest_warp")
PUBLIC = {"warp_check": set(warp_check.__all__), "pytest_warp": set(getattr(pytest_warp, "__all__", ()))}
MARK = "# internal:"


@dataclass(frozen=True, kw_only=True)
class Patch:
    """One ``monkeypatch.setattr`` call: where it is and what it replaces."""

    file: str
    line: int
    target: str
    internal: bool
    explained: bool


def _project(module: str) -> bool:
    return module.split(".")[0] in PROJECT


def _imported_names(tree: ast.Module) -> dict[str, str]:
    """Every name the file binds by an import (at any depth), mapped to the module path it names."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:  # `import a.b` binds a; `import a.b as x` binds x to a.b
                bound = alias.name if alias.asname else alias.name.split(".")[0]
                names[alias.asname or bound] = bound
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif (  # nltk = pytest.importorskip("nltk")
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func) == "pytest.importorskip"
            and node.value.args
            and isinstance(node.value.args[0], ast.Constant)
        ):
            for bound in node.targets:
                if isinstance(bound, ast.Name):
                    names[bound.id] = str(node.value.args[0].value)
    return names


def _patchers(tree: ast.Module) -> set[str]:
    """The names a file patches through: ``monkeypatch`` and each ``with monkeypatch.context() as name``."""
    names = {"monkeypatch"}
    for node in ast.walk(tree):
        if isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            if ast.unparse(node.context_expr).endswith("monkeypatch.context()"):
                names.add(node.optional_vars.id)
    return names


def _root(node: ast.expr) -> ast.expr:
    """The name an attribute chain hangs from (``type(x)`` counts as ``x``)."""
    while True:
        if isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call):
            of_type = isinstance(node.func, ast.Name) and node.func.id == "type" and node.args
            node = node.args[0] if of_type else node.func
        else:
            return node


def _internal(target: ast.expr, name: ast.expr | None, imported: dict[str, str]) -> bool:
    if isinstance(target, ast.Constant) and isinstance(target.value, str):
        dotted = target.value
        if not _project(dotted):
            return False
        package, _, rest = dotted.partition(".")
        return not (rest in PUBLIC[package] and "." not in rest)
    root = _root(target)
    if not isinstance(root, ast.Name) or root.id not in imported:
        return True  # a local object, a fixture's value: the product's, unless shown otherwise
    module = imported[root.id]
    if not _project(module):
        return False
    public_table = (
        isinstance(target, ast.Name)
        and module in PROJECT
        and isinstance(name, ast.Constant)
        and name.value in PUBLIC[module]
    )
    return not public_table


def patches_in(source: str, file: str = "<test>") -> list[Patch]:
    """Every ``<monkeypatch>.setattr(...)`` call in ``source``, judged."""
    tree = ast.parse(source)
    imported = _imported_names(tree)
    patchers = _patchers(tree)
    lines = source.splitlines()
    found = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "setattr"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in patchers
            and node.args
        ):
            continue
        target = node.args[0]
        name = node.args[1] if len(node.args) > 1 else None
        around = lines[max(node.lineno - 2, 0) : node.end_lineno]
        found.append(
            Patch(
                file=file,
                line=node.lineno,
                target=ast.unparse(target) + (f".{name.value}" if isinstance(name, ast.Constant) else ""),
                internal=_internal(target, name, imported),
                explained=any(MARK in line for line in around),
            )
        )
    return found


def _all_patches() -> list[Patch]:
    return [
        patch
        for path in sorted(TESTS.rglob("*.py"))
        for patch in patches_in(path.read_text(encoding="utf-8"), str(path.relative_to(TESTS)))
    ]


def test_every_patch_of_the_products_own_code_says_why_no_outside_test_reaches_it():
    unexplained = [f"{p.file}:{p.line} {p.target}" for p in _all_patches() if p.internal and not p.explained]
    assert not unexplained, (
        "monkeypatch.setattr on warp-check's own code without '# internal: <why>' on its line or the line "
        "above; test the promise from outside (public API, CLI, pytester, files, exit code) instead, or say "
        "why none reaches it:\n" + "\n".join(unexplained)
    )


@pytest.mark.parametrize(
    ("source", "internal"),
    [
        ("from warp_check.repair import iterations\nmonkeypatch.setattr(iterations, 'join', spy)\n", True),
        ("monkeypatch.setattr('warp_check.cli.load_suite', spy)\n", True),
        ("import warp_check.repair.iterations as it\nmonkeypatch.setattr(it.stack, 'x', 1)\n", True),
        ("monkeypatch.setattr(type(problem), 'cross_gram', spy)\n", True),  # a local: the product's
        ("from warp_check import q\nwith monkeypatch.context() as p:\n    p.setattr(q, 'MAX', 1)\n", True),
        ("nltk = pytest.importorskip('nltk')\nmonkeypatch.setattr(nltk.data, 'find', missing)\n", False),
        ("import warp_check\nmonkeypatch.setattr(warp_check, 'HEAD_SPECS', ())\n", False),  # a public table
        ("import warp_check\nmonkeypatch.setattr(warp_check, '_lazy', ())\n", True),
        ("monkeypatch.setattr('warp_check.HEAD_SPECS', ())\n", False),
        ("import os\nmonkeypatch.setattr(os, 'fsync', full)\n", False),
        ("import torch\nmonkeypatch.setattr(torch.cuda, 'is_available', lambda: False)\n", False),
        ("from transformers import PreTrainedModel as M\nmonkeypatch.setattr(M, 'save_pretrained', f)\n", False),
        ("monkeypatch.setattr('transformers.modeling_utils.safe_save_file', full)\n", False),
    ],
)
def test_the_rule_tells_the_products_code_from_the_users_environment(source, internal):
    (patch,) = patches_in(source)
    assert patch.internal is internal and not patch.explained


@pytest.mark.parametrize(
    "source",
    [
        "from warp_check import x\nmonkeypatch.setattr(x, 'y', 1)  # internal: no input reaches it\n",
        "from warp_check import x\n# internal: no input reaches it\nmonkeypatch.setattr(x, 'y', 1)\n",
        "from warp_check import x\n# internal: none reaches it\nmonkeypatch.setattr(\n    x,\n    'y',\n    1,\n)\n",
    ],
)
def test_a_reason_on_the_line_or_the_line_above_explains_a_patch(source):
    (patch,) = patches_in(source)
    assert patch.internal and patch.explained


def test_a_reason_two_lines_above_does_not_count():
    source = "from warp_check import x\n# internal: too far\n\nmonkeypatch.setattr(x, 'y', 1)\n"
    (patch,) = patches_in(source)
    assert patch.internal and not patch.explained
