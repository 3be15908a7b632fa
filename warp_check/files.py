"""File modes for what warp-check writes atomically.

``mkstemp``/``mkdtemp`` create 0600 files and 0700 folders, and a rename keeps the mode, so an
artefact or report would be unreadable to a CI upload step or another user. Written files get
the mode an ordinary ``open()`` would give them under the process's umask.
"""

from __future__ import annotations

import os
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)  # the only portable way to read it; set straight back
    os.umask(mask)
    return mask


def as_if_created(target: int | str | Path, *, directory: bool = False) -> None:
    """chmod a temp file (path or descriptor) or temp folder to 0666/0777 minus the umask."""
    mode = (0o777 if directory else 0o666) & ~_umask()
    if isinstance(target, int):
        os.fchmod(target, mode)
    else:
        os.chmod(target, mode)
