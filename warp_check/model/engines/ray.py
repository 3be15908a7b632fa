"""The encoder pass on Ray Data: ``map_batches`` over the pass's one-length batches, one model per worker.

The driver tokenizes (it needs the input digests for the cache anyway) and forms the same
batches the local pass forms (:func:`warp_check.model.batches.length_batches`, the same size),
so every case is encoded in the same company and its v is bit for bit the local pass's on the
same device. Each Ray Data row is one such batch; an actor per worker loads the model once
from its folder, checks that its upstream is the driver's (the cache key), forwards each batch
with :meth:`ClassifierAdapter.forward_batch`, checks the head against the logits, and returns
v with each case's position. The driver gathers every row before anything is written, so a
pass that fails writes no shard; the repair, the QP and the certificates never leave it.

A worker that dies is restarted and its batch retried (``[model.ray] max_restarts`` times); past
that the pass fails with an :class:`~warp_check.errors.EngineError` saying so.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import warp_check.errors as error_types
from warp_check.errors import EngineError, ModelError, WarpError
from warp_check.model.batches import length_batches
from warp_check.model.engines.settings import NO_RAY, RaySettings
from warp_check.model.hashing import upstream_sha256
from warp_check.model.specs import HeadSpec

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter

# Tests only: a folder where a file named "crash-once" makes the next worker to see it exit at its next
# batch (the file is taken by one worker), and one named "crash-always" makes every worker exit.
FAULTS_ENV = "WARP_CHECK_RAY_FAULTS"


@dataclass(frozen=True, kw_only=True)
class WorkerJob:
    """What a worker needs to load the driver's model: the folder, the head, the limits, the device."""

    model_dir: str
    spec: HeadSpec
    max_length: int
    device: str
    threads: int
    check: bool
    upstream: str  # the driver's upstream digest: a worker whose model differs refuses to encode


class RayEncoder:
    """One Ray worker: the model loaded once; each call encodes one batch of one length."""

    def __init__(self, job: WorkerJob) -> None:
        import torch

        from warp_check.model.adapter import ClassifierAdapter

        torch.set_num_threads(job.threads)
        # A refusal is raised from the first batch, not from here: Ray reports a failed constructor as a
        # dead worker and starts another, where a batch's error comes back to the driver as it is.
        self.refusal: WarpError | None = None
        try:
            self.adapter = ClassifierAdapter.from_pretrained(
                job.model_dir, layer=job.spec, max_length=job.max_length, check=job.check, device=job.device
            )
        except WarpError as exc:
            self.refusal = exc
            return
        if upstream_sha256(self.adapter) != job.upstream:
            self.refusal = ModelError(
                f"the model folder {job.model_dir!r} on a Ray worker is not the model the driver loaded "
                "(its encoder's weights differ): give the workers the same folder"
            )
        self.head = self.adapter.head() if job.check else None
        self.check = job.check

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.refusal is not None:
            raise self.refusal
        _injected_fault()
        positions, vs = [], []
        for text in batch["features"]:
            rows = json.loads(str(text))
            v, logits = self.adapter.forward_batch([row["features"] for row in rows])
            if self.check:
                self.adapter.check_logits(v, logits, self.head)
            positions += [row["position"] for row in rows]
            vs.append(np.asarray(v, dtype=np.float32))
        return {"position": np.asarray(positions, dtype=np.int64), "v": np.concatenate(vs)}


def _injected_fault() -> None:
    folder = os.environ.get(FAULTS_ENV)
    if not folder:
        return
    if (Path(folder) / "crash-always").exists():
        os._exit(1)
    try:
        (Path(folder) / "crash-once").unlink()
    except FileNotFoundError:
        return
    os._exit(1)


def encode_on_ray(
    adapter: ClassifierAdapter,
    features: Sequence[dict[str, list[int]]],
    *,
    batch_size: int,
    upstream: str | None,
    check: bool,
    progress: bool,
) -> np.ndarray:
    """v (len(features), d_in) float32 of ``features`` encoded on Ray, in the batches the local pass
    forms ([model.ray] batch_size, else ``batch_size``); ``upstream``: the driver's digest of the encoder
    (None: computed here)."""
    ray = _ray()
    settings = adapter.engine.ray
    batches = length_batches([len(f["input_ids"]) for f in features], settings.batch_size or batch_size)
    upstream = upstream if upstream is not None else upstream_sha256(adapter)
    with _ray_quiet(progress):
        return _encode(
            ray, adapter, features, batches, settings=settings, upstream=upstream, check=check, progress=progress
        )


@contextmanager
def _ray_quiet(progress: bool) -> Iterator[None]:
    """Ray's own deprecation notices about its settings are not the user's to act on (and are errors
    under ``-W error``): silenced within the pass, and only Ray's. Without ``progress`` Ray Data's
    log lines (a plan, a start and an end per pass) are left out too, as the local pass prints nothing."""
    from ray.util.annotations import RayDeprecationWarning

    log = logging.getLogger("ray.data")
    level = log.level
    if not progress:
        log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            # max_restarts/max_task_retries reach Ray Data's actors only as ray_remote_args, which Ray 2.60
            # deprecates without a replacement (hence the extra's pin below 2.64)
            warnings.filterwarnings("ignore", category=RayDeprecationWarning)
            warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"ray(\.|$)")
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"ray(\.|$)")
            yield
    finally:
        log.setLevel(level)


def _encode(
    ray: Any,
    adapter: ClassifierAdapter,
    features: Sequence[dict[str, list[int]]],
    batches: Sequence[Sequence[int]],
    *,
    settings: RaySettings,
    upstream: str,
    check: bool,
    progress: bool,
) -> np.ndarray:
    if adapter.source is None or not Path(adapter.source, "config.json").is_file():
        raise ModelError(
            "engine 'ray' loads the model from its folder on every worker, and this model was not loaded from "
            "one: save it with save_pretrained and load that folder, or use engine 'local'"
        )
    connect(ray, settings)
    job = WorkerJob(
        model_dir=str(Path(adapter.source).resolve()),
        spec=HeadSpec(
            repair_layer=adapter.spec.repair_layer,
            activation=adapter.spec.activation,
            classifier=adapter.spec.classifier,
            ffn=adapter.spec.ffn,
        ),
        max_length=adapter.max_length,
        device="cuda" if settings.num_gpus > 0 else "cpu",  # a worker sees only the GPUs Ray gives it
        threads=settings.worker_threads,
        check=check,
        upstream=upstream,
    )
    rows = [
        {"features": json.dumps([{"position": int(i), "features": features[i]} for i in batch])} for batch in batches
    ]
    workers = min(len(rows), settings.num_workers or _workers_held(ray, settings))
    dataset = ray.data.from_items(rows, override_num_blocks=min(len(rows), 4 * workers)).map_batches(
        RayEncoder,
        fn_constructor_kwargs={"job": job},
        batch_size=1,  # one length-batch a call: the batches stay the local pass's
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=settings.num_cpus,
        num_gpus=settings.num_gpus,
        max_restarts=settings.max_restarts,
        max_task_retries=settings.max_restarts,
    )
    V = np.full((len(features), adapter.width), np.nan, dtype=np.float32)
    seen = np.zeros(len(features), dtype=bool)
    context = ray.data.DataContext.get_current()
    bars = context.enable_progress_bars
    context.enable_progress_bars = progress
    try:
        for out in dataset.iter_batches(batch_size=None, batch_format="numpy"):
            V[out["position"]] = np.asarray(out["v"], dtype=np.float32)
            seen[out["position"]] = True
    except Exception as exc:  # noqa: BLE001 — Ray wraps what happened on a worker: say it as a WarpError
        raise _failure(exc, settings.max_restarts) from None
    finally:
        context.enable_progress_bars = bars
    if not seen.all():
        raise EngineError(
            f"the Ray pass returned {int(seen.sum())} of {len(features)} representations: nothing was cached; "
            "run again, or use engine 'local'"
        )
    return V


def connect(ray: Any, settings: RaySettings) -> None:
    """Join the cluster at ``settings.address``, or start a local Ray on this machine's cores (no
    dashboard, no network); a Ray already started in this process is used as it is."""
    if ray.is_initialized():
        return
    if settings.address is not None:
        _reachable(settings.address)
    try:
        if settings.address is None:
            ray.init(
                num_cpus=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        else:
            ray.init(address=settings.address, log_to_driver=False, configure_logging=False)
    except Exception as exc:  # noqa: BLE001 — Ray's own failure to start or connect
        where = (
            "start a local Ray" if settings.address is None else f"connect to the Ray cluster at {settings.address!r}"
        )
        raise EngineError(
            f"cannot {where} ({type(exc).__name__}: {exc}); check [model.ray] address, or use engine 'local'"
        ) from None


# A head that is up answers a TCP connect within milliseconds, even across regions; Ray itself retries
# an address where nothing listens for minutes. Past this, the address is refused.
CONNECT_TIMEOUT_S = 10.0


def _reachable(address: str) -> None:
    """Refuse at once a cluster ``address`` (host:port, ray://host:port) where nothing answers; "auto"
    and what is not host:port are left to Ray, which says what it makes of them."""
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not colon or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise EngineError(
            f"cannot connect to the Ray cluster at {address!r}: nothing answers at {host}:{port} ({why}, "
            f"within {CONNECT_TIMEOUT_S:g} s); check [model.ray] address and that the head runs (ray start "
            "--head), or use engine 'local'"
        ) from None


def _workers_held(ray: Any, settings: RaySettings) -> int:
    """How many workers the cluster's resources hold at once."""
    resources = ray.cluster_resources()
    if settings.num_gpus > 0:
        return max(1, int(resources.get("GPU", 0) // settings.num_gpus))
    return max(1, int(resources.get("CPU", 1) // max(settings.num_cpus, 1e-9)))


def _ray() -> Any:
    try:
        import ray
        import ray.data
    except ImportError:
        raise EngineError(f"engine 'ray' {NO_RAY}") from None
    return ray


_WORKER_ERROR = re.compile(r"^warp_check\.errors\.([A-Za-z]+): (.+)$", re.MULTILINE)


def _worker_error(text: str) -> WarpError | None:
    """A worker's own WarpError, read back from the traceback Ray relays as text: a batch's exception
    reaches the driver wrapped (UserCodeException) without its cause."""
    match = _WORKER_ERROR.search(text)
    kind = getattr(error_types, match[1], None) if match else None
    if match is None or not (isinstance(kind, type) and issubclass(kind, WarpError)):
        return None
    try:
        return kind(match[2])
    except TypeError:  # an error type that takes more than a message
        return EngineError(match[2])


def _failure(exc: BaseException, restarts: int) -> WarpError:
    """What failed on Ray, as a WarpError: a worker's own WarpError as it is, else what Ray says."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        inner = getattr(cause, "cause", None)  # a RayTaskError (also of its cause's type) keeps the worker's own
        if isinstance(inner, BaseException):
            cause = inner
            continue
        if isinstance(cause, WarpError):
            return cause
        cause = cause.__cause__ or cause.__context__
    said_by_worker = _worker_error(str(exc))
    if said_by_worker is not None:
        return said_by_worker
    text = str(exc).strip().splitlines()
    said = text[-1] if text else ""
    died = "ActorDied" in type(exc).__name__ or "died" in str(exc).lower()
    what = (
        f"a Ray worker died (restarted {restarts} times, [model.ray] max_restarts)"
        if died
        else f"the Ray pass failed ({type(exc).__name__})"
    )
    return EngineError(
        f"{what}: {said[:300]}; nothing was cached. Check the workers' logs (ray logs), their memory, or use "
        "engine 'local'"
    )
