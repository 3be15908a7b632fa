"""What a certificate measured on cases reads and gives back, as columns over the cases: the gaps
every certificate reads (:class:`CaseGaps`, made by :func:`warp_check.certify.cases.measure_gaps`), the
bars it holds them to (:class:`Bars`), and its verdicts and figures (:class:`Measured`).

No numpy here: the certificates' modules, which front ends read for their words, import this.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from warp_check.cases import Kind
from warp_check.certify.certificate import CaseCertificate, Lipschitz
from warp_check.repair.settings import KeepMargin, keep_bars

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from warp_check.certify.falsify import AttackSettings
    from warp_check.model.head import DenseHead

_MEASURED_FIELDS = frozenset(f.name for f in dataclasses.fields(CaseCertificate)) - {
    "id",
    "kind",
    "label",
    "gap_before",
    "gap_after",
    "gap_as_saved",
    "excluded",
    "restored",
    "further",
}


@dataclass(frozen=True, kw_only=True)
class Bars:
    """What the certificates hold the cases to: the margins and the attack on the radius."""

    gamma_s: float
    gamma_h: float
    attack: AttackSettings | None = None
    keep_margin: KeepMargin = KeepMargin.GAMMA_H  # a must_keep case's bar: γ_h, or its own (RepairSettings)

    def keep_bars(self, gaps_before: np.ndarray) -> np.ndarray:
        """Each must_keep case's bar from its gap before the repair, by the rule the repair held it to."""
        return keep_bars(gaps_before, self.gamma_h, self.keep_margin)


@dataclass(frozen=True, kw_only=True, eq=False)
class CaseGaps:
    """The repaired head and what every certificate of the cases reads of it, a row per case."""

    head: DenseHead
    ids: tuple[str, ...]
    kinds: tuple[Kind, ...]
    V: np.ndarray  # as encoded (float32, maybe memory-mapped): read in float64 a block at a time
    labels: np.ndarray  # the answers, a row per case, as head.decision holds them
    gaps_before: np.ndarray
    gaps: np.ndarray  # float64
    stored: np.ndarray  # in the saved model's own arithmetic
    fix: np.ndarray  # bool: certified as a must_fix case (a must_fix case, or a restored must_keep one)
    restored: np.ndarray  # bool: a must_keep case repaired back from the baseline
    excluded: np.ndarray  # bool: a must_keep case left out (the input model got it wrong)
    held: np.ndarray  # the gap Cert 1 and 2 judge: the smaller of float64's and the saved model's own
    kept: np.ndarray  # bool: a must_keep case held to its answer (neither restored nor left out)
    lipschitz: Lipschitz


@dataclass(frozen=True, kw_only=True, eq=False)
class Measured:
    """One certificate's verdicts and figures on the cases it is claimed for: ``rows`` (bool, a row
    per case) says which, ``columns`` the :class:`CaseCertificate` fields it sets, a value per case."""

    rows: np.ndarray
    columns: Mapping[str, np.ndarray]

    def __post_init__(self) -> None:
        unknown = sorted(set(self.columns) - _MEASURED_FIELDS)
        if unknown:
            raise ValueError(f"Measured.columns: {unknown} are not a certificate's fields of a case record")
        n = len(self.rows)
        wrong = [name for name, column in self.columns.items() if len(column) != n]
        if wrong:
            raise ValueError(f"Measured.columns: {wrong} have not one value per case ({n})")


__all__ = ["Bars", "CaseGaps", "Measured"]
