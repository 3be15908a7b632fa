"""The activations WARP knows, by every name a config or a module uses for them.

Standard library only: a suite names its activation in ``[model] layer``, and suites load
without numpy (warm checks).
"""

from __future__ import annotations

# Names transformers uses in configs (hidden_act) and torch module classes, mapped to ours.
ALIASES: dict[str, str] = {
    "relu": "relu",
    "tanh": "tanh",
    "sigmoid": "sigmoid",
    "gelu": "gelu",
    "geluactivation": "gelu",
    "gelu_python": "gelu",
    "gelu_tanh": "gelu_tanh",
    "gelu_new": "gelu_tanh",
    "newgeluactivation": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "fastgeluactivation": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "pytorchgelutanh": "gelu_tanh",
    "silu": "silu",
    "swish": "silu",
    "siluactivation": "silu",
    "identity": "identity",
    "linear": "identity",  # transformers' summary_activation for "no activation"
}

KNOWN = ("gelu", "gelu_tanh", "identity", "relu", "sigmoid", "silu", "tanh")


def canonical_name(name: str) -> str:
    """Our name for ``name`` (ours, a transformers ``hidden_act`` or a module class name).

    Raises KeyError with the sentence to show when WARP does not know it.
    """
    key = ALIASES.get(name.lower())
    if key is None:
        raise KeyError(f"activation {name!r} is not supported by WARP (known: {', '.join(KNOWN)})")
    return key


def exact_name(name: str) -> str:
    """Our name for ``name`` written exactly as a known name (a suite's spelling is not guessed):
    'ReLU' is refused with 'did you mean relu?' rather than silently read as relu."""
    if name in ALIASES:
        return ALIASES[name]
    if name.lower() in ALIASES:
        raise KeyError(
            f"activation {name!r} is not supported by WARP under this spelling: did you mean {name.lower()!r}?"
        )
    raise KeyError(f"activation {name!r} is not supported by WARP (known: {', '.join(KNOWN)})")
