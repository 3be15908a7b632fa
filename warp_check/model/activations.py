"""Elementwise activations of the repair layer, in float64 numpy: value, slope, bounds.

Repair needs σ and σ' (the Jacobian of the linearisation); the certificates need the
global Lipschitz constant L_σ (paper, Thm 3) and, for the local radius, the largest change
of σ' over an interval. The last one is exact: σ' is piecewise monotone between the
critical points listed per activation, so its extremes on an interval lie at the ends or
at those points.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from warp_check.model.activation_names import canonical_name

Array = np.ndarray

_SQRT2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _phi(x: Array) -> Array:
    return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _erf(x: Array) -> Array:
    from scipy.special import erf  # lazy: importing warp_check stays light

    return erf(x)


def _gelu(x: Array) -> Array:
    return 0.5 * x * (1.0 + _erf(x / _SQRT2))


def _gelu_slope(x: Array) -> Array:
    return 0.5 * (1.0 + _erf(x / _SQRT2)) + x * _phi(x)


def _gelu_tanh(x: Array) -> Array:
    return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3)))


def _gelu_tanh_slope(x: Array) -> Array:
    inner = _SQRT_2_OVER_PI * (x + 0.044715 * x**3)
    t = np.tanh(inner)
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x * x)


def _sigmoid(x: Array) -> Array:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


@dataclass(frozen=True)
class Activation:
    """An elementwise σ with what repair and certification need to know about it."""

    name: str
    fn: Callable[[Array], Array]
    slope: Callable[[Array], Array]
    lipschitz: float  # sup |σ'|
    # Points where σ' has a local extremum (or a jump, for ReLU): the only interior
    # candidates for the extremes of σ' on an interval.
    slope_critical_points: tuple[float, ...]
    torch_name: str  # how to rebuild σ in torch for attacks (see certify.py)
    # σ' from z and σ(z) where σ(z) gives it for less than σ'(z) alone (tanh: 1 − σ²); None: slope(z).
    slope_given_value: Callable[[Array, Array], Array] | None = None

    def value_and_slope(self, z: Array) -> tuple[Array, Array]:
        """σ(z) and σ'(z): what a linearisation needs, one pass of σ where the slope allows it."""
        value = self.fn(z)
        return value, (self.slope(z) if self.slope_given_value is None else self.slope_given_value(z, value))

    def slope_change_bound(self, z: Array, half_width: Array) -> Array:
        """r(z, w) = sup_{|u| <= w} |σ'(z + u) − σ'(z)|, elementwise and exact."""
        z = np.asarray(z, dtype=np.float64)
        w = np.asarray(half_width, dtype=np.float64)
        lo, hi = z - w, z + w
        centre = self.slope(z)
        worst = np.maximum(np.abs(self.slope(lo) - centre), np.abs(self.slope(hi) - centre))
        if self.name == "relu":
            # σ' jumps between 0 and 1 at 0: any interval touching 0 sees both values.
            crosses = (lo <= 0.0) & (hi >= 0.0)
            return np.where(crosses, 1.0, worst)
        for point in self.slope_critical_points:
            inside = (lo <= point) & (point <= hi)
            worst = np.where(inside, np.maximum(worst, np.abs(self.slope(np.float64(point)) - centre)), worst)
        # The critical points are known to ~1e-6; σ' is flat there, so 1e-9 covers the error.
        return worst + 1e-9


def _relu_slope(x: Array) -> Array:
    # The subgradient at exactly 0 is taken as 0, as torch does for ReLU.
    return (np.asarray(x) > 0).astype(np.float64)


def _tanh_slope(x: Array) -> Array:
    t = np.tanh(x)
    return 1.0 - t * t


def _sigmoid_slope(x: Array) -> Array:
    s = _sigmoid(x)
    return s * (1.0 - s)


def _identity_slope(x: Array) -> Array:
    return np.ones_like(np.asarray(x, dtype=np.float64))


def _silu(x: Array) -> Array:
    return x * _sigmoid(x)


def _silu_slope(x: Array) -> Array:
    s = _sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


# sup σ' and the critical points of σ' below were found numerically (σ'' = 0) and are
# rounded outward where that matters for soundness (Lipschitz constants rounded up).
ACTIVATIONS: dict[str, Activation] = {
    "relu": Activation("relu", lambda x: np.maximum(x, 0.0), _relu_slope, 1.0, (0.0,), "relu"),
    "tanh": Activation("tanh", np.tanh, _tanh_slope, 1.0, (0.0,), "tanh", lambda _, t: 1.0 - t * t),
    "sigmoid": Activation("sigmoid", _sigmoid, _sigmoid_slope, 0.25, (0.0,), "sigmoid", lambda _, s: s * (1.0 - s)),
    "gelu": Activation("gelu", _gelu, _gelu_slope, 1.1290, (-_SQRT2, _SQRT2), "gelu"),
    "gelu_tanh": Activation("gelu_tanh", _gelu_tanh, _gelu_tanh_slope, 1.1290, (-1.418504, 1.418504), "gelu_tanh"),
    "silu": Activation("silu", _silu, _silu_slope, 1.0999, (-2.399357, 2.399357), "silu"),
    # The final-linear form (the classifier itself is repaired): no σ, the gap is linear in W.
    "identity": Activation("identity", lambda x: np.asarray(x, dtype=np.float64), _identity_slope, 1.0, (), "identity"),
}


def get_activation(name: str) -> Activation:
    """Look an activation up by our name, a transformers ``hidden_act`` or a module class name."""
    return ACTIVATIONS[canonical_name(name)]


def torch_activation(name: str):
    """σ in torch, for what needs its gradient (GSN-FT, the v-space attacks)."""
    import torch

    table = {
        "relu": torch.relu,
        "tanh": torch.tanh,
        "sigmoid": torch.sigmoid,
        "gelu": torch.nn.functional.gelu,
        "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
        "silu": torch.nn.functional.silu,
        "identity": lambda x: x,
    }
    return table[name]
