"""Warm checks: a plain check answered from the representation cache, without loading the model.

A check needs, per case, v (cached by :mod:`warp_check.representations`) and the head's
weights. Finding v in the cache normally takes the loaded model: the cache key hashes the
upstream parameters and the tokenised input. After a check that loaded the model, a *warm
entry* is written beside the cache: the head's weights and, per case text, the key its v is
stored under. A later check of the same suite finds that entry from the model folder's content
digest (:mod:`warp_check.fingerprint`), the suite's ``layer`` and ``max_length``, and the
versions of the libraries that tokenise and run the model, so it never imports torch or
transformers. Any change to any of those, or a case the entry does not know, is a miss, and the
check loads the model as before. The gaps are computed by the same float64 :class:`DenseHead`
from the same float32 v, so a warm check's numbers are bit-identical to a cold one's.

Layout: ``<cache_dir>/warm/<key>.safetensors`` (tensors W, b, Wc, bc; the rest in its metadata)
and ``<cache_dir>/warm/digests.json`` (the file-digest memo). Written atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .cases import Case
from .files import replaced_atomically
from .fingerprint import FileDigests, folder_sha256

if TYPE_CHECKING:  # pragma: no cover
    from .head import DenseHead
    from .model import ClassifierAdapter
    from .representations import Encoded

FORMAT = "warp-check-warm/1"
WARM_DIR = "warm"
# What turns a folder's files into v: tokenisation and the forward pass. A new version of any
# of these may change either, so it is a different entry.
LIBRARIES = ("warp-check", "transformers", "tokenizers", "torch", "safetensors")


def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def case_sha256(case: Case) -> str:
    """What tokenisation sees of a case (with the folder's tokenizer and max_length)."""
    return hashlib.sha256(json.dumps([case.text, case.text_pair]).encode()).hexdigest()


@dataclass(frozen=True)
class WarmEntry:
    """What a check needs from a loaded model, remembered for a model folder's exact content."""

    key: str
    upstream_sha256: str
    head: DenseHead
    head_name: str  # "repair_layer → activation → classifier"
    inputs: Mapping[str, str]  # case_sha256 → the representation cache's input key

    def encoded(self, cases: Sequence[Case], cache_dir: str | Path) -> Encoded | None:
        """v of every case from the cache, or None if any case is not there."""
        from .representations import Encoded, cached_rows

        keys = [self.inputs.get(case_sha256(c)) for c in cases]
        if any(k is None for k in keys):
            return None
        known = cached_rows(cache_dir, self.upstream_sha256)
        rows = [known.get(k) for k in keys]  # type: ignore[arg-type]
        if any(r is None or r.shape != (self.head.d_in,) for r in rows):
            return None
        V = np.stack(rows).astype(np.float32) if rows else np.zeros((0, self.head.d_in), dtype=np.float32)
        return Encoded(tuple(c.id for c in cases), V, len(cases), 0, self.upstream_sha256, tuple(keys))  # type: ignore[arg-type]


def entry_key(model_dir: str | Path, layer: Any, max_length: int, digests: FileDigests) -> str:
    """The entry's name: the folder's content, the suite's layer and max_length, the libraries.

    Raises OSError if the folder cannot be read.
    """
    identity = {
        "format": FORMAT,
        "folder_sha256": folder_sha256(model_dir, digests),
        "layer": repr(layer),
        "max_length": int(max_length),
        "versions": _versions(),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def _entry_path(model_dir: str | Path, layer: Any, max_length: int, cache_dir: str | Path) -> Path | None:
    """Where the entry for the folder as it is now lives (None: the folder cannot be read)."""
    digests = FileDigests(Path(cache_dir) / WARM_DIR / "digests.json")
    try:
        return Path(cache_dir) / WARM_DIR / f"{entry_key(model_dir, layer, max_length, digests)}.safetensors"
    except OSError:
        return None
    finally:
        digests.save()


def lookup(model_dir: str | Path, layer: Any, max_length: int, cache_dir: str | Path) -> WarmEntry | None:
    """The warm entry for this model folder as it is now, or None (then load the model).

    Reads only: with no entry at all in the cache, nothing is hashed and nothing written.
    """
    if not any((Path(cache_dir) / WARM_DIR).glob("[!.]*.safetensors")):
        return None
    path = _entry_path(model_dir, layer, max_length, cache_dir)
    return None if path is None else _read(path)


def _read(path: Path) -> WarmEntry | None:
    from safetensors import SafetensorError, safe_open

    from .activations import get_activation
    from .head import DenseHead

    if not path.is_file():
        return None
    key = path.stem
    try:
        with safe_open(str(path), framework="numpy") as f:
            meta = json.loads((f.metadata() or {}).get("entry", "null"))
            tensors = {name: f.get_tensor(name) for name in ("W", "b", "Wc", "bc")}
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("key") != key:
            return None
        head = DenseHead(
            **tensors, activation=get_activation(meta["activation"]), storage_dtype=str(meta["storage_dtype"])
        )
        inputs = meta["inputs"]
        if not isinstance(inputs, dict) or not isinstance(meta["upstream_sha256"], str):
            return None
        return WarmEntry(key, meta["upstream_sha256"], head, str(meta["head_name"]), inputs)
    except (SafetensorError, OSError, ValueError, KeyError, TypeError):
        return None  # a damaged entry is only a miss


def record(
    adapter: ClassifierAdapter,
    cases: Sequence[Case],
    encoded: Encoded,
    cache_dir: str | Path,
    *,
    layer: Any,
    max_length: int,
) -> Path | None:
    """Remember, for the folder the adapter was loaded from, the head and where each case's v is.

    ``layer`` and ``max_length`` are what the suite asked for (the adapter may have capped
    ``max_length`` at the tokenizer's): the lookup knows only those.

    Called after a check that encoded (or found) every case. Entries of earlier runs on the same
    folder are merged (a suite that grows keeps its older cases warm). Returns the entry's path,
    or None when the adapter has no folder or the cache cannot be written (never an error).
    """
    from safetensors.numpy import save_file

    if adapter.source is None or not os.path.isdir(adapter.source):
        return None
    path = _entry_path(adapter.source, layer, max_length, cache_dir)
    if path is None or len(encoded.input_keys) != len(cases):
        return None
    inputs = {case_sha256(c): k for c, k in zip(cases, encoded.input_keys, strict=True)}
    earlier = _read(path)
    if earlier is not None and earlier.upstream_sha256 == encoded.upstream_sha256:
        if all(earlier.inputs.get(k) == v for k, v in inputs.items()):
            return path  # nothing new
        inputs = dict(earlier.inputs) | inputs
    head = adapter.head()
    meta = {
        "format": FORMAT,
        "key": path.stem,
        "model_dir": str(adapter.source),
        "upstream_sha256": encoded.upstream_sha256,
        "activation": head.activation.name,
        "storage_dtype": head.storage_dtype,
        "head_name": adapter.spec.chain,
        "inputs": inputs,
    }
    tensors = {"W": head.W, "b": head.b, "Wc": head.Wc, "bc": head.bc}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with replaced_atomically(path, suffix=".safetensors") as tmp:
            save_file(
                {k: np.ascontiguousarray(v) for k, v in tensors.items()}, tmp, metadata={"entry": json.dumps(meta)}
            )
    except OSError:
        return None
    return path
