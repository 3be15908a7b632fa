"""Benchmark: the paper's primal QP against our dual QP, on one paper-size linearised problem.

What is measured: wall-clock seconds of ``warp_check.qp.solve`` on the *first* linearised QP
of the repair loop (synthetic head and cases of ``benchmarks.synthetic``: 108 must_fix, 800 must_keep,
d_in = 768, γ_s = 1.0, γ_h = 0.3, ρ = 2, λ = 50), solved three ways in one process with the
same OSQP tolerances:

* ``primal_s``    the paper's primal form (eq. 5–8), all constraints: r·768 + 108 variables;
* ``dual_full_s`` our dual form, all 908 constraints (a 908×908 Gram matrix);
* ``dual_s``      our default path: the dual with the lazy must_keep working set.

Each time includes everything ``solve`` does (building K or the Gram matrix, OSQP setup and
factorisation, ADMM, polishing, working-set rounds); V Vᵀ is *not* cached unless
``--cached-vvt`` (the repair loop caches it, so a loop iteration is a little cheaper still).
``speedup = primal_s / dual_s``, ``speedup_full = primal_s / dual_full_s``.
``same_solution`` is true when both dual solutions agree with the primal B to 1e-6 (max abs).

``--blas-threads N`` pins the BLAS threads (``benchmarks.measure.blas_threads``); the thread
counts and the load average at the end of the run are in the record's ``machine``.

Run: ``python -m benchmarks.bench_qp --rank 2 --json`` from the repository root. Exit 1 if a
solve fails or the solutions differ. Timings are of one run on this machine: rerun and compare
on a quiet machine before quoting them.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

import numpy as np

from benchmarks import synthetic
from benchmarks.measure import blas_threads
from benchmarks.results import add_output_arguments, report
from warp_check.qp import solve as qp_solve
from warp_check.qp.problem import LinearisedProblem
from warp_check.qp.settings import SolverSettings
from warp_check.qp.solution import QPSolution

TOLERANCE = 1e-6  # max |B_primal − B_dual| for "same solution"


def run(rank: int, seed: int, activation: str, cached_vvt: bool, threads: int | None = None) -> dict[str, object]:
    built = synthetic.build(seed, activation)
    problem = synthetic.first_problem(built, rank, cache_vvt=cached_vvt)
    base = SolverSettings()  # identical tolerances for every form
    variants = {
        "primal": replace(base, form="primal", working_set=False),
        "dual_full": replace(base, form="dual", working_set=False),
        "dual": replace(base, form="dual", working_set=True),
    }
    solutions: dict[str, QPSolution] = {}
    wall: dict[str, float] = {}
    with blas_threads(threads):
        _warm_up()
        for name, settings in variants.items():
            start = time.perf_counter()
            solutions[name] = qp_solve.solve(problem, settings)
            wall[name] = time.perf_counter() - start

    primal, dual, full = solutions["primal"], solutions["dual"], solutions["dual_full"]
    ok = all(s.status.has_solution and s.B is not None for s in solutions.values())
    diff = diff_full = float("nan")
    if ok:
        assert primal.B is not None and dual.B is not None and full.B is not None
        diff = float(np.max(np.abs(primal.B - dual.B)))
        diff_full = float(np.max(np.abs(primal.B - full.B)))
    same = ok and diff <= TOLERANCE and diff_full <= TOLERANCE
    return {
        "rank": rank,
        "n_fix": problem.n_fix,
        "n_keep": problem.n - problem.n_fix,
        "d_in": problem.d_in,
        "activation": activation,
        "seed": seed,
        "blas_threads": threads,
        "cached_vvt": cached_vvt,
        "primal_s": round(wall["primal"], 4),
        "dual_s": round(wall["dual"], 4),
        "dual_full_s": round(wall["dual_full"], 4),
        "speedup": round(wall["primal"] / wall["dual"], 2),
        "speedup_full": round(wall["primal"] / wall["dual_full"], 2),
        "same_solution": bool(same),
        "max_abs_diff": diff,
        "max_abs_diff_full": diff_full,
        "objective_primal": primal.objective,
        "objective_dual": dual.objective,
        "objective_dual_full": full.objective,
        "status_primal": primal.status.value,
        "status_dual": dual.status.value,
        "status_dual_full": full.status.value,
        "iterations_primal": primal.iterations,
        "iterations_dual": dual.iterations,
        "iterations_dual_full": full.iterations,
        "problem": synthetic.describe(built),
    }


def _warm_up() -> None:
    """Import OSQP and SciPy and solve a tiny QP, so no form pays the one-off import cost.

    Both of its constraints bind in either form (the must_fix slack is priced out, the
    must_keep row is slack), so OSQP's polish step does not print "no active set".
    """
    tiny = LinearisedProblem(np.ones((2, 1)), np.eye(2), np.array([1e3, -1.0]), 1, 2.0, 50.0)
    for form in ("primal", "dual"):
        qp_solve.solve(tiny, SolverSettings(form=form, working_set=False))


def print_table(result: dict[str, object]) -> None:
    print(
        f"rank {result['rank']}: {result['n_fix']} must_fix, {result['n_keep']} must_keep, "
        f"d_in {result['d_in']}, {result['activation']} head, seed {result['seed']}"
    )
    print(f"{'form':<28}{'seconds':>10}{'speedup':>10}{'ADMM iter':>11}  status    objective")
    rows = (
        ("primal (paper)", "primal", 1.0),
        ("dual, all constraints", "dual_full", result["speedup_full"]),
        ("dual + working set (ours)", "dual", result["speedup"]),
    )
    for label, key, speedup in rows:
        print(
            f"{label:<28}{result[key + '_s']:>10.4f}{speedup:>9}×{result['iterations_' + key]:>11}"
            f"  {result['status_' + key]:<9} {result['objective_' + key]:.10g}"
        )
    print(
        f"same solution (≤ {TOLERANCE:g}): {result['same_solution']}  "
        f"max |ΔB| dual {result['max_abs_diff']:.3g}, dual_full {result['max_abs_diff_full']:.3g}"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_qp", description=__doc__.splitlines()[0])
    parser.add_argument("--rank", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--activation", choices=("relu", "tanh"), default="relu")
    parser.add_argument("--cached-vvt", action="store_true", help="hand the dual V Vᵀ precomputed")
    parser.add_argument("--blas-threads", type=int, default=None, help="limit BLAS threads (measure with 1)")
    add_output_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    result = run(args.rank, args.seed, args.activation, args.cached_vvt, args.blas_threads)
    report("bench_qp", parser, args, argv, result, print_table)
    return 0 if result["same_solution"] else 1


if __name__ == "__main__":
    sys.exit(main())
