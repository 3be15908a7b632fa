"""Finding the repairable head of any sequence classifier from one traced forward pass.

Every ``nn.Linear`` records its input and output on a probe batch. The *classifier* is the
last Linear whose output is the logits — directly, or at one position per row (decoder-only
models run their ``score`` on every position and pool the last non-pad token: whichever
position it is, its output equals the logits). The *dense* layer is the last Linear before it
whose output, through one of WARP's elementwise activations, is exactly the classifier's input
at those positions: dense → σ → linear (dropout is the identity in eval mode). Where there is
no such layer (ModernBERT's head puts a LayerNorm between; GPT-2, Llama, Qwen2 have none), the
classifier itself is repaired: the final-linear form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from warp_check.errors import ModelError
from warp_check.model.activations import ACTIVATIONS
from warp_check.model.specs import HeadSpec

NEAREST_SHOWN = 6  # Linear modules an error lists, nearest the output first


@dataclass(frozen=True)
class _Call:
    name: str
    inputs: np.ndarray  # float64
    outputs: np.ndarray


def find_head(model: Any, batch: dict[str, Any], *, atol: float, rtol: float) -> HeadSpec:
    """The HeadSpec of ``model``, traced on ``batch`` (the model's forward arguments).

    ``atol``/``rtol`` are how closely traced values must agree (they follow the model's dtype).
    Raises ModelError listing the Linear modules nearest the output when the logits come out
    of no Linear at all.
    """
    calls, logits = _trace(model, batch)
    close = _Close(atol, rtol)
    found = _classifier(calls, logits, close)
    if found is None:
        raise ModelError(_nothing_found(calls, logits.shape))
    index, positions = found
    classifier = calls[index]
    x = _at(classifier.inputs, positions)
    for dense in reversed(calls[:index]):
        y = _at(dense.outputs, positions) if dense.outputs.ndim == 3 else dense.outputs
        if y.shape != x.shape:
            continue
        for name, activation in ACTIVATIONS.items():
            if name != "identity" and close(activation.fn(y), x):
                how = f"traced: '{dense.name}' → {name} → '{classifier.name}' reproduces the logits"
                return HeadSpec(repair_layer=dense.name, activation=name, classifier=classifier.name, found_by=how)
    why = (
        f"traced: no dense → activation → linear layer feeds '{classifier.name}', so the final linear layer "
        "itself is repaired (its gap is linear in the update: one exact QP)"
    )
    return HeadSpec.final_linear(classifier.name, found_by=why)


class _Close:
    def __init__(self, atol: float, rtol: float) -> None:
        self.atol, self.rtol = atol, rtol

    def __call__(self, a: np.ndarray, b: np.ndarray) -> bool:
        return a.shape == b.shape and bool(np.all(np.abs(a - b) <= self.atol + self.rtol * np.abs(b)))


def _trace(model: Any, batch: dict[str, Any]) -> tuple[list[_Call], np.ndarray]:
    import torch

    calls: list[_Call] = []
    names = {module: name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}

    def hook(module, args, output):
        if args and isinstance(args[0], torch.Tensor) and isinstance(output, torch.Tensor):
            calls.append(_Call(names[module], _float64(args[0]), _float64(output)))

    handles = [module.register_forward_hook(hook) for module in names]
    try:
        with torch.inference_mode():
            logits = model(**batch).logits
    finally:
        for handle in handles:
            handle.remove()
    return calls, _float64(logits)


def _float64(tensor) -> np.ndarray:
    return tensor.detach().cpu().double().numpy()


def _classifier(calls: list[_Call], logits: np.ndarray, close: _Close) -> tuple[int, np.ndarray | None] | None:
    """(index of the last call whose output is the logits, the position per row or None)."""
    for index in range(len(calls) - 1, -1, -1):
        out = calls[index].outputs
        if out.shape == logits.shape and close(out, logits):
            return index, None
        if out.ndim == 3 and out.shape[0] == logits.shape[0] and out.shape[2] == logits.shape[1]:
            positions = pooled_positions(out, logits)
            if close(out[np.arange(out.shape[0]), positions], logits):
                return index, positions
    return None


def pooled_positions(per_position: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """For each row, the position whose (batch, seq, C) output is closest to that row's logits:
    where the model pooled, by its own rule (last non-pad token, first token, ...)."""
    distance = np.max(np.abs(per_position - logits[:, None, :]), axis=2)
    return np.argmin(distance, axis=1)


def _at(values: np.ndarray, positions: np.ndarray | None) -> np.ndarray:
    if positions is None or values.ndim == 2:
        return values
    return values[np.arange(values.shape[0]), positions]


def _nothing_found(calls: list[_Call], shape: tuple[int, ...]) -> str:
    nearest = []
    for call in reversed(calls):
        if call.name not in (c.split(" ")[0] for c in nearest):
            nearest.append(f"{call.name} (→ {call.outputs.shape[-1]} features)")
        if len(nearest) == NEAREST_SHOWN:
            break
    listed = ", ".join(nearest) if nearest else "none"
    return (
        f"layer = 'auto' found no nn.Linear whose output is the logits {tuple(shape)} (something after the last "
        f"Linear changes them); the Linear modules nearest the output: {listed}. Name the head in warp.toml: "
        "layer = [repair_layer, activation, classifier] for a dense → activation → linear head, or "
        "layer = [final_layer] to repair the layer whose output is the logits"
    )
