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
from warp_check.certify.certificate import Certificate, HistoryRow, Summary, TrafficChange, change_sentence, percent
from warp_check.repair.records import IterationRecord
from warp_check.repair.settings import RepairSettings, SynonymUse
from warp_check.runs.modes import Mode, RunStatus
from warp_check.serial import Reader, Record, on_disk, read, view
from warp_check.suite.loader import Suite

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.runs.neighbourhood import Neighbourhood


@dataclass(frozen=True, kw_only=True)
class RunDetails(Record):
    """What every run of a suite records; all a run that failed before its verdicts has."""

    model: str | None
    suite_sha256: str
    counts: Mapping[Kind, int]  # the suite's cases per kind
    # Under pytest: "main", or the xdist worker that ran it for all. Written last, after whatever
    # the run's own details are, and only where it was computed for others.
    computed_by: str | None = field(default=None, metadata=on_disk(omit_none=True, last=True))

    @classmethod
    def of(cls, suite: Suite, **fields: Any) -> Any:
        """This kind of details for ``suite``: its model (folder, or Hub id and commit), digest and counts,
        then ``fields``."""
        # A Hub model is named by its id and commit, beside the snapshot folder it was read from.
        model = str(suite.model_dir) if suite.hub is None else f"{suite.hub} ({suite.model_dir})"
        common = {"model": model, "suite_sha256": suite.digest(), "counts": _suite_counts(suite)}
        return cls(**common | fields)


def _suite_counts(suite: Suite) -> dict[Kind, int]:
    return {kind: suite.count(kind) for kind in Kind}


@dataclass(frozen=True, kw_only=True)
class CheckDetails(RunDetails):
    selected: int  # cases checked (pytest's selection)
    head: str  # the head's chain, e.g. "pre_classifier → relu → classifier"
    encoded: int  # distinct inputs through the encoder
    from_cache: int  # distinct inputs whose v the cache had
    encode_seconds: float
    model_loaded: bool  # False: answered from a warm entry
    identical: int = field(default=0, metadata=on_disk(omit_default=True))  # cases whose input is an earlier one's


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
WITHOUT_SYNONYMS = "no WordNet synonyms: nltk or its WordNet data is not installed, see the README"


@dataclass(frozen=True, kw_only=True)
class NeighbourhoodNote(Record):
    """What the repair's neighbourhood draw found (:class:`~warp_check.runs.neighbourhood.Neighbourhood`)."""

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


NAMED_IN_MESSAGE = 10  # must_fix cases a failure message names (the costliest); the report and JUnit list all


@dataclass(frozen=True, kw_only=True)
class LeftOut(Record):
    """A must_fix case a traffic budget cannot buy, and the changes that name it."""

    id: str
    where: str  # the case file and line
    nearest: int  # changed tune-part texts nearest it among the cases pulling towards their new label


@dataclass(frozen=True, kw_only=True)
class BudgetFit(Record):
    """Which must_fix cases a repair over its traffic budget cannot buy within it: the suite repaired
    again, the costliest must_fix cases left out, until the changes on the traffic's *tune* part keep
    within the budget (an estimate: Cert 4's bound part is never used). Greedy: at most these cases,
    not the fewest."""

    budget: float
    confidence: float
    left_out: tuple[LeftOut, ...]  # in the order they were left out, costliest first (all of them: ``floor``)
    kept: int  # must_fix cases the last repair fixed
    n: int  # tune-part texts measured
    changed: int  # of them, changed by the last repair
    bound: float  # the Clopper–Pearson bound on that share
    within: bool  # whether the last repair keeps within the budget on the tune part
    repairs: int
    seconds: float
    why: str | None = field(default=None, metadata=on_disk(omit_none=True))  # why it stopped short of an answer
    # Even with no must_fix case the repair is over: the must_keep margins (γ_h) alone change too much.
    floor: bool = field(default=False, metadata=on_disk(omit_default=True))

    def sentence(self) -> str:
        """The finding, as sentences of Cert 4's failure message."""
        if self.why is not None:
            return f"Which must_fix cases the budget cannot buy is not known: {self.why}."
        if self.floor:
            return (
                f"No must_fix case can be fixed within max_change = {percent(self.budget)}: even with none, the "
                f"repair of the must_keep cases short of their margin (gamma_h) changes {self.changed} of {self.n} "
                f"predictions on the traffic's tune part (at most {percent(self.bound)}). A larger max_change or a "
                "smaller gamma_h."
            )
        costliest = sorted(self.left_out, key=lambda c: -c.nearest)[:NAMED_IN_MESSAGE]
        named = ", ".join(f"'{c.id}' ({c.where}; {c.nearest} change(s) nearest it)" for c in costliest)
        if len(self.left_out) > len(costliest):
            named += f" and {len(self.left_out) - len(costliest)} more (the report lists them all)"
        estimate = (
            f"changes {self.changed} of {self.n} predictions on the traffic's tune part (at most "
            f"{percent(self.bound)}, {percent(self.confidence, digits=3)}; {self.repairs} repair(s), "
            f"{self.seconds:.1f} s)"
        )
        if not self.within:
            return (
                f"After leaving out {len(self.left_out)} must_fix case(s) ({named}) the repair still "
                f"{estimate}, over max_change = {percent(self.budget)}."
            )
        if not self.left_out:  # the tune part is within where Cert 4's sample is not
            return (
                f"On the traffic's tune part the repair of every must_fix case {estimate}, within max_change = "
                f"{percent(self.budget)} where Cert 4's sample is not: more traffic (both parts grow) may show it."
            )
        if self.kept == 0:
            return (
                f"No must_fix case can be fixed within max_change = {percent(self.budget)}: only with all "
                f"{len(self.left_out)} left out does the repair keep within it (it {estimate}); the costliest: {named}."
            )
        return (
            f"Within max_change = {percent(self.budget)}, a repair of the other {self.kept} must_fix case(s) "
            f"{estimate}; these {len(self.left_out)} cannot be fixed within it: {named}. Move them out of this "
            "release's must_fix files, or raise max_change."
        )


@dataclass(frozen=True, kw_only=True)
class TrafficNote(Record):
    """Cert 4 as a run reports it: the sample's counts, the changes measured and the bound on their share."""

    source: str  # the traffic file
    rows: int  # rows read
    duplicates: int  # rows that repeated an earlier text
    in_suite: int  # texts that are suite cases: left out
    tune: int  # texts of the tune part (never measured here)
    no_text: int  # texts of the bound part the model sees as no text: left out
    sample_sha256: str
    n: int  # texts measured
    changed: int
    bound: float
    confidence: float
    max_change: float | None
    by_pair: dict[str, int]
    changes: tuple[TrafficChange, ...]
    seconds: float
    labels: dict[str, int] = field(default_factory=dict)  # the suite's label names, for the changes' classes
    # Over the budget: which must_fix cases it cannot buy (None: within it, or no budget).
    fit: BudgetFit | None = field(default=None, metadata=on_disk(omit_none=True))

    @property
    def within_budget(self) -> bool:
        return self.max_change is None or self.bound <= self.max_change

    def label_name(self, label: int) -> str:
        return next((name for name, index in self.labels.items() if index == label), str(label))

    def __str__(self) -> str:
        budget = ""
        if self.max_change is not None:
            verdict = "within" if self.within_budget else "OVER"
            budget = f"; {verdict} the budget max_change = {percent(self.max_change)}"
        pairs = ", ".join(f"{pair}: {count}" for pair, count in self.by_pair.items())
        return f"{change_sentence(self.bound, self.changed, self.n, self.confidence)}{budget}" + (
            f" [{pairs}]" if pairs else ""
        )

    def sample_line(self) -> str:
        """How the file became the sample: rows, duplicates and suite cases left out, the two parts."""
        left = f", {self.no_text:,} the model sees as no text" if self.no_text else ""
        return (
            f"{self.source}: {self.rows:,} rows, {self.duplicates:,} duplicate(s) merged, {self.in_suite:,} suite "
            f"case(s) left out; {self.n:,} texts measured (bound part{left}), {self.tune:,} kept for tuning; "
            f"{self.seconds:.2f} s"
        )


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
    """Cert 4 as a run measured it: a repair's, or an audit's recomputation (None: no traffic measured)."""
    return details.traffic if isinstance(details, (RepairDetails, AuditDetails)) else None


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
