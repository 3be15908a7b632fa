"""A sequence classifier seen as encoder → v → W_c σ(W v + b) + b_c.

v is captured by a forward pre-hook on the repair layer, so it is exact for any model, and the
factorisation is checked against the model's own logits before anything relies on it.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from warp_check.errors import ModelError
from warp_check.model.activations import get_activation
from warp_check.model.head import DenseHead
from warp_check.model.loading import load_model_folder
from warp_check.model.specs import HeadSpec, resolve_spec

if TYPE_CHECKING:  # pragma: no cover
    import torch

EQUIVALENCE_ATOL = 1e-5
EQUIVALENCE_RTOL = 1e-5
PROBE_TEXTS = ("a plain probe sentence.", "another, longer probe sentence to check the head with.")


def _submodule(model: Any, name: str, role: str):
    import torch

    try:
        module = model.get_submodule(name)
    except AttributeError:
        raise ModelError(f"{role} '{name}' does not exist in {type(model).__name__}") from None
    if not isinstance(module, torch.nn.Linear):
        raise ModelError(
            f"{role} '{name}' is a {type(module).__name__}, not a dense (nn.Linear) layer: "
            "WARP repairs a dense → activation → linear head"
        )
    return module


def _input_limit(model: Any, tokenizer: Any) -> int:
    """The most tokens the model's forward pass takes (a very large number when it does not say)."""
    limits = [getattr(tokenizer, "model_max_length", None)]
    config = getattr(model, "config", None)
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and getattr(config, "model_type", None) not in _OFFSET_POSITIONS:
        limits.append(positions)
    usable = [n for n in limits if isinstance(n, int) and 0 < n < 1_000_000]  # HF's "unset" is ~1e30
    return min(usable, default=1_000_000)


# RoBERTa-style models number positions from padding_idx + 1: two fewer than their table.
_OFFSET_POSITIONS = frozenset({"roberta", "xlm-roberta", "camembert"})


class ClassifierAdapter:
    """A sequence classifier seen as encoder → v → W_c σ(W v + b) + b_c."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        spec: HeadSpec,
        *,
        max_length: int = 128,
        source: str | None = None,
        check: bool = True,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.spec = spec
        # Longer inputs than the model has positions for crash its forward pass: truncate to
        # what it takes (the tokenizer's model_max_length, as Hugging Face's own default does).
        self.max_length = min(int(max_length), _input_limit(model, tokenizer))
        self.source = source
        self.activation = get_activation(spec.activation)
        self.repair_layer = _submodule(model, spec.repair_layer, "repair layer")
        self.classifier = _submodule(model, spec.classifier, "classifier")
        if self.repair_layer.out_features != self.classifier.in_features:
            raise ModelError(
                f"repair layer '{spec.repair_layer}' outputs {self.repair_layer.out_features} features "
                f"but classifier '{spec.classifier}' takes {self.classifier.in_features}"
            )
        if self.repair_layer.bias is None or self.classifier.bias is None:
            missing = spec.repair_layer if self.repair_layer.bias is None else spec.classifier
            raise ModelError(f"layer '{missing}' has no bias; WARP's head form needs one (b, b_c)")
        self._forward_keys = set(inspect.signature(model.forward).parameters)
        if check:
            self.check_finite()
            self.check_equivalence(PROBE_TEXTS)

    # -- construction -----------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        layer: str | HeadSpec | Sequence[str] = "auto",
        max_length: int = 128,
        check: bool = True,
    ) -> ClassifierAdapter:
        """Load a local Hugging Face folder offline; never runs remote code."""
        model, tokenizer = load_model_folder(path)
        spec = resolve_spec(model, layer)
        return cls(model, tokenizer, spec, max_length=max_length, source=str(path), check=check)

    # -- the head as numbers ----------------------------------------------------------
    def head(self) -> DenseHead:
        def arr(t) -> np.ndarray:
            return t.detach().cpu().double().numpy()

        return DenseHead(
            arr(self.repair_layer.weight),
            arr(self.repair_layer.bias),
            arr(self.classifier.weight),
            arr(self.classifier.bias),
            self.activation,
            storage_dtype=str(self.repair_layer.weight.dtype).removeprefix("torch."),
        )

    def with_head(self, head: DenseHead) -> ClassifierAdapter:
        """A new adapter over a deep copy of the model carrying ``head``'s weights.

        The input model is never modified.
        """
        import torch

        model = copy.deepcopy(self.model)
        new = ClassifierAdapter(
            model, self.tokenizer, self.spec, max_length=self.max_length, source=self.source, check=False
        )
        with torch.no_grad():
            for module, (weight, bias) in (
                (new.repair_layer, (head.W, head.b)),
                (new.classifier, (head.Wc, head.bc)),
            ):
                module.weight.copy_(torch.as_tensor(weight, dtype=module.weight.dtype))
                module.bias.copy_(torch.as_tensor(bias, dtype=module.bias.dtype))
        return new

    # -- encoding -----------------------------------------------------------------------
    def tokenize(self, texts: Sequence[str], pairs: Sequence[str | None] | None = None) -> list[dict[str, list[int]]]:
        """One encoding per text (no padding), limited to the keys the model's forward takes."""
        if not texts:
            return []  # Hugging Face tokenizers fail on an empty batch (IndexError)
        pairs = list(pairs) if pairs is not None else [None] * len(texts)
        if any(p is not None for p in pairs) and not all(p is not None for p in pairs):
            return [self.tokenize([t], [p])[0] for t, p in zip(texts, pairs, strict=True)]
        encoded = self.tokenizer(
            list(texts),
            list(pairs) if pairs and pairs[0] is not None else None,
            truncation=True,
            max_length=self.max_length,
        )
        keys = [k for k in encoded.keys() if k in self._forward_keys]
        return [{k: list(encoded[k][i]) for k in keys} for i in range(len(texts))]

    def forward_batch(self, features: list[dict[str, list[int]]]) -> tuple[np.ndarray, np.ndarray]:
        """(v, logits) for one batch, v captured by a pre-hook on the repair layer."""
        import torch

        batch = self.tokenizer.pad(features, return_tensors="pt")
        captured: list[torch.Tensor] = []

        def hook(_module, args):
            captured.append(args[0].detach())

        handle = self.repair_layer.register_forward_pre_hook(hook)
        try:
            with torch.inference_mode():
                logits = self.model(**{k: v for k, v in batch.items() if k in self._forward_keys}).logits
        finally:
            handle.remove()
        if len(captured) != 1 or captured[0].ndim != 2:
            shape = tuple(captured[0].shape) if captured else None
            raise ModelError(
                f"repair layer '{self.spec.repair_layer}' was called {len(captured)} time(s) with input "
                f"shape {shape}; WARP needs exactly one call on a (batch, features) input"
            )
        return captured[0].float().cpu().numpy(), logits.float().cpu().numpy()

    def check_equivalence(self, texts: Sequence[str], pairs: Sequence[str | None] | None = None) -> float:
        """Max |model logits − W_c σ(W v + b) − b_c| on ``texts``; raises if above 1e-5."""
        features = self.tokenize(texts, pairs)
        V, logits = self.forward_batch(features)
        return self.check_logits(V, logits)

    def check_finite(self) -> None:
        """Raise if any parameter holds NaN/Inf: every gap would be NaN, and no repair can help."""
        import torch

        for name, tensor in self.model.state_dict().items():
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                count = int((~torch.isfinite(tensor)).sum())
                where = f"model folder {self.source!r}: " if self.source else ""
                raise ModelError(
                    f"{where}parameter '{name}' holds {count} NaN/Inf value(s) of {tensor.numel()}: "
                    "the weights are corrupt (a diverged training run or a damaged file); WARP cannot repair them"
                )

    def check_logits(self, V: np.ndarray, logits: np.ndarray) -> float:
        recomputed = self.head().logits(np.asarray(V, dtype=np.float64))
        error = np.abs(recomputed - logits)
        bound = EQUIVALENCE_ATOL + EQUIVALENCE_RTOL * np.abs(logits)
        if not np.all(error <= bound):
            raise ModelError(
                f"the head at '{self.spec.repair_layer}' → {self.spec.activation} → '{self.spec.classifier}' "
                f"does not reproduce the model's logits (max error {float(error.max()):.3g} > "
                f"{EQUIVALENCE_ATOL:g}): something between these layers is not "
                "dense → activation → linear, so WARP cannot repair this layer"
            )
        return float(error.max())

    def upstream_parameters(self) -> list[tuple[str, Any]]:
        """Every parameter except those of the head: all that v depends on."""
        head = {f"{self.spec.repair_layer}.", f"{self.spec.classifier}."}
        return [
            (name, tensor)
            for name, tensor in self.model.state_dict().items()
            if not any(name.startswith(prefix) for prefix in head)
        ]
