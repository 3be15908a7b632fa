"""``warp_certificate.json`` as one typed record: what a repair claims about the model it saved.

:class:`Certificate` is the only way the file is written (:meth:`Certificate.write`) or read
(:meth:`Certificate.read`); :meth:`Certificate.from_json` checks every key and names the file
and the key it found wrong. The JSON keeps one key order (people diff these files), and
radii and gaps that are not finite are written as null.

Standard library only: the run records (:mod:`warp_check.runs.details`) hold parts of a
certificate, and a warm check loads them without numpy.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warp_check.cases import Case, Kind
from warp_check.errors import CertificateError, SettingsError
from warp_check.files import write_text_atomically
from warp_check.model.specs import HeadForm
from warp_check.qp.settings import FLAT_KEYS, SolverSettings
from warp_check.repair.settings import NeighbourSettings, RepairSettings

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.repair.loop import IterationRecord, RepairResult, RepairStatus

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


def finite(value: float | None) -> float | None:
    """``value`` as a float, or None where there is no finite number (the file holds null)."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def _value(value: Any) -> Any:
    """IterationRecord's QP fields may be str enums: the certificate keeps their values."""
    return value.value if isinstance(value, enum.Enum) else value


# -- reading -----------------------------------------------------------------------------------


class _Object:
    """One JSON object of a certificate, read key by key; every error names the file and the key."""

    def __init__(self, data: Any, where: str, path: Path) -> None:
        if not isinstance(data, dict):
            raise CertificateError(f"{path}: {where} must be an object, got {type(data).__name__}")
        self.data = data
        self.where = where
        self.path = path

    def _key(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, key: str, what: str) -> CertificateError:
        return CertificateError(f"{self.path}: {self._key(key)} {what}")

    def _get(self, key: str, accept, what: str, *, optional: bool = False) -> Any:
        value = self.data.get(key)
        if key in self.data and ((optional and value is None) or accept(value)):
            return value
        raise self.fail(key, f"is missing or not {what}{' (or null)' if optional else ''}")

    def text(self, key: str, *, optional: bool = False) -> str:
        return self._get(key, lambda v: isinstance(v, str), "a string", optional=optional)

    def integer(self, key: str, *, optional: bool = False) -> int:
        return self._get(key, _is_integer, "an integer", optional=optional)

    def number(self, key: str, *, optional: bool = False) -> float:
        return self._get(key, lambda v: _is_integer(v) or isinstance(v, float), "a number", optional=optional)

    def flag(self, key: str, *, optional: bool = False) -> bool:
        return self._get(key, lambda v: isinstance(v, bool), "true or false", optional=optional)

    def texts(self, key: str) -> tuple[str, ...]:
        return tuple(self._get(key, _is_texts, "a list of strings"))

    def choice(self, key: str, enum_type: type[enum.Enum]) -> Any:
        value = self.text(key)
        try:
            return enum_type(value)
        except ValueError:
            known = ", ".join(repr(m.value) for m in enum_type)
            raise self.fail(key, f"is {value!r}, not one of {known}") from None

    def object(self, key: str) -> _Object:
        if key not in self.data:
            raise self.fail(key, "is missing")
        return _Object(self.data[key], self._key(key), self.path)

    def objects(self, key: str) -> list[_Object]:
        items = self.data.get(key)
        if not isinstance(items, list):
            raise self.fail(key, "must be a list")
        return [_Object(item, f"{self._key(key)}[{i}]", self.path) for i, item in enumerate(items)]

    def record(self, cls: type) -> Any:
        """A record whose fields are all plain (str, int, float, bool, optional or not)."""
        readers = {"str": self.text, "int": self.integer, "float": self.number, "bool": self.flag}
        values = {}
        for f in dataclasses.fields(cls):
            kind, _, optional = str(f.type).partition(" | ")
            values[f.name] = readers[kind](f.name, optional=optional == "None")
        return cls(**values)

    def exactly(self, cls: type, *, since: tuple[str, ...] = ()) -> None:
        """Every field of the record ``cls`` is here, and nothing else: no default stands in for a
        missing setting (but for those ``since`` names, which older certificates lack)."""
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [name for name in names if name not in self.data and name not in since]
        if missing:
            raise self.fail(missing[0], "is missing")
        unknown = [key for key in self.data if key not in names]
        if unknown:
            raise self.fail(unknown[0], "is not a setting")

    def settings(self, cls: type, *, since: tuple[str, ...] = (), **given: Any) -> Any:
        """A settings record from exactly its fields, validated by its own class."""
        self.exactly(cls, since=since)
        try:
            return cls(**self.data | given)
        except SettingsError as exc:
            raise CertificateError(f"{self.path}: {self._key(str(exc))}") from None


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _plain_json(record: Any) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}


# -- the parts ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ModelRecord:
    """Which model was repaired, where, and the hashes that say what changed."""

    source: str | None
    model_type: str | None
    repair_layer: str
    activation: str
    classifier: str | None  # None: the final-linear form (the layer giving the logits was repaired)
    # The form repaired (it follows from ``classifier``; written for the reader) and how the head was
    # chosen: the head table, traced, named, or the final linear layer after the dense form did not
    # converge, and why. None in certificates written before they were recorded.
    form: HeadForm | None = None
    found_by: str | None = None
    max_length: int
    # Where v was computed (cpu, cuda:0): v from a GPU differs from the CPU's by ~1e-6 relative in
    # float32 (a unit of the dtype in half precision; verify.gap_tolerances). None in certificates
    # written before it was recorded.
    device: str | None = None
    sha256_upstream: str  # of everything upstream of v: the representations' identity
    sha256_source_frozen: str  # every parameter but the repair layer, in the input model
    # Of the saved files, filled in by write_artefact; None until then.
    sha256_repair_layer: str | None = None
    sha256_frozen: str | None = None

    def __post_init__(self) -> None:
        shape = HeadForm.FINAL_LINEAR if self.classifier is None else HeadForm.DENSE
        if self.form is not None and self.form is not shape:
            raise CertificateError(
                f"model.form={self.form.value!r} but model.classifier={self.classifier!r} makes it {shape.value!r}"
            )

    def to_json(self) -> dict[str, Any]:
        return {key: _value(value) for key, value in _plain_json(self).items()}

    @classmethod
    def from_json(cls, data: _Object) -> ModelRecord:
        classifier = data.text("classifier", optional=True)
        form = data.choice("form", HeadForm) if "form" in data.data else None
        if form is not None and form is not (HeadForm.FINAL_LINEAR if classifier is None else HeadForm.DENSE):
            raise data.fail("form", f"is {form.value!r}, which classifier {classifier!r} contradicts")
        return cls(
            source=data.text("source", optional=True),
            model_type=data.text("model_type", optional=True),
            repair_layer=data.text("repair_layer"),
            activation=data.text("activation"),
            classifier=classifier,
            form=form,
            found_by=data.text("found_by", optional=True) if "found_by" in data.data else None,
            max_length=data.integer("max_length"),
            device=data.text("device", optional=True) if "device" in data.data else None,
            sha256_upstream=data.text("sha256_upstream"),
            sha256_source_frozen=data.text("sha256_source_frozen"),
            sha256_repair_layer=data.text("sha256_repair_layer"),  # a certificate on disk has both hashes
            sha256_frozen=data.text("sha256_frozen"),
        )


@dataclass(frozen=True, kw_only=True)
class ParentRecord:
    """The model this one was repaired from: a link of the release chain (``verify --chain``)."""

    sha256_repair_layer: str  # the input model's repair layer
    sha256_frozen: str  # every other parameter of the input model
    certificate_sha256: str | None  # the input folder's own certificate, where it was a repaired model

    def to_json(self) -> dict[str, Any]:
        return _plain_json(self)

    @classmethod
    def from_json(cls, data: _Object) -> ParentRecord:
        return cls(
            sha256_repair_layer=data.text("sha256_repair_layer"),
            sha256_frozen=data.text("sha256_frozen"),
            certificate_sha256=data.text("certificate_sha256", optional=True),
        )


@dataclass(frozen=True, kw_only=True)
class HistoryRow:
    """One iteration of the repair loop; the full-step fields compare the QP's linear promise with
    the true gaps at its full step (None where no step was solved)."""

    iteration: int
    min_gap_fix: float | None
    min_gap_keep: float | None
    fix_met: int
    keep_met: int
    step_norm: float
    step_fraction: float
    promised_fix_shortfall: float | None
    full_step_fix_shortfall: float | None
    promised_keep_missed: int | None
    full_step_keep_missed: int | None
    seconds: float
    rank: int  # of this iteration's step: the loop grows it when an iteration stalls
    metric_scale: float  # κ, the trust region's scale of the step's price, after this iteration

    @classmethod
    def of(cls, record: IterationRecord) -> HistoryRow:
        values = {f.name: getattr(record, f.name) for f in dataclasses.fields(cls)}
        return cls(**values | {"min_gap_fix": finite(record.min_gap_fix), "min_gap_keep": finite(record.min_gap_keep)})

    def to_json(self) -> dict[str, Any]:
        return _plain_json(self)


@dataclass(frozen=True, kw_only=True)
class GsnFtSummary:
    """Whether GSN-FT fine-tuned the head before the repair, why, and what it changed."""

    applied: bool
    reason: str
    chosen_step: int
    changed: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return _plain_json(self) | {"changed": list(self.changed)}

    @classmethod
    def from_json(cls, data: _Object) -> GsnFtSummary:
        return cls(
            applied=data.flag("applied"),
            reason=data.text("reason"),
            chosen_step=data.integer("chosen_step"),
            changed=data.texts("changed"),
        )


@dataclass(frozen=True, kw_only=True)
class RepairRecord:
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
            qp_status=tuple(_value(r.qp_status) for r in rows),
            qp_form=tuple(_value(r.qp_form) for r in rows),
            qp_backend=tuple(_value(r.qp_backend) for r in rows),
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

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "converged": self.converged,
            "iterations": self.iterations,
            "qp_status": list(self.qp_status),
            "qp_form": list(self.qp_form),
            "qp_backend": list(self.qp_backend),
            "history": [row.to_json() for row in self.history],
            "gsn_kappa_before": self.gsn_kappa_before,
            "gsn_kappa_after": self.gsn_kappa_after,
            "gsn_ft": self.gsn_ft.to_json(),
            "excluded_must_keep": list(self.excluded_must_keep),
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, data: _Object) -> RepairRecord:
        # The loop's module loads numpy and the solvers: only when a certificate is read.
        from warp_check.repair.loop import RepairStatus

        return cls(
            status=data.choice("status", RepairStatus),
            converged=data.flag("converged"),
            iterations=data.integer("iterations"),
            qp_status=data.texts("qp_status"),
            qp_form=data.texts("qp_form"),
            qp_backend=data.texts("qp_backend"),
            history=tuple(row.record(HistoryRow) for row in data.objects("history")),
            gsn_kappa_before=data.number("gsn_kappa_before", optional=True),
            gsn_kappa_after=data.number("gsn_kappa_after", optional=True),
            gsn_ft=GsnFtSummary.from_json(data.object("gsn_ft")),
            excluded_must_keep=data.texts("excluded_must_keep"),
            seconds=data.number("seconds"),
        )


@dataclass(frozen=True, kw_only=True)
class Lipschitz:
    """L = ‖W̃‖₂ ‖W_c‖₂ L_σ (paper eq. 14)."""

    L: float
    norm_W: float
    norm_Wc: float
    L_sigma: float

    def to_json(self) -> dict[str, Any]:
        return _plain_json(self)


@dataclass(frozen=True, kw_only=True)
class CaseCertificate:
    """Cert 1–3 of one case, recomputed from the repaired weights."""

    id: str
    kind: Kind
    label: int
    gap_before: float
    gap_after: float
    # The gap in the saved model's own arithmetic (its dtype); Cert 1 and 2 need both. None in
    # certificates written before it was recorded.
    gap_as_saved: float | None = None
    cert1: bool | None = None  # must_fix: gap ≥ γ_s
    cert2: bool | None = None  # must_keep: gap ≥ γ_h and label unchanged
    cert3: bool | None = None  # must_fix: ε* > 0 and no flip found inside the certified ball
    eps_star: float | None = None
    eps_local: float | None = None
    attack_min_gap: float | None = None  # smallest gap PGD found inside the certified ball
    flip_radius: float | None = None  # smallest flipping radius the min-norm attack found
    excluded: bool = False  # must_keep case the original model got wrong: not constrained

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
class CaseRecord(CaseCertificate):
    """A case as the certificate records it: its certificate (radii finite or None) and its texts."""

    text: str
    text_pair: str | None = None
    source: str | None = None  # "neighbour": a perturbed copy the repair drew, not a suite case

    @classmethod
    def of(cls, record: CaseCertificate, case: Case) -> CaseRecord:
        radii = ("eps_star", "eps_local", "attack_min_gap", "flip_radius")
        values = {f.name: getattr(record, f.name) for f in dataclasses.fields(CaseCertificate)}
        texts = {"text": case.text, "text_pair": case.text_pair, "source": case.source}
        return cls(**values | {r: finite(values[r]) for r in radii} | texts)

    @property
    def radius(self) -> float | None:
        """The largest radius the certificate claims (ε* or the local radius), None if it claims none."""
        return max([r for r in (self.eps_star, self.eps_local) if r is not None], default=None)

    def case(self) -> Case:
        return Case(
            id=self.id, text=self.text, text_pair=self.text_pair, label=self.label, kind=self.kind, source=self.source
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind.value,
            "label": self.label,
            "text": self.text,
            "text_pair": self.text_pair,
            "source": self.source,
            "gap_before": self.gap_before,
            "gap_after": self.gap_after,
            "gap_as_saved": self.gap_as_saved,
            "cert1": self.cert1,
            "cert2": self.cert2,
            "cert3": self.cert3,
            "eps_star": self.eps_star,
            "eps_local": self.eps_local,
            "attack_min_gap": self.attack_min_gap,
            "flip_radius": self.flip_radius,
            "excluded": self.excluded,
        }

    @classmethod
    def from_json(cls, data: _Object) -> CaseRecord:
        record = cls(
            id=data.text("id"),
            kind=data.choice("kind", Kind),
            label=data.integer("label"),
            text=data.text("text"),
            text_pair=data.text("text_pair", optional=True),
            source=data.text("source", optional=True) if "source" in data.data else None,
            gap_before=data.number("gap_before"),
            gap_after=data.number("gap_after"),
            gap_as_saved=data.number("gap_as_saved", optional=True) if "gap_as_saved" in data.data else None,
            cert1=data.flag("cert1", optional=True),
            cert2=data.flag("cert2", optional=True),
            cert3=data.flag("cert3", optional=True),
            eps_star=data.number("eps_star", optional=True),
            eps_local=data.number("eps_local", optional=True),
            attack_min_gap=data.number("attack_min_gap", optional=True),
            flip_radius=data.number("flip_radius", optional=True),
            excluded=data.flag("excluded"),
        )
        try:
            record.case()  # a case the encoder can run: an id, a text, a class id
        except ValueError as exc:
            raise CertificateError(f"{data.path}: {data.where}: {exc}") from None
        return record


@dataclass(frozen=True, kw_only=True)
class Summary:
    """Cert 1/2/3 as 'held/total' over the cases that claim each."""

    cert1: str
    cert2: str
    cert3: str

    @classmethod
    def of(cls, records: Sequence[CaseCertificate]) -> Summary:
        def count(name: str) -> str:
            values = [getattr(r, name) for r in records if getattr(r, name) is not None]
            return f"{sum(values)}/{len(values)}"

        return cls(cert1=count("cert1"), cert2=count("cert2"), cert3=count("cert3"))

    def __str__(self) -> str:
        return f"Cert 1 {self.cert1}, Cert 2 {self.cert2}, Cert 3 {self.cert3}"

    def to_json(self) -> dict[str, str]:
        return _plain_json(self)


# -- the certificate ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Certificate:
    """Everything a repair claims, in the order the file shows it."""

    created: str  # ISO 8601, UTC, seconds
    warp_check_version: str
    model: ModelRecord
    settings: RepairSettings
    repair: RepairRecord
    lipschitz: Lipschitz
    radius_space: str  # the radii are in the space of v, not of texts: says which layer's input
    cases: tuple[CaseRecord, ...]
    summary: Summary
    parent: ParentRecord | None = None  # None in certificates written before the chain was recorded

    @staticmethod
    def now() -> str:
        return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

    def with_hashes(self, repair_layer: str, frozen: str) -> Certificate:
        """This certificate with the hashes of the files it was saved beside."""
        model = dataclasses.replace(self.model, sha256_repair_layer=repair_layer, sha256_frozen=frozen)
        return dataclasses.replace(self, model=model)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "created": self.created,
            "warp_check_version": self.warp_check_version,
            "model": self.model.to_json(),
            "settings": self.settings.to_dict(),
            "repair": self.repair.to_json(),
            "lipschitz": self.lipschitz.to_json(),
            "radius_space": self.radius_space,
            "cases": [c.to_json() for c in self.cases],
            "summary": self.summary.to_json(),
            "parent": None if self.parent is None else self.parent.to_json(),
        }

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
        top = _Object(data, "", path)
        return cls(
            created=top.text("created"),
            warp_check_version=top.text("warp_check_version"),
            model=ModelRecord.from_json(top.object("model")),
            settings=_settings(top.object("settings")),
            repair=RepairRecord.from_json(top.object("repair")),
            lipschitz=top.object("lipschitz").record(Lipschitz),
            radius_space=top.text("radius_space"),
            cases=tuple(CaseRecord.from_json(case) for case in top.objects("cases")),
            summary=top.object("summary").record(Summary),
            parent=ParentRecord.from_json(top.object("parent")) if data.get("parent") is not None else None,
        )

    @classmethod
    def read(cls, path: str | Path) -> Certificate:
        return cls.from_json(read_json(path), path=path)

    def write(self, path: str | Path) -> Path:
        """Write the certificate to ``path`` atomically; a value JSON cannot hold is an error."""
        return write_text_atomically(path, json.dumps(self.to_json(), indent=2, allow_nan=False) + "\n")


def read_json(path: str | Path) -> Any:
    """The parsed JSON of a certificate file; a missing or unreadable file is a CertificateError."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise CertificateError(f"{path}: no certificate file here") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CertificateError(f"{path}: not a readable JSON certificate ({exc})") from None


def _settings(data: _Object) -> RepairSettings:
    data.exactly(RepairSettings, since=("neighbours",))
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
    return data.settings(RepairSettings, since=("neighbours",), solver=solver, neighbours=neighbours)


__all__ = [
    "CERTIFICATE_NAME",
    "FORMAT",
    "CaseCertificate",
    "CaseRecord",
    "Certificate",
    "GsnFtSummary",
    "HistoryRow",
    "ParentRecord",
    "Lipschitz",
    "ModelRecord",
    "RepairRecord",
    "Summary",
    "finite",
]
