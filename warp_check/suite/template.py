"""The ``warp.toml`` that ``warp-check init`` writes: every table a suite reads, each key with its
default and a line on what it does.

The keys and their defaults are not written here: they are the fields of the settings records the
loader builds from each table (``ModelSettings``, ``RaySettings``, ``RepairSettings``,
``SolverSettings`` and each registered QP backend's record, ``NeighbourSettings``,
``TrafficSettings``). What this module adds is the words: a note per key (:data:`TABLES`), and for a
key whose default has no TOML form (None) the value shown commented out. A field a record gains
without a note here is still written, and the tests refuse it, so the file init writes and the
reference page (docs/reference/warp-toml.md, rendered from this module) say what every key does.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from warp_check.certificates.traffic.settings import TrafficSettings
from warp_check.decisions import SINGLE_LABEL
from warp_check.model.engines.settings import EngineSettings, RaySettings
from warp_check.qp import registry
from warp_check.qp.settings import SolverSettings
from warp_check.repair.settings import NeighbourSettings, RepairSettings
from warp_check.suite.model_source import ModelSettings

NOTE_COLUMN = 34  # where a key's note starts, so that the notes read as a column
_MISSING = object()


@dataclass(frozen=True, kw_only=True)
class Table:
    """One table of warp.toml as init writes it: ``record``'s fields are its keys, their defaults
    its values. ``notes``: a line on each key. ``shown``: what a key whose default is None (no TOML
    value) shows, commented out. ``spelt``: how the table spells a default of no TOML form that it
    reads (``keep_cases = "all"`` for None). ``elsewhere``: fields that are tables of their own or
    written by the caller. ``optional``: keys written commented out even with a value. ``out``:
    the whole table commented out (it needs a value no default gives: traffic's file)."""

    name: str
    note: str
    record: type
    notes: Mapping[str, str]
    shown: Mapping[str, Any] = field(default_factory=dict)
    spelt: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    elsewhere: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    out: bool = False

    def keys(self) -> tuple[str, ...]:
        """The keys the table writes, in the record's order."""
        return tuple(f.name for f in dataclasses.fields(self.record) if f.name not in self.elsewhere)

    def lines(self, given: Mapping[str, Any] | None = None, *, notes: Mapping[str, str] | None = None) -> list[str]:
        """The table's lines: ``given`` values (the model's source) set, the other keys at their
        defaults; ``notes`` in place of the table's own for some keys."""
        given, notes = given or {}, {**self.notes, **(notes or {})}
        lines = [noted_line(f"{'# ' if self.out else ''}[{self.name}]", self.note)]
        defaults = {f.name: _default(f) for f in dataclasses.fields(self.record)}
        for key in self.keys():
            value, commented = given.get(key, _MISSING), self.out or key in self.optional
            if value is _MISSING:
                value = defaults[key]
                if key in self.spelt:
                    value = self.spelt[key](value)
            else:
                commented = self.out
            if value is None or value is _MISSING or value == ():  # no value to write: one shown, commented out
                value, commented = self.shown.get(key), True
            lines.append(_key_line(key, value, notes.get(key, ""), commented=commented))
        return lines


def toml_value(value: Any) -> str:
    """``value`` as TOML writes it: strings as JSON escapes them (TOML's escapes), floats as Python
    writes them (1e-07 as 1e-7), enums as their value, a mapping as an inline table."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return re.sub(r"e([+-])0*(\d)", lambda m: f"e{'-' if m[1] == '-' else ''}{m[2]}", repr(value))
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{key} = {toml_value(one)}" for key, one in value.items()) + " }"
    raise TypeError(f"{value!r} has no TOML form here")


def _default(one: dataclasses.Field[Any]) -> Any:
    if one.default is not dataclasses.MISSING:
        return one.default
    if one.default_factory is not dataclasses.MISSING:
        return one.default_factory()
    return _MISSING


def _key_line(key: str, value: Any, note: str, *, commented: bool) -> str:
    line = f"{'# ' if commented else ''}{key} = {toml_value(value)}"
    return noted_line(line, note)


def noted_line(line: str, note: str) -> str:
    """``line`` with ``note`` as its comment, in the notes' column where the line leaves room."""
    if not note:
        return line
    return f"{line.ljust(NOTE_COLUMN - 2)}  # {note}" if len(line) < NOTE_COLUMN - 2 else f"{line}  # {note}"


MODEL = Table(
    name="model",
    note="the classifier tested, and how it is read (ModelSettings)",
    record=ModelSettings,
    notes={
        "path": "a local Hugging Face folder (relative: to this file's folder)…",
        "factory": "…or a function (file beside warp.toml) returning such a folder…",
        "id": "…or a Hub model, read from the local Hugging Face cache (never downloaded),",
        "revision": "pinned to a commit (40 hex digits)",
        "allow_moving_revision": "true: a branch or tag as model.id's revision (it moves under the gate)",
        "layer": '"auto": found; or [repair layer, σ, head] by name; "final": the final linear layer',
        "max_length": "tokens a text is cut to",
        "batch_size": "cases per encoder batch",
        "device": "where the encoder runs: auto (CUDA when torch sees it), cpu, cuda, cuda:N",
        "threads": "torch CPU threads while encoding (default: the cores, shared by xdist's workers)",
        "engine": '"local": the encoder runs in this process; "ray": on Ray workers ([model.ray])',
        "decision": "the kind of decision (default: the one the model's config names)",
        "thresholds": "multi_label: per label, the probability above which it is on",
    },
    shown={
        "path": "../models/sentiment",
        "factory": "models.py:build",
        "id": "org/name",
        "revision": "<40-hex commit>",
        "threads": 4,
        "decision": SINGLE_LABEL.name,
        "thresholds": {"toxic": 0.5},
    },
    spelt={"engine": lambda engine: engine.kind.value if isinstance(engine, EngineSettings) else engine},
    optional=("path", "factory", "id", "revision", "allow_moving_revision", "thresholds"),
)

RAY = Table(
    name="model.ray",
    note='the Ray cluster, where engine = "ray" (RaySettings)',
    record=RaySettings,
    notes={
        "address": "default: a local Ray on this machine's cores; or a cluster's (ray://host:10001)",
        "num_workers": "default: as many as the cluster's CPUs (or GPUs) hold",
        "num_cpus": "per worker; its torch threads",
        "num_gpus": "per worker; > 0 runs its encoder on its GPU",
        "batch_size": "cases per forward batch on a worker (default: [model] batch_size)",
        "max_restarts": "a worker that dies is restarted, and its batch retried, this many times",
    },
    shown={"address": "auto", "num_workers": 4, "batch_size": 64},
)

REPAIR = Table(
    name="repair",
    note="the repair's settings (RepairSettings); the defaults",
    record=RepairSettings,
    elsewhere=("solver", "neighbours"),
    notes={
        "rank": "the paper's r, where the loop starts",
        "max_rank": "it grows ×4 up to this when an iteration stalls (= rank: fixed)",
        "gamma_s": "must_fix margin γ_s",
        "gamma_h": "must_keep margin γ_h",
        "keep_margin": '"own": a right case below γ_h keeps its own gap; "gamma_h": lifted to γ_h',
        "lam": "λ, the price of a must_fix case's slack",
        "rho": "ρ, the price of the step",
        "mu": "price of moving the layer's output on the must_keep cases (0: the paper's)",
        "price_growth": "a must_fix case a full step leaves short: its slack this much dearer (1: λ fixed)",
        "trust_region": "true: re-solve a step the true gaps do not follow at a higher price",
        "max_iter": "the paper's T: iterations of the loop at most",
        "aim_above": "the QP aims this far above each margin, so the saved weights meet it",
        "gsn_threshold": "GSN fine-tuning first where the must_fix cases' mean κ is below this",
        "gsn_ft_steps": "... its steps",
        "gsn_ft_lr": "... its learning rate",
        "gsn_ft_batch_size": "... its batch",
        "backtracking": "halvings of a QP step that would raise the merit",
        "patience": "stop when the total shortfall has not improved for this many iterations",
        "seed": "seed of the repair's random draws",
        "blas_threads": "BLAS threads inside the loop",
        "restore_regressions": "must_keep cases the baseline got right and the model not: repaired back",
        "resident_keep": "must_keep cases the loop holds in float64; past it, those at risk",
        "screen_margin": "... at risk: gap below γ_h + this",
    },
    shown={"blas_threads": 1},
)

SOLVER = Table(
    name="repair.solver",
    note="the QP settings every backend shares (SolverSettings)",
    record=SolverSettings,
    elsewhere=("backend_settings",),
    notes={
        "form": '"auto", "primal" or "dual": the QP over β or over its rows',
        "time_limit_s": "per QP; a backstop, not a tuning knob",
        "working_set": "must_keep rows join the QP only when its answer violates them",
        "working_set_rounds": "... rounds of adding rows at most",
        "working_set_window": "... a row this close to its bound starts in the set",
        "working_set_batch": "... rows added a round, most violated first",
        "backend": "auto, or a registered backend: " + " | ".join(b.name for b in registry.registered()),
        "newton_min_rows": "auto: OSQP below this many rows",
    },
)

# Each built-in backend's own table, [repair.solver.<name>] (a backend registered later gets its table
# with its record's defaults, without notes).
BACKEND_NOTES: Mapping[str, Mapping[str, str]] = {
    "osqp": {
        "eps_abs": "absolute tolerance",
        "eps_rel": "relative tolerance",
        "eps_infeasible": "both of OSQP's infeasibility tests",
        "max_iter": "ADMM iterations a QP",
        "polishing": "polish the answer on its active rows",
        "polish_refine_iter": "... refinement steps of the polish",
        "scaling": "scaling iterations",
        "sigma": "OSQP's σ",
    },
    "ipm": {
        "max_unknowns": "only while β has at most this many unknowns (rank × the layer's input)",
        "tolerance": "relative residuals",
        "max_iter": "iterations a QP",
    },
    "alm": {
        "tolerance": "every row's optimality condition, relative to 1 + max |h|",
        "max_iter": "Newton steps over all rounds of one QP",
    },
    "active_set": {
        "tolerance": "every row's optimality condition, relative to 1 + max |h|",
        "max_iter": "iterations a QP",
    },
}


def backend_tables() -> tuple[Table, ...]:
    """The table of each registered QP backend's own settings, in registration order."""
    return tuple(
        Table(
            name=f"repair.solver.{backend.name}",
            note=f"the {backend.name} backend's own settings",
            record=backend.settings,
            notes=BACKEND_NOTES.get(backend.name, {}),
        )
        for backend in registry.registered()
    )


NEIGHBOURS = Table(
    name="repair.neighbours",
    note="perturbed copies the model gets wrong, repaired too (NeighbourSettings)",
    record=NeighbourSettings,
    notes={
        "per_case": "perturbations drawn per must_fix case: 0 and 0 is off (on: 8 and 16)",
        "keep_per_case": "... per perturbed must_keep case",
        "keep_cases": 'must_keep cases perturbed: those nearest the boundary ("all": every one)',
        "keep_choice": '"nearest", or "random": a seeded sample',
        "synonyms": '"auto": WordNet synonyms where nltk and its data are installed; true, false',
        "max_edits": "edits per perturbation",
        "seed": "seed of the draws",
    },
    spelt={"keep_cases": lambda n: "all" if n is None else n, "synonyms": lambda s: "auto" if s is None else s},
)

TRAFFIC = Table(
    name="traffic",
    note="unlabelled text like the model's traffic (Cert 4; TrafficSettings)",
    record=TrafficSettings,
    out=True,
    notes={
        "path": "any format `warp-check import` reads (CSV, TSV, JSONL, Parquet, AdvGLUE dev.json)",
        "format": "where the file's name does not say it",
        "text": "its text column",
        "text_pair": "... and its second text, for pairs",
        "task": "AdvGLUE's dev.json: which task",
        "max_change": 'at most this share of its predictions a repair may change ("1%" or 0.01)',
        "confidence": "of the bound on that share",
    },
    shown={"path": "traffic.jsonl", "format": "csv", "text_pair": "text_b", "task": "sst2", "max_change": "1%"},
)

TOP_NOTES: Mapping[str, str] = {
    "name": "default: the folder's name",
    "description": "what the suite is for",
}


def tables() -> tuple[Table, ...]:
    """Every settings table init writes, in the file's order (labels and cases come between model and repair)."""
    return (MODEL, RAY, REPAIR, SOLVER, *backend_tables(), NEIGHBOURS, TRAFFIC)


__all__ = [
    "BACKEND_NOTES",
    "NOTE_COLUMN",
    "TOP_NOTES",
    "Table",
    "backend_tables",
    "noted_line",
    "tables",
    "toml_value",
]
