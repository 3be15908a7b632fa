"""The QP backends, by name: each registers itself here with one call (:func:`register_backend`).

A backend is one signature, ``solve(problem, settings, warm) -> QPSolution``, with its own settings
record (held by :class:`~warp_check.qp.settings.SolverSettings`, read from ``[repair.solver.<name>]``),
its advice when it fails, the forms it can be asked for, and its place in ``auto``'s rule:

* a QP of fewer than ``newton_min_rows`` rows, or one asked for in the dual form, goes to the decider
  (the one backend registered with ``decides``: OSQP);
* from there, to the first backend by :attr:`AutoPlace.rank` that solves the form asked for and
  :attr:`AutoPlace.fits` the problem's size; none: the decider;
* a QP ``auto`` gave the decider that it could not decide goes on to every backend that fits it,
  in rank order (:func:`after_decider`).

Standard library only: settings are read (suites load, certificates are checked) without numpy;
a backend's solve imports its numerics when a QP is solved.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from warp_check.errors import SettingsError

if TYPE_CHECKING:
    from warp_check.qp.problem import LinearisedProblem
    from warp_check.qp.settings import SolverSettings
    from warp_check.qp.solution import QPSolution, WarmStart

    Solve = Callable[[LinearisedProblem, SolverSettings, WarmStart | None], QPSolution]

# What a form means, for the error that refuses a backend the form it cannot solve.
FORM_WORDS = {"primal": "in β space", "dual": "the dual"}


class Backend(str):
    """A QP backend by the name it registered under: what a solution and a certificate's history
    name. A string, not an enum: a backend's file adds one by registering."""

    __slots__ = ()


@dataclass(frozen=True, kw_only=True)
class AutoPlace:
    """Where ``auto`` puts a backend among those it picks from ``newton_min_rows`` rows on."""

    rank: int  # auto asks the backends in this order, lowest first
    # (problem, the backend's own settings): whether a problem this size is the backend's.
    fits: Callable[[LinearisedProblem, Any], bool]


@dataclass(frozen=True, kw_only=True)
class Decider:
    """What makes a backend the one a run others cannot decide goes to."""

    title: str  # how messages name it ("OSQP's 'maximum iterations reached'")
    # (problem, settings, the rows an undecided backend had in play, its start time, what it said):
    # the answer from those rows, its solver_status saying so; None where it cannot decide either.
    solve_from: Callable[[LinearisedProblem, SolverSettings, Any, float, str], QPSolution | None]
    # (its own settings): the clause naming what to raise in it for a QP handed over to it.
    advice: Callable[[Any], str]


@dataclass(frozen=True, kw_only=True)
class QPBackend:
    """A registered backend: what :func:`register_backend` was given."""

    name: Backend  # as SolverSettings.backend, [repair.solver.<name>] and a certificate's history name it
    settings: type  # its frozen keyword-only settings record; the defaults are what it runs with
    solve: Solve
    # (its own settings, the solver's): what to raise or loosen when it ended with no usable solution,
    # naming its keys as warp.toml spells them.
    advice: Callable[[Any, SolverSettings], str]
    forms: tuple[str, ...]  # the forms it solves ("primal", "dual"): asking it for another is refused
    auto: AutoPlace | None = None  # None: it runs only when named
    decides: Decider | None = None  # the backend a run others cannot decide goes to (one at most)


_REGISTERED: dict[str, QPBackend] = {}


def register_backend(
    *,
    name: str,
    settings: type,
    solve: Solve,
    advice: Callable[[Any, SolverSettings], str],
    forms: tuple[str, ...],
    auto: AutoPlace | None = None,
    decides: Decider | None = None,
) -> QPBackend:
    """Make a backend known by ``name``: SolverSettings accepts it and its settings from then on."""
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
        name=Backend(name), settings=settings, solve=solve, advice=advice, forms=forms, auto=auto, decides=decides
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


def hand_over_advice(settings: SolverSettings) -> str:
    """The decider's clause for a backend's advice: what to raise in it for a QP handed over."""
    taker = decider()
    return taker.decides.advice(settings.of(taker.settings))  # type: ignore[union-attr]


def limits_advice(name: str, own: Any, settings: SolverSettings, *, instead: str) -> str:
    """The advice of a backend whose own settings are ``max_iter`` and ``tolerance`` and whose undecided
    runs go to the decider: raise both limits, loosen its tolerance, or name another backend."""
    return (
        f"raise solver {name}_max_iter (now {own.max_iter}) and {hand_over_advice(settings)}, or loosen "
        f"{name}_tolerance (now {own.tolerance:g}), or set solver backend '{instead}'"
    )


def _ranked(form: str) -> list[QPBackend]:
    placed = [b for b in _REGISTERED.values() if b.auto is not None and (form == "auto" or form in b.forms)]
    return sorted(placed, key=lambda b: b.auto.rank)  # type: ignore[union-attr]


def pick(problem: LinearisedProblem, settings: SolverSettings) -> QPBackend:
    """The backend the settings name, or ``auto``'s choice for this problem's size."""
    if settings.backend != "auto":
        return backend(settings.backend)
    # A form named in the settings is the decider's form: the interior point solves the primal only,
    # the active set the dual only, and neither is picked against the other's form.
    # Every row counts, the soft ones too: OSQP's dual holds every must_fix row from the start, and a
    # neighbourhood brings a thousand (the example's 1,188 must_fix and 188 must_keep: 21 s of
    # OSQP against 0.5 s of interior point and augmented Lagrangian, the same iterates).
    if problem.n < settings.newton_min_rows or settings.form == "dual":
        return decider()
    fitting = (b for b in _ranked(settings.form) if b.auto.fits(problem, settings.of(b.settings)))  # type: ignore[union-attr]
    return next(fitting, decider())


def after_decider(problem: LinearisedProblem, settings: SolverSettings) -> tuple[QPBackend, ...]:
    """Where a QP ``auto`` gave the decider goes when it cannot decide it: every backend that fits,
    in rank order. On an ill-conditioned exact problem which of them settles it turns on the last
    bits of v (tiny MPNet's final layer, ×141 its norm: the interior point converged on one CPU's
    kernels and stalled at residual 18 on another's, where the augmented Lagrangian settles it in
    71 iterations), so a repair must not end on the first one's stall."""
    return tuple(b for b in _ranked(settings.form) if b.auto.fits(problem, settings.of(b.settings)))  # type: ignore[union-attr]
