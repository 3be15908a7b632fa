"""The representation cache on disk: safetensors shards of v, keyed by the input's digest.

Layout: ``<cache_dir>/<upstream sha256>/<shard sha256>.safetensors``; a shard holds ``v``
(n, d_in) float32 and, in its metadata, the input digest of every row. Shards are read
memory-mapped (the safetensors layout parsed here, checked field by field), only the rows asked
for. Shards are written to a temporary file and renamed, so concurrent writers never corrupt one;
a damaged shard is a miss.
A cache is an optimisation: one that cannot be written (full disk, read-only folder) is given up
with one CacheWarning, and the run goes on with the representations it computed.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import struct
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from warp_check.errors import CacheWarning
from warp_check.files import replaced_atomically


class ShardStore:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.given_up = False  # after a failed write: no more tries, no more warnings

    def lookup(self, keys: Sequence[str], d_in: int) -> tuple[np.ndarray, np.ndarray]:
        """v of each of ``keys`` the shards hold: ``(found, V)``, a mask over ``keys`` and a float32
        (len(keys), d_in) array whose found rows are filled. Shards are memory-mapped and only the rows
        asked for are read, so a cache far larger than the suite costs its keys, not its rows. A damaged
        shard, or a row that is not finite, is a miss."""
        found = np.zeros(len(keys), dtype=bool)
        V = np.zeros((len(keys), d_in), dtype=np.float32)
        if not self.folder.is_dir() or not keys:
            return found, V
        wanted: dict[str, list[int]] = {}
        for i, key in enumerate(keys):
            wanted.setdefault(key, []).append(i)
        # "[!.]": a writer killed before its rename leaves a ".tmp-*" file; it is not a shard.
        for shard in sorted(self.folder.glob("[!.]*.safetensors")):
            if not shard.is_file():  # a folder, a dangling link, a FIFO (whose open() would wait forever)
                continue
            mapped = _mapped_shard(shard)
            if mapped is None or mapped[1].shape[1] != d_in:
                continue  # a damaged shard, or another layer's width: only a cache miss
            shard_keys, v = mapped
            targets, rows = [], []
            for row, key in enumerate(shard_keys):
                for i in wanted.get(key, ()):
                    if not found[i]:
                        targets.append(i)
                        rows.append(row)
            if not rows:
                continue
            rows = np.asarray(rows)
            whole = len(rows) == len(v) and bool((rows == np.arange(len(v))).all())
            try:
                block = np.array(v, dtype=np.float32) if whole else np.asarray(v[rows], dtype=np.float32)
            except (OSError, ValueError):  # the file shrank under us: a miss
                continue
            finite = np.isfinite(block).all(axis=1)  # a NaN row is damage, not a representation: a miss
            picked = np.asarray(targets)[finite]
            V[picked] = block[finite]
            found[picked] = True
        return found, V

    def save(self, keys: list[str], V: np.ndarray) -> None:
        from safetensors import SafetensorError
        from safetensors.numpy import save_file

        V = np.ascontiguousarray(V, dtype=np.float32)
        if self.given_up or not np.isfinite(V).all():  # never cache what evaluate() refuses
            return
        name = hashlib.sha256("\n".join(keys).encode()).hexdigest()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with replaced_atomically(self.folder / f"{name}.safetensors", suffix=".safetensors") as tmp:
                save_file({"v": V}, tmp, metadata={"keys": json.dumps(keys)})
        except (OSError, SafetensorError) as exc:
            self.given_up = True
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            # safetensors says a full disk only in its message, as text
            full = (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)) or any(
                os.strerror(code) in why for code in (errno.ENOSPC, errno.EDQUOT)
            )
            if isinstance(exc, OSError) and not full and (exc.filename2 or exc.filename):
                why += f": {str(exc.filename2 or exc.filename)!r}"  # what is in the way, where it is not room
            advice = "free space there" if full else "move what is in the way, or make it writable,"
            warnings.warn(
                CacheWarning(
                    f"the representation cache {str(self.folder.parent)!r} cannot be written ({why}): "
                    f"going on without it (answers unchanged); {advice} or turn the cache off "
                    "(--cache none; pytest: --warp-cache none)"
                ),
                stacklevel=2,
            )


_HEADER_AT_MOST = 1 << 30  # a header past this is damage, not a shard's keys


def _mapped_shard(path: Path) -> tuple[list[str], np.ndarray] | None:
    """A shard's keys and its v memory-mapped (read-only), from the safetensors layout: an 8-byte
    little-endian header length, the JSON header, then the tensors' bytes. None: not a whole shard."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            if not 0 < length <= min(_HEADER_AT_MOST, size - 8):
                return None
            header = json.loads(f.read(length))
        entry = header["v"]
        keys = json.loads(header["__metadata__"]["keys"])
        rows, width = (int(n) for n in entry["shape"])
        begin, end = (int(n) for n in entry["data_offsets"])
        if (
            entry["dtype"] != "F32"
            or not isinstance(keys, list)
            or len(keys) != rows
            or not all(isinstance(k, str) for k in keys)
            or end - begin != rows * width * 4
            or 8 + length + end > size
            or rows == 0
        ):
            return None
        v = np.memmap(path, dtype="<f4", mode="r", offset=8 + length + begin, shape=(rows, width))
    except (OSError, ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError):
        return None
    return keys, v
