"""Content digests of files and model folders, re-read only when a file may have changed.

A model folder is identified by what is in it: the SHA-256 of every file. Reading a 90 MB
``model.safetensors`` on every run costs as much as the rest of a warm check, so digests are
remembered beside the cache, keyed by what ``stat`` says of the file — device, inode, size,
mtime and ctime, as git's index does. Writing a file, or renaming another over it, changes its
ctime (which no user call can set back), so a changed file is always re-read. A digest taken
within ``RACY_NS`` of the file's last change is not trusted (git's "racily clean" rule: a write
in the same clock tick as the hashing would leave the stat unchanged), and is taken again later.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from warp_check.files import replaced_atomically

FORMAT = "warp-check-digests/1"
RACY_NS = 2_000_000_000  # file-system timestamps can be this coarse (FAT: 2 s)
MAX_ENTRIES = 4_096  # the memo stays small: oldest entries are dropped past this


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


class FileDigests:
    """SHA-256 of files, remembered in ``memo`` (a JSON file) while their stat is unchanged.

    ``memo=None`` remembers nothing (every digest reads the file). The memo is written only by
    :meth:`save`, atomically; a damaged or foreign memo is ignored, never an error.
    """

    def __init__(self, memo: str | Path | None) -> None:
        self.memo = Path(memo) if memo is not None else None
        self._entries: dict[str, dict[str, object]] = self._read()
        self._changed = False

    def _read(self) -> dict[str, dict[str, object]]:
        if self.memo is None:
            return {}
        try:
            data = json.loads(self.memo.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("files"), dict):
            return {}
        return {k: v for k, v in data["files"].items() if isinstance(v, dict)}

    def sha256(self, path: str | Path) -> str:
        """The file's SHA-256; raises OSError if it cannot be read."""
        key = os.path.abspath(path)
        st = os.stat(key)
        entry = self._entries.get(key)
        if entry is not None and entry.get("stat") == _stamp(st) and isinstance(entry.get("sha256"), str):
            recorded = entry.get("recorded_ns")
            if isinstance(recorded, int) and recorded - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS:
                return entry["sha256"]  # type: ignore[return-value]
        recorded_ns = time.time_ns()
        value = file_sha256(key)
        if _stamp(os.stat(key)) == _stamp(st):  # unchanged while it was read: worth remembering
            self._entries.pop(key, None)  # re-insert: the dict's order is the age order
            self._entries[key] = {"stat": _stamp(st), "sha256": value, "recorded_ns": recorded_ns}
            self._changed = True
        return value

    def save(self) -> None:
        """Write the memo (temp file, then rename) if a digest was added; errors are ignored."""
        if self.memo is None or not self._changed:
            return
        entries = dict(list(self._entries.items())[-MAX_ENTRIES:])
        try:
            self.memo.parent.mkdir(parents=True, exist_ok=True)
            with replaced_atomically(self.memo, suffix=".json") as tmp:
                Path(tmp).write_text(json.dumps({"format": FORMAT, "files": entries}), encoding="utf-8")
            self._changed = False
        except OSError:
            pass  # a read-only cache: digests are only re-read next time


# A suite's own files: transformers reads none of them when it loads a model.
SUITE_FILES = ("warp.toml",)
SUITE_SUFFIXES = (".jsonl",)


def is_model_file(relative: Path) -> bool:
    """Whether a file in a model folder can change the model: not under a hidden folder (``.warp``,
    ``.git``, ``.cache``), not a hidden file, not a suite's warp.toml or JSONL case file."""
    if any(part.startswith(".") for part in relative.parts):
        return False
    return relative.name not in SUITE_FILES and relative.suffix not in SUITE_SUFFIXES


def folder_sha256(folder: str | Path, digests: FileDigests) -> str:
    """One digest of every model file under ``folder`` (relative path and content), in a fixed order.

    Suite state a model folder may hold is not the model (:func:`is_model_file`): a suite kept
    inside its model folder would otherwise never be warm, its own ``.warp/`` changing the digest.
    Raises OSError if the folder or a file in it cannot be read.
    """
    root = Path(folder)
    if not root.is_dir():
        raise NotADirectoryError(str(root))
    files = sorted(p for p in root.rglob("*") if p.is_file() and is_model_file(p.relative_to(root)))
    hasher = hashlib.sha256()
    for path in files:
        hasher.update(f"{path.relative_to(root).as_posix()}\0{digests.sha256(path)}\n".encode())
    return hasher.hexdigest()
