"""Where the repairable head lives in each architecture: a table keyed by ``config.model_type``
(as peft keeps its target modules) and :class:`HeadSpec` for everything else.

Standard library only: a suite's ``[model] layer`` becomes a HeadSpec when it loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from warp_check.errors import ModelError
from warp_check.model.activation_names import canonical_name


@dataclass(frozen=True, kw_only=True)
class HeadSpec:
    """Where the repairable head lives: dotted module names and the activation between."""

    repair_layer: str
    activation: str
    classifier: str

    @property
    def chain(self) -> str:
        """``repair_layer → activation → classifier``: how reports name the head."""
        return f"{self.repair_layer} → {self.activation} → {self.classifier}"

    def __post_init__(self) -> None:
        for name in ("repair_layer", "activation", "classifier"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ModelError(f"HeadSpec.{name}={value!r}: must be a non-empty string")
        try:
            canonical_name(self.activation)
        except KeyError as exc:
            raise ModelError(f"HeadSpec.activation={self.activation!r}: {exc.args[0]}") from None


# Per-architecture heads. Every entry is dense → activation → linear with only dropout in
# between, which is the identity in eval mode.
HEAD_SPECS: dict[str, HeadSpec] = {
    "distilbert": HeadSpec(repair_layer="pre_classifier", activation="relu", classifier="classifier"),
    "bert": HeadSpec(repair_layer="bert.pooler.dense", activation="tanh", classifier="classifier"),
    "roberta": HeadSpec(repair_layer="classifier.dense", activation="tanh", classifier="classifier.out_proj"),
    "xlm-roberta": HeadSpec(repair_layer="classifier.dense", activation="tanh", classifier="classifier.out_proj"),
    "camembert": HeadSpec(repair_layer="classifier.dense", activation="tanh", classifier="classifier.out_proj"),
    "electra": HeadSpec(repair_layer="classifier.dense", activation="gelu", classifier="classifier.out_proj"),
}


def resolve_spec(model: Any, layer: str | HeadSpec | Sequence[str] = "auto") -> HeadSpec:
    """The HeadSpec for ``model``: from the table (``"auto"``) or given explicitly.

    ``layer`` may be a HeadSpec or a sequence (repair_layer, activation, classifier).
    """
    if isinstance(layer, HeadSpec):
        return layer
    if isinstance(layer, str):
        if layer != "auto":
            raise ModelError(f"layer={layer!r}: give 'auto' or the three names (repair_layer, activation, classifier)")
        model_type = getattr(getattr(model, "config", None), "model_type", None)
        if model_type not in HEAD_SPECS:
            known = ", ".join(sorted(HEAD_SPECS))
            raise ModelError(
                f"no head table entry for model_type {model_type!r} (known: {known}); "
                "name the modules explicitly: layer = [repair_layer, activation, classifier]"
            )
        return HEAD_SPECS[model_type]
    names = list(layer)
    if len(names) != 3:
        raise ModelError(f"layer={names!r}: expected [repair_layer, activation, classifier]")
    return HeadSpec(repair_layer=names[0], activation=names[1], classifier=names[2])
