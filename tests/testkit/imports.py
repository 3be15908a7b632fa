"""The import graph of the project's own code, read from its source (nothing is imported).

Every import counts, at the top, inside a function or under TYPE_CHECKING: a lazy import is still
an arrow. ``from package import name`` names the submodule where ``name`` is one.
"""

from __future__ import annotations

import ast
from pathlib import Path

from testkit import REPO


def module_name(path: Path) -> str:
    """``warp_check/qp/ipm.py`` → ``warp_check.qp.ipm``; a package's ``__init__.py`` → the package."""
    relative = path.resolve().relative_to(REPO).with_suffix("")
    names = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(names)


def modules_under(package: str) -> dict[str, Path]:
    """Every module of ``package`` (dotted, under the checkout), by name."""
    root = REPO.joinpath(*package.split("."))
    return {module_name(p): p for p in sorted(root.rglob("*.py"))}


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports made absolute (the file may be outside the checkout)."""
    inside = path.resolve().is_relative_to(REPO)
    module = module_name(path) if inside else path.stem
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            found |= {_submodule_or_package(base, alias.name) for alias in node.names}
    return found


def _submodule_or_package(package: str, name: str) -> str:
    """``from warp_check.qp import registry`` imports the module registry, not only the package."""
    inside = REPO.joinpath(*package.split("."), name)
    return f"{package}.{name}" if inside.with_suffix(".py").is_file() or inside.is_dir() else package
