"""The repairable head as plain float64 arrays: logits = W_c σ(W v + b) + b_c, and its kind of
decision (what a prediction and a margin are: :mod:`warp_check.decisions`).

Everything that repair and certification compute (gaps, linearisation, GSN κ) is a function
of this object and the cached representations v; no model forward is needed. "Labels" here are the
kind's answers, one row per case.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from warp_check.decisions import SINGLE_LABEL, DecisionKind, Margins
from warp_check.model.activations import Activation, torch_activation

# Unit roundoff per dtype, and how many of them a recomputation may differ by (an audit's v on
# another device, the head's float64 logits against the model's own): generous for sums of a few
# thousand terms, tight enough that GELU's tanh approximation (< 1e-3) is still refused.
UNIT_ROUNDOFF: dict[str, float] = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
ROUNDING_ULPS = 16.0
ROWS_AT_ONCE = 4096


def unit_roundoff(dtype: str) -> float:
    """The unit roundoff of a dtype's name; float32's for one this table does not know."""
    return UNIT_ROUNDOFF.get(dtype, UNIT_ROUNDOFF["float32"])


@dataclass(frozen=True)
class DenseHead:
    W: np.ndarray  # (d_out, d_in), the only weight repair changes
    b: np.ndarray  # (d_out,)
    Wc: np.ndarray  # (C, d_out)
    bc: np.ndarray  # (C,)
    activation: Activation
    storage_dtype: str = "float32"  # the model's dtype: repaired weights are rounded to it
    # Only W may change (a bias is missing, or the classifier is the identity of the final-linear form).
    fixed_head: bool = False
    decision: DecisionKind = SINGLE_LABEL  # what the logits decide, and the margins of an answer

    def __post_init__(self) -> None:
        for name in ("W", "b", "Wc", "bc"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        d_out, d_in = self.W.shape
        if self.b.shape != (d_out,) or self.Wc.ndim != 2 or self.Wc.shape[1] != d_out:
            raise ValueError(
                f"head shapes do not chain: W {self.W.shape}, b {self.b.shape}, "
                f"W_c {self.Wc.shape}, b_c {self.bc.shape}"
            )
        if self.bc.shape != (self.Wc.shape[0],) or self.Wc.shape[0] < 2:
            raise ValueError(f"classification head needs >= 2 classes, got W_c {self.Wc.shape}")

    @property
    def num_classes(self) -> int:
        return int(self.Wc.shape[0])

    @property
    def d_in(self) -> int:
        return int(self.W.shape[1])

    @property
    def d_out(self) -> int:
        return int(self.W.shape[0])

    @property
    def width(self) -> int:
        """The columns of a row's representation: v itself here."""
        return self.d_in

    @property
    def exact_linear(self) -> bool:
        """The gaps are linear in W (σ the identity, the final-linear form): linearising them is exact."""
        return self.activation.name == "identity"

    def repaired_input(self, V: np.ndarray) -> np.ndarray:
        """The repair layer's input of each row (the columns a step of W multiplies): V itself here."""
        return V

    def torch_logits_fn(self):
        """The logits as a torch function of a (rows, width) float64 tensor, for the v-space attacks."""
        import torch

        W, b, Wc, bc = (torch.tensor(a, dtype=torch.float64) for a in (self.W, self.b, self.Wc, self.bc))
        act = torch_activation(self.activation.torch_name)
        return lambda X: act(X @ W.T + b) @ Wc.T + bc

    def towards(self, plus: np.ndarray, minus: np.ndarray) -> np.ndarray:
        """W_c[plus] − W_c[minus] (a constraint's direction through the classifier), class index
        ``num_classes`` naming no class: a zero row."""
        plus, minus = np.asarray(plus), np.asarray(minus)
        C = self.num_classes
        if plus.size and max(int(plus.max()), int(minus.max())) < C:
            return self.Wc[plus] - self.Wc[minus]
        padded = np.vstack([self.Wc, np.zeros((1, self.d_out))])
        return padded[plus] - padded[minus]

    def with_weight(self, W: np.ndarray) -> DenseHead:
        return replace(self, W=W)

    def round_to_storage(self, W: np.ndarray) -> np.ndarray:
        """W as it will be saved: certify what is written, not what was computed."""
        if self.storage_dtype == "bfloat16":  # numpy has no bfloat16
            import torch

            return torch.as_tensor(np.asarray(W, dtype=np.float64)).to(torch.bfloat16).double().numpy()
        return np.asarray(W, dtype=self.storage_dtype).astype(np.float64)

    def pre_activation(self, V: np.ndarray) -> np.ndarray:
        return V @ self.W.T + self.b

    def logits(self, V: np.ndarray) -> np.ndarray:
        return self.activation.fn(self.pre_activation(V)) @ self.Wc.T + self.bc

    def logits_scale(self, V: np.ndarray) -> np.ndarray:
        """Per logit, the size of the terms summed to compute it: |W_c| (L_σ(|W||v| + |b|) + |σ(z)|) + |b_c|.
        Floating-point rounding is relative to this, not to the logit: large weights cancelling to
        a small logit round like the weights."""
        V = np.asarray(V, dtype=np.float64)
        hidden_terms = np.abs(V) @ np.abs(self.W).T + np.abs(self.b)
        hidden = np.abs(self.activation.fn(self.pre_activation(V)))
        return (self.activation.lipschitz * hidden_terms + hidden) @ np.abs(self.Wc).T + np.abs(self.bc)

    def gap_rounding_reach(self, V: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """Per row, how far v rounded apart by the head's dtype may move the gap: ROUNDING_ULPS units
        of it times ‖∇_v gap ⊙ v‖₂. Another device's kernels sum in another order and round each
        entry of v apart by about a unit, independently; float16 moves a gap of 1 by ~1e-3."""
        V = np.asarray(V, dtype=np.float64)
        labels = np.asarray(labels)
        norms = np.zeros(len(labels))
        for start in range(0, len(labels), ROWS_AT_ONCE):  # the gradient is as large as V: in blocks
            rows = slice(start, start + ROWS_AT_ONCE)
            margins = self.margins(V[rows], labels[rows])
            slope = self.activation.slope(self.pre_activation(V[rows]))
            gradient = (slope * self.towards(margins.held, margins.rival)) @ self.W
            norms[rows] = np.linalg.norm(gradient * V[rows], axis=1)
        return ROUNDING_ULPS * self.unit_roundoff * norms

    @property
    def unit_roundoff(self) -> float:
        return unit_roundoff(self.storage_dtype)

    def margins(self, V: np.ndarray, labels: np.ndarray) -> Margins:
        """The decision's margin of every row: gap = s_held − s_rival (single label: s_y − max_{c≠y} s_c)."""
        return self.decision.margins(self.logits(V), labels)

    def gaps(self, V: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The gap and the strongest rival class ĉ, per row."""
        margins = self.margins(V, labels)
        return margins.gap, margins.rival

    def gaps_from_pre_activation(self, Z: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """Gaps given Z = V Wᵀ + b (the loop updates Z by a low-rank term, not a full product)."""
        return self.decision.margins(self.activation.fn(Z) @ self.Wc.T + self.bc, labels).gap

    def logits_in(self, V: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """The logits with v, the weights and every product and sum in ``dtype`` (numpy's float32 or
        float64; σ itself in float64, rounded back), returned in ``dtype``."""
        z = np.asarray(V, dtype=dtype) @ self.W.astype(dtype).T + self.b.astype(dtype)
        hidden = self.activation.fn(z.astype(np.float64)).astype(dtype)
        return hidden @ self.Wc.astype(dtype).T + self.bc.astype(dtype)

    def logits_as_stored(self, V: np.ndarray) -> np.ndarray:
        """The logits as the saved model computes them: the head's weights and v in its storage dtype,
        the arithmetic in that dtype too (torch, as the model's own layers run), returned as float64.
        Half precision rounds each product and sum: a gap of 1 can come out ~1e-2 lower than in float64."""
        if self.storage_dtype in ("float64", "float32"):
            return self.logits_in(V, np.dtype(self.storage_dtype)).astype(np.float64)
        import torch

        dtype = getattr(torch, self.storage_dtype)

        def stored(a: np.ndarray):
            return torch.as_tensor(np.asarray(a, dtype=np.float64)).to(dtype)

        sigma = torch_activation(self.activation.name)
        with torch.no_grad():
            z = torch.nn.functional.linear(stored(V), stored(self.W), stored(self.b))
            logits = torch.nn.functional.linear(sigma(z), stored(self.Wc), stored(self.bc))
        return logits.double().numpy()

    def gaps_as_stored(self, V: np.ndarray, labels: np.ndarray) -> np.ndarray:
        return self.decision.margins(self.logits_as_stored(V), labels).gap

    def predict(self, V: np.ndarray) -> np.ndarray:
        return self.decision.predict(self.logits(V))

    def linearise(self, V: np.ndarray, labels: np.ndarray, U: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gap, rival and c_i = Uᵀ J_i (w_held − w_ĉ) (paper eq. 10) for every row."""
        Z = self.pre_activation(V)
        S = self.activation.slope(Z)
        margins = self.decision.margins(self.activation.fn(Z) @ self.Wc.T + self.bc, labels)
        return margins.gap, margins.rival, (S * self.towards(margins.held, margins.rival)) @ U

    def gsn_kappa(self, V: np.ndarray, labels: np.ndarray, U: np.ndarray) -> np.ndarray:
        """κ(v) = ‖[q^(1)…q^(r)]‖_F over every constraint of the answer (paper eq. 3–4: every rival
        class k of the label)."""
        Z = self.pre_activation(V)
        S = self.activation.slope(Z)  # (n, d_out)
        constraints = self.decision.constraints(self.activation.fn(Z) @ self.Wc.T + self.bc, labels)
        total = np.zeros(V.shape[0])
        for k in range(constraints.gap.shape[1]):
            q = (S * self.towards(constraints.plus[:, k], constraints.minus[:, k])) @ U  # (n, r)
            total += np.where(constraints.active[:, k], np.sum(q * q, axis=1), 0.0)
        return np.sqrt(total)


def top_left_singular_vectors(W: np.ndarray, rank: int) -> np.ndarray:
    """U ∈ R^{d_out×r}: the top-r left singular vectors of W, deterministic signs.

    For small r, ARPACK (a fixed start vector, so runs are repeatable) is ~10× faster than a
    full SVD of a 768×768 layer, and the loop calls this every iteration. The QP's solution
    ΔW = U B does not depend on the basis of span(U); fixed signs keep runs bit-identical.
    """
    d = min(W.shape)
    U = None
    if rank < d // 4:
        from scipy.sparse.linalg import ArpackError, svds

        start = np.full(d, 1.0 / np.sqrt(d))
        try:
            u, sigma, _ = svds(W, k=rank, v0=start, tol=0, solver="arpack", which="LM")
            U = u[:, np.argsort(-sigma)]
        except ArpackError:
            U = None  # no convergence: the dense SVD below always answers
    if U is None:
        U = np.linalg.svd(W, full_matrices=False)[0][:, :rank]
    signs = np.sign(U[np.argmax(np.abs(U), axis=0), np.arange(U.shape[1])])
    return U * np.where(signs == 0, 1.0, signs)
