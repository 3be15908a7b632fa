"""The representation cache on disk: safetensors shards of v, keyed by the input's digest.

Layout: ``<cache_dir>/<upstream sha256>/<shard sha256>.safetensors``; a shard holds ``v``
(n, d_in) float32 and, in its metadata, the input digest of every row. Shards are written to a
temporary file and renamed, so concurrent writers never corrupt one; a damaged shard is a miss.
A cache is an optimisation: one that cannot be written (full disk, read-only folder) is given up
with one CacheWarning, and the run goes on with the representations it computed.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import numpy as np

from warp_check.errors import CacheWarning
from warp_check.files import replaced_atomically


class ShardStore:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.given_up = False  # after a failed write: no more tries, no more warnings

    def load(self) -> dict[str, np.ndarray]:
        from safetensors import SafetensorError, safe_open

        rows: dict[str, np.ndarray] = {}
        if not self.folder.is_dir():
            return rows
        # "[!.]": a writer killed before its rename leaves a ".tmp-*" file; it is not a shard.
        for shard in sorted(self.folder.glob("[!.]*.safetensors")):
            try:
                with safe_open(str(shard), framework="numpy") as f:
                    keys = json.loads((f.metadata() or {}).get("keys", "[]"))
                    v = f.get_tensor("v")
            except (SafetensorError, OSError, ValueError, json.JSONDecodeError):
                continue  # a damaged shard is only a cache miss
            if isinstance(keys, list) and v.ndim == 2 and len(keys) == v.shape[0]:
                finite = np.isfinite(v).all(axis=1)  # a NaN row is damage, not a representation: a miss
                rows.update((key, row) for key, row, ok in zip(keys, v, finite, strict=True) if ok)
        return rows

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
            warnings.warn(
                CacheWarning(
                    f"the representation cache {str(self.folder.parent)!r} cannot be written ({why}): "
                    "going on without it (answers unchanged); free space there or turn the cache off "
                    "(--cache none; pytest: --warp-cache none)"
                ),
                stacklevel=2,
            )
