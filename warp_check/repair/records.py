"""What the repair loop takes and gives: the cases as arrays, a record per iteration, the result.

Light to import (numpy on first use): the certificate and the run records, read on the warm
path without numpy, keep fields of these records.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from warp_check.qp.registry import Backend
from warp_check.repair.settings import RepairSettings

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from warp_check.model.head import DenseHead
    from warp_check.qp.solution import QPForm, QPStatus


# Rows hashed at a time by CaseSet.merged.
MERGE_BLOCK = 8192


@dataclass(frozen=True)
class CaseSet:
    """Cases of one kind as the loop sees them: ids, representations (n, d_in), labels, and how many
    of the suite's cases each row stands for (``copies``: 1 each but where :meth:`merged` joined
    identical cases into one row).

    ``V`` stays float32 where it is given so (a float32 model's v, as encoded and cached: exact in
    float32, and half the memory of a million rows; a memory-mapped array stays mapped); anything
    else is float64. The loop computes in float64 whatever is stored: float32 → float64 is exact."""

    ids: tuple[str, ...]
    V: np.ndarray
    labels: np.ndarray
    copies: np.ndarray | None = None

    def __post_init__(self) -> None:
        import numpy as np

        object.__setattr__(self, "ids", tuple(self.ids))
        V = self.V if isinstance(self.V, np.ndarray) and self.V.dtype == np.float32 else np.asarray(self.V, np.float64)
        object.__setattr__(self, "V", V)
        labels = np.asarray(self.labels)  # the decision's answers, a row per case (single label: class ids)
        object.__setattr__(self, "labels", labels.astype(np.int64) if labels.ndim == 1 else labels)
        copies = np.ones(len(self.ids), dtype=np.int64) if self.copies is None else np.asarray(self.copies, np.int64)
        object.__setattr__(self, "copies", copies)
        if self.V.ndim != 2 or self.V.shape[0] != len(self.ids) or self.labels.shape[:1] != (len(self.ids),):
            raise ValueError(
                f"CaseSet shapes disagree: {len(self.ids)} ids, V {self.V.shape}, labels {self.labels.shape}"
            )
        if copies.shape != (len(self.ids),) or np.any(copies < 1):
            raise ValueError(f"CaseSet copies: one count ≥ 1 per case, got {copies!r}")

    @classmethod
    def empty(cls, d_in: int) -> CaseSet:
        import numpy as np

        return cls((), np.zeros((0, d_in)), np.zeros(0, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, mask: np.ndarray) -> CaseSet:
        ids = tuple(i for i, keep in zip(self.ids, mask, strict=True) if keep)
        return CaseSet(ids, self.V[mask], self.labels[mask], self.copies[mask])

    def merged(self) -> tuple[CaseSet, dict[str, str]]:
        """The cases with one row per distinct (representation, label), in first-seen order, and
        each dropped copy's id → the id of the case it is identical to.

        Identical rows are one constraint written twice: a suite that lists a case twice asks for
        it once, so the copy neither weighs twice in the QP nor costs a second row. Exact: rows are
        compared bit for bit, so only cases the model cannot tell apart are merged (a row is known
        by a 128-bit digest, and a digest seen before is confirmed by comparing the rows: a million
        rows cost 16 bytes each, not a copy of themselves).
        """
        import hashlib

        import numpy as np

        first: dict[bytes, int] = {}
        rows: list[int] = []
        copies: dict[str, str] = {}
        count = self.copies.copy()
        labels = self.labels.tolist()
        for lo in range(0, len(self.ids), MERGE_BLOCK):  # a block at a time: a memory-mapped V stays on disk
            block = np.ascontiguousarray(self.V[lo : lo + MERGE_BLOCK])
            for offset, row in enumerate(block):
                i = lo + offset
                key = hashlib.blake2b(self.labels[i].tobytes() + row.tobytes(), digest_size=16)
                j = first.setdefault(key.digest(), i)
                if j != i and not (np.array_equal(self.V[j], row) and labels[j] == labels[i]):
                    j = i  # a digest collision (2⁻¹²⁸): two different rows, both kept
                if j == i:
                    rows.append(i)
                else:
                    copies[self.ids[i]] = self.ids[j]
                    count[j] += count[i]
        if not copies:
            return self, copies
        return CaseSet(tuple(self.ids[i] for i in rows), self.V[rows], self.labels[rows], count[rows]), copies

    def rows(self, index: np.ndarray) -> CaseSet:
        """The cases at ``index`` (integer positions, in that order)."""
        return CaseSet(tuple(self.ids[i] for i in index), self.V[index], self.labels[index], self.copies[index])


class RepairStatus(str, enum.Enum):
    """How a repair ended; only CONVERGED gives a model that may be saved."""

    CONVERGED = "converged"
    NOTHING_TO_REPAIR = "nothing_to_repair"
    NOT_CONVERGED = "not_converged"  # T iterations used up, or no progress possible
    INFEASIBLE = "infeasible"  # the must_keep constraints cannot all hold
    SOLVER_FAILED = "solver_failed"
    INVALID_INPUT = "invalid_input"  # NaN/Inf in weights or representations

    @property
    def repaired(self) -> bool:
        return self is RepairStatus.CONVERGED


@dataclass(frozen=True, kw_only=True)
class IterationRecord:
    """One iteration of the loop: its QP, its step, and the margins after it. The certificate's
    history and a run's details keep a selection of these fields (serial.view)."""

    iteration: int
    qp_status: QPStatus
    qp_form: QPForm
    qp_rows: int
    qp_objective: float
    step_norm: float  # ‖ΔW‖_F
    min_gap_fix: float
    min_gap_keep: float
    fix_met: int
    keep_met: int
    seconds: float
    step_fraction: float = 1.0  # of the QP step taken (< 1: backtracked)
    qp_working_set: int | None = None  # rows in the last QP solved (lazy must_keep rows); None: all qp_rows
    qp_rounds: int = 1  # QPs solved this iteration (working-set rounds, trust-region re-solves)
    qp_backend: Backend  # no default: the loop always says which backend solved
    qp_seconds: float = 0.0  # the QP solves alone (within ``seconds``)
    qp_iterations: int = 0  # the backend's own iterations (ADMM, Newton), summed over rounds
    rank: int = 0  # r of this iteration's step (the loop grows it when it stalls)
    metric_scale: float = 1.0  # κ, the trust region's scale of the step's metric, after this iteration
    model_ratio: float | None = None  # true / promised merit decrease at the full step
    # The linear model against the true gaps at the full QP step (before any backtracking):
    # what the QP promised and what the step would really give. Where they part, the
    # activations switched or saturated under the step; the loop then cut it (step_fraction).
    # None where no step was solved.
    promised_fix_shortfall: float | None = None  # Σ max(γ_s − linearised gap, 0) over must_fix
    full_step_fix_shortfall: float | None = None  # the same from the true gaps
    promised_keep_missed: int | None = None  # must_keep cases the linearised step leaves below γ_h
    full_step_keep_missed: int | None = None  # must_keep cases below γ_h at the true full step


@dataclass(frozen=True)
class Miss:
    """A case that misses its margin: what it needs and by how much it falls short.

    ``room``: what a half-precision model needs above the margin besides (the reach of v rounded
    apart by its ``dtype`` on another device, DenseHead.gap_rounding_reach); ``gap`` is then the
    lower of the float64 gap and the gap in the saved arithmetic, as the stopping rule measures it."""

    id: str
    kind: str
    gap: float
    target: float
    room: float = 0.0
    dtype: str | None = None  # the storage dtype that asks for ``room`` (None: no room asked)

    @property
    def short_by(self) -> float:
        return self.target + self.room - self.gap

    @property
    def needs(self) -> str:
        """What the case needs, in words: its margin, and the room above it where one is asked."""
        if not self.room:
            return f"{self.target:g}"
        return f"{self.target:g} + {self.room:.3g} (room for v rounded apart in {self.dtype} on another device)"


@dataclass(frozen=True)
class GsnFtRecord:
    """Whether GSN-FT ran, why, and the mean κ of each of its steps (step 0: unchanged)."""

    applied: bool
    reason: str
    kappa_per_step: tuple[float, ...] = ()
    chosen_step: int = 0


@dataclass(frozen=True)
class RepairResult:
    """Everything a repair did, whatever its status; ``head_after`` ships only when it converged."""

    status: RepairStatus
    message: str
    head_before: DenseHead
    head_after: DenseHead  # equals head_before (plus GSN-FT) unless converged
    settings: RepairSettings
    iterations: tuple[IterationRecord, ...]
    gaps_before: dict[str, float]
    gaps_after: dict[str, float]
    kappa_before: dict[str, float]
    kappa_after: dict[str, float]
    excluded_keep: tuple[str, ...]  # must_keep cases wrong before repair: not constrained
    misses: tuple[Miss, ...]
    gsn_ft: GsnFtRecord
    seconds: float
    merged: int = 0  # cases identical to another (representation and label): constrained once
    # must_keep cases the loop never held (repair.screen: checked from outside after each round), and
    # the rounds it took; 0 and 1 where every case was in the loop
    held_outside: int = 0
    rounds: int = 1

    @property
    def repaired(self) -> bool:
        return self.status.repaired

    @property
    def mean_kappa_before(self) -> float:
        return mean(self.kappa_before.values())

    @property
    def mean_kappa_after(self) -> float:
        return mean(self.kappa_after.values())


def mean(values) -> float:
    import numpy as np

    values = list(values)
    return float(np.mean(values)) if values else math.nan
