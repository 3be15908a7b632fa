"""The QP backends, by name: each registers itself here with one call (:func:`register_backend`).

A backend is one signature, ``solve(problem, settings, warm) -> QPSolution``, with its own settings
record (held by :class:`~warp_check.qp.settings.SolverSettings`, read from ``[repair.solver.<name>]``),
its advice when it fails, the forms it can be asked for, and its place in ``auto``'s rule
(warp_check.qp.solve): the decider (the one backend registered with ``decides``: OSQP) below
``newton_min_rows`` rows, the first backend by :attr:`AutoPlace.rank` that fits from there.

The registry is the floor of warp_check.qp: it imports nothing of it. The problem, the settings and
the solution it passes along are ``Any`` here (the settings import the registry, so naming them would
be a circle), and a backend's solve is named as ``"module:function"``, imported on its first call
(:class:`EntryPoint`), so a backend's file never imports its numerics. Standard library only:
settings are read (suites load, certificates are checked) without numpy.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from warp_check.errors import SettingsError

# What a form means, for the error that refuses a backend the form it cannot solve.
FORM_WORDS = {"primal": "in β space", "dual": "the dual"}


class Backend(str):
    """A QP backend by the name it registered under: what a solution and a certificate's history
    name. A string, not an enum: a backend's file adds one by registering."""

    __slots__ = ()


@dataclass(frozen=True)
class EntryPoint:
    """A function to call, given as ``"module:function"`` (imported on its first call, then kept) or
    as the function itself (a test's own backend)."""

    target: str | Callable[..., Any]

    def __post_init__(self) -> None:
        if callable(self.target):
            return
        module, _, name = str(self.target).partition(":")
        if not (all(part.isidentifier() for part in module.split(".")) and name.isidentifier()):
            raise SettingsError("target", self.target, "must be a function or 'module:function'")

    def load(self) -> Callable[..., Any]:
        if callable(self.target):
            return self.target
        module, _, name = self.target.partition(":")
        # The module is imported once; the function is looked up in it on every call, so that what
        # runs is what the module holds now (a test may put a function of its own there).
        return getattr(_imported(module), name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.load()(*args, **kwargs)


@functools.cache
def _imported(module: str) -> ModuleType:
    return importlib.import_module(module)


@dataclass(frozen=True, kw_only=True)
class AutoPlace:
    """Where ``auto`` puts a backend among those it picks from ``newton_min_rows`` rows on."""

    rank: int  # auto asks the backends in this order, lowest first
    # (problem, the backend's own settings): whether a problem this size is the backend's.
    fits: Callable[[Any, Any], bool]


@dataclass(frozen=True, kw_only=True)
class Decider:
    """What makes a backend the one a run others cannot decide goes to."""

    title: str  # how messages name it ("OSQP's 'maximum iterations reached'")
    # (problem, settings, the rows an undecided backend had in play, its start time, what it said):
    # the answer from those rows, its solver_status saying so; None where it cannot decide either.
    solve_from: EntryPoint
    # (its own settings): the clause naming what to raise in it for a QP handed over to it.
    advice: Callable[[Any], str]


@dataclass(frozen=True, kw_only=True)
class QPBackend:
    """A registered backend: what :func:`register_backend` was given."""

    name: Backend  # as SolverSettings.backend, [repair.solver.<name>] and a certificate's history name it
    settings: type  # its frozen keyword-only settings record; the defaults are what it runs with
    solve: EntryPoint  # (problem, settings, warm) -> QPSolution
    # (its own settings, the decider's clause for a QP handed over to it): what to raise or loosen when
    # it ended with no usable solution, naming its keys as warp.toml spells them.
    advice: Callable[[Any, str], str]
    forms: tuple[str, ...]  # the forms it solves ("primal", "dual"): asking it for another is refused
    auto: AutoPlace | None = None  # None: it runs only when named
    decides: Decider | None = None  # the backend a run others cannot decide goes to (one at most)


_REGISTERED: dict[str, QPBackend] = {}


def register_backend(
    *,
    name: str,
    settings: type,
    solve: str | Callable[..., Any],
    advice: Callable[[Any, str], str],
    forms: tuple[str, ...],
    auto: AutoPlace | None = None,
    decides: Decider | None = None,
) -> QPBackend:
    """Make a backend known by ``name``: SolverSettings accepts it and its settings from then on.
    ``solve``: ``"module:function"`` (imported when a QP is first solved) or the function."""
    if not name.isidentifier() or name == "auto" or name in _REGISTERED:
        raise SettingsError("name", name, "must be an identifier, not 'auto' and not registered already")
    if not (dataclasses.is_dataclass(settings) and settings.__dataclass_params__.frozen):  # type: ignore[attr-defined]
        raise SettingsError("settings", settings, "must be a frozen dataclass")
    if not forms or any(form not in FORM_WORDS for form in forms):
        raise SettingsError("forms", forms, f"must name one or more of {', '.join(FORM_WORDS)}")
    if decides is not None and any(b.decides is not None for b in _REGISTERED.values()):
        raise SettingsError("decides", name, f"'{decider().name}' decides undecided runs already")
    settings()  # its defaults must be valid settings
    backend = QPBackend(
        name=Backend(name),
        settings=settings,
        solve=EntryPoint(solve),
        advice=advice,
        forms=forms,
        auto=auto,
        decides=decides,
    )
    _REGISTERED[name] = backend
    return backend


def unregister_backend(name: str) -> None:
    """Forget a backend (a test's own); settings that name it are refused from then on."""
    del _REGISTERED[name]


def registered() -> tuple[QPBackend, ...]:
    """Every backend, in the order they registered."""
    return tuple(_REGISTERED.values())


def backend(name: str) -> QPBackend:
    if name not in _REGISTERED:
        names = [f"'{n}'" for n in ("auto", *_REGISTERED)]
        raise SettingsError("backend", name, f"must be {', '.join(names[:-1])} or {names[-1]}")
    return _REGISTERED[name]


def decider() -> QPBackend:
    """The backend that decides what the others cannot (OSQP: it decides infeasibility directly)."""
    return next(b for b in _REGISTERED.values() if b.decides is not None)


def limits_advice(name: str, own: Any, *, hand_over: str, instead: str) -> str:
    """The advice of a backend whose own settings are ``max_iter`` and ``tolerance`` and whose undecided
    runs go to the decider (``hand_over``: the decider's clause): raise both limits, loosen its
    tolerance, or name another backend."""
    return (
        f"raise solver {name}_max_iter (now {own.max_iter}) and {hand_over}, or loosen "
        f"{name}_tolerance (now {own.tolerance:g}), or set solver backend '{instead}'"
    )
