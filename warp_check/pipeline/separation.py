"""Why a final-linear repair can stall: two cases with different labels that the model all but
merges at the classifier's input.

For logits W v + b, case i (label y) meeting gap ≥ γ_i and case j (label y') meeting gap ≥ γ_j
give, added up, (w_y − w_y')·(v_i − v_j) ≥ γ_i + γ_j (the biases cancel), so every repair that
meets both has ‖w_y − w_y'‖ ≥ (γ_i + γ_j) / ‖v_i − v_j‖. Where the pair is close, that weight is
many times the layer's own: the loop, which prices each step, creeps towards it and stalls, and
a pair at distance 0 cannot be met at all. The pair with the largest such factor explains it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from warp_check.repair.records import Miss

# Pairs are scored in blocks of this many rows against every case: memory stays ~rows × cases.
_BLOCK = 256


@dataclass(frozen=True, kw_only=True)
class Separation:
    """The pair of cases with different labels whose margins need the final layer's weights to grow most."""

    first: str  # a case that misses its margin
    second: str  # the case with another label closest to it, relative to what both need
    first_label: int
    second_label: int
    distance: float  # ‖v_first − v_second‖ at the final layer's input
    norm: float  # ‖v_first‖
    needed: float  # the least ‖w_first_label − w_second_label‖ meeting both margins (inf at distance 0)
    current: float  # that norm in the layer now

    @property
    def growth(self) -> float:
        """How many times its current size the weight difference must become (inf: no repair can)."""
        return self.needed / self.current if self.current > 0 else float("inf")

    def describe(self, layer: str, names: Mapping[int, str]) -> str:
        pair = (
            f"'{self.first}' ({names.get(self.first_label, self.first_label)}) and "
            f"'{self.second}' ({names.get(self.second_label, self.second_label)})"
        )
        if self.distance == 0:
            return (
                f"{pair} are one point at the input of '{layer}' (the same v): no change of that layer meets both "
                "margins; check their labels, or leave one of them out"
            )
        share = f"{100 * self.distance / self.norm:.2g} % of ‖v‖" if self.norm > 0 else "‖v‖ is 0"
        return (
            f"{pair} are {self.distance:.3g} apart at the input of '{layer}' ({share}): meeting both margins "
            f"needs the difference of their rows of '{layer}' to grow from {self.current:.3g} to at least "
            f"{self.needed:.3g} (×{self.growth:.3g}), which the loop's priced steps creep towards (a higher lam "
            "lets them grow faster); check both labels: if both are right, the encoder barely tells the two apart"
        )


def hardest_pair(
    W: np.ndarray,
    V: np.ndarray,
    labels: np.ndarray,
    targets: np.ndarray,
    ids: Sequence[str],
    misses: Sequence[Miss],
) -> Separation | None:
    """Over each case in ``misses`` and every case with another label: the pair whose margins need the
    rows of ``W`` (the final layer's weight) for their labels to grow the most. None: no such pair."""
    index = {case_id: i for i, case_id in enumerate(ids)}
    rows = np.array(sorted({index[m.id] for m in misses if m.id in index}), dtype=np.int64)
    if rows.size == 0 or len(np.unique(labels)) < 2:
        return None
    V = np.asarray(V, dtype=np.float64)
    squared = np.sum(V * V, axis=1)
    apart = np.linalg.norm(W[:, None, :] - W[None, :, :], axis=2)  # ‖w_a − w_b‖ for every pair of classes
    best: tuple[float, int, int, float] | None = None  # (growth, i, j, distance)
    for start in range(0, rows.size, _BLOCK):
        block = rows[start : start + _BLOCK]
        distance = np.sqrt(np.maximum(squared[block, None] + squared[None, :] - 2.0 * V[block] @ V.T, 0.0))
        exact = distance < 1e-6 * np.sqrt(squared[block, None] + squared[None, :] + 1e-300)
        if exact.any():  # too close for the expansion above: measure them directly
            bi, bj = np.nonzero(exact)
            distance[bi, bj] = np.linalg.norm(V[block[bi]] - V[bj], axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            growth = (targets[block, None] + targets[None, :]) / (distance * apart[labels[block]][:, labels])
        growth[labels[block, None] == labels[None, :]] = -np.inf
        growth[np.isnan(growth)] = np.inf  # distance 0 and identical rows: no repair meets both
        k = int(np.argmax(growth))
        bi, j = divmod(k, growth.shape[1])
        if best is None or growth[bi, j] > best[0]:
            best = (float(growth[bi, j]), int(block[bi]), int(j), float(distance[bi, j]))
    if best is None or best[0] == -np.inf:
        return None
    _, i, j, distance = best
    current = float(apart[labels[i], labels[j]])
    needed = (targets[i] + targets[j]) / distance if distance > 0 else float("inf")
    return Separation(
        first=ids[i],
        second=ids[j],
        first_label=int(labels[i]),
        second_label=int(labels[j]),
        distance=distance,
        norm=float(np.sqrt(squared[i])),
        needed=float(needed),
        current=current,
    )
