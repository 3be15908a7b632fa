"""Where and how a benchmark measured: the machine, the code, BLAS threads, peak memory, QP times.

* ``machine_info``: CPU count, platform, Python, the libraries the timings depend on, the BLAS
  threads a process gets unless a run pins them (``--blas-threads``; the result says what a run
  pinned) and the 1-minute load average at the time of the call (call it at the end of a run);
* ``code_version``: the checkout's commit, whether warp_check/ or benchmarks/ (results aside)
  had uncommitted changes, warp-check's version and a digest of warp_check/'s sources;
* ``blas_threads``: pins the BLAS thread count for a block. On a small or busy machine,
  OpenBLAS with more than one thread can be many times *slower* on the small dense solves the
  repair loop makes: compare ``--blas-threads 1`` before reading anything into a slow run;
* ``peak_rss_mb``: the process's peak resident memory so far;
"""

from __future__ import annotations

import hashlib
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata

from benchmarks import REPO
from warp_check.perturb.wordnet import wordnet_available
from warp_check.version import __version__

LIBRARIES = ("numpy", "scipy", "osqp", "torch", "transformers", "peft", "nltk")


def machine_info() -> dict[str, object]:
    """Where and with what the numbers were taken (the load average is the one at this call)."""
    return {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "libraries": {name: _installed_version(name) for name in LIBRARIES},
        "load_average_1m": round(os.getloadavg()[0], 2),
        "blas_default_threads": _blas_thread_counts(),
        # synonyms = "auto", the default, draws WordNet synonyms only where this is true
        "wordnet": wordnet_available(),
        "gpus": _gpus(),
    }


def _gpus() -> list[str]:
    """The CUDA devices torch sees, by name, where the benchmark loaded torch (never loaded for this)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def code_version() -> dict[str, object]:
    """What code was measured: the commit, whether it had uncommitted changes, and a digest of
    warp_check/'s sources, which tells two uncommitted states apart."""
    digest = hashlib.sha256()
    package = REPO / "warp_check"
    for path in sorted(package.rglob("*.py")):
        digest.update(f"{path.relative_to(package)}\n".encode())
        digest.update(path.read_bytes())
    commit = _git("rev-parse", "HEAD")
    changes = _git("status", "--porcelain", "--", "warp_check", "benchmarks", ":!benchmarks/results")
    return {
        "warp_check_version": __version__,
        "git_commit": commit,
        "uncommitted_changes": None if changes is None else bool(changes),
        "warp_check_sources_sha256": digest.hexdigest()[:16],
    }


@contextmanager
def blas_threads(count: int | None) -> Iterator[None]:
    """Limit BLAS to ``count`` threads for the block (no-op for None)."""
    if count is None:
        yield
        return
    from threadpoolctl import threadpool_limits  # a dependency of warp-check; loads BLAS info

    with threadpool_limits(limits=count, user_api="blas"):
        yield


def stage_log() -> Callable[[str], None]:
    """A benchmark's progress line on stderr, each message after the seconds since this call."""
    start = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - start:7.0f} s] {message}", file=sys.stderr, flush=True)

    return log


def peak_rss_mb() -> float:
    """The process's peak resident memory so far, in MiB (run a size in a fresh process for its own)."""
    # Linux reports ru_maxrss in KiB, macOS in bytes.
    scale = 1.0 / 1024 if sys.platform != "darwin" else 1.0 / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _blas_thread_counts() -> list[int]:
    from threadpoolctl import threadpool_info

    return sorted({int(pool["num_threads"]) for pool in threadpool_info() if pool.get("user_api") == "blas"})


def _git(*args: str) -> str | None:
    """``git ARGS`` in the checkout, stripped; None where git or the repository is missing."""
    try:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None
