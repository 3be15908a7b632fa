"""What a certificate is to the rest of warp-check: :class:`Cert`, one object per certificate in
:data:`warp_check.certificates.CERTIFICATES`, and :class:`CertNumbers`, the figures it adds to a case.

A certificate claimed per case (Cert 1–3) names the key its verdict has in the certificate file's
case records and summary (``name``), the kinds of case it is claimed for, and the figures a case's
verdict carries for reports and JUnit; one measured on the run as a whole (Cert 4) claims no case.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from warp_check.cases import Kind
from warp_check.certify.certificate import CaseCertificate
from warp_check.certify.measured import Bars, CaseGaps, Measured
from warp_check.repair.settings import RepairSettings


@dataclass(frozen=True, kw_only=True)
class CertNumbers:
    """A certificate's figures for one case: its fields, in order, are the case's report columns and
    JUnit properties of that name (``JUNIT``: those JUnit carries; every field where it is empty), and
    a further certificate's figures in the certificate file (:meth:`from_figures` reads them back)."""

    JUNIT: ClassVar[tuple[str, ...]] = ()

    def properties(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_figures(cls, figures: Mapping[str, Any]) -> CertNumbers:
        """The figures as the certificate file keeps them (a further certificate's)."""
        return cls(**{f.name: figures.get(f.name) for f in dataclasses.fields(cls)})


class Cert(abc.ABC):
    """One certificate: its ``name`` (its key in the certificate file: ``cert1``), ``title`` (``Cert 1``),
    ``claim`` (what it promises, in words), the ``kinds`` of case it is claimed for (none: the run's).

    Cert 1–3 measure every case at once (:meth:`measure_cases`, columns over the cases, on the gaps
    recomputed in float64 from the saved weights) and are kept in the case records' own keys; a
    further certificate measures each case itself (:meth:`measure`, on those records), at the repair
    and again at the audit, and the file keeps its verdict and figures in the case's ``further``."""

    name: ClassVar[str]
    title: ClassVar[str]
    claim: ClassVar[str]
    kinds: ClassVar[frozenset[Kind]] = frozenset()
    numbers_type: ClassVar[type[CertNumbers] | None] = None  # the figures it adds to a case, where any
    # False for Cert 1–4, whose verdicts and figures have their own keys in the certificate file; a
    # further certificate's are its case's ``further`` claim, and its verdict a property of the case.
    further: ClassVar[bool] = True

    def measure_cases(self, gaps: CaseGaps, bars: Bars) -> Measured | None:
        """Its verdicts and figures in the case records' own keys, on every case at once (Cert 1–3;
        None: it keeps none there)."""
        return None

    def measure(self, record: CaseCertificate, settings: RepairSettings) -> tuple[bool, CertNumbers | None] | None:
        """A further certificate's verdict and figures on a case (None: not claimed for it)."""
        return None

    def audit_target(self, settings: RepairSettings) -> str | None:
        """What the audit holds a case's recomputed verdict to, in words (Cert 1–3); None: the audit
        re-checks it otherwise (a further certificate: by :meth:`measure`; Cert 4: on the traffic)."""
        return None

    def audited(self, record: CaseCertificate, settings: RepairSettings) -> tuple[bool, str] | None:
        """Whether it holds for the case as recomputed at the audit, and the audit's words (None:
        see :meth:`audit_target`)."""
        target = self.audit_target(settings)
        if target is None:
            return None
        holds = bool(getattr(record, self.name))
        return holds, f"{self.name}: {target}: {'holds' if holds else 'FAILS'} (gap {record.held_gap:.6g})"

    def holds(self, record: CaseCertificate) -> bool | None:
        """Whether it holds for the case (None: not claimed for it), as its certificate records it."""
        claim = record.claim(self.name)
        return claim.holds if claim is not None else getattr(record, self.name, None)

    def numbers(self, record: CaseCertificate) -> CertNumbers | None:
        """Its figures for the case, where it has any (a further certificate's: from its claim)."""
        claim = record.claim(self.name)
        if claim is None or self.numbers_type is None:
            return None
        return self.numbers_type.from_figures(claim.figures)

    @property
    def junit(self) -> tuple[str, ...]:
        """The JUnit properties it adds to a case's record, in order: a further certificate's verdict
        (under its name), then its figures."""
        kind = self.numbers_type
        figures = () if kind is None else kind.JUNIT or tuple(f.name for f in dataclasses.fields(kind))
        return ((self.name,) if self.further else ()) + figures

    def report_line(self, cases: Sequence[Mapping[str, Any]]) -> tuple[str, bool] | None:
        """A further certificate's line of a report on a run (the cases' properties): how many cases
        it held for, and whether it held for all; None where no case carries its verdict (Cert 1–3:
        the report's own figures say)."""
        verdicts = [p[self.name] for p in cases if isinstance(p.get(self.name), bool)]
        if not verdicts:
            return None
        return f"{sum(verdicts)}/{len(verdicts)} cases: {self.claim}", all(verdicts)

    def __repr__(self) -> str:
        return f"<{self.title}: {self.claim}>"


__all__ = ["Cert", "CertNumbers"]
