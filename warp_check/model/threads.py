"""How many CPU threads torch uses while warp-check encodes, set explicitly and given back after.

The default is one thread, whatever the machine's cores or pytest-xdist's workers: MKL splits a
small matrix product's sums among its threads, so v, and the repaired weights after it, depended
on the thread count (all-MiniLM-L6-v2's v of a 7- or 9-token case alone in its batch moved in the
last bits between 1 and 2 threads, and so did a product of 7 or 9 rows; at one thread a case's v
did not depend on its batch either). A serial run took every core and an xdist worker its share,
so the same suite gave two sets of weights (issue 39: 9e-7 relative), and so did a cache filled
by a run of a subset. One thread is also what a busy or shared machine runs fastest (500 tiny
cases: 14.7 s at 2 threads beside another job, 1.05 s at 1). A count the user gives
(``[model] threads``, ``--warp-threads``) trades that for speed on free cores: the same count
gives the same bits, serial or under xdist, and it is capped at the cores
(:func:`capped_threads`): more threads than cores only take turns (``--warp-threads 10000`` made
a 2-case check take 55 s instead of 8).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator

from warp_check.errors import WarpWarning


def available_cores() -> int:
    """The CPUs this process may run on (its affinity, where the system says), at least 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):  # pragma: no cover - no sched_getaffinity (macOS, Windows)
        return max(os.cpu_count() or 1, 1)


DEFAULT_THREADS = 1  # v must not depend on the cores a run has: see the module


def default_threads() -> int:
    """The encoder's threads when the user gives none: one, on every machine and in every xdist worker."""
    return DEFAULT_THREADS


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
    """Within the block torch uses ``threads`` CPU threads (None: :func:`default_threads`); the
    caller's setting comes back after it."""
    import torch

    before = torch.get_num_threads()
    wanted = default_threads() if threads is None else threads
    if wanted != before:
        torch.set_num_threads(wanted)
    try:
        yield wanted
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
