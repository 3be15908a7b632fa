"""docs/design.md's table of layers is the import graph of the code, read from its source.

Every module of ``warp_check`` and ``pytest_warp`` belongs to one part that the table names; a
module imports only its own part and the parts on lower floors (imports inside functions
count: a lazy import is still an arrow); the plugin and the CLI reach the core through its
public names (``warp_check``'s ``__init__``) and the plumbing only they may use (``warp_check.frontend``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from testkit import REPO
from testkit.imports import imports_of, modules_under

DESIGN = REPO / "docs" / "design.md"
PACKAGES = ("warp_check", "pytest_warp")
# What the plugin and the CLI may import of the core: its public names (the error types among them), and
# what only the front ends need (option declarations, the run modes' table, checks made before a run).
PUBLIC = {"warp_check", "warp_check.frontend"}
FRONT_ENDS = ("pytest_warp", "warp_check.cli", "warp_check.commands")


@dataclass(frozen=True, kw_only=True)
class Part:
    name: str  # as the table writes it: 'suite/', 'cases.py', 'pytest_warp/'
    floor: int


def read_table(text: str) -> list[Part]:
    """The rows of the table under '## The layers': | floor | parts | what they own |."""
    section = text[text.index("## The layers") :]
    section = section[: section.find("\n## ", 1)] if "\n## " in section[1:] else section
    parts = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        parts += [Part(name=name, floor=int(cells[0])) for name in re.findall(r"`([^`]+)`", cells[1])]
    return parts


def part_of(module: str, parts: dict[str, Part]) -> Part | None:
    """``warp_check.qp.ipm`` → 'qp/'; ``warp_check.cases`` → 'cases.py'; the package itself → '__init__.py'."""
    top, *rest = module.split(".")
    if top == "pytest_warp":
        return parts.get("pytest_warp/")
    if not rest:
        return parts.get("__init__.py")
    return parts.get(f"{rest[0]}/") or parts.get(f"{rest[0]}.py")


def project_imports(path: Path) -> set[str]:
    """Every module of the project that ``path`` imports, at the top or inside a function."""
    return {name for name in imports_of(path) if name.split(".")[0] in PACKAGES}


def project_modules() -> dict[str, Path]:
    return {name: path for package in PACKAGES for name, path in modules_under(package).items()}


@pytest.fixture(scope="module")
def parts() -> dict[str, Part]:
    table = read_table(DESIGN.read_text(encoding="utf-8"))
    assert table, "docs/design.md has no table under '## The layers'"
    return {part.name: part for part in table}


def test_every_module_is_in_a_part_the_design_names_and_every_part_exists(parts):
    homeless = [module for module in project_modules() if part_of(module, parts) is None]
    assert homeless == [], "modules in no part of docs/design.md's table of layers"
    for name in parts:
        where = REPO / name if name.startswith("pytest_warp") else REPO / "warp_check" / name
        assert where.exists(), f"docs/design.md names {name}, which is not in the code"


def test_every_import_runs_down_the_floors_the_design_gives(parts):
    upward = []
    for module, path in project_modules().items():
        here = part_of(module, parts)
        for target in project_imports(path):
            there = part_of(target, parts)
            assert there is not None, f"{module} imports {target}, in no part of the table"
            if there.name != here.name and there.floor >= here.floor:
                upward.append(f"{module} (floor {here.floor}) -> {target} ({there.name}, floor {there.floor})")
    assert upward == []


def test_the_plugin_and_the_cli_reach_the_core_through_its_public_names(parts):
    private = []
    for module, path in project_modules().items():
        front = module.split(".")[:2]
        if not (module.startswith("pytest_warp") or front in (["warp_check", "cli"], ["warp_check", "commands"])):
            continue
        for target in project_imports(path):
            inside = target.startswith(("warp_check.cli", "warp_check.commands")) or not target.startswith("warp_check")
            if not inside and target not in PUBLIC:
                private.append(f"{module} -> {target}")
    assert private == []


def test_only_the_front_ends_import_the_frontend_module():
    importers = [
        module
        for module, path in project_modules().items()
        if "warp_check.frontend" in project_imports(path) and not module.startswith(FRONT_ENDS)
    ]
    assert importers == []


def test_the_core_never_imports_pytest():
    for module, path in project_modules().items():
        if module.startswith("warp_check"):
            names = {n.split(".")[0] for n in imports_of(path)}
            assert "pytest" not in names and "_pytest" not in names, module


def test_the_table_reader_reads_floors_parts_and_the_graph_rules():
    # The reader itself, on a table written here: a test that cannot fail proves nothing.
    text = (
        "## The layers\n\n| floor | parts | owns |\n|---|---|---|\n"
        "| 2 | `repair/`, `x.py` | a |\n| 1 | `cases.py` | b |\n"
    )
    table = read_table(text)
    assert [(p.name, p.floor) for p in table] == [("repair/", 2), ("x.py", 2), ("cases.py", 1)]
    named = {p.name: p for p in table}
    assert part_of("warp_check.repair.loop", named).name == "repair/"
    assert part_of("warp_check.cases", named).floor == 1
    assert part_of("warp_check.qp.ipm", named) is None
