"""Real small file systems for fault tests: a tmpfs of a given size, where this process may mount one."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path


def can_mount() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("mount") is not None


@contextlib.contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path | None]:
    """``folder`` as a tmpfs of ``size`` ('256k', '2m'); None where mounting is not allowed here."""
    folder.mkdir(parents=True, exist_ok=True)
    if not can_mount():
        yield None
        return
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        yield None
        return
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path, leave: int = 0) -> None:
    """Fill the file system of ``folder`` until at most ``leave`` bytes are free."""
    chunk = b"\0" * 4096
    with open(folder / ".filler", "wb") as handle:
        try:
            while shutil.disk_usage(folder).free > leave:
                handle.write(chunk)
                handle.flush()
        except OSError:
            pass
