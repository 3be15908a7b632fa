"""The README's Python example ("The core, from Python") runs as written on a real suite folder."""

from __future__ import annotations

import re
from pathlib import Path

from testkit import REPO


def readme_example() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## The core, from Python") :]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    return next(block for block in blocks if "wc.load_suite(" in block)


def test_the_readme_python_example_checks_repairs_and_reads_the_certificate(tiny_suite: Path, tmp_path: Path):
    code = readme_example()
    assert len(code.strip().splitlines()) <= 12  # ten lines of work, and the import
    out = tmp_path / "repaired"
    code = code.replace('"reviews/"', repr(str(tiny_suite))).replace('"repaired', f'"{out}')
    printed: list[tuple] = []
    namespace = {"print": lambda *args: printed.append(args)}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code, as a user runs it

    before, after, certificate = namespace["before"], namespace["after"], namespace["certificate"]
    assert not before.passed  # the suite's must_fix cases fail on the model as it is
    assert after.passed and (out / "model.safetensors").is_file()
    for held_of_total in (certificate.summary.cert1, certificate.summary.cert2, certificate.summary.cert3):
        held, total = held_of_total.split("/")
        assert held == total != "0"
    assert len(printed) == 3
