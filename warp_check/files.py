"""Writing files atomically (temporary name, then rename), with the modes an ordinary open() gives.

``mkstemp``/``mkdtemp`` create 0600 files and 0700 folders, and a rename keeps the mode, so an
artefact or report would be unreadable to a CI upload step or another user. Written files get
the mode an ordinary ``open()`` would give them under the process's umask.
"""

from __future__ import annotations

import enum
import json
import math
import os
import signal
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any


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


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C held until the block ends, then delivered: what the block does (renaming several files
    into place) is done whole. Only the main thread receives signals, so elsewhere nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[object] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if held:
        if callable(previous):
            previous(signal.SIGINT, held[0])  # Python's own handler raises KeyboardInterrupt
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt


def write_text_atomically(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) beside ``path``, then rename it into place."""
    path = Path(path)
    with replaced_atomically(path, suffix=".tmp") as tmp, open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def jsonable(value: Any) -> Any:
    """JSON-safe copy: non-finite floats become None, paths strings, tuples lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return jsonable(value.item())
    return value


def write_json_atomic(path: str | Path, data: Any) -> Path:
    """Write JSON to a temporary file beside ``path``, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomically(path, json.dumps(jsonable(data), indent=2, allow_nan=False) + "\n")
