"""What a run records beside its verdicts, one record per kind of run: the numbers the terminal
summary, the ``warp-check`` output and the report show.

Each record's JSON is its fields in order (:mod:`warp_check.serial`), so the xdist run files
and report.json keep one shape; :func:`read_details` reads one back for the run it belongs to.
Standard library only: a warm check builds these without numpy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from warp_check.cases import Kind
from warp_check.certificates.traffic.verdicts import TrafficNote
from warp_check.certify.certificate import Certificate, HistoryRow, Summary
from warp_check.decisions import SINGLE_LABEL
from warp_check.repair.records import IterationRecord
from warp_check.repair.settings import RepairSettings, SynonymUse
from warp_check.runs.modes import Mode, RunStatus
from warp_check.runs.paired import PairedTest
from warp_check.serial import Reader, Record, on_disk, read, view
from warp_check.suite.loader import Suite

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.pipeline.neighbourhood import Neighbourhood


@dataclass(frozen=True, kw_only=True)
class RunDetails(Record):
    """What every run of a suite records; all a run that failed before its verdicts has."""

    model: str | None
    suite_sha256: str
    counts: Mapping[Kind, int]  # the suite's cases per kind
    # The kind of decision its cases state (the report's per-part table is the kind's).
    decision: str = field(default=SINGLE_LABEL.name, metadata=on_disk(omit_default=True))
    # Under pytest: "main", or the xdist worker that ran it for all. Written last, after whatever
    # the run's own details are, and only where it was computed for others.
    computed_by: str | None = field(default=None, metadata=on_disk(omit_none=True, last=True))

    @classmethod
    def of(cls, suite: Suite, **fields: Any) -> Any:
        """This kind of details for ``suite``: its model (folder, or Hub id and commit), digest and counts,
        then ``fields``."""
        # A Hub model is named by its id and commit, beside the snapshot folder it was read from.
        model = str(suite.model_dir) if suite.hub is None else f"{suite.hub} ({suite.model_dir})"
        common = {
            "model": model,
            "suite_sha256": suite.digest(),
            "counts": _suite_counts(suite),
            "decision": suite.decision.name,
        }
        return cls(**common | fields)

    @classmethod
    def beside(cls, run: RunDetails, **fields: Any) -> Any:
        """This kind of details for the suite ``run`` describes (its model, digest and counts), then ``fields``."""
        common = {"model": run.model, "suite_sha256": run.suite_sha256, "counts": run.counts, "decision": run.decision}
        return cls(**common | fields)


def _suite_counts(suite: Suite) -> dict[Kind, int]:
    return {kind: suite.count(kind) for kind in Kind if kind is not Kind.DEFERRED or suite.deferred}


@dataclass(frozen=True, kw_only=True)
class CheckDetails(RunDetails):
    selected: int  # cases checked (pytest's selection)
    head: str  # the head's chain, e.g. "pre_classifier → relu → classifier"
    encoded: int  # distinct inputs through the encoder
    from_cache: int  # distinct inputs whose v the cache had
    encode_seconds: float
    model_loaded: bool  # False: answered from a warm entry
    identical: int = field(default=0, metadata=on_disk(omit_default=True))  # cases whose input is an earlier one's
    # Against a baseline (warp_check.modes.baseline): the paired test, and Cert 4 between the two models.
    paired_test: PairedTest | None = field(default=None, metadata=on_disk(omit_none=True))
    traffic: TrafficNote | None = field(default=None, metadata=on_disk(omit_none=True))


IterationSummary = view(
    IterationRecord,
    "IterationSummary",
    ("iteration", "min_gap_fix", "min_gap_keep", "fix_met", "keep_met", "step_norm", "seconds"),
    finite_fields=("min_gap_fix", "min_gap_keep"),
    doc="One iteration of the repair loop, as a run reports it (IterationRecord's fields).",
    module=__name__,
)


@dataclass(frozen=True, kw_only=True)
class GsnFtNote(Record):
    applied: bool
    reason: str


# Said where synonyms = "auto" found no WordNet: the copies drew none, and what would add them.
WITHOUT_SYNONYMS = (
    "no WordNet synonyms: nltk or its WordNet data is not installed (pip install 'warp-check[wordnet]', then "
    "python -m nltk.downloader wordnet)"
)


@dataclass(frozen=True, kw_only=True)
class NeighbourhoodNote(Record):
    """What the repair's neighbourhood draw found (:class:`~warp_check.pipeline.neighbourhood.Neighbourhood`)."""

    perturbed: int  # suite cases perturbed
    drawn: int  # distinct new variants run
    wrong: int  # those the model got wrong: must_fix cases of the repair
    # Of those, the ones a failed repair still missed, left out before it was tried again.
    dropped: int = field(default=0, metadata=on_disk(since=True))
    # Why the repair went on without any of them (it failed with them).
    left_out: str | None = field(default=None, metadata=on_disk(since=True))
    seconds: float = field(default=0.0, metadata=on_disk(since=True))
    # Whether the copies drew WordNet synonyms.
    synonyms: SynonymUse = field(default=SynonymUse.OFF, metadata=on_disk(since=True))

    @classmethod
    def of(cls, hood: Neighbourhood | None) -> NeighbourhoodNote | None:
        if hood is None:
            return None
        return cls(
            perturbed=hood.perturbed, drawn=hood.drawn, wrong=len(hood.cases) + len(hood.dropped),
            dropped=len(hood.dropped), left_out=hood.left_out, seconds=round(hood.seconds, 3),
            synonyms=hood.synonyms,
        )  # fmt: skip

    def __str__(self) -> str:
        found = f"{self.wrong} of {self.drawn} perturbation(s) of {self.perturbed} case(s) were wrong"
        # Said last, after what was found: where "auto" found no WordNet, and what would add it.
        missing = f"; {WITHOUT_SYNONYMS}" if self.synonyms is SynonymUse.NOT_INSTALLED else ""
        if self.left_out is not None:
            alone = f"with them the repair ended {self.left_out}, so the suite's own cases were repaired alone"
            return f"{found}; {alone}{missing}"
        if not self.wrong:
            return f"{found} ({self.seconds:.1f} s{missing})"
        certified = f"{self.wrong - self.dropped} repaired and certified as must_fix cases too"
        if self.dropped:
            certified += f", {self.dropped} the repair could not meet beside the suite's cases dropped"
        return f"{found}: {certified} ({self.seconds:.1f} s{missing})"


def _repair_settings(data: Reader) -> RepairSettings:
    return RepairSettings.from_dict(dict(data))


@dataclass(frozen=True, kw_only=True)
class RepairDetails(RunDetails):
    head: str  # the head repaired (the final linear layer where ``layer = "auto"`` fell back to it)
    found_by: str = field(default="", metadata=on_disk(since=True))  # how that head was chosen, and why
    encoded: int
    from_cache: int
    encode_seconds: float
    status: RunStatus
    repair_message: str
    iterations: int
    repair_seconds: float
    kappa_before: float | None  # mean GSN κ over must_fix
    kappa_after: float | None
    gsn_ft: GsnFtNote
    certs: Summary | None = field(metadata=on_disk(none_as_empty=True))  # None: no certificate was computed
    excluded: tuple[str, ...]  # must_keep cases the original model got wrong (and the baseline too, where known)
    artefact: str | None  # where the repaired model went; None: nothing written
    history: tuple[IterationSummary, ...]
    # must_keep cases the original model got wrong and the suite's baseline right: repaired back.
    restored: tuple[str, ...] = field(default=(), metadata=on_disk(since=True))
    # The suite's baseline they were judged on, and how it was chosen (None: none was known).
    baseline: str | None = field(default=None, metadata=on_disk(since=True, omit_none=True))
    # As its settings file has it: settings recorded before neighbourhoods existed have none.
    settings: RepairSettings = field(metadata=on_disk(write=RepairSettings.to_dict, read=_repair_settings))
    gamma_s: float
    gamma_h: float
    lipschitz: float | None
    # None: none was drawn (off, or nothing needed repair).
    neighbourhood: NeighbourhoodNote | None = field(default=None, metadata=on_disk(none_as_empty=True, since=True))
    identical: int = field(default=0, metadata=on_disk(omit_default=True))  # cases whose input is an earlier one's
    merged: int = field(default=0, metadata=on_disk(omit_default=True))  # cases constrained as one (same v, label)
    # Cert 4, where the repair measured traffic.
    traffic: TrafficNote | None = field(default=None, metadata=on_disk(omit_none=True))


@dataclass(frozen=True, kw_only=True)
class AuditDetails(RunDetails):
    certificate: str  # the certificate's path
    checks: int
    failed_checks: tuple[str, ...]  # what each failed check says
    not_in_suite: tuple[str, ...]  # certified cases the suite does not have (but for the neighbourhood's)
    # Certified cases the repair drew (perturbed copies of suite cases), checked too.
    neighbours: int = field(default=0, metadata=on_disk(since=True))
    gamma_s: float
    gamma_h: float
    # Cert 4 as recomputed on the audited model, where the certificate claims it and traffic was given.
    traffic: TrafficNote | None = field(default=None, metadata=on_disk(omit_none=True))


def traffic_of(details: object) -> TrafficNote | None:
    """Cert 4 as a run measured it: a repair's, an audit's recomputation, or a check's against a baseline
    (None: no traffic measured)."""
    return details.traffic if isinstance(details, (RepairDetails, AuditDetails, CheckDetails)) else None


@dataclass(frozen=True, kw_only=True)
class CertificateDetails(Record):
    """A repair run as a certificate file tells it (no suite: only what the file claims)."""

    model: str | None
    counts: Mapping[Kind, int]  # the certified cases per kind
    iterations: int
    repair_seconds: float
    kappa_before: float | None
    kappa_after: float | None
    certs: Summary
    excluded: tuple[str, ...]
    history: tuple[HistoryRow, ...]
    gamma_s: float
    gamma_h: float
    lipschitz: float
    artefact: str | None  # the folder holding the certificate
    decision: str = field(default=SINGLE_LABEL.name, metadata=on_disk(omit_default=True))

    @classmethod
    def of(cls, certificate: Certificate, *, artefact: str | None) -> CertificateDetails:
        counts: dict[Kind, int] = {}
        for case in certificate.cases:
            counts[case.kind] = counts.get(case.kind, 0) + 1
        repair = certificate.repair
        return cls(
            model=certificate.model.source,
            counts=counts,
            iterations=repair.iterations,
            repair_seconds=repair.seconds,
            kappa_before=repair.gsn_kappa_before,
            kappa_after=repair.gsn_kappa_after,
            certs=certificate.summary,
            excluded=repair.excluded_must_keep,
            history=repair.history,
            gamma_s=certificate.settings.gamma_s,
            gamma_h=certificate.settings.gamma_h,
            lipschitz=certificate.lipschitz.L,
            artefact=artefact,
            decision=certificate.model.decision,
        )


Details = RunDetails | CheckDetails | RepairDetails | AuditDetails | CertificateDetails
_BY_MODE: dict[Mode, type[RunDetails]] = {
    Mode.CHECK: CheckDetails,
    Mode.REPAIR: RepairDetails,
    Mode.AUDIT: AuditDetails,
}


def read_details(mode: Mode, status: RunStatus, data: Mapping[str, Any]) -> Details:
    """The details of a run of ``mode`` that ended with ``status``, from their JSON."""
    if status is RunStatus.ERROR:
        return read(RunDetails, data)
    if mode is Mode.REPAIR and "suite_sha256" not in data:  # read from a certificate: no suite
        return read(CertificateDetails, data)
    return read(_BY_MODE[mode], data)
