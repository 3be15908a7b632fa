"""The synthetic repair problem of the benchmarks: deterministic, paper-size, no model needed.

What it builds, from a seed:

* a dense head ``logits = W_c σ(W v + b) + b_c`` with ``W`` (768×768) ~ N(0, 1/768), a small
  bias ``b``, a 2-class ``W_c`` whose logit difference is orthogonal to the mean hidden
  activation (so the two classes are balanced, as for a real fine-tuned head), scaled so the
  median |gap| of correct predictions is ``TYPICAL_GAP`` (≈3), and ``b_c = 0``;
* representations in ``d_in = 768`` (the input of the repair layer; ``d``: another width, W then
  d × d), from one of
  ``DISTRIBUTIONS``: ``isotropic`` ``v ~ N(0, I)`` (the default, and the worst case for lazy
  must_keep rows: every case points its own way, so the QP's active set grows to ~r·d_in), or
  ``measured``: ``v ~ N(μ, Σ)`` shaped like real pre-classifier inputs (see ``Sampler``);
* ``must_keep``: 800 fresh rows labelled with the head's own prediction, i.e. all correct, with
  their natural small-margin tail left in (a few start below γ_h = 0.3, so the first QP has
  active must_keep rows, as on a real model's clean cases);
* ``must_fix``: 108 "adversarial-like" rows: drawn rows whose |gap| lies in [0.05, 3], labelled
  with the *other* class, so each is wrong by a gap between −3 and −0.05 (near the boundary).

The paper's sizes (108 must_fix, 800 must_keep, d = 768) and defaults (γ_s = 1.0, γ_h = 0.3,
ρ = 2, λ = 50) are used throughout. ``first_problem`` returns the first linearised QP of the
repair loop for a two-class head (one row per case, the strongest competitor); ``keep_cases``
draws n further must_keep cases for the scale benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from warp_check.model.activations import ACTIVATIONS
from warp_check.model.head import DenseHead, top_left_singular_vectors
from warp_check.qp.problem import LinearisedProblem
from warp_check.repair.records import CaseSet

D = 768  # d_in = d_out, as in DistilBERT's pre_classifier / BERT's pooler
N_FIX = 108
N_KEEP = 800
TYPICAL_GAP = 3.0  # median |gap| of correct predictions
FIX_GAP_RANGE = (0.05, 3.0)  # |gap| of the rows turned into must_fix cases
GAMMA_S = 1.0
GAMMA_H = 0.3
RHO = 2.0
LAM = 50.0
AIM_ABOVE = 1e-3  # RepairSettings.aim_above: the QP targets γ + this


# Shape of real representations, measured on 1,804 SST-2 sentences through the MiniLM
# DistilBERT example model (pre_classifier input, d = 384; the cache of benchmarks.paper_tables):
# the mean carries 67% of E‖v‖², the centred spectrum falls as k^-0.79 (fitted over k = 2..200),
# its largest eigenvalue is 19% of the variance. Transformer representations are anisotropic
# like this; an isotropic N(0, I) in 768-d is far from it.
MEASURED_MEAN_SHARE = 0.67
MEASURED_SPECTRUM_SLOPE = 0.79
DISTRIBUTIONS = ("isotropic", "measured")

# Shape of real repair layers, measured on the four MiniLM heads warp-check ships or builds
# (the DistilBERT and BERT example models and their RTE fine-tunes; d = 384): fine-tuning
# leaves one spike in W's spectrum, σ₁ = 12.8–27.6 × the median singular value (σ₁/σ₂ =
# 2.1–4.5), and the class direction w₁ − w₀ lies in W's top singular directions: 84–89 % of its
# norm in the top one, 88–93 % in the top two. A random W (the ``random`` head) has no spike
# and ~5 % of the class direction in its top two, so a rank-2 update there reaches the
# logits only through large, strongly non-linear moves (benchmarks/RESULTS.md). ``measured``
# adds the spike with the mildest measured size and aims the class direction along it.
MEASURED_SPIKE_OVER_MEDIAN = 12.8
MEASURED_CLASS_ALIGNMENT = 0.88
HEADS = ("random", "measured")


@dataclass(frozen=True)
class Sampler:
    """Draws (n, D) representations; ``measured``: N(μ, Σ) with the measured shape above.

    Both have E‖v‖² = D, so pre-activations W v have the same scale. Σ = Q diag(λ) Qᵀ with a
    random rotation Q and λ_k ∝ k^-slope; μ is a random direction of norm √(share · D).
    """

    distribution: str
    d: int = 768
    mean: np.ndarray | None = None
    scales: np.ndarray | None = None  # (D, D): Q diag(√λ), so v = μ + z scalesᵀ

    @classmethod
    def make(cls, distribution: str, seed: int, d: int = 768) -> Sampler:
        if distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {DISTRIBUTIONS}, got {distribution!r}")
        if distribution == "isotropic":
            return cls(distribution, d)
        rng = np.random.default_rng(seed + 7_919)
        lam = np.arange(1, d + 1, dtype=np.float64) ** -MEASURED_SPECTRUM_SLOPE
        lam *= d * (1.0 - MEASURED_MEAN_SHARE) / lam.sum()
        Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
        mean = rng.normal(size=d)
        mean *= np.sqrt(d * MEASURED_MEAN_SHARE) / np.linalg.norm(mean)
        return cls(distribution, d, mean, Q * np.sqrt(lam))

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        z = rng.normal(size=(n, self.d))
        return z if self.scales is None else self.mean + z @ self.scales.T


@dataclass(frozen=True)
class SyntheticProblem:
    head: DenseHead
    fix: CaseSet
    keep: CaseSet
    seed: int
    activation: str
    sampler: Sampler
    head_shape: str = "random"


def build(
    seed: int = 0, activation: str = "relu", distribution: str = "isotropic", head_shape: str = "random", d: int = D
) -> SyntheticProblem:
    """The head and the two case sets; identical for identical arguments.

    ``head_shape`` ``random``: W ~ N(0, 1/768), class direction random; ``measured``: the same
    W plus the spike that fine-tuning leaves, with the class direction along it (see
    MEASURED_SPIKE_OVER_MEDIAN). The random draws are the same up to the head's shape.
    """
    if activation not in ("relu", "tanh"):
        raise ValueError(f"activation must be 'relu' or 'tanh', got {activation!r}")
    if head_shape not in HEADS:
        raise ValueError(f"head_shape must be one of {HEADS}, got {head_shape!r}")
    act = ACTIVATIONS[activation]
    sampler = Sampler.make(distribution, seed, d)
    rng = np.random.default_rng(seed)
    W = rng.normal(0.0, 1.0 / np.sqrt(d), size=(d, d))
    b = rng.normal(0.0, 0.05, size=d)
    spike = None
    if head_shape == "measured":
        shape_rng = np.random.default_rng(seed + 104_729)  # its own stream: the rest stays as drawn
        out_dir, in_dir = (x / np.linalg.norm(x) for x in shape_rng.normal(size=(2, d)))
        median = float(np.median(np.linalg.svd(W, compute_uv=False)))
        W = W + MEASURED_SPIKE_OVER_MEDIAN * median * np.outer(out_dir, in_dir)
        spike = (out_dir, shape_rng.normal(size=d))

    # Class direction made orthogonal to the mean activation so neither class dominates:
    # random, or (measured head) MEASURED_CLASS_ALIGNMENT of it along the spike.
    calibration = sampler.draw(rng, 4096)
    hidden = act.fn(calibration @ W.T + b)
    mean_hidden = hidden.mean(axis=0)
    direction = rng.normal(size=d)
    if spike is not None:
        out_dir, other = spike
        other -= (other @ out_dir) * out_dir
        direction = aligned_direction(out_dir, other / np.linalg.norm(other), mean_hidden)
    direction -= (direction @ mean_hidden) / (mean_hidden @ mean_hidden) * mean_hidden
    scale = TYPICAL_GAP / float(np.median(np.abs(hidden @ direction)))
    half = 0.5 * scale * direction
    f32 = np.float32  # a real model's weights: the loop rounds the repaired W to this too
    head = DenseHead(
        W=W.astype(f32),
        b=b.astype(f32),
        Wc=np.stack([-half, half]).astype(f32),
        bc=np.zeros(2),
        activation=act,
        storage_dtype="float32",
    )

    V_keep = sampler.draw(rng, N_KEEP)
    keep = CaseSet(tuple(f"keep-{i:04d}" for i in range(N_KEEP)), V_keep, head.predict(V_keep))

    low, high = FIX_GAP_RANGE
    chosen: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    while sum(len(c) for c in chosen) < N_FIX:
        pool = sampler.draw(rng, 1024)
        predicted = head.predict(pool)
        gap, _ = head.gaps(pool, predicted)
        near = (gap >= low) & (gap <= high)
        chosen.append(pool[near])
        labels.append(1 - predicted[near])  # the other class: wrong by −gap
    V_fix = np.vstack(chosen)[:N_FIX]
    fix = CaseSet(tuple(f"fix-{i:04d}" for i in range(N_FIX)), V_fix, np.concatenate(labels)[:N_FIX])
    return SyntheticProblem(head, fix, keep, seed, activation, sampler, head_shape)


def aligned_direction(spike: np.ndarray, other: np.ndarray, mean_hidden: np.ndarray) -> np.ndarray:
    """A unit class direction in span(spike, other) (orthonormal) that keeps
    MEASURED_CLASS_ALIGNMENT of its norm along ``spike`` once made orthogonal to ``mean_hidden``
    (the balancing projection would otherwise eat into the alignment; bisection on the angle)."""
    m = mean_hidden / np.linalg.norm(mean_hidden)

    def alignment(angle: float) -> float:
        d = np.cos(angle) * spike + np.sin(angle) * other
        d -= (d @ m) * m
        return abs(float(d @ spike)) / float(np.linalg.norm(d))

    low, high = 0.0, 0.5 * np.pi  # alignment falls from ~1 to ~0 over the quarter turn
    for _ in range(60):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if alignment(mid) > MEASURED_CLASS_ALIGNMENT else (low, mid)
    angle = 0.5 * (low + high)
    return np.cos(angle) * spike + np.sin(angle) * other


def class_alignment(W: np.ndarray, Wc: np.ndarray, rank: int) -> float:
    """‖Uᵀ(w₁ − w₀)‖ / ‖w₁ − w₀‖ with U the top-``rank`` left singular vectors of W."""
    direction = np.asarray(Wc[1] - Wc[0], dtype=np.float64)
    U = top_left_singular_vectors(np.asarray(W, dtype=np.float64), rank)
    return float(np.linalg.norm(U.T @ direction) / np.linalg.norm(direction))


def first_problem(synthetic: SyntheticProblem, rank: int, *, cache_vvt: bool = False) -> LinearisedProblem:
    """The first linearised QP of the repair loop at ``rank`` (U = top-r singular vectors of W).

    ``cache_vvt`` hands the solver V Vᵀ precomputed, as the loop does (it is constant there);
    by default the dual pays for it inside the timed solve, which is the fair one-shot comparison.
    """
    head, fix, keep = synthetic.head, synthetic.fix, synthetic.keep
    V = np.vstack([fix.V, keep.V])
    labels = np.concatenate([fix.labels, keep.labels])
    targets = np.concatenate([np.full(len(fix), GAMMA_S), np.full(len(keep), GAMMA_H)])
    U = top_left_singular_vectors(head.W, rank)
    gap, _, C = head.linearise(V, labels, U)
    return LinearisedProblem(
        C,
        V,
        targets + AIM_ABOVE - gap,
        len(fix),
        RHO,
        LAM,
        V @ V.T if cache_vvt else None,
    )


def describe(synthetic: SyntheticProblem) -> dict[str, float | int]:
    """A few numbers that show the problem looks like a real one (for the benchmark output)."""
    head = synthetic.head
    g_fix, _ = head.gaps(synthetic.fix.V, synthetic.fix.labels)
    g_keep, _ = head.gaps(synthetic.keep.V, synthetic.keep.labels)
    return {
        "fix_gap_min": round(float(g_fix.min()), 4),
        "fix_gap_max": round(float(g_fix.max()), 4),
        "keep_gap_median": round(float(np.median(g_keep)), 4),
        "keep_below_gamma_h": int(np.sum(g_keep < GAMMA_H)),
    }


KEEP_BLOCK = 8192  # rows drawn (and classified) at a time: no n×d_out temporaries at 100k


def keep_cases(synthetic: SyntheticProblem, n: int, seed: int, keep: str) -> CaseSet:
    """n further must_keep cases from the problem's sampler, labelled by its head; ``keep="margin"``:
    only cases whose gap is already ≥ γ_h (``"natural"``: every one). Stored in float32, as a real
    model's v are (a million rows of d = 768: 3 GB, not 6), and labelled from the stored values."""
    head = synthetic.head
    rng = np.random.default_rng(seed + 1_000_003)
    V = np.empty((n, head.d_in), dtype=np.float32)
    labels = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        block = synthetic.sampler.draw(rng, KEEP_BLOCK).astype(np.float32)
        predicted = head.predict(block)
        if keep == "margin":
            gap, _ = head.gaps(block, predicted)
            chosen = gap >= GAMMA_H
            block, predicted = block[chosen], predicted[chosen]
        take = min(n - filled, block.shape[0])
        V[filled : filled + take] = block[:take]
        labels[filled : filled + take] = predicted[:take]
        filled += take
    return CaseSet(tuple(f"keep-{i:07d}" for i in range(n)), V, labels)
