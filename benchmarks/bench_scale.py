"""Benchmark: the WARP repair loop with 1k, 10k and 100k must_keep cases (lazy must_keep rows).

What is measured, per must_keep size n: ``warp_check.repair.loop.repair_head(head, fix, keep,
settings=RepairSettings(rank=R))`` on the synthetic head and 108 must_fix cases of
``benchmarks.synthetic`` (d_in = d_out = 768, float32 weights, paper defaults) with n must_keep
representations v ~ N(0, I) labelled with the head's own prediction (``--distribution
measured``: shaped like real ones; ``--head measured``: a repair layer with the spectrum spike
and class alignment of real fine-tuned heads, where the default random W has neither; see
``benchmarks.synthetic``; ``--source sst2``: a real problem instead, see
``benchmarks.sst2_problem``, with ``--perturbations k`` grown past SST-2's 67k sentences by k
seeded perturbations of each). ``--keep margin`` (the default) keeps only cases that already meet
γ_h = 0.3, as a clean regression set that passes its gate before repair does; ``--keep natural``
keeps every correct case, with the ~5% tail below γ_h that the repair must then lift too (the
harder problem: its elastic rows all enter every QP).

Each size runs in its own subprocess, so that its peak resident memory is its own:

* ``qp_seconds``     sum of ``QPSolution.seconds`` over the loop (every working-set round);
* ``seconds``        the whole ``repair`` call (set-up, SVDs, linearisation, QPs, exact gap
  recomputation, final bookkeeping); ``iterations`` the loop's iterations;
* ``peak_rss_mb``    ``ru_maxrss`` of the subprocess at the end (data + interpreter + repair);
  ``data_rss_mb`` the same just before ``repair`` (the representations alone are n·768·8 bytes);
* ``qp_rows`` / ``qp_working_set`` per iteration: rows of the linearised problem and rows in the
  last QP the working set needed (``qp_rounds`` QPs that iteration);
* ``cert1`` / ``cert2`` recomputed in float64 from the repaired weights (``benchmarks.certificates``).

Ratios: ``qp_seconds_per_1k_keep`` and, for sizes ≤ ``--compare-full`` (default 1000), the same
repair with every row in every QP (``working_set=False``): ``full_seconds``, ``full_qp_seconds``,
``lazy_speedup_qp`` and ``same_head`` (max |W_lazy − W_full| ≤ 1e-5 and the same status).
Goal (issue 6): at 100k, peak RSS < 4 GB and QP time < 60 s.

Run: ``python -m benchmarks.bench_scale --json`` from the repository root (one JSON record with
every size; ``--max-iter 1``: the first QP of each size alone; ``--backend``: the QP solver).
Exit 1 unless every repair converged with Cert 2 on every must_keep case.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks import REPO, sst2_problem, synthetic
from benchmarks.certificates import recomputed_certificates
from benchmarks.measure import peak_rss_mb
from benchmarks.results import add_output_arguments, report
from warp_check.qp import registry
from warp_check.repair.loop import repair_head
from warp_check.repair.records import RepairStatus
from warp_check.repair.settings import RepairSettings

SIZES = (1_000, 10_000, 100_000)
GOAL_RSS_MB = 4096  # issue 6: 100k must_keep at d = 768
# issue 40: a million must_keep at d = 384 (MiniLM) within 4 GB, at d = 768 (BERT-base) within 8 GB
GOAL_RSS_MB_MILLION = {384: 4096, 768: 8192}
GOAL_QP_SECONDS = 60.0
SAME_HEAD_TOLERANCE = 1e-5


def run_size(
    n_keep: int,
    seed: int,
    activation: str,
    rank: int,
    keep: str,
    lazy: bool = True,
    threads: int | None = 1,
    distribution: str = "isotropic",
    backend: str = "auto",
    max_iter: int | None = None,
    head: str = "random",
    source: str = "synthetic",
    model: str = "distilbert",
    paper_loop: bool = False,
    d_in: int = synthetic.D,
    resident_keep: int | None = None,
    perturbations: int = 0,
) -> dict[str, object]:
    """One repair at one must_keep size, in this process (call it in a fresh one for the RSS).

    ``source="sst2"``: the real problem of ``benchmarks.sst2_problem`` instead of a synthetic
    one (the example model's head, its suite's attacked must_fix cases, SST-2 train as
    must_keep); ``seed``, ``activation``, ``distribution`` and ``head`` do not apply to it.
    The row's ``_W_after`` (the repaired weight, up to 5k must_keep) is for the caller to pop.
    """
    if source == "sst2":
        problem_head, fix, keep_set, about = sst2_problem.problem(n_keep or None, keep, model, perturbations)
        n_keep = len(keep_set)
        about |= {"distribution": None, "head": None, "class_alignment_r": None, "seed": None}
    else:
        built = synthetic.build(seed, activation, distribution, head, d_in)
        problem_head, fix = built.head, built.fix
        keep_set = synthetic.keep_cases(built, n_keep, seed, keep)
        alignment = round(synthetic.class_alignment(built.head.W, built.head.Wc, rank), 3)
        about = {"distribution": distribution, "head": head, "class_alignment_r": alignment, "seed": seed}
    settings = RepairSettings(rank=rank, blas_threads=threads)
    if resident_keep is not None:  # hold fewer (or more) must_keep cases in the loop than the default
        settings = replace(settings, resident_keep=resident_keep)
    if paper_loop:  # the paper's loop: no function-space price, no trust region, a fixed rank
        settings = replace(settings, mu=0.0, trust_region=False, max_rank=rank, price_growth=1.0)
    settings = replace(settings, solver=replace(settings.solver, backend=backend))
    if max_iter is not None:  # stop the loop early: --max-iter 1 measures the first QP alone
        settings = replace(settings, max_iter=max_iter)
    if not lazy:
        settings = replace(settings, solver=replace(settings.solver, working_set=False))
    import osqp  # noqa: F401  (one-off imports are the process's cost, not the repair's)
    import scipy.sparse.linalg  # noqa: F401

    data_rss = peak_rss_mb()
    start = time.perf_counter()
    result = repair_head(problem_head, fix, keep_set, settings=settings)
    seconds = time.perf_counter() - start
    peak_rss = peak_rss_mb()
    qp_seconds = sum(r.qp_seconds for r in result.iterations)
    gaps_before_keep = np.array(list(result.gaps_before.values())[len(fix) :])
    return {
        "source": source,
        "n_keep": n_keep,
        "n_fix": len(fix),
        "d_in": problem_head.d_in,
        "keep": keep,
        **about,
        "activation": problem_head.activation.name,
        "lazy": lazy,
        "backend": backend,
        "qp_backends": sorted({r.qp_backend for r in result.iterations}),
        "blas_threads": threads,
        "rank": rank,
        "resident_keep": settings.resident_keep,
        "loop": "paper" if paper_loop else "default",
        "ranks": [r.rank for r in result.iterations],
        "metric_scale": [r.metric_scale for r in result.iterations],
        "status": result.status.value,
        "converged": result.status is RepairStatus.CONVERGED,
        "iterations": len(result.iterations),
        "seconds": round(seconds, 3),
        "qp_seconds": round(qp_seconds, 3),
        "qp_seconds_per_1k_keep": round(1000 * qp_seconds / n_keep, 4),
        "peak_rss_mb": round(peak_rss, 1),
        "data_rss_mb": round(data_rss, 1),
        "representations_mb": round(keep_set.V.nbytes / 2**20, 1),
        "representations_dtype": str(keep_set.V.dtype),
        # repair.screen: the must_keep cases the loop never held (checked from outside after each round),
        # the share that did enter the loop (its QPs' rows come from these), and the rounds
        "held_outside": result.held_outside,
        "keep_in_loop_share": round(1 - result.held_outside / max(n_keep, 1), 4),
        "rounds": result.rounds,
        "seconds_per_1k_keep": round(1000 * seconds / max(n_keep, 1), 4),
        **recomputed_certificates(result.head_after, fix, keep_set, gamma_s=settings.gamma_s, gamma_h=settings.gamma_h),
        "excluded_keep": len(result.excluded_keep),
        "keep_below_gamma_h_before": int(np.sum(gaps_before_keep < settings.gamma_h)),
        "qp_rows": [r.qp_rows for r in result.iterations],
        "qp_working_set": [r.qp_working_set for r in result.iterations],
        "qp_rounds": [r.qp_rounds for r in result.iterations],
        "qp_seconds_per_iteration": [round(r.qp_seconds, 3) for r in result.iterations],
        # How the loop moved: the share of each QP step taken (< 1: the full step made the true
        # gaps worse) and the smallest must_fix gap after it.
        "step_fraction": [r.step_fraction for r in result.iterations],
        "min_gap_fix_per_iteration": [round(r.min_gap_fix, 4) for r in result.iterations],
        # Why a step was cut: the QP's linear promise against the true gaps at the full step.
        "promised_fix_shortfall": [_rounded(r.promised_fix_shortfall) for r in result.iterations],
        "full_step_fix_shortfall": [_rounded(r.full_step_fix_shortfall) for r in result.iterations],
        "promised_keep_missed": [r.promised_keep_missed for r in result.iterations],
        "full_step_keep_missed": [r.full_step_keep_missed for r in result.iterations],
        "message": result.message,
        "W_after_sha": hashlib.sha256(np.ascontiguousarray(result.head_after.W).tobytes()).hexdigest()[:12],
        "_W_after": result.head_after.W if n_keep <= 5_000 else None,
    }


def goal_rss_mb(n_keep: int, d_in: int) -> int:
    """The peak RSS goal of the largest size: issue 40's from 300k cases (by width), else issue 6's."""
    if n_keep > 100_000:
        return GOAL_RSS_MB_MILLION.get(d_in, GOAL_RSS_MB * d_in // 384)
    return GOAL_RSS_MB


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def in_subprocess(n_keep: int, args: argparse.Namespace, weights: Path, lazy: bool = True) -> dict[str, object]:
    """run_size in a fresh interpreter, so ru_maxrss is this size's alone; the repaired weight
    (sizes up to 5k) goes to ``weights`` (.npy) for the comparison with every row."""
    command = [
        sys.executable, "-m", "benchmarks.bench_scale", "--one", str(n_keep), "--weights-out", str(weights),
        "--seed", str(args.seed), "--activation", args.activation, "--rank", str(args.rank), "--keep", args.keep,
        "--blas-threads", str(args.blas_threads), "--distribution", args.distribution, "--backend", args.backend,
        "--head", args.head, "--source", args.source, "--model", args.model, "--d-in", str(args.d_in),
    ]  # fmt: skip
    if args.resident_keep is not None:
        command += ["--resident-keep", str(args.resident_keep)]
    if args.perturbations:
        command += ["--perturbations", str(args.perturbations)]
    if args.paper_loop:
        command.append("--paper-loop")
    if args.max_iter is not None:
        command += ["--max-iter", str(args.max_iter)]
    if not lazy:
        command.append("--full")
    # From the repository root, as `python -m benchmarks.bench_scale` itself runs.
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"bench_scale: size {n_keep} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare_with_full(lazy: dict[str, object], full: dict[str, object]) -> dict[str, object]:
    same_status = lazy["status"] == full["status"]
    same = same_status and lazy["W_after_sha"] == full["W_after_sha"]
    diff = lazy.get("max_abs_dW_vs_full")
    return {
        "full_seconds": full["seconds"],
        "full_qp_seconds": full["qp_seconds"],
        "full_iterations": full["iterations"],
        "full_peak_rss_mb": full["peak_rss_mb"],
        "full_cert2": full["cert2"],
        "lazy_speedup_qp": round(full["qp_seconds"] / max(lazy["qp_seconds"], 1e-9), 2),
        "lazy_speedup_total": round(full["seconds"] / max(lazy["seconds"], 1e-9), 2),
        "identical_head": bool(same),
        "same_status": bool(same_status),
        "max_abs_dW_vs_full": diff,
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_scale", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default=",".join(str(s) for s in SIZES),
        help="must_keep sizes, comma-separated (--source sst2: 0 means every sentence that qualifies)",
    )
    parser.add_argument("--rank", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--activation", choices=("relu", "tanh"), default="relu")
    parser.add_argument("--keep", choices=("margin", "natural"), default="margin")
    parser.add_argument(
        "--distribution",
        choices=synthetic.DISTRIBUTIONS,
        default="isotropic",
        help="representations: isotropic N(0, I) (worst case) or shaped like measured MiniLM ones",
    )
    parser.add_argument(
        "--head",
        choices=synthetic.HEADS,
        default="random",
        help="repair layer: random W (worst case) or with the spike and class alignment measured on real heads",
    )
    parser.add_argument(
        "--source",
        choices=("synthetic", "sst2"),
        default="synthetic",
        help="sst2: the example model's head and attacked cases, SST-2 train sentences as must_keep (needs the data)",
    )
    parser.add_argument(
        "--model",
        choices=tuple(sst2_problem.SUITES),
        default="distilbert",
        help="--source sst2: the example model whose head is repaired (distilbert: ReLU; bert: tanh)",
    )
    parser.add_argument(
        "--paper-loop",
        action="store_true",
        help="the paper's loop (mu 0, no trust region, the rank fixed) instead of the defaults",
    )
    parser.add_argument(
        "--d-in",
        type=int,
        default=synthetic.D,
        help="the repair layer's input (and output) width of the synthetic rows (384: MiniLM; 768: BERT-base)",
    )
    parser.add_argument(
        "--resident-keep",
        type=int,
        default=None,
        help="RepairSettings.resident_keep: the most must_keep cases the loop holds (default: the setting's own)",
    )
    parser.add_argument(
        "--perturbations",
        type=int,
        default=0,
        help="--source sst2: after the sentences, up to this many seeded perturbations of each (the suite's own "
        "strategies), to reach suites past SST-2's 67k",
    )
    parser.add_argument("--compare-full", type=int, default=1000, help="also solve with every row up to this size")
    parser.add_argument("--blas-threads", type=int, default=1, help="BLAS threads in the loop")
    parser.add_argument(
        "--backend",
        choices=("auto", *(backend.name for backend in registry.registered())),
        default="auto",
        help="QP solver (SolverSettings.backend; auto from 1,000 must_keep rows: the interior-point method "
        "while rank·d_in <= 2048, else the augmented Lagrangian method)",
    )
    parser.add_argument(
        "--max-iter", type=int, default=None, help="stop each repair after this many loop iterations (1: the first QP)"
    )
    add_output_arguments(parser)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # the subprocess's job
    parser.add_argument("--full", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--weights-out", type=Path, default=None, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.perturbations and args.source != "sst2":
        parser.error(f"--perturbations {args.perturbations}: perturbs SST-2's sentences; it needs --source sst2")
    if args.perturbations < 0:
        parser.error(f"--perturbations {args.perturbations}: a count of perturbations a sentence, 0 or more")
    if args.one is not None:
        return run_one_size(args)

    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_scale-") as work:
        for n in sizes:
            lazy_weights, full_weights = Path(work) / f"{n}-lazy.npy", Path(work) / f"{n}-full.npy"
            row = in_subprocess(n, args, lazy_weights)
            if 0 < n <= args.compare_full:
                full = in_subprocess(n, args, full_weights, lazy=False)
                row["max_abs_dW_vs_full"] = float(np.max(np.abs(np.load(lazy_weights) - np.load(full_weights))))
                row.update(compare_with_full(row, full))
                row["same_head"] = bool(row["same_status"] and row["max_abs_dW_vs_full"] <= SAME_HEAD_TOLERANCE)
            rows.append(row)
    largest = max(rows, key=lambda r: r["n_keep"])
    smallest = min(rows, key=lambda r: r["n_keep"])
    rss_goal = goal_rss_mb(largest["n_keep"], largest["d_in"])
    summary = {
        "sizes": rows,
        "goal": {"n_keep": largest["n_keep"], "peak_rss_mb_max": rss_goal, "qp_seconds_max": GOAL_QP_SECONDS},
        # Met only by a repair that converged with Cert 2 on every case: a stalled loop's QP time says nothing.
        "goal_met": bool(
            largest["converged"]
            and largest["cert2_all"]
            and largest["peak_rss_mb"] <= rss_goal
            and largest["qp_seconds"] < GOAL_QP_SECONDS
        ),
        # Time per case at the largest size over the smallest: ≤ 1 grows no faster than linearly (issue 40).
        "seconds_per_case_growth": round(
            largest["seconds_per_1k_keep"] / max(smallest["seconds_per_1k_keep"], 1e-9), 3
        ),
    }
    report("bench_scale", parser, args, argv, summary, print_table)
    ok = all(r["converged"] and r["cert2_all"] for r in rows)
    return 0 if ok else 1


def run_one_size(args: argparse.Namespace) -> int:
    """The subprocess's job: one size, its row as the last line of stdout, the weight to --weights-out."""
    result = run_size(
        args.one, args.seed, args.activation, args.rank, args.keep, not args.full, args.blas_threads,
        args.distribution, args.backend, args.max_iter, args.head, args.source, args.model, args.paper_loop,
        args.d_in, args.resident_keep, args.perturbations,
    )  # fmt: skip
    W = result.pop("_W_after")
    if W is not None and args.weights_out is not None:
        np.save(args.weights_out, W)
    print(json.dumps(result))
    return 0


def print_table(summary: dict[str, object]) -> None:
    print(
        f"{'n_keep':>8}{'d':>5}{'QP s':>9}{'total s':>9}{'iter':>6}{'rounds':>7}{'in loop':>9}{'peak RSS MB':>13}"
        f"{'cert 2':>17}  working set / rows"
    )
    for r in summary["sizes"]:
        ws = max((w or q) for w, q in zip(r["qp_working_set"], r["qp_rows"], strict=True)) if r["qp_rows"] else 0
        print(
            f"{r['n_keep']:>8}{r['d_in']:>5}{r['qp_seconds']:>9.2f}{r['seconds']:>9.2f}{r['iterations']:>6}"
            f"{r['rounds']:>7}{r['keep_in_loop_share']:>9.1%}{r['peak_rss_mb']:>13.0f}{r['cert2']:>17}"
            f"  ≤ {ws} / {max(r['qp_rows'], default=0)}"
        )
        if "full_qp_seconds" in r:
            print(
                f"{'':>8} all rows: QP {r['full_qp_seconds']:.2f} s, total {r['full_seconds']:.2f} s "
                f"(lazy {r['lazy_speedup_qp']}× on QP), same head: {r['same_head']} "
                f"(max |ΔW| {r['max_abs_dW_vs_full']:.2g})"
            )
    goal = summary["goal"]
    print(
        f"goal at n = {goal['n_keep']}: RSS < {goal['peak_rss_mb_max']} MB and QP < {goal['qp_seconds_max']} s: "
        f"{'met' if summary['goal_met'] else 'NOT met'}; time per case, largest / smallest size: "
        f"{summary['seconds_per_case_growth']}"
    )


if __name__ == "__main__":
    sys.exit(main())
