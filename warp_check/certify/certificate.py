"""``warp_certificate.json`` as one typed record: what a repair claims about the model it saved.

:class:`Certificate` is the only way the file is written (:meth:`Certificate.write`) or read
(:meth:`Certificate.read`); reading checks every key and names the file and the key it found
wrong. The JSON is the records' fields through :mod:`warp_check.serial`, in one key order (people
diff these files); radii and gaps that are not finite are written as null.

Standard library only: the run records (:mod:`warp_check.runs.details`) hold parts of a
certificate, and a warm check loads them without numpy.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from warp_check.cases import Case, Kind
from warp_check.errors import CertificateError, SettingsError
from warp_check.files import write_text_atomically
from warp_check.json_bounded import read_json as bounded_json
from warp_check.model.specs import HeadForm
from warp_check.qp.settings import FLAT_KEYS, SolverSettings
from warp_check.repair.records import IterationRecord, RepairResult, RepairStatus
from warp_check.repair.settings import KeepMargin, NeighbourSettings, RepairSettings
from warp_check.serial import FieldError, Reader, Record, finite, on_disk, view

# The reader of one JSON object of the file, under the name ``_settings`` reads with.
_Object = Reader

CERTIFICATE_NAME = "warp_certificate.json"
FORMAT = "warp-certificate/1"
TOP_LEVEL_KEYS = (
    "format",
    "created",
    "warp_check_version",
    "model",
    "settings",
    "repair",
    "lipschitz",
    "radius_space",
    "cases",
    "summary",
)
# Keys certificates gained later: written always, read where present (older files lack them).
LATER_KEYS = ("parent",)
# Keys written only where the repair measured them (Cert 4: where it was given traffic).
MEASURED_KEYS = ("traffic",)
# Settings certificates gained later (read as their defaults where missing).
LATER_SETTINGS = ("neighbours", "restore_regressions", "keep_margin")


# -- the parts ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ModelRecord(Record):
    """Which model was repaired, where, and the hashes that say what changed."""

    source: str | None
    # The Hub model ``source`` is a snapshot of: its id, the revision asked for and the commit read.
    # Left out for a local folder (and read as None from certificates written before they were kept).
    hub_id: str | None = field(default=None, metadata=on_disk(since=True, omit_none=True))
    hub_revision: str | None = field(default=None, metadata=on_disk(since=True, omit_none=True))
    hub_commit: str | None = field(default=None, metadata=on_disk(since=True, omit_none=True))
    model_type: str | None
    repair_layer: str
    activation: str
    classifier: str | None  # None: the final-linear form (the layer giving the logits was repaired)
    # The form repaired (it follows from ``classifier``; written for the reader) and how the head was
    # chosen: the head table, traced, named, or the final linear layer after the dense form did not
    # converge, and why. None in certificates written before they were recorded.
    form: HeadForm | None = field(default=None, metadata=on_disk(since=True))
    found_by: str | None = field(default=None, metadata=on_disk(since=True))
    max_length: int
    # Where v was computed (cpu, cuda:0): v from a GPU differs from the CPU's by ~1e-6 relative in
    # float32 (a unit of the dtype in half precision; verify.gap_tolerances). None in certificates
    # written before it was recorded.
    device: str | None = field(default=None, metadata=on_disk(since=True))
    sha256_upstream: str  # of everything upstream of v: the representations' identity
    sha256_source_frozen: str  # every parameter but the repair layer, in the input model
    # Of the saved files, filled in by write_artefact; None until then (a certificate on disk has both).
    sha256_repair_layer: str | None = field(default=None, metadata=on_disk(not_null=True))
    sha256_frozen: str | None = field(default=None, metadata=on_disk(not_null=True))
    # The kind of decision the cases' labels and gaps are of (warp_check.decisions); single label is not written.
    decision: str = field(default="single_label", metadata=on_disk(omit_default=True))
    # Its thresholds (label id → logit), where the kind decides by them and any is not 0; else not written.
    thresholds: dict[str, float] | None = field(default=None, metadata=on_disk(omit_none=True))

    def __post_init__(self) -> None:
        shape = HeadForm.FINAL_LINEAR if self.classifier is None else HeadForm.DENSE
        if (
            self.form is not None
            and self.form is not shape
            and (self.form, shape) != (HeadForm.FFN_OUTPUT, HeadForm.DENSE)
        ):
            raise FieldError("form", f"is {self.form.value!r}, which classifier {self.classifier!r} contradicts")


@dataclass(frozen=True, kw_only=True)
class ParentRecord(Record):
    """The model this one was repaired from: a link of the release chain (``verify --chain``)."""

    sha256_repair_layer: str  # the input model's repair layer
    sha256_frozen: str  # every other parameter of the input model
    certificate_sha256: str | None  # the input folder's own certificate, where it was a repaired model


@dataclass(frozen=True, kw_only=True)
class BaselineRecord(Record):
    """The model the suite's must_keep cases were judged on before the repair (the suite's baseline):
    a case it got right and the input model gets wrong was restored. ``verify --chain`` follows it
    where the input model has no certificate (a model fine-tuned elsewhere from this one)."""

    source: str  # its folder, as given
    chosen_by: str  # how it was chosen: the option that named it, or the certificate chain's first model
    sha256_repair_layer: str
    sha256_frozen: str
    certificate_sha256: str | None  # its own certificate, where it was a repaired model
    restored: tuple[str, ...]  # the ids of the cases restored against it


# One iteration of the repair loop as the certificate keeps it; the full-step fields compare the QP's
# linear promise with the true gaps at its full step (None where no step was solved).
HistoryRow = view(
    IterationRecord,
    "HistoryRow",
    (
        "iteration", "min_gap_fix", "min_gap_keep", "fix_met", "keep_met", "step_norm", "step_fraction",
        "promised_fix_shortfall", "full_step_fix_shortfall", "promised_keep_missed", "full_step_keep_missed",
        "seconds", "rank", "metric_scale",
    ),
    finite_fields=("min_gap_fix", "min_gap_keep"),
    doc="One iteration of the repair loop, as the certificate keeps it (IterationRecord's fields).",
    module=__name__,
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class GsnFtSummary(Record):
    """Whether GSN-FT fine-tuned the head before the repair, why, and what it changed."""

    applied: bool
    reason: str
    chosen_step: int
    changed: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class RepairRecord(Record):
    """How the repair went: its status, each iteration's QP, GSN κ and GSN-FT, what it left out."""

    status: RepairStatus
    converged: bool
    iterations: int
    qp_status: tuple[str, ...]
    qp_form: tuple[str, ...]
    qp_backend: tuple[str, ...]
    history: tuple[HistoryRow, ...]
    gsn_kappa_before: float | None
    gsn_kappa_after: float | None
    gsn_ft: GsnFtSummary
    excluded_must_keep: tuple[str, ...]
    seconds: float

    @classmethod
    def of(cls, result: RepairResult) -> RepairRecord:
        rows = result.iterations
        return cls(
            status=result.status,
            converged=result.repaired,
            iterations=len(rows),
            qp_status=tuple(r.qp_status.value for r in rows),
            qp_form=tuple(r.qp_form.value for r in rows),
            qp_backend=tuple(str(r.qp_backend) for r in rows),
            history=tuple(HistoryRow.of(r) for r in rows),
            gsn_kappa_before=finite(result.mean_kappa_before),
            gsn_kappa_after=finite(result.mean_kappa_after),
            gsn_ft=GsnFtSummary(
                applied=result.gsn_ft.applied,
                reason=result.gsn_ft.reason,
                chosen_step=result.gsn_ft.chosen_step,
                changed=("repair_layer.bias", "classifier") if result.gsn_ft.applied else (),
            ),
            excluded_must_keep=tuple(result.excluded_keep),
            seconds=result.seconds,
        )


@dataclass(frozen=True, kw_only=True)
class Lipschitz(Record):
    """L = ‖W̃‖₂ ‖W_c‖₂ L_σ (paper eq. 14)."""

    L: float
    norm_W: float
    norm_Wc: float
    L_sigma: float


@dataclass(frozen=True, kw_only=True)
class FurtherClaim(Record):
    """A certificate's verdict on one case beyond Cert 1–3 (one registered in
    :data:`warp_check.certificates.CERTIFICATES`), as the file keeps it: its name, whether it holds
    (None: not claimed for the case), and its figures by name."""

    name: str
    holds: bool | None
    figures: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class CaseCertificate:
    """Cert 1–3 of one case, recomputed from the repaired weights."""

    id: str
    kind: Kind
    label: int | tuple[int, ...]  # the case's answer as its kind of decision states it (single label: a class id)
    gap_before: float
    gap_after: float
    # The gap in the saved model's own arithmetic (its dtype); Cert 1 and 2 need both. None in
    # certificates written before it was recorded.
    gap_as_saved: float | None = field(default=None, metadata=on_disk(since=True))
    cert1: bool | None = None  # must_fix: gap ≥ γ_s
    cert2: bool | None = None  # must_keep: gap ≥ its bar (γ_h, or keep_bar) and label unchanged
    # must_keep under keep_margin = "own": the gap Cert 2 holds it to (min(γ_h, its gap before), not
    # below KEEP_FLOOR); not written under the default (γ_h for every case).
    keep_bar: float | None = field(default=None, metadata=on_disk(since=True, omit_none=True))
    cert3: bool | None = None  # must_fix: ε* > 0 and no flip found inside the certified ball
    eps_star: float | None = None
    eps_local: float | None = None
    attack_min_gap: float | None = None  # smallest gap PGD found inside the certified ball
    flip_radius: float | None = None  # smallest flipping radius the min-norm attack found
    excluded: bool = False  # must_keep case the original model got wrong: not constrained
    # must_keep case the original model got wrong and the baseline right: repaired back, certified as a
    # must_fix case is (Cert 1 and 3).
    restored: bool = field(default=False, metadata=on_disk(since=True))
    # The further certificates' verdicts on the case; not written where there are none.
    further: tuple[FurtherClaim, ...] = field(default=(), metadata=on_disk(omit_default=True))

    def claim(self, name: str) -> FurtherClaim | None:
        """The further certificate ``name``'s verdict on the case, where it gave one."""
        return next((c for c in self.further if c.name == name), None)

    @property
    def held_gap(self) -> float:
        """The gap Cert 1 and 2 judge: the smaller of float64's and the saved model's own."""
        return self.gap_after if self.gap_as_saved is None else min(self.gap_after, self.gap_as_saved)

    @property
    def certified_radius(self) -> float | None:
        if self.eps_star is None:
            return None
        return max(self.eps_star, self.eps_local or 0.0)


@dataclass(frozen=True, kw_only=True)
class CaseRecord(CaseCertificate, Record):
    """A case as the certificate records it: its certificate (radii finite or None) and its texts."""

    text: str
    text_pair: str | None = None
    source: str | None = field(default=None, metadata=on_disk(since=True))  # "neighbour": a perturbed copy

    # The file shows the case (id to texts) before its numbers.
    JSON_FIELDS: ClassVar[tuple[str, ...]] = (
        "id", "kind", "label", "text", "text_pair", "source", "gap_before", "gap_after", "gap_as_saved", "cert1",
        "cert2", "keep_bar", "cert3", "eps_star", "eps_local", "attack_min_gap", "flip_radius", "excluded", "restored",
        "further",
    )  # fmt: skip

    def __post_init__(self) -> None:
        if isinstance(self.label, list):  # a kind's answer of several class ids, as JSON holds it
            object.__setattr__(self, "label", tuple(tuple(a) if isinstance(a, list) else a for a in self.label))
        if isinstance(self.label, bool) or not isinstance(self.label, (int, tuple)):
            raise FieldError("label", "is missing or not an integer (or a list of them)")
        self.case()  # a case the encoder can run: an id, a text, a class id

    @classmethod
    def of(cls, record: CaseCertificate, case: Case) -> CaseRecord:
        radii = ("eps_star", "eps_local", "attack_min_gap", "flip_radius")
        values = {f.name: getattr(record, f.name) for f in dataclasses.fields(CaseCertificate)}
        texts = {"text": case.text, "text_pair": case.text_pair, "source": case.source}
        return cls(**values | {r: finite(values[r]) for r in radii} | texts)

    def case(self) -> Case:
        return Case(
            id=self.id, text=self.text, text_pair=self.text_pair, label=self.label, kind=self.kind, source=self.source
        )


@dataclass(frozen=True, kw_only=True)
class Summary(Record):
    """Cert 1/2/3 as 'held/total' over the cases that claim each."""

    cert1: str
    cert2: str
    cert3: str
    # The further certificates', by name; not written where there are none.
    further: dict[str, str] | None = field(default=None, metadata=on_disk(omit_none=True))

    @classmethod
    def of(cls, records: Sequence[CaseCertificate]) -> Summary:
        def count(values: list[bool]) -> str:
            return f"{sum(values)}/{len(values)}"

        def held(name: str) -> list[bool]:
            return [getattr(r, name) for r in records if getattr(r, name) is not None]

        names = list(dict.fromkeys(c.name for r in records for c in r.further))
        further = {
            name: count([c.holds for r in records if (c := r.claim(name)) is not None and c.holds is not None])
            for name in names
        }
        return cls(
            cert1=count(held("cert1")), cert2=count(held("cert2")), cert3=count(held("cert3")), further=further or None
        )

    def __str__(self) -> str:
        further = "".join(f", {name} {count}" for name, count in (self.further or {}).items())
        return f"Cert 1 {self.cert1}, Cert 2 {self.cert2}, Cert 3 {self.cert3}{further}"


@dataclass(frozen=True, kw_only=True)
class TrafficChange(Record):
    """One text of the traffic sample whose predicted label the repair changed."""

    index: int  # its place among the texts measured (the sample's bound part, in key order)
    text: str
    text_pair: str | None = None
    before: int  # the class the input model predicted
    after: int  # the class the repaired model predicts


@dataclass(frozen=True, kw_only=True)
class TrafficRecord(Record):
    """Cert 4: how many predictions the repair changed on a sample of unlabelled traffic, and the
    exact (Clopper–Pearson) upper bound on the share it changes of traffic like it.

    ``n`` texts measured (the sample's bound part, less those the model sees as no text); ``changed``
    of them predicted otherwise by the repaired model; ``bound`` the upper bound on the change rate
    at ``confidence``. ``predicted_before`` is the input model's class of each measured text, in
    sample order: an audit recomputes the repaired model's and counts again."""

    source: str  # the traffic file's name
    sample_sha256: str  # the sample's digest (warp_check.certificates.traffic.sample): an audit must measure the same
    n: int
    changed: int
    bound: float
    confidence: float
    max_change: float | None = None  # the budget the bound was held to (None: none)
    by_pair: dict[str, int]  # changes per "before→after" label names
    no_text: int = 0  # texts of the sample the model sees as no text (nothing but special tokens): not measured
    predicted_before: tuple[int, ...]
    changes: tuple[TrafficChange, ...]
    seconds: float  # what measuring took
    # A token classifier's traffic: n, changed and bound are sentences (any word's tag changed), these
    # the words measured and those whose tag changed (warp_check.certificates.traffic.sentences).
    words: int | None = field(default=None, metadata=on_disk(omit_none=True))
    words_changed: int | None = field(default=None, metadata=on_disk(omit_none=True))

    @property
    def within_budget(self) -> bool:
        return self.max_change is None or self.bound <= self.max_change

    def sentence(self) -> str:
        return change_sentence(self.bound, self.changed, self.n, self.confidence, words=self.word_counts)

    @property
    def word_counts(self) -> tuple[int, int] | None:
        """(words changed, words measured) of a token classifier's traffic; None for whole texts."""
        return None if self.words is None else (self.words_changed or 0, self.words)


def change_sentence(
    bound: float, changed: int, n: int, confidence: float, *, words: tuple[int, int] | None = None
) -> str:
    """'changes at most 1.9 % of predictions on traffic like this (3 of 412, 95 %)'; per word (``words``:
    changed, measured), the share bounded is of sentences with any word's tag changed."""
    if words is not None:
        return (
            f"changes a word's tag in at most {percent(bound)} of sentences on traffic like this ({changed} of {n} "
            f"sentences, {percent(confidence, digits=3)}; {words[0]:,} of {words[1]:,} words' tags changed)"
        )
    return (
        f"changes at most {percent(bound)} of predictions on traffic like this "
        f"({changed} of {n}, {percent(confidence, digits=3)})"
    )


def percent(share: float, *, digits: int = 2) -> str:
    """A share as a percentage, to ``digits`` significant digits: 0.0187 → '1.9 %' (1.0 → '100 %', not '1e+02 %')."""
    shown = f"{100 * share:.{digits}g}"
    return f"{100 * share:.0f} %" if "e+" in shown else f"{shown} %"


# -- the certificate ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Certificate(Record):
    """Everything a repair claims, in the order the file shows it."""

    created: str  # ISO 8601, UTC, seconds
    warp_check_version: str
    model: ModelRecord
    settings: RepairSettings = field(metadata=on_disk(write=RepairSettings.to_dict, read=lambda r: _settings(r)))
    repair: RepairRecord
    lipschitz: Lipschitz
    radius_space: str  # the radii are in the space of v, not of texts: says which layer's input
    cases: tuple[CaseRecord, ...]
    summary: Summary
    # None in certificates written before the chain was recorded.
    parent: ParentRecord | None = field(default=None, metadata=on_disk(since=True))
    # Cert 4, where the repair was given traffic; not written otherwise (older certificates lack it).
    traffic: TrafficRecord | None = field(default=None, metadata=on_disk(omit_none=True))
    # The suite's baseline where the repair restored regressions against one (None: none was known).
    baseline: BaselineRecord | None = field(default=None, metadata=on_disk(since=True, omit_none=True))

    @staticmethod
    def now() -> str:
        return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

    def with_hashes(self, repair_layer: str, frozen: str) -> Certificate:
        """This certificate with the hashes of the files it was saved beside."""
        model = dataclasses.replace(self.model, sha256_repair_layer=repair_layer, sha256_frozen=frozen)
        return dataclasses.replace(self, model=model)

    # Its own pair for the one key that is not a field: the format, written first and checked first.
    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT} | super().to_json()

    @classmethod
    def from_json(cls, data: Any, *, path: str | Path) -> Certificate:
        """Check every key of ``data`` (a parsed certificate file); errors name ``path`` and the key."""
        path = Path(path)
        if not isinstance(data, dict):
            raise CertificateError(f"{path}: a certificate is a JSON object, got {type(data).__name__}")
        missing = [key for key in TOP_LEVEL_KEYS if key not in data]
        if missing:
            raise CertificateError(f"{path}: missing key(s) {', '.join(missing)}")
        if data["format"] != FORMAT:
            raise CertificateError(f"{path}: format {data['format']!r} is not {FORMAT!r}")
        return Reader(data, "", path, CertificateError).record(cls)

    @classmethod
    def read(cls, path: str | Path) -> Certificate:
        return cls.from_json(read_json(path), path=path)

    def write(self, path: str | Path) -> Path:
        """Write the certificate to ``path`` atomically; a value JSON cannot hold is an error."""
        return write_text_atomically(path, json.dumps(self.to_json(), indent=2, allow_nan=False) + "\n")


def read_json(path: str | Path) -> Any:
    """The parsed JSON of a certificate file, read within bounds (:mod:`warp_check.json_bounded`): a
    missing, unreadable, oversized, too deeply nested file or a number no certificate holds is a
    CertificateError naming the file."""
    return bounded_json(path, error=CertificateError, what="certificate")


def _settings(data: _Object) -> RepairSettings:
    data.exactly(RepairSettings, since=LATER_SETTINGS)
    written = data.object("solver")
    # Every flat key a certificate holds, and nothing else: no default stands in for a missing setting.
    missing = [key for key in FLAT_KEYS if key not in written.data]
    unknown = [key for key in written.data if key not in SolverSettings.keys()]
    if missing or unknown:
        raise written.fail(missing[0], "is missing") if missing else written.fail(unknown[0], "is not a setting")
    try:
        solver = SolverSettings.from_json(written.data)
    except SettingsError as exc:
        raise CertificateError(f"{data.path}: {written._key(str(exc))}") from None
    # A certificate written before neighbourhoods existed: its repair drew none.
    neighbours = NeighbourSettings.off()
    if "neighbours" in data.data:
        neighbours = data.object("neighbours").settings(NeighbourSettings)
    # Written without keep_margin: before it was a setting, or under gamma_h (to_dict leaves it out then).
    keep = {} if "keep_margin" in data.data else {"keep_margin": KeepMargin.GAMMA_H}
    return data.settings(RepairSettings, since=LATER_SETTINGS, solver=solver, neighbours=neighbours, **keep)


__all__ = [
    "CERTIFICATE_NAME",
    "FORMAT",
    "BaselineRecord",
    "CaseCertificate",
    "CaseRecord",
    "Certificate",
    "FurtherClaim",
    "GsnFtSummary",
    "HistoryRow",
    "ParentRecord",
    "Lipschitz",
    "ModelRecord",
    "RepairRecord",
    "Summary",
    "TrafficChange",
    "change_sentence",
    "TrafficRecord",
    "percent",
]
