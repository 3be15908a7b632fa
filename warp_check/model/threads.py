"""How many CPU threads torch uses while warp-check encodes, set explicitly and given back after.

torch's own default is every physical core of the machine, whatever else runs: under
pytest-xdist each worker would take them all (500 tiny cases: 14.7 s at 2 threads beside another
job, 1.05 s at 1). The default here is the cores this process may use, shared among the xdist
workers of the run, and never more than torch was already told (OMP_NUM_THREADS, or a caller's
torch.set_num_threads), so a limit the user set holds. A count the user gives is capped at the
cores (:func:`capped_threads`): more threads than cores only take turns (``--warp-threads 10000``
made a 2-case check take 55 s instead of 8).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator

from warp_check.errors import WarpWarning
from warp_check.validation import is_decimal


def available_cores() -> int:
    """The CPUs this process may run on (its affinity, where the system says), at least 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):  # pragma: no cover - no sched_getaffinity (macOS, Windows)
        return max(os.cpu_count() or 1, 1)


def default_threads() -> int:
    """The available cores, divided among pytest-xdist's workers when this is one of them."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    share = int(workers) if is_decimal(workers) and int(workers) > 0 else 1
    return max(available_cores() // share, 1)


def capped_threads(threads: int) -> int:
    """``threads``, or the available cores where it asks for more (a WarpWarning says so).

    Called once where a count the user gave is taken (an adapter, a compare or attack run), so
    the notice comes once, not once per encoder batch.
    """
    cores = available_cores()
    if threads <= cores:
        return threads
    warnings.warn(f"threads {threads} > {cores} cores: using {cores}", WarpWarning, stacklevel=2)
    return cores


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Within the block torch uses ``threads`` CPU threads (None: :func:`default_threads`, at most
    torch's current setting); the caller's setting comes back after it."""
    import torch

    before = torch.get_num_threads()
    wanted = min(default_threads(), before) if threads is None else threads
    if wanted != before:
        torch.set_num_threads(wanted)
    try:
        yield wanted
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
