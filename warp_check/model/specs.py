"""Where the repairable head lives in each architecture: a table keyed by ``config.model_type``
(as peft keeps its target modules) and :class:`HeadSpec` for everything else.

Standard library only: a suite's ``[model] layer`` becomes a HeadSpec when it loads.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from warp_check.errors import ModelError
from warp_check.model.activation_names import canonical_name


class HeadForm(str, enum.Enum):
    """What repair changes: the dense layer before the classifier (the paper's form), or the
    final linear layer itself where no dense → σ → linear head exists."""

    DENSE = "dense"  # logits = W_c σ(W v + b) + b_c; W is repaired
    FINAL_LINEAR = "final_linear"  # logits = W v + b; W (the classifier) is repaired
    # logits = W_c LayerNorm(W v + b + r) + b_c per token: W the encoder's last feed-forward output layer
    FFN_OUTPUT = "ffn_output"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, kw_only=True)
class FfnOutput:
    """Where a post-LN encoder's last feed-forward block adds its residual and normalises: the module
    whose forward argument ``residual_arg`` is the residual r, and the LayerNorm of ``dense``'s output + r."""

    norm: str
    residual_module: str
    residual_arg: int

    def __post_init__(self) -> None:
        for name in ("norm", "residual_module"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ModelError(f"FfnOutput.{name}={value!r}: must be a non-empty string")
        if not isinstance(self.residual_arg, int) or self.residual_arg < 0:
            raise ModelError(f"FfnOutput.residual_arg={self.residual_arg!r}: must be a position (an integer >= 0)")


@dataclass(frozen=True, kw_only=True)
class HeadSpec:
    """Where the repairable head lives: dotted module names and the activation between.

    ``classifier`` None is the final-linear form: ``repair_layer`` is the layer that gives the
    logits, and the activation is the identity. ``found_by`` says how the head was chosen
    (reports and certificates show it); it is not part of the head's identity. ``fallback`` is
    the head to repair instead when this dense form does not converge: only ``layer = "auto"``
    sets it (the final linear layer), so a head the user named is never silently replaced.
    """

    repair_layer: str
    activation: str
    classifier: str | None
    found_by: str = field(default="", compare=False)
    fallback: HeadSpec | None = field(default=None, compare=False, repr=False)
    # The FFN-output form: the residual and LayerNorm between the repair layer and the classifier.
    ffn: FfnOutput | None = None

    @property
    def form(self) -> HeadForm:
        if self.ffn is not None:
            return HeadForm.FFN_OUTPUT
        return HeadForm.FINAL_LINEAR if self.classifier is None else HeadForm.DENSE

    @property
    def chain(self) -> str:
        """How reports name the head: ``repair_layer → activation → classifier``, or the final layer."""
        if self.classifier is None:
            return f"{self.repair_layer} (final linear layer)"
        if self.ffn is not None:
            return f"{self.repair_layer} → + residual → {self.ffn.norm} → {self.classifier}"
        return f"{self.repair_layer} → {self.activation} → {self.classifier}"

    @property
    def quoted(self) -> str:
        """The chain with the module names quoted, for messages."""
        if self.classifier is None:
            return f"'{self.repair_layer}' (final linear layer)"
        if self.ffn is not None:
            return f"'{self.repair_layer}' → + residual → LayerNorm '{self.ffn.norm}' → '{self.classifier}'"
        return f"'{self.repair_layer}' → {self.activation} → '{self.classifier}'"

    def __post_init__(self) -> None:
        names = ("repair_layer", "activation") + (("classifier",) if self.classifier is not None else ())
        for name in names:
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ModelError(f"HeadSpec.{name}={value!r}: must be a non-empty string")
        try:
            canonical = canonical_name(self.activation)
        except KeyError as exc:
            raise ModelError(f"HeadSpec.activation={self.activation!r}: {exc.args[0]}") from None
        if self.classifier is None and canonical != "identity":
            raise ModelError(
                f"HeadSpec.activation={self.activation!r}: the final-linear form (no classifier after the "
                "repair layer) has no activation; give 'identity'"
            )
        if self.ffn is not None and (self.classifier is None or canonical != "identity"):
            raise ModelError(
                f"HeadSpec.ffn: the FFN-output form needs a classifier after the LayerNorm and activation "
                f"'identity' (got classifier {self.classifier!r}, activation {self.activation!r})"
            )
        if self.fallback is not None and (
            self.ffn is not None
            or self.classifier is None
            or self.fallback.form is not HeadForm.FINAL_LINEAR
            or self.fallback.repair_layer != self.classifier
        ):
            raise ModelError(
                f"HeadSpec.fallback={self.fallback.chain!r}: only a dense head falls back, and only to its own "
                f"classifier as the final linear layer (here {self.classifier!r})"
            )

    @classmethod
    def final_linear(cls, layer: str, *, found_by: str = "") -> HeadSpec:
        return cls(repair_layer=layer, activation="identity", classifier=None, found_by=found_by)

    def falling_back(self) -> HeadSpec:
        """This dense head as ``layer = "auto"`` chose it: its classifier, as the final linear layer,
        is repaired instead when the dense form does not converge."""
        if self.classifier is None:
            return self
        return replace(self, fallback=HeadSpec.final_linear(self.classifier))


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


# Token classifiers (``...ForTokenClassification``) of these families put a dropout and one Linear,
# ``classifier``, on every position's final hidden state: no dense layer before it, so the classifier
# itself is repaired, exactly, as the final linear layer on each word's state. That is every family's
# default form: the FFN-output form (``layer = "ffn_output"``, TOKEN_FFN_BLOCKS) measured no better on
# WikiANN (entity F1 −8.4 points either way) at 20× the time, and it is a linearised loop, not one exact QP.
TOKEN_HEAD_FAMILIES = frozenset({"bert", "distilbert", "roberta", "xlm-roberta", "camembert", "electra", "deberta-v2"})
TOKEN_CLASSIFIER = "classifier"


def token_head_spec(model: Any) -> HeadSpec:
    """The head of a token classifier: its classifier as the final linear layer (the default form)."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in TOKEN_HEAD_FAMILIES:
        known = ", ".join(sorted(TOKEN_HEAD_FAMILIES))
        raise ModelError(
            f"no token-classifier head entry for model_type {model_type!r} (known: {known}); name the linear "
            "layer that gives each token's tag logits: layer = [final_layer]"
        )
    return HeadSpec.final_linear(TOKEN_CLASSIFIER, found_by=f"a {model_type} token classifier: its classifier")


@dataclass(frozen=True, kw_only=True)
class FfnBlock:
    """Where a family's encoder layers are and, inside the last, its feed-forward output: the dense layer
    repaired, the LayerNorm after it and the module whose forward argument ``residual_arg`` is the residual."""

    layers: str  # the ModuleList of encoder layers, under the model's base model
    dense: str
    norm: str
    residual_module: str
    residual_arg: int


_BERT_LIKE = {"dense": "output.dense", "norm": "output.LayerNorm", "residual_module": "output", "residual_arg": 1}
# Post-LN families: each encoder layer ends LayerNorm(dense(act(W1 x)) + r), and the classifier reads
# that LayerNorm's output directly (dropout between, the identity in eval).
TOKEN_FFN_BLOCKS: dict[str, FfnBlock] = {
    "bert": FfnBlock(layers="bert.encoder.layer", **_BERT_LIKE),
    "roberta": FfnBlock(layers="roberta.encoder.layer", **_BERT_LIKE),
    "xlm-roberta": FfnBlock(layers="roberta.encoder.layer", **_BERT_LIKE),
    "camembert": FfnBlock(layers="roberta.encoder.layer", **_BERT_LIKE),
    "electra": FfnBlock(layers="electra.encoder.layer", **_BERT_LIKE),
    "deberta-v2": FfnBlock(layers="deberta.encoder.layer", **_BERT_LIKE),
    "distilbert": FfnBlock(
        layers="distilbert.transformer.layer",
        dense="ffn.lin2",
        norm="output_layer_norm",
        residual_module="ffn",
        residual_arg=0,
    ),
}
FFN_LAYER = "ffn_output"  # [model] layer naming this form


def token_ffn_spec(model: Any) -> HeadSpec:
    """The FFN-output form of a token classifier: its encoder's last feed-forward output layer, through the
    residual and LayerNorm that follow it, then the classifier."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    block = TOKEN_FFN_BLOCKS.get(model_type)
    if block is None:
        known = ", ".join(sorted(TOKEN_FFN_BLOCKS))
        raise ModelError(
            f"layer = {FFN_LAYER!r}: no feed-forward output entry for model_type {model_type!r} (known: {known}); "
            "the form needs a post-LN encoder whose last layer ends LayerNorm(dense(·) + residual) read by the "
            "classifier (a pre-LN family normalises before its feed-forward block and again after the encoder); "
            "repair the classifier: layer = 'auto'"
        )
    try:
        count = len(model.get_submodule(block.layers))
    except (AttributeError, TypeError):
        raise ModelError(
            f"layer = {FFN_LAYER!r}: a {model_type} token classifier without its encoder layers at "
            f"'{block.layers}' ({type(model).__name__})"
        ) from None
    last = f"{block.layers}.{count - 1}"
    return HeadSpec(
        repair_layer=f"{last}.{block.dense}",
        activation="identity",
        classifier=TOKEN_CLASSIFIER,
        ffn=FfnOutput(
            norm=f"{last}.{block.norm}",
            residual_module=f"{last}.{block.residual_module}",
            residual_arg=block.residual_arg,
        ),
        found_by=f"a {model_type} token classifier: its last feed-forward output layer",
    )


def resolve_spec(model: Any, layer: str | HeadSpec | Sequence[str] = "auto") -> HeadSpec:
    """The HeadSpec for ``model``: from the table (``"auto"``) or given explicitly.

    ``layer`` may be a HeadSpec or a sequence (repair_layer, activation, classifier).
    """
    if isinstance(layer, HeadSpec):
        return layer
    if isinstance(layer, str):
        if layer != "auto":
            raise ModelError(
                f"layer={layer!r}: give 'auto', 'final', the three names (repair_layer, activation, classifier) "
                "or [final_layer]"
            )
        model_type = getattr(getattr(model, "config", None), "model_type", None)
        if model_type not in HEAD_SPECS:
            known = ", ".join(sorted(HEAD_SPECS))
            raise ModelError(
                f"no head table entry for model_type {model_type!r} (known: {known}); "
                "name the modules explicitly: layer = [repair_layer, activation, classifier]"
            )
        return HEAD_SPECS[model_type]
    names = list(layer)
    if len(names) == 1:
        return HeadSpec.final_linear(names[0], found_by="named: the final linear layer")
    if len(names) != 3:
        raise ModelError(f"layer={names!r}: expected [repair_layer, activation, classifier] or [final_layer]")
    return HeadSpec(repair_layer=names[0], activation=names[1], classifier=names[2])


def recorded_head(
    *, repair_layer: str, activation: str, classifier: str | None, form: HeadForm | None
) -> HeadSpec | str:
    """The ``layer`` that loads the head a certificate records: its modules by name, or, for the FFN-output
    form, ``"ffn_output"`` (its LayerNorm and residual found from the family's table, as the repair found them)."""
    if form is HeadForm.FFN_OUTPUT:
        return FFN_LAYER
    return HeadSpec(repair_layer=repair_layer, activation=activation, classifier=classifier)
