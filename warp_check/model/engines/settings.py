"""``[model] engine`` and ``[model.ray]``: where the encoder pass runs, as typed records.

Standard library only (suites and ``pytest --help`` read it). Whether Ray is installed is asked
of the import system, never by importing it: a run that asks for Ray without it is refused
before any work.
"""

from __future__ import annotations

import enum
import importlib.util
import math
from dataclasses import dataclass, field

from warp_check.errors import SettingsError
from warp_check.validation import is_integer

NO_RAY = "needs Ray, which is not installed: pip install 'warp-check[ray]'"


class Engine(enum.Enum):
    """Where the encoder pass runs."""

    LOCAL = "local"  # this process, in batches of one length
    RAY = "ray"  # a Ray Data map_batches over the same batches, one model per worker


ENGINE_NAMES = tuple(engine.value for engine in Engine)


@dataclass(frozen=True, kw_only=True)
class RaySettings:
    """``[model.ray]``: the Ray cluster and its workers (each loads the model once)."""

    address: str | None = None  # None: start a local Ray on this machine's cores; "auto", "ray://host:10001"
    num_workers: int | None = None  # None: as many as the cluster's CPUs (or GPUs) hold
    num_cpus: float = 1.0  # per worker; its torch threads are this, rounded down (at least 1)
    num_gpus: float = 0.0  # per worker; > 0 runs the worker's encoder on its GPU
    batch_size: int | None = None  # cases per forward batch on a worker; None: [model] batch_size
    max_restarts: int = 3  # a worker that dies is restarted, and its batch retried, this many times

    def __post_init__(self) -> None:
        if self.address is not None and (not isinstance(self.address, str) or not self.address.strip()):
            raise SettingsError("address", self.address, "must be a non-empty string ('auto', 'ray://host:port')")
        for name in ("num_workers", "batch_size"):
            value = getattr(self, name)
            if value is not None and not is_integer(value, 1):
                raise SettingsError(name, value, "must be an integer >= 1")
        if not is_integer(self.max_restarts, 0):
            raise SettingsError("max_restarts", self.max_restarts, "must be an integer >= 0")
        for name, low in (("num_cpus", 0.0), ("num_gpus", 0.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise SettingsError(name, value, "must be a finite number")
            if value < low:
                raise SettingsError(name, value, f"must be >= {low:g}")
        if self.num_cpus == 0 and self.num_gpus == 0:
            raise SettingsError("num_cpus", self.num_cpus, "a worker needs a CPU or a GPU: give num_cpus or num_gpus")

    @property
    def worker_threads(self) -> int:
        """torch CPU threads on each worker: its CPUs, at least one."""
        return max(1, int(self.num_cpus))


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """Which engine encodes, and how Ray runs when it is Ray."""

    kind: Engine = Engine.LOCAL
    ray: RaySettings = field(default_factory=RaySettings)

    def __post_init__(self) -> None:
        if not isinstance(self.kind, Engine):
            raise SettingsError("engine", self.kind, f"must be one of {', '.join(ENGINE_NAMES)}")
        if not isinstance(self.ray, RaySettings):
            raise SettingsError("ray", self.ray, "must be a RaySettings")

    def using(self, engine: str | Engine) -> EngineSettings:
        """These settings with the engine ``engine`` (a name, as options give it)."""
        return EngineSettings(kind=engine_named(engine), ray=self.ray)


LOCAL = EngineSettings()


def engine_named(name: str | Engine) -> Engine:
    """The engine called ``name``; SettingsError naming the choices otherwise."""
    if isinstance(name, Engine):
        return name
    try:
        return Engine(name)
    except ValueError:
        raise SettingsError("engine", name, f"must be one of {', '.join(ENGINE_NAMES)}") from None


def ray_installed() -> bool:
    return importlib.util.find_spec("ray") is not None


def require_engine(engine: Engine) -> None:
    """Refuse an engine whose package is not installed (SettingsError naming the extra to install)."""
    if engine is Engine.RAY and not ray_installed():
        raise SettingsError("engine", engine.value, NO_RAY)
