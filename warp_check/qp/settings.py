"""The QP solver's settings: the ones every backend shares here, each backend's own in its record
(warp_check.qp.backends), every tolerance and limit spelled out (no solver default is trusted).

On disk (``[repair.solver]`` in warp.toml, ``"solver"`` in a certificate) a backend's settings are
a table under its name, ``[repair.solver.ipm]`` ``tolerance = 1e-6``, or the flat keys every
certificate holds and older suites wrote, ``ipm_tolerance = 1e-6`` (:data:`FLAT_KEYS`);
:meth:`SolverSettings.to_json` and :meth:`SolverSettings.from_json` are that form's one pair.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from warp_check.errors import SettingsError
from warp_check.qp import backends as _built_in  # noqa: F401  (the built-in backends register themselves)
from warp_check.qp import registry
from warp_check.qp.registry import FORM_WORDS
from warp_check.validation import require_integer, require_number

T = TypeVar("T")

# The flat keys of [repair.solver] and a certificate's "solver", in the order certificates write
# them: key → (the backend whose setting it is, None for a shared one; the field it sets).
FLAT_KEYS: dict[str, tuple[str | None, str]] = {
    "form": (None, "form"),
    "eps_abs": ("osqp", "eps_abs"),
    "eps_rel": ("osqp", "eps_rel"),
    "eps_infeasible": ("osqp", "eps_infeasible"),
    "max_iter": ("osqp", "max_iter"),
    "time_limit_s": (None, "time_limit_s"),
    "polishing": ("osqp", "polishing"),
    "polish_refine_iter": ("osqp", "polish_refine_iter"),
    "scaling": ("osqp", "scaling"),
    "sigma": ("osqp", "sigma"),
    "working_set": (None, "working_set"),
    "working_set_rounds": (None, "working_set_rounds"),
    "working_set_window": (None, "working_set_window"),
    "working_set_batch": (None, "working_set_batch"),
    "backend": (None, "backend"),
    "ipm_min_rows": (None, "newton_min_rows"),
    "ipm_max_unknowns": ("ipm", "max_unknowns"),
    "ipm_tolerance": ("ipm", "tolerance"),
    "ipm_max_iter": ("ipm", "max_iter"),
    "active_set_tolerance": ("active_set", "tolerance"),
    "active_set_max_iter": ("active_set", "max_iter"),
    "alm_tolerance": ("alm", "tolerance"),
    "alm_max_iter": ("alm", "max_iter"),
}


@dataclass(frozen=True, kw_only=True)
class SolverSettings:
    """QP solver settings, all spelled out (OSQP's defaults, eps 1e-3, are far too loose here)."""

    form: str = "auto"  # "auto" | "primal" | "dual"
    time_limit_s: float = 600.0  # per solve; a backstop, not a tuning knob
    # Lazy must_keep constraints (cutting planes): solve with the must_fix rows and the
    # must_keep rows that are violated or near-active now, add every row the solution
    # violates, repeat. The final answer is the optimum of the full problem; most must_keep
    # rows never enter. The window is in the units of the rows (gap units in the loop): a
    # hard row whose bound is within it of being violated at β = 0 starts in the set.
    working_set: bool = True
    working_set_rounds: int = 50
    working_set_window: float = 0.05
    # Rows added per round, most violated first. Adding every violated row at once grows the
    # set with rows that later rows make slack, and a dense QP's cost grows as rows³ (10k
    # must_keep, first QP: 8.5 s at 300 a round, 24 s with every violated row at once).
    working_set_batch: int = 300
    # Which solver, by its registered name (warp_check.qp.registry). "auto": OSQP below
    # ``newton_min_rows`` rows; from there the β-space interior point while β is small, else the
    # augmented Lagrangian. OSQP factors the working set's dense dual without BLAS: on real SST-2
    # repairs (MiniLM, d_in 384, 1 BLAS thread) the whole loop took 2.4 s against 0.9 s at 2,000
    # must_keep rows (ReLU head) and 8.1 s against 1.3 s (tanh head); at 500, 0.3–0.5 s against 0.6–0.7 s.
    backend: str = "auto"
    newton_min_rows: int = 1_000  # ``ipm_min_rows`` in the flat form
    # Each backend's own settings record where it differs from its defaults (SolverSettings.of reads
    # one); kept in registration order, defaults dropped, so equal settings compare equal.
    backend_settings: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if self.form not in ("auto", *FORM_WORDS):
            raise SettingsError("form", self.form, "must be 'auto', 'primal' or 'dual'")
        if self.backend != "auto":
            named = registry.backend(self.backend)
            if self.form != "auto" and self.form not in named.forms:
                own = named.forms[0]
                why = f"the '{named.name}' backend solves {FORM_WORDS[own]}: use form 'auto' or '{own}'"
                raise SettingsError("form", self.form, why)
        for name in ("working_set_rounds", "working_set_batch", "newton_min_rows"):
            require_integer(name, getattr(self, name), 1)
        require_number("time_limit_s", self.time_limit_s)
        require_number("working_set_window", self.working_set_window, allow_zero=True)
        object.__setattr__(self, "backend_settings", _canonical(self.backend_settings))

    def of(self, settings_type: type[T]) -> T:
        """The settings of the backend whose record is ``settings_type`` (its defaults unless given)."""
        return next((s for s in self.backend_settings if type(s) is settings_type), None) or settings_type()

    def to_json(self) -> dict[str, object]:
        """The on-disk form: the flat keys (FLAT_KEYS, in its order), then each registered backend
        outside that table as an object under its name."""
        values: dict[str, object] = {}
        for key, (name, field) in FLAT_KEYS.items():
            values[key] = getattr(self if name is None else self.of(registry.backend(name).settings), field)
        flat = {name for name, _ in FLAT_KEYS.values()}
        for backend in registry.registered():
            if backend.name not in flat:
                values[backend.name] = dataclasses.asdict(self.of(backend.settings))
        return values

    @classmethod
    def from_json(cls, values: Mapping[str, Any]) -> SolverSettings:
        """Settings from their on-disk form: a shared setting, a flat key (``ipm_tolerance``) or a
        backend's name holding a table of its settings (``ipm = {tolerance = 1e-6}``). A SettingsError
        names the key as written (``ipm_tolerance``, ``ipm.tolerance``)."""
        shared: dict[str, Any] = {}
        own: dict[str, dict[str, Any]] = {}  # backend → its fields
        written: dict[tuple[str, str], str] = {}  # (backend, "" for shared; field) → the key that set it

        def put(name: str, field: str, value: Any, key: str) -> None:
            if (name, field) in written:
                raise SettingsError(key, value, f"'{written[name, field]}' sets it already")
            if name:
                own.setdefault(name, {})[field] = value
            else:
                shared[field] = value
            written[name, field] = key

        for key, value in values.items():
            if key in FLAT_KEYS:
                name, field = FLAT_KEYS[key]
                put(name or "", field, value, key)
            elif key in SHARED:
                put("", key, value, key)
            elif key in {b.name for b in registry.registered()}:
                if not isinstance(value, Mapping):
                    raise SettingsError(key, value, f"must be a table of the '{key}' backend's settings")
                for field, one in value.items():
                    put(key, field, one, f"{key}.{field}")
            else:
                raise SettingsError(key, value, "is not a solver setting")
        records = []
        for name, fields in own.items():
            settings_type = registry.backend(name).settings
            names = {f.name for f in dataclasses.fields(settings_type)}
            for field, value in fields.items():
                if field not in names:
                    raise SettingsError(written[name, field], value, f"is not a setting of the '{name}' backend")
            try:
                records.append(settings_type(**fields))
            except SettingsError as exc:
                raise SettingsError(written.get((name, exc.field), exc.field), exc.value, exc.why) from None
        try:
            return cls(**shared, backend_settings=tuple(records))
        except SettingsError as exc:
            raise SettingsError(written.get(("", exc.field), exc.field), exc.value, exc.why) from None

    @staticmethod
    def keys() -> tuple[str, ...]:
        """Every key [repair.solver] takes: the flat ones, the shared settings named otherwise, and
        each backend's name (a table of its settings)."""
        return (*FLAT_KEYS, *(k for k in SHARED if k not in FLAT_KEYS), *(b.name for b in registry.registered()))

    @staticmethod
    def key_type(key: str) -> type | str:
        """What a [repair.solver] key holds: a backend's settings record for its name, else its field's type."""
        name, field = FLAT_KEYS.get(key, (None, key))
        if name is None and key not in SHARED:
            return registry.backend(key).settings
        owner = SolverSettings if name is None else registry.backend(name).settings
        return next(str(f.type) for f in dataclasses.fields(owner) if f.name == field)


# The shared settings as a key names them (each backend's record is under its own name).
SHARED = tuple(f.name for f in dataclasses.fields(SolverSettings) if f.name != "backend_settings")


def _canonical(given: Any) -> tuple[Any, ...]:
    """``backend_settings`` checked (registered records, one each) in registration order, defaults dropped."""
    if not isinstance(given, tuple):
        raise SettingsError("backend_settings", given, "must be a tuple of backends' settings records")
    order = {b.settings: i for i, b in enumerate(registry.registered())}
    for record in given:
        if type(record) not in order:
            raise SettingsError("backend_settings", record, "is not the settings record of a registered backend")
    if len({type(record) for record in given}) < len(given):
        raise SettingsError("backend_settings", given, "holds one backend's settings twice")
    return tuple(sorted((r for r in given if r != type(r)()), key=lambda r: order[type(r)]))
