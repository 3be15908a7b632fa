"""Representations v of every case: one batched encoder pass, cached on disk by hashes.

Everything upstream of the repair layer is frozen during repair, so v depends only on the
upstream parameters and the tokenised input. The cache key is the SHA-256 of both; the
repaired model has the same upstream, so auditing it needs no encoder pass either.

Cache layout: ``<cache_dir>/<upstream sha256>/<shard sha256>.safetensors``; a shard holds
``v`` (n, d_in) float32 and, in its metadata, the input hash of every row. Shards are
written to a temporary file and renamed, so concurrent writers never corrupt one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .cases import Case
from .files import replaced_atomically

if TYPE_CHECKING:  # pragma: no cover
    from .model import ClassifierAdapter

PROGRESS_MIN_CASES = 256  # below this a progress bar is noise


@dataclass(frozen=True)
class Encoded:
    """v for each case id, in the order asked; how many rows came from the cache, how many were encoded."""

    ids: tuple[str, ...]
    V: np.ndarray  # (n, d_in) float32
    from_cache: int
    encoded: int
    upstream_sha256: str
    input_keys: tuple[str, ...] = ()  # per case, the key its v is cached under (empty: not known)

    def rows(self, ids: Sequence[str]) -> np.ndarray:
        index = {case_id: i for i, case_id in enumerate(self.ids)}
        return self.V[[index[i] for i in ids]]


def tensor_digest(hasher, name: str, tensor) -> None:
    """Feed name, dtype, shape and raw bytes of a tensor into ``hasher``."""
    t = tensor.detach().cpu().contiguous()
    hasher.update(f"{name}|{str(t.dtype)}|{tuple(t.shape)}|".encode())
    hasher.update(t.view(-1).view(dtype=_byte_dtype()).numpy().tobytes())


def _byte_dtype():
    import torch

    return torch.uint8


# Config keys that cannot change v: names, bookkeeping, the label names. Every other key
# (layer_norm_eps, hidden_act, ...) can, so it is part of the cache key.
_CONFIG_KEYS_NOT_AFFECTING_V = frozenset(
    {"_name_or_path", "_commit_hash", "transformers_version", "architectures", "id2label", "label2id", "problem_type"}
)


def upstream_sha256(adapter: ClassifierAdapter) -> str:
    hasher = hashlib.sha256()
    hasher.update(f"{type(adapter.model).__name__}|{adapter.spec.repair_layer}|".encode())
    config = getattr(adapter.model, "config", None)
    if config is not None and hasattr(config, "to_dict"):
        settings = {k: v for k, v in config.to_dict().items() if k not in _CONFIG_KEYS_NOT_AFFECTING_V}
        hasher.update(json.dumps(settings, sort_keys=True, default=repr).encode())
    for name, tensor in sorted(adapter.upstream_parameters(), key=lambda item: item[0]):
        tensor_digest(hasher, name, tensor)
    return hasher.hexdigest()


def input_sha256(features: dict[str, list[int]]) -> str:
    return hashlib.sha256(json.dumps(features, sort_keys=True).encode()).hexdigest()


def encode_cases(
    adapter: ClassifierAdapter,
    cases: Sequence[Case],
    *,
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    check: bool = True,
) -> Encoded:
    """v for every case: from the cache where present, else one length-sorted batched pass.

    With ``check`` the model's logits of every freshly encoded case are compared with the
    head's factorisation (the load-time check, on the real inputs, at no extra cost).
    """
    ids = tuple(case.id for case in cases)
    features = adapter.tokenize([c.text for c in cases], [c.text_pair for c in cases])
    keys = [input_sha256(f) for f in features]
    upstream = upstream_sha256(adapter)
    store = _ShardStore(Path(cache_dir) / upstream) if cache_dir is not None else None
    known = store.load() if store is not None else {}
    d_in = adapter.repair_layer.in_features
    V = np.zeros((len(cases), d_in), dtype=np.float32)
    missing = []
    for i, key in enumerate(keys):
        row = known.get(key)
        if row is not None and row.shape == (d_in,):
            V[i] = row
        else:
            missing.append(i)
    if missing:
        order = sorted(missing, key=lambda i: (len(features[i]["input_ids"]), i))
        bar = _progress(len(order), enabled=progress)
        try:
            for start in range(0, len(order), batch_size):
                chunk = order[start : start + batch_size]
                v, logits = adapter.forward_batch([features[i] for i in chunk])
                if check:
                    adapter.check_logits(v, logits)
                V[chunk] = v
                bar.update(len(chunk))
        finally:
            bar.close()
        if store is not None:
            store.save([keys[i] for i in missing], V[missing])
    return Encoded(ids, V, len(cases) - len(missing), len(missing), upstream, tuple(keys))


def _progress(total: int, *, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(
        total=total, desc="warp: encoding cases", unit="case", disable=not enabled or total < PROGRESS_MIN_CASES
    )


class _ShardStore:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

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
        from safetensors.numpy import save_file

        self.folder.mkdir(parents=True, exist_ok=True)
        V = np.ascontiguousarray(V, dtype=np.float32)
        if not np.isfinite(V).all():  # never cache what evaluate() refuses
            return
        name = hashlib.sha256("\n".join(keys).encode()).hexdigest()
        with replaced_atomically(self.folder / f"{name}.safetensors", suffix=".safetensors") as tmp:
            save_file({"v": V}, tmp, metadata={"keys": json.dumps(keys)})
