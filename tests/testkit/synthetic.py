"""Synthetic heads and cases for the math tests: no model, exact control, milliseconds."""

from __future__ import annotations

import numpy as np

from warp_check.model.activations import ACTIVATIONS
from warp_check.model.head import DenseHead
from warp_check.repair.records import CaseSet


def synthetic_problem(
    *, activation: str = "relu", d: int = 64, classes: int = 2, n_fix: int = 12, n_keep: int = 150, seed: int = 0
) -> tuple[DenseHead, CaseSet, CaseSet]:
    """A random head; must_keep = cases it gets right with margin; must_fix = adversarial
    variants of other right cases: pushed along −∇gap just across the boundary, keeping
    the clean label (what an attack recipe produces, in v-space)."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(d, d)) / np.sqrt(d)
    b = rng.normal(size=d) * 0.1
    Wc = rng.normal(size=(classes, d)) * (3.0 / np.sqrt(d))
    head = DenseHead(W, b, Wc, np.zeros(classes), ACTIVATIONS[activation], storage_dtype="float32")
    head = head.with_weight(head.round_to_storage(W))
    V = rng.normal(size=(4 * (n_fix + n_keep), d))
    labels = head.predict(V)
    gaps, competitor = head.gaps(V, labels)
    right = np.flatnonzero(gaps > 0.5)
    keep_rows, seed_rows = right[:n_keep], right[n_keep : n_keep + n_fix]
    adversarial = []
    for i in seed_rows:
        v, y = V[i], labels[i]
        slope = head.activation.slope(head.W @ v + head.b)
        direction = -(head.W.T @ (slope * (head.Wc[y] - head.Wc[competitor[i]])))
        direction /= np.linalg.norm(direction)
        t = 0.0
        while head.gaps((v + t * direction)[None], np.array([y]))[0][0] > -0.3:
            t += 0.05
        adversarial.append(v + t * direction)
    fix = CaseSet(tuple(f"fix{i}" for i in range(len(seed_rows))), np.array(adversarial), labels[seed_rows])
    keep = CaseSet(tuple(f"keep{i}" for i in range(len(keep_rows))), V[keep_rows], labels[keep_rows])
    return head, fix, keep
