"""Every Hugging Face sequence-classifier family warp-check is tried on: a tiny model of each,
built from its config class (hidden 32, 2 layers, no download), trained for a few seconds on
the test suite's synthetic sentiment task, then checked, repaired and audited.

Run: ``python -m benchmarks.families [--families bert,gpt2,...] [--neighbours on] [--json | --save]``
(``--neighbours``: the repair's, as ``warp-check repair --neighbours`` takes it; off by default). Prints, per
family, the head repaired (dense → σ → linear, or the final linear layer: found so, or fallen
back to where the dense form ``layer = "auto"`` found did not converge), the repair's iterations,
the certificate counts and the perturbed copies certified beside the suite's cases (hood); and
why a repair may stall: how many times its weights the closest pair of cases with different
labels makes the dense layer (×dense) or the final layer (×final) grow at least.
``tests/model/test_families.py`` runs the same builders at CI size.

``--arithmetic default,avx2,jitter`` builds each family's model and suite once, then checks,
repairs and audits copies of them under each perturbation of the arithmetic, each in a fresh
process: ``default`` the CPU's own kernels, ``avx2`` torch's AVX2 kernels
(``ATEN_CPU_CAPABILITY=avx2``), ``jitter`` every cached v (both heads' inputs) moved by up to
``--jitter-ulps`` units of float32 at random (seeded) before the repair reads it. A row says
whether the outcome (repaired or not, the form repaired, fallen back or not) is the same under all
of them, and the iterations of each.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.results import add_output_arguments, report
from benchmarks.testkit import testkit
from warp_check.cases import NEIGHBOUR
from warp_check.cli import main as cli
from warp_check.pipeline.ladder import FELL_BACK


def measure(model_type: str, work: Path, neighbours: str | None = None) -> dict[str, Any]:
    """Build, check (must exit 1), repair (0), audit the repaired folder (0); the figures of each."""
    row, model_dir, folder = _built(model_type, work)
    if folder is None:
        return row
    return row | run_built(model_dir, folder, work / "repaired", neighbours)


def _built(model_type: str, work: Path) -> tuple[dict[str, Any], Path, Path | None]:
    families = testkit("families")
    start = time.perf_counter()
    model_dir = families.build(model_type, work / "model")
    folder = families.suite(model_dir, work / "suite")
    row: dict[str, Any] = {"family": model_type, "build_seconds": round(time.perf_counter() - start, 2)}
    if folder is None:
        row |= {"ok": False, "why": "the tiny model gets too few cases wrong or right"}
    return row, model_dir, folder


# The perturbations of the arithmetic --arithmetic takes: the environment each process runs under.
ARITHMETIC: dict[str, dict[str, str]] = {
    "default": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "default-kernels": {"ATEN_CPU_CAPABILITY": "default"},  # torch's unvectorised kernels
    "jitter": {},  # v moved in the cache (jitter_cache), under the default kernels
}
# What must be the same under every arithmetic for a family's repair to count as robust to ulps.
OUTCOME = ("ok", "form", "fell_back")


def measure_arithmetic(
    model_type: str, work: Path, arithmetic: list[str], neighbours: str | None, ulps: int, seed: int
) -> dict[str, Any]:
    """One model and suite, built here; each arithmetic's check, repair and audit in a fresh process on
    a fresh copy of the suite (its own cache)."""
    row, model_dir, folder = _built(model_type, work)
    if folder is None:
        return row
    runs: dict[str, Any] = {}
    for name in arithmetic:
        copy = work / f"suite-{name}"
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns(".warp"))
        command = [sys.executable, "-m", "benchmarks.families", "--run-built", str(model_dir), str(copy)]
        command += ["--neighbours", neighbours] if neighbours is not None else []
        command += ["--run-jitter", "--jitter-ulps", str(ulps), "--jitter-seed", str(seed)] if name == "jitter" else []
        env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"} | ARITHMETIC[name]
        done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=Path(__file__).parents[1])
        try:
            runs[name] = json.loads(done.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            runs[name] = {"ok": False, "why": f"exit {done.returncode}: {done.stderr[-800:]}"}
    outcomes = {name: tuple(r.get(k) for k in OUTCOME) for name, r in runs.items()}
    return row | {
        "ok": all(r.get("ok") for r in runs.values()),
        "same_outcome": len(set(outcomes.values())) == 1,
        "arithmetic": runs,
    }


def jitter_cache(model_dir: Path, folder: Path, ulps: int, seed: int) -> int:
    """Encode the suite at both heads the repair may use (the dense form and the final linear layer it
    falls back to) into the suite's cache, then move every cached v by up to ``ulps`` units of float32,
    seeded; returns the rows moved. The audit encodes v afresh: the repair's v and the audit's then
    differ as another machine's would."""
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    from warp_check.model.adapter import ClassifierAdapter
    from warp_check.model.specs import HeadSpec
    from warp_check.pipeline.evaluation import evaluate
    from warp_check.runs.workdir import default_cache_dir
    from warp_check.suite.loader import load_suite

    suite = load_suite(folder)
    cache = default_cache_dir(suite)
    auto = ClassifierAdapter.from_pretrained(model_dir)
    heads = [auto]
    if auto.spec.classifier is not None:
        heads.append(auto.with_spec(HeadSpec.final_linear(auto.spec.classifier)))
    for adapter in heads:
        evaluate(adapter, suite.cases, cache_dir=cache, progress=False)
    rng, moved = np.random.default_rng(seed), 0
    for shard in sorted(cache.rglob("*.safetensors")):
        with safe_open(str(shard), framework="numpy") as f:
            metadata = f.metadata()
        v = load_file(str(shard))["v"]
        steps = rng.integers(-ulps, ulps + 1, size=v.shape).astype(np.float32)
        save_file({"v": (v + steps * np.spacing(np.abs(v))).astype(np.float32)}, str(shard), metadata=metadata)
        moved += v.shape[0]
    return moved


def run_built(
    model_dir: Path,
    folder: Path,
    out: Path,
    neighbours: str | None = None,
    jitter: tuple[int, int] | None = None,
    *,
    separation: bool = True,
) -> dict[str, Any]:
    """Check (must exit 1), repair (0) and audit (0) a built model's suite; with ``jitter`` (ulps,
    seed), the cached v moved first; ``separation``: why a repair may stall, too."""
    moved = jitter_cache(model_dir, folder, *jitter) if jitter else None
    codes = {}
    with contextlib.redirect_stdout(io.StringIO()) as said:
        codes["check"] = cli(["check", str(folder), "-q"])
        hood = ["--neighbours", neighbours] if neighbours is not None else []
        codes["repair"] = cli(["repair", str(folder), "--out", str(out), *hood, "-q"])
        codes["audit"] = cli(["verify", str(out), "--suite", str(folder)]) if out.is_dir() else None
    summary = _certified(out / "warp_certificate.json") if out.is_dir() else {}
    ok = codes == {"check": 1, "repair": 0, "audit": 0}
    why = _separation(model_dir, folder) if separation else {}
    why |= {"jittered_rows": moved} if jitter else {}
    return {"ok": ok, "exit_codes": codes, **summary, **why, "output": None if ok else said.getvalue()[-2000:]}


def _separation(model_dir: Path, folder: Path) -> dict[str, Any]:
    """Why a repair may stall (warp_check.pipeline.separation): the pair of cases with different labels, a
    must_fix case among them, that needs the weights to grow most. At the classifier's input the least
    ‖w_y − w_y′‖ is (γ_i + γ_j) / ‖v_i − v_j‖; for the dense layer, through σ's largest slope L_σ,
    ‖W̃‖₂ ≥ (γ_i + γ_j) / (L_σ ‖w_c,y − w_c,y′‖ ‖v_i − v_j‖). A tanh head also caps every gap: with only
    W changing, |logit_1 − logit_0| ≤ Σ|w_c,1 − w_c,0| ± (b_c,1 − b_c,0)."""
    import numpy as np

    from warp_check.cases import Kind
    from warp_check.model.adapter import ClassifierAdapter
    from warp_check.model.specs import HeadSpec
    from warp_check.pipeline.evaluation import evaluate
    from warp_check.pipeline.separation import hardest_pair
    from warp_check.repair.records import Miss
    from warp_check.repair.settings import RepairSettings
    from warp_check.suite.loader import load_suite

    defaults = RepairSettings()
    cases = [c for c in load_suite(folder).cases if c.kind in (Kind.MUST_FIX, Kind.MUST_KEEP)]
    labels = np.array([c.label for c in cases], dtype=np.int64)
    targets = np.array([defaults.gamma_s if c.kind is Kind.MUST_FIX else defaults.gamma_h for c in cases])
    ids = tuple(c.id for c in cases)
    misses = [Miss(c.id, c.kind.value, 0.0, defaults.gamma_s) for c in cases if c.kind is Kind.MUST_FIX]
    auto = ClassifierAdapter.from_pretrained(model_dir)
    final = auto if auto.spec.classifier is None else auto.with_spec(HeadSpec.final_linear(auto.spec.classifier))

    def pair(W: np.ndarray, adapter: ClassifierAdapter):
        V = evaluate(adapter, cases, progress=False).encoded.V.astype(np.float64)
        return hardest_pair(W, V, labels, targets, ids, misses)

    at_final = pair(final.head().W, final)
    out: dict[str, Any] = {
        "final_pair": [at_final.first, at_final.second],
        "final_pair_apart": round(at_final.distance / at_final.norm, 5),  # of ‖v‖
        "final_weight_growth": round(at_final.growth, 3),  # ‖w_y − w_y′‖ needed / now
    }
    if auto.spec.classifier is not None:
        head = auto.head()
        dense = pair(head.Wc, auto)
        needed = dense.growth / head.activation.lipschitz  # ‖W̃‖₂ at least
        out |= {
            "dense_pair": [dense.first, dense.second],
            "dense_pair_apart": round(dense.distance / dense.norm, 5),
            "dense_norm_growth": round(needed / float(np.linalg.norm(head.W, 2)), 3),  # ‖W̃‖₂ needed / ‖W‖₂
        }
        if head.activation.name == "tanh" and head.num_classes == 2:
            spread, shift = float(np.abs(head.Wc[1] - head.Wc[0]).sum()), float(head.bc[1] - head.bc[0])
            out["tanh_gap_ceiling"] = [round(spread - shift, 3), round(spread + shift, 3)]  # per label
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.families", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--families", default=",".join(testkit("families").FAMILIES), help="model types, comma-separated"
    )
    parser.add_argument(
        "--neighbours", metavar="off|on|N|all", help="the repair's neighbourhood (default: the repair's own, off)"
    )
    parser.add_argument(
        "--arithmetic",
        metavar="A,B,...",
        help=f"build once, then repair under each of: {', '.join(ARITHMETIC)} (each in a fresh process)",
    )
    parser.add_argument("--jitter-ulps", type=int, default=4, help="jitter: the most units of float32 v moves by")
    parser.add_argument("--jitter-seed", type=int, default=0, help="jitter: the seed of the moves")
    parser.add_argument("--run-built", nargs=2, metavar=("MODEL", "SUITE"), help=argparse.SUPPRESS)  # one process
    parser.add_argument("--run-jitter", action="store_true", help=argparse.SUPPRESS)  # that process jitters v
    add_output_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.run_built:  # one arithmetic's run, in its own process: one JSON line
        model_dir, folder = (Path(p) for p in args.run_built)
        jitter = (args.jitter_ulps, args.jitter_seed) if args.run_jitter else None
        out = folder.parent / f"{folder.name}-repaired"
        with contextlib.redirect_stderr(io.StringIO()):
            row = run_built(model_dir, folder, out, args.neighbours, jitter, separation=False)
        print(json.dumps(row))
        return 0
    arithmetic = args.arithmetic.split(",") if args.arithmetic else None
    unknown = sorted(set(arithmetic or ()) - set(ARITHMETIC))
    if unknown:
        parser.error(f"--arithmetic: unknown {', '.join(unknown)} (known: {', '.join(ARITHMETIC)})")
    rows = []
    for model_type in args.families.split(","):
        with tempfile.TemporaryDirectory() as work:
            try:
                if arithmetic:
                    ulps, seed = args.jitter_ulps, args.jitter_seed
                    rows.append(measure_arithmetic(model_type, Path(work), arithmetic, args.neighbours, ulps, seed))
                else:
                    rows.append(measure(model_type, Path(work), args.neighbours))
            except Exception as exc:  # noqa: BLE001 — one family's crash is that family's row
                rows.append({"family": model_type, "ok": False, "why": f"{type(exc).__name__}: {exc}"[:500]})
    result = {"families": rows, "all_ok": all(r["ok"] for r in rows)}
    if arithmetic:
        result["arithmetic"] = arithmetic
        result["all_same_outcome"] = all(r.get("same_outcome", False) for r in rows)
    report("families", parser, args, argv, result, _print_arithmetic if arithmetic else _print_table)
    return 0 if result["all_ok"] else 1


def _print_arithmetic(result: dict[str, Any]) -> None:
    """A row a family: under each arithmetic, the form repaired (final: fell back or found so) and the
    iterations, and whether the outcome is the same under all."""
    names = result["arithmetic"]
    print(f"{'family':<22} " + " ".join(f"{n:<22}" for n in names) + " same")
    for r in result["families"]:
        cells = []
        for name in names:
            run = r.get("arithmetic", {}).get(name, {})
            form = {"dense": "dense", "final_linear": "final"}.get(run.get("form"), "-")
            form += " (fell back)" if run.get("fell_back") else ""
            cells.append(f"{form + ' ' + str(run.get('iterations', '-')) if run.get('ok') else 'FAILED':<22}")
        print(f"{r['family']:<22} " + " ".join(cells) + f" {'yes' if r.get('same_outcome') else 'NO'}")
        if not r["ok"]:
            for name, run in r.get("arithmetic", {}).items():
                if not run.get("ok"):
                    print(f"    {name}: {(run.get('why') or run.get('output') or '')[-400:]}")


def _certified(path: Path) -> dict[str, Any]:
    """What a written certificate says of the head, the repair and Cert 1–3."""
    data = json.loads(path.read_text(encoding="utf-8"))
    model = data["model"]
    final = model.get("classifier") is None
    head = (
        f"{model['repair_layer']}"
        if final
        else f"{model['repair_layer']} → {model['activation']} → {model['classifier']}"
    )
    found_by = model.get("found_by") or ""
    return {
        "form": "final_linear" if final else "dense",
        "fell_back": found_by.startswith(FELL_BACK),  # auto found a dense head whose repair did not converge
        "found_by": found_by,
        "head": head,
        "iterations": data["repair"]["iterations"],
        # Perturbed copies certified beside the suite's cases (0: the neighbourhood was left out, or none was wrong).
        "neighbours": sum(c.get("source") == NEIGHBOUR for c in data["cases"]),
        **data["summary"],
    }


def _print_table(result: dict[str, Any]) -> None:
    print(
        f"{'family':<22} {'form':<24} {'head':<52} {'it':>3} {'cert1':>7} {'cert2':>7} {'cert3':>7} {'hood':>5}  "
        "ok  ×dense ×final"
    )
    for r in result["families"]:
        form = r.get("form", "-") + (" (fell back)" if r.get("fell_back") else "")
        print(
            f"{r['family']:<22} {form:<24} {r.get('head', '-'):<52} {r.get('iterations', '-'):>3} "
            f"{r.get('cert1', '-'):>7} {r.get('cert2', '-'):>7} {r.get('cert3', '-'):>7} "
            f"{r.get('neighbours', '-'):>5}  "
            f"{'yes' if r['ok'] else 'NO '} "
            f"{_growth(r.get('dense_norm_growth')):>6} {_growth(r.get('final_weight_growth')):>6}"
        )
        if not r["ok"]:
            print(f"    {r.get('why') or (r.get('output') or '')[-600:]}")


def _growth(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


if __name__ == "__main__":
    sys.exit(main())
