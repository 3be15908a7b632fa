"""warp_check.qp's own floors: every import inside it runs down them (lazy and TYPE_CHECKING imports
count, as they do for docs/design.md's table), so qp/ holds no circle; and settings, the registry and
every backend's advice read without numpy or a backend's numerics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testkit.imports import imports_of, modules_under

NUMERICS = ("osqp_backend", "ipm", "alm", "alm_matrix_free", "active_set")
# Bottom up. A backend's file (backends/<name>.py) is on floor 1 whatever its name: it names its
# solve as "module:function", so it imports the registry (and the problem, for ``fits``'s type) only.
FLOORS = {
    "registry": 0,
    "problem": 0,
    "linalg": 0,
    "gram_preconditioner": 0,
    "": 0,  # the package's docstring
    "backends": 2,  # imports every backend's file: they register in its order
    "settings": 3,
    "solution": 4,
    **dict.fromkeys(NUMERICS, 5),
    "alm_matrix_free": 5,
    "alm": 6,  # over alm_matrix_free: a working set past its rows goes on without a Gram matrix
    "solve": 6,
}


def floor_of(module: str) -> int:
    name = module.removeprefix("warp_check.qp").removeprefix(".")
    if name.startswith("backends."):
        return 1
    assert name in FLOORS, f"warp_check.qp.{name} has no floor in FLOORS: give it one"
    return FLOORS[name]


def qp_imports(path: Path) -> set[str]:
    """Every module of warp_check.qp the file names in an import, wherever the import stands."""
    return {name for name in imports_of(path) if name == "warp_check.qp" or name.startswith("warp_check.qp.")}


def test_every_import_inside_qp_runs_down_its_floors():
    upward = []
    for module, path in modules_under("warp_check.qp").items():
        for target in qp_imports(path):
            if floor_of(target) >= floor_of(module):
                upward.append(f"{module} (floor {floor_of(module)}) -> {target} (floor {floor_of(target)})")
    assert upward == []


def test_the_floor_reader_sees_lazy_and_type_checking_imports(tmp_path):
    # The reader itself, on a file written here: a test that cannot fail proves nothing.
    written = tmp_path / "one.py"
    written.write_text(
        "from typing import TYPE_CHECKING\nfrom warp_check.qp import registry, solution\n"
        "if TYPE_CHECKING:\n    from warp_check.qp.settings import SolverSettings\n"
        "def solve():\n    import warp_check.qp.ipm\n",
        encoding="utf-8",
    )
    assert qp_imports(written) == {
        "warp_check.qp.registry",
        "warp_check.qp.solution",
        "warp_check.qp.settings",
        "warp_check.qp.ipm",
    }
    assert floor_of("warp_check.qp.backends.toy") == 1 and floor_of("warp_check.qp.solve") == 6


def test_settings_and_every_backends_advice_read_without_numpy_or_a_backends_numerics():
    code = (
        "import json, sys\n"
        "from warp_check.qp import registry\n"
        "from warp_check.qp.settings import SolverSettings\n"
        "from warp_check.repair import advice\n"
        "from warp_check.repair.settings import RepairSettings\n"
        "words = [advice.after_solver_failure(RepairSettings(solver=SolverSettings(backend=b.name)), b.name)\n"
        "         for b in registry.registered()]\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'osqp')\n"
        f"                or m.removeprefix('warp_check.qp.') in {NUMERICS!r})\n"
        "print(json.dumps({'loaded': loaded, 'words': words}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["loaded"] == []
    assert len(seen["words"]) == 4 and all("max_iter" in words for words in seen["words"])
