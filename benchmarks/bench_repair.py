"""Benchmark: the whole WARP repair loop on a paper-size problem, from cached representations.

What is measured: wall-clock seconds of ``warp_check.repair.loop.repair_head(head, fix, keep,
settings=RepairSettings(rank=R))`` on the synthetic head and cases of ``benchmarks.synthetic``
(108 must_fix, 800 must_keep, d_in = 768, float32 weights, paper defaults γ_s = 1.0, γ_h = 0.3,
λ = 50, ρ = 2). No model runs: v is what a real run would have cached, so this is the time the
repair itself costs (every SVD, linearisation, QP and gap recomputation, plus the final
bookkeeping of ``repair``). ``qp_seconds`` is the sum of ``QPSolution.seconds`` over the
iterations, ``iteration_seconds`` the sum of the loop's own iteration times; the rest of
``seconds`` is set-up (GSN κ, V Vᵀ) and the final κ/gap bookkeeping. ``cert1`` / ``cert2`` are
recomputed in float64 from the repaired weights (``benchmarks.certificates``).

Run: ``python -m benchmarks.bench_repair --blas-threads 1 --json`` from the repository root.
Exit 1 unless the repair converged.
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks import synthetic
from benchmarks.certificates import recomputed_certificates
from benchmarks.measure import blas_threads
from benchmarks.results import add_output_arguments, report
from warp_check.repair.loop import repair_head
from warp_check.repair.records import RepairStatus
from warp_check.repair.settings import RepairSettings


def run(rank: int, seed: int, activation: str, threads: int | None = None) -> dict[str, object]:
    problem = synthetic.build(seed, activation)
    head, fix, keep = problem.head, problem.fix, problem.keep
    settings = RepairSettings(rank=rank)
    # One-off imports are a process's cost, not a repair's: pay them before the clock starts.
    import osqp  # noqa: F401
    import scipy.sparse.linalg  # noqa: F401

    with blas_threads(threads):
        start = time.perf_counter()
        result = repair_head(head, fix, keep, settings=settings)
        seconds = time.perf_counter() - start

    forms = sorted({record.qp_form for record in result.iterations})
    return {
        "rank": rank,
        "activation": activation,
        "seed": seed,
        "blas_threads": threads,
        "n_fix": len(fix),
        "n_keep": len(keep),
        "d_in": head.d_in,
        "seconds": round(seconds, 4),
        "iterations": len(result.iterations),
        "status": result.status.value,
        "converged": result.status is RepairStatus.CONVERGED,
        **recomputed_certificates(result.head_after, fix, keep, gamma_s=settings.gamma_s, gamma_h=settings.gamma_h),
        "qp_form": forms[0] if len(forms) == 1 else forms,
        "qp_rows": [record.qp_rows for record in result.iterations],
        "qp_seconds": round(sum(r.qp_seconds for r in result.iterations), 4),
        "qp_seconds_per_iteration": [round(r.qp_seconds, 4) for r in result.iterations],
        "qp_admm_iterations": [r.qp_iterations for r in result.iterations],
        "iteration_seconds": round(sum(r.seconds for r in result.iterations), 4),
        "excluded_keep": len(result.excluded_keep),
        "message": result.message,
        "problem": synthetic.describe(problem),
    }


def print_text(result: dict[str, object]) -> None:
    print(
        f"repair at rank {result['rank']} ({result['activation']} head, seed {result['seed']}): "
        f"{result['status']} in {result['iterations']} iteration(s), {result['seconds']:.3f} s "
        f"(QP {result['qp_seconds']:.3f} s, form {result['qp_form']})"
    )
    print(f"cert 1 (must_fix gap ≥ 1.0): {result['cert1']}   cert 2 (must_keep gap ≥ 0.3): {result['cert2']}")
    print(result["message"])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_repair", description=__doc__.splitlines()[0])
    parser.add_argument("--rank", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--activation", choices=("relu", "tanh"), default="relu")
    parser.add_argument("--blas-threads", type=int, default=None, help="limit BLAS threads (measure with 1)")
    add_output_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    result = run(args.rank, args.seed, args.activation, args.blas_threads)
    report("bench_repair", parser, args, argv, result, print_text)
    return 0 if result["converged"] else 1


if __name__ == "__main__":
    sys.exit(main())
