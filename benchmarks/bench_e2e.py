"""Benchmark: what ``--warp-repair`` and a warm representation cache cost in a real pytest run.

On the example suite ``example_suites/reviews-distilbert`` (real MiniLM encoder, 167 must_fix,
188 must_keep, 16 aux), every run is ``python -m pytest -q -p no:randomly -p no:cacheprovider
SUITE [--warp-repair]`` as a subprocess of this script (one process tree), on a copy of the
suite and ``example_suites/minilm`` in a temporary folder, so the checkout is never written.
The assembled example model in the user cache is reused (assembled first if missing, not timed).

Measured, each ``--repeat`` times (median reported):

* ``plain_cold``: plain run with the suite's representation cache (``.warp/cache``) removed
  (a CI job on a fresh checkout);
* ``plain_warm``: plain run with that cache filled by the run before;
* ``repair_cold``: ``--warp-repair`` run with the cache removed (the same start as plain_cold);
* ``repair_warm``: ``--warp-repair`` run with the cache filled by the repair run before, that
  run's repaired model removed;
* ``repair_cold_neighbours``: ``--warp-repair --warp-neighbours on`` from a removed cache: with the
  neighbourhood a repair draws when it is on (its perturbations, their encoder pass and their QP
  rows; off by default).

A plain run after a plain run finds the model folder unchanged and answers from the cache
without importing torch, transformers or numpy (warp_check.warm); ``model_loaded`` says, per run,
whether the model was loaded. The subprocesses run with Python's default bytecode cache (the
script drops ``PYTHONDONTWRITEBYTECODE`` from their environment): with it set, every run
recompiles every module, pytest's assertion rewriting included, which no user's machine does.

For each: ``wall_s`` = the subprocess's wall time (interpreter start, imports, model load,
collection, the suite's run, reporting) and ``suite_run_s`` = the longest item duration pytest
reports (``--durations``): the item that triggers the suite's run (encoding, or repair +
certificates) carries its cost. Ratios: ``repair_over_plain`` = repair_cold / plain_cold (goal
≤ 1.3: what adding ``--warp-repair`` costs a CI job; ``repair_neighbours_over_plain`` the same with the
neighbourhood on, without a goal), ``warm_over_cold`` = plain_warm /
plain_cold (goal ≤ 0.1), each on wall time and on suite-run time; and, without a goal,
``repair_over_plain_warm`` = repair_warm / plain_warm: a repair must load the model (it saves
one), a warm plain run does not, so this one is large because the plain run got fast.

Run: ``python -m benchmarks.bench_e2e --json`` from the repository root (about 3 minutes on 2
cores with --repeat 3). Exit 1 if a run's exit code is not the expected one (plain 1, repair 0).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.example_models import EXAMPLE_SUITES
from benchmarks.results import add_output_arguments, report

DURATION = re.compile(r"^\s*([0-9.]+)s\s+(call|setup|teardown)\s+(\S+)", re.MULTILINE)
GOALS = {"repair_over_plain": 1.3, "warm_over_cold": 0.1}


def pytest_run(suite: Path, *extra: str) -> dict[str, object]:
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
        "--durations=1", "--durations-min=0", "--tb=no", "-rN", str(suite), *extra,
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=suite.parent, timeout=1800, env=env)
    wall = time.perf_counter() - start
    durations = [float(m[1]) for m in DURATION.finditer(done.stdout)]
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    return {
        "exit": done.returncode,
        "wall_s": round(wall, 3),
        "suite_run_s": max(durations) if durations else None,
        "model_loaded": "model not loaded" not in done.stdout,
        "summary": summary,
    }


def median_of(runs: list[dict[str, object]], key: str) -> float | None:
    values = [r[key] for r in runs if r[key] is not None]
    return round(statistics.median(values), 3) if values else None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_e2e", description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="reviews-distilbert", help="example suite folder name")
    parser.add_argument(
        "--suite-path", type=Path, help="any suite folder instead (its model path must not be relative to it)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    add_output_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="warp-e2e-"))
    try:
        source = args.suite_path or EXAMPLE_SUITES / args.suite
        suite = work / source.name
        shutil.copytree(source, suite, ignore=shutil.ignore_patterns(".warp"))
        if args.suite_path is None:  # the checkout's layout: warp.toml's factory is "../minilm/models.py:..."
            shutil.copytree(EXAMPLE_SUITES / "minilm", work / "minilm", ignore=shutil.ignore_patterns("__pycache__"))
        warmup = pytest_run(suite, "--warp-cache", "none")  # assembles the model if missing; not timed
        names = ("plain_cold", "plain_warm", "repair_cold", "repair_warm", "repair_cold_neighbours")
        runs: dict[str, list[dict[str, object]]] = {name: [] for name in names}
        for _ in range(args.repeat):
            shutil.rmtree(suite / ".warp", ignore_errors=True)
            runs["plain_cold"].append(pytest_run(suite))
            runs["plain_warm"].append(pytest_run(suite))
            shutil.rmtree(suite / ".warp", ignore_errors=True)
            runs["repair_cold"].append(pytest_run(suite, "--warp-repair"))
            shutil.rmtree(suite / ".warp" / "repaired", ignore_errors=True)
            runs["repair_warm"].append(pytest_run(suite, "--warp-repair"))
            shutil.rmtree(suite / ".warp", ignore_errors=True)
            runs["repair_cold_neighbours"].append(pytest_run(suite, "--warp-repair", "--warp-neighbours", "on"))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    medians = {name: {k: median_of(r, k) for k in ("wall_s", "suite_run_s")} for name, r in runs.items()}

    def ratio(a: str, b: str, key: str) -> float | None:
        x, y = medians[a][key], medians[b][key]
        return round(x / y, 3) if x is not None and y else None

    ratios = {
        "repair_over_plain": ratio("repair_cold", "plain_cold", "wall_s"),
        "repair_over_plain_suite_run": ratio("repair_cold", "plain_cold", "suite_run_s"),
        "repair_neighbours_over_plain": ratio("repair_cold_neighbours", "plain_cold", "wall_s"),
        "repair_neighbours_over_plain_suite_run": ratio("repair_cold_neighbours", "plain_cold", "suite_run_s"),
        "repair_over_plain_warm": ratio("repair_warm", "plain_warm", "wall_s"),
        "repair_over_plain_warm_suite_run": ratio("repair_warm", "plain_warm", "suite_run_s"),
        "warm_over_cold": ratio("plain_warm", "plain_cold", "wall_s"),
        "warm_over_cold_suite_run": ratio("plain_warm", "plain_cold", "suite_run_s"),
    }
    expected = {"plain_cold": 1, "plain_warm": 1, "repair_cold": 0, "repair_warm": 0, "repair_cold_neighbours": 0}
    ok = warmup["exit"] == 1 and all(r["exit"] == expected[n] for n, rs in runs.items() for r in rs)
    result = {
        "suite": str(args.suite_path) if args.suite_path else f"example_suites/{args.suite}",
        "repeat": args.repeat,
        "medians": medians,
        "ratios": ratios,
        "goals": GOALS,
        "goals_met": {name: ratios[name] is not None and ratios[name] <= goal for name, goal in GOALS.items()},
        "runs": runs,
        "exit_codes_as_expected": ok,
        "env": {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"), "bytecode_cache": True},
    }
    report("bench_e2e", parser, args, argv, result, print_text, ignore=("suite_path",))
    return 0 if ok else 1


def print_text(result: dict[str, object]) -> None:
    for name, m in result["medians"].items():
        print(f"{name:<12} wall {m['wall_s']} s, suite run {m['suite_run_s']} s")
    for name, value in result["ratios"].items():
        print(f"{name:<28} {value}")


if __name__ == "__main__":
    sys.exit(main())
