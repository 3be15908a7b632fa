"""SHA-256 of what a model computes with: tensors, the upstream of the repair layer, an input.

Representations are cached under the upstream digest, and a certificate names the repaired
model's parameters by theirs, so anyone can check later what changed.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter


def tensor_digest(hasher, name: str, tensor) -> None:
    """Feed name, dtype, shape and raw bytes of a tensor into ``hasher``."""
    t = tensor.detach().cpu().contiguous()
    hasher.update(f"{name}|{str(t.dtype)}|{tuple(t.shape)}|".encode())
    hasher.update(t.view(-1).view(dtype=_byte_dtype()).numpy())  # its buffer: no copy


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


def parameter_hashes(state_dict: dict[str, Any], repair_layer: str) -> tuple[str, str]:
    """(sha256 of the repair layer's weight and bias, sha256 of every other parameter)."""
    prefix = f"{repair_layer}."
    layer, frozen = hashlib.sha256(), hashlib.sha256()
    for name in sorted(state_dict):
        tensor_digest(layer if name.startswith(prefix) else frozen, name, state_dict[name])
    return layer.hexdigest(), frozen.hexdigest()
