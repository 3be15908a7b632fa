"""The FFN-output form of a token classifier as float64 arrays: a post-LN encoder's last feed-forward
output layer W, the residual r its block adds, the LayerNorm after them and the classifier:

    u = W v + b + r,   h = LayerNorm(u) = γ ⊙ (u − mean u) / s + β,   s = sqrt(var u + ε),
    logits = W_c h + b_c

per token row (dropouts are the identity in eval). The LayerNorm is row-wise, not element-wise: its
Jacobian at u is dense, J(u) = diag(γ) P / s with P = I − 11ᵀ/d − n nᵀ/d (n the normalised u), a
symmetric projection, so a margin's gradient with respect to u is P (γ ⊙ Δw) / s, never J itself.

A row's representation is v and r side by side, ``[v | r]`` (``d_in + d_out`` columns): the cache, the
audit and ``verify`` carry the residual with v, and only this module splits them. A step of W moves u
by ΔW v, as a step of the dense form moves its pre-activation, so the loop's Z is u here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from warp_check.model.blocks import blocks
from warp_check.model.head import ROUNDING_ULPS, DenseHead


@dataclass(frozen=True, kw_only=True)
class LayerNormMap:
    """LayerNorm over a row: γ, β and ε as the model's module holds them."""

    gamma: np.ndarray
    beta: np.ndarray
    eps: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "gamma", np.asarray(self.gamma, dtype=np.float64))
        object.__setattr__(self, "beta", np.asarray(self.beta, dtype=np.float64))
        if self.gamma.ndim != 1 or self.beta.shape != self.gamma.shape:
            raise ValueError(f"LayerNorm weights do not match: γ {self.gamma.shape}, β {self.beta.shape}")
        if not (isinstance(self.eps, float) and self.eps > 0):
            raise ValueError(f"LayerNormMap.eps={self.eps!r}: must be a positive float")

    @property
    def size(self) -> int:
        return int(self.gamma.size)

    def normalised(self, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(n, s) per row: (u − mean u) / s and s = sqrt(var u + ε)."""
        centred = U - U.mean(axis=1, keepdims=True)
        s = np.sqrt(np.mean(centred * centred, axis=1) + self.eps)
        return centred / s[:, None], s

    def value(self, U: np.ndarray) -> np.ndarray:
        n, _ = self.normalised(U)
        return n * self.gamma + self.beta

    def pullback(self, U: np.ndarray, T: np.ndarray) -> np.ndarray:
        """J(u)ᵀ t per row (t a row of ``T``, or one direction for every row): P (γ ⊙ t) / s."""
        n, s = self.normalised(U)
        w = np.broadcast_to(T * self.gamma, U.shape)
        projected = w - w.mean(axis=1, keepdims=True) - n * (np.sum(n * w, axis=1, keepdims=True) / self.size)
        return projected / s[:, None]


@dataclass(frozen=True)
class NormedHead(DenseHead):
    """logits = W_c LayerNorm(W v + b + r) + b_c; only W changes. ``activation`` is the identity (the
    element-wise σ of the dense form has no place here); every method that would apply it is this
    class's own."""

    norm: LayerNormMap = field(kw_only=True)
    fixed_head: bool = True  # b, the LayerNorm and the classifier stay: W alone is the FFN-output form

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.activation.name != "identity":
            raise ValueError(f"the FFN-output head takes no element-wise activation, got {self.activation.name!r}")
        if self.norm.size != self.d_out:
            raise ValueError(f"LayerNorm of {self.norm.size} features after a layer of {self.d_out} outputs")

    @property
    def width(self) -> int:
        return self.d_in + self.d_out

    @property
    def exact_linear(self) -> bool:
        return False

    def repaired_input(self, V: np.ndarray) -> np.ndarray:
        return V[:, : self.d_in]

    def residual(self, V: np.ndarray) -> np.ndarray:
        return V[:, self.d_in :]

    def pre_activation(self, V: np.ndarray) -> np.ndarray:
        """u = W v + b + r per row."""
        V = np.asarray(V, dtype=np.float64)
        return self.repaired_input(V) @ self.W.T + self.b + self.residual(V)

    def logits_from_pre_activation(self, Z: np.ndarray) -> np.ndarray:
        return self.norm.value(Z) @ self.Wc.T + self.bc

    def logits(self, V: np.ndarray) -> np.ndarray:
        return self.logits_from_pre_activation(self.pre_activation(V))

    def gaps_from_pre_activation(self, Z: np.ndarray, labels: np.ndarray) -> np.ndarray:
        return self.decision.margins(self.logits_from_pre_activation(Z), labels).gap

    def pullback(self, Z: np.ndarray, towards: np.ndarray) -> np.ndarray:
        """∂(towards · h)/∂u per row: how a margin's direction reaches u through the LayerNorm."""
        return self.norm.pullback(Z, towards)

    def logits_scale(self, V: np.ndarray) -> np.ndarray:
        """Per logit, the size of the terms summed to compute it: u's terms (|W||v| + |b| + |r|) carried
        through the LayerNorm's slope |γ| / s, plus |h|, through |W_c|, plus |b_c|."""
        V = np.asarray(V, dtype=np.float64)
        terms = np.abs(self.repaired_input(V)) @ np.abs(self.W).T + np.abs(self.b) + np.abs(self.residual(V))
        Z = self.pre_activation(V)
        normalised, s = self.norm.normalised(Z)
        hidden = np.abs(normalised * self.norm.gamma + self.norm.beta)
        return (terms * np.abs(self.norm.gamma) / s[:, None] + hidden) @ np.abs(self.Wc).T + np.abs(self.bc)

    def gap_rounding_reach(self, V: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """ROUNDING_ULPS units of the dtype times ‖∇_row gap ⊙ row‖₂ over v and r (both rounded by the
        device that computed them)."""
        V = np.asarray(V, dtype=np.float64)
        labels = np.asarray(labels)
        norms = np.zeros(len(labels))
        for rows in blocks(len(labels)):
            Z = self.pre_activation(V[rows])
            margins = self.decision.margins(self.logits_from_pre_activation(Z), labels[rows])
            through = self.pullback(Z, self.towards(margins.held, margins.rival))
            gradient = np.hstack([through @ self.W, through])
            norms[rows] = np.linalg.norm(gradient * V[rows], axis=1)
        return ROUNDING_ULPS * self.unit_roundoff * norms

    def logits_in(self, V: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """The logits with v, r, the weights and every product and sum in ``dtype`` (the LayerNorm in
        float64, rounded back), returned in ``dtype``."""
        V = np.asarray(V, dtype=dtype)
        u = self.repaired_input(V) @ self.W.astype(dtype).T + self.b.astype(dtype) + self.residual(V)
        hidden = self.norm.value(u.astype(np.float64)).astype(dtype)
        return hidden @ self.Wc.astype(dtype).T + self.bc.astype(dtype)

    def logits_as_stored(self, V: np.ndarray) -> np.ndarray:
        """The logits as the saved model computes them, in its storage dtype (torch's LayerNorm for
        half precision), as float64."""
        if self.storage_dtype in ("float64", "float32"):
            return self.logits_in(V, np.dtype(self.storage_dtype)).astype(np.float64)
        import torch

        dtype = getattr(torch, self.storage_dtype)

        def stored(a: np.ndarray):
            return torch.as_tensor(np.asarray(a, dtype=np.float64)).to(dtype)

        V = np.asarray(V, dtype=np.float64)
        with torch.no_grad():
            u = torch.nn.functional.linear(stored(self.repaired_input(V)), stored(self.W), stored(self.b))
            u = u + stored(self.residual(V))
            h = torch.nn.functional.layer_norm(
                u, (self.d_out,), stored(self.norm.gamma), stored(self.norm.beta), self.norm.eps
            )
            logits = torch.nn.functional.linear(h, stored(self.Wc), stored(self.bc))
        return logits.double().numpy()

    def linearise(self, V: np.ndarray, labels: np.ndarray, U: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gap, rival and c_i = Uᵀ J(u_i)ᵀ (w_held − w_ĉ) for every row."""
        Z = self.pre_activation(V)
        margins = self.decision.margins(self.logits_from_pre_activation(Z), labels)
        return margins.gap, margins.rival, self.pullback(Z, self.towards(margins.held, margins.rival)) @ U

    def gsn_kappa(self, V: np.ndarray, labels: np.ndarray, U: np.ndarray) -> np.ndarray:
        """κ(v) = ‖[q^(1)…q^(r)]‖_F over every constraint of the answer, q = Uᵀ J(u)ᵀ (w_plus − w_minus)."""
        Z = self.pre_activation(V)
        constraints = self.decision.constraints(self.logits_from_pre_activation(Z), labels)
        total = np.zeros(Z.shape[0])
        for k in range(constraints.gap.shape[1]):
            q = self.pullback(Z, self.towards(constraints.plus[:, k], constraints.minus[:, k])) @ U
            total += np.where(constraints.active[:, k], np.sum(q * q, axis=1), 0.0)
        return np.sqrt(total)

    def torch_logits_fn(self):
        """The logits as a torch function of a (rows, d_in + d_out) float64 tensor: v and r both move."""
        import torch

        W, b, Wc, bc, gamma, beta = (
            torch.tensor(a, dtype=torch.float64)
            for a in (self.W, self.b, self.Wc, self.bc, self.norm.gamma, self.norm.beta)
        )
        d_in, eps = self.d_in, self.norm.eps

        def logits(X):
            u = X[:, :d_in] @ W.T + b + X[:, d_in:]
            return torch.nn.functional.layer_norm(u, (u.shape[1],), gamma, beta, eps) @ Wc.T + bc

        return logits
