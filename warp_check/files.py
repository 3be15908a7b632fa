"""File modes for what warp-check writes atomically.

``mkstemp``/``mkdtemp`` create 0600 files and 0700 folders, and a rename keeps the mode, so an
artefact or report would be unreadable to a CI upload step or another user. Written files get
the mode an ordinary ``open()`` would give them under the process's umask.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def replaced_atomically(path: str | Path, *, suffix: str) -> Iterator[str]:
    """A temporary file beside ``path`` (``.tmp-*``, so globs for ``[!.]*`` skip it) to write.

    When the block ends without an error it is renamed onto ``path``; either way no temporary
    file is left behind. Raises OSError if the folder cannot take the file.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=suffix)
    try:
        as_if_created(fd)
        os.close(fd)
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text_atomically(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) beside ``path``, then rename it into place."""
    path = Path(path)
    with replaced_atomically(path, suffix=".tmp") as tmp, open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path
