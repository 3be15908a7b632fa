"""Benchmark: the paper's tables (3, 4, 6–8, Appendix D) on real data, CPU only. Not in CI.

For each task and model:

* **Models.** SST-2: the two MiniLM example models (``benchmarks.example_models.minilm``:
  DistilBERT layout with a ReLU ``pre_classifier`` head, BERT with the tanh pooler head). They
  were trained on airline tweets, not SST-2; their SST-2 accuracy is reported as it is, or with
  ``--sst2-rows N`` they are fine-tuned on N SST-2 train sentences first
  (``benchmarks.example_models.sst2_finetune``, cached). RTE: the
  same models fine-tuned on RTE train pairs for ``--rte-epochs`` epochs
  (``benchmarks.example_models.rte_finetune``, cached).
* **Cases.** Data is read from ``../shared/data`` (``benchmarks.data``). A seeded
  sample of train sentences (SST-2: at least 6 words) is encoded; those the model gets right by a
  gap ≥ 0.05 are split, in order, into must_keep (``--keep``), attack sources for must_fix
  (``--fix-pool``), attack sources for the held-out attack set (``--heldout-pool``) and aux
  cases (``--aux``, default none), all disjoint. must_fix cases come from ``warp-check attack
  --recipe`` ``--fix-recipe`` (default DeepWordBugGao2018; TextAttack, run in the
  ``--attack-python`` environment that has it), held-out ones from each of ``--heldout-recipes``
  on the same held-out sources: every success the model really gets wrong. Attacks are cached
  under ``$XDG_CACHE_HOME/warp-check/benchmarks/attacks``. General accuracy: the dev set (SST-2
  872, RTE 277).
* **Runs.** ``warp_check.compare`` (original, same-layer LoRA r=2 α=4, all-layers full FT,
  WARP r=2; baselines capped at ``--epochs``), the certificate table from ``repair_cases`` (Cert
  1/2/3 counts, gaps, ε* and the local radius, tightness of both against the v-space min-norm
  attack and the paper's Monte Carlo test), and WARP-only ablations: ranks 1/2/8/32, must_fix size,
  must_keep size (seeded subsamples).

Run: ``python -m benchmarks.paper_tables --task sst2 --models distilbert --out sst2.md`` from
the repository root (the commands behind benchmarks/RESULTS.md are in the JSON records it links).
Needs a Python with TextAttack for the attacks (``--attack-python``). Writes only ``--out``, the
``--save`` record, the model cache and a temporary folder it removes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.data import cache_root, read_jsonl, read_tsv, write_jsonl, write_suite
from benchmarks.example_models import minilm, rte_finetune, sst2_finetune
from benchmarks.measure import machine_info
from benchmarks.results import add_output_arguments, command_line, report
from warp_check import Case, Kind, evaluate, load_suite, monte_carlo_flip_multiplier, repair_cases
from warp_check.extras.baselines import TrainSettings
from warp_check.extras.compare import CompareSettings, compare_suite
from warp_check.releases.load import load_adapter

MARGIN = 0.05


# -- cases ------------------------------------------------------------------------------------


def correct_pool(adapter, task: str, rows: list[dict], want: int, log) -> tuple[list[dict], float]:
    """Rows the model gets right by ≥ MARGIN, in order, until ``want``; also the accuracy seen."""
    chosen, seen, right = [], 0, 0
    for begin in range(0, len(rows), 512):
        chunk = rows[begin : begin + 512]
        cases = [
            Case(id=r["id"], text=r["text"], text_pair=r.get("text_pair"), label=r["label"], kind=Kind.MUST_KEEP)
            for r in chunk
        ]
        gaps = evaluate(adapter, cases, batch_size=64, progress=False).gaps
        seen += len(chunk)
        right += int((gaps > 0).sum())
        chosen += [r for r, g in zip(chunk, gaps, strict=True) if g >= MARGIN]
        log(f"pool: {len(chosen)}/{want} right after {seen} rows")
        if len(chosen) >= want:
            break
    return chosen[:want], right / max(seen, 1)


def attack(
    python: str, model_dir: Path, task: str, sources: list[dict], work: Path, name: str, budget: int, log,
    recipe: str = "DeepWordBugGao2018",
):  # fmt: skip
    """``warp-check attack --recipe RECIPE`` on ``sources``; returns the cases found and the counts.

    Cached under ``data.cache_root()/attacks`` by recipe, budget, model folder and the sources'
    ids and texts: a second run on the same split reads the cases instead of attacking again.
    """
    key = hashlib.sha256(
        json.dumps(
            [recipe, budget, model_dir.name, task, [(r["id"], r["text"], r.get("text_pair")) for r in sources]]
        ).encode()
    ).hexdigest()[:16]
    cached = cache_root() / "attacks" / f"{recipe}-{key}"
    if (cached / "counts.json").is_file():
        found = read_jsonl(cached / "found.jsonl")
        log(f"attack {name} ({recipe}): {len(found)} cases from the cache {cached}")
        return found, json.loads((cached / "counts.json").read_text()) | {"cached": True}
    folder = write_suite(work / f"attack-{name}-{recipe}", model_dir, task, {"clean.jsonl": "must_keep"})
    write_jsonl(folder / "clean.jsonl", sources, task)
    out = folder / "found.jsonl"
    env = os.environ | {"HF_HUB_OFFLINE": "1", "NLTK_DATA": os.environ.get("NLTK_DATA", "/tmp/nltk-off")}
    command = [
        python, "-m", "warp_check.cli", "attack", str(folder), "--recipe", recipe,
        "--out", str(out), "--query-budget", str(budget), "--json", "-q",
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=7200)
    if done.returncode != 0:
        raise RuntimeError(f"warp-check attack failed ({done.returncode}): {done.stderr[-2000:]}")
    found = read_jsonl(out)
    summary = json.loads(done.stdout)
    counts = summary["counts"] | {"seconds": round(time.perf_counter() - start, 1)}
    log(f"attack {name} ({recipe}): {len(found)} cases from {len(sources)} sources in {counts['seconds']:.0f} s")
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{cached.name}.", dir=cached.parent))
    shutil.copyfile(out, tmp / "found.jsonl")
    (tmp / "counts.json").write_text(json.dumps(counts))
    os.replace(tmp, cached)
    return found, counts


# -- certificates -----------------------------------------------------------------------------


def certificate_table(suite, cache: Path) -> dict:
    adapter = load_adapter(suite)
    evaluation = evaluate(adapter, suite.cases, batch_size=64, cache_dir=cache, progress=False)
    outcome = repair_cases(adapter, suite.cases, suite.repair, evaluation=evaluation, progress=False)
    result = outcome.result
    if not outcome.certificates:
        return {"status": result.status.value, "message": result.message}
    fix = [r for r in outcome.certificates if r.kind == "must_fix"]
    keep = [r for r in outcome.certificates if r.kind == "must_keep" and not r.excluded]
    V = evaluation.encoded.rows([r.id for r in fix]).astype(np.float64)
    labels = np.array([r.label for r in fix])
    eps = np.array([r.eps_star for r in fix])
    local = np.array([r.eps_local for r in fix])
    flips = np.array([r.flip_radius for r in fix])
    head = result.head_after
    mc_star = monte_carlo_flip_multiplier(head, V, labels, eps)
    mc_local = monte_carlo_flip_multiplier(head, V, labels, local)

    def stats(values) -> dict:
        v = np.asarray(values, dtype=np.float64)
        finite = v[np.isfinite(v)]
        return {
            "min": float(finite.min()) if finite.size else None,
            "median": float(np.median(finite)) if finite.size else None,
            "mean": float(finite.mean()) if finite.size else None,
            "max": float(finite.max()) if finite.size else None,
            "n_infinite": int((~np.isfinite(v)).sum()),
        }

    return {
        "status": result.status.value,
        "iterations": len(result.iterations),
        "loop_seconds": result.seconds,
        "cert1": f"{sum(bool(r.cert1) for r in fix)}/{len(fix)}",
        "cert2": f"{sum(bool(r.cert2) for r in keep)}/{len(keep)}",
        "cert3": f"{sum(bool(r.cert3) for r in fix)}/{len(fix)}",
        "excluded_must_keep": len(result.excluded_keep),
        "gap_fix": stats([r.gap_after for r in fix]),
        "gap_keep": stats([r.gap_after for r in keep]),
        "eps_star": stats(eps),
        "eps_local": stats(local),
        "local_over_star": stats(local / eps),
        "attack_flip_over_star": stats(flips / eps),
        "attack_flip_over_local": stats(flips / local),
        "mc_multiplier_star": stats(mc_star),
        "mc_multiplier_local": stats(mc_local),
        "pgd_flips_inside": int(sum(1 for r in fix if r.attack_min_gap is not None and r.attack_min_gap <= 0)),
        "lipschitz": outcome.lipschitz.L,
    }


# -- one task × model -------------------------------------------------------------------------


@dataclass(frozen=True)
class Split:
    """One task × model's cases, written as a suite folder plus the general and held-out files."""

    model_dir: Path
    suite_dir: Path
    general: Path  # the dev set
    heldout: Path  # every held-out recipe's successes, each case's source naming its recipe
    sizes: dict[str, int]
    info: dict


def build_split(task: str, name: str, args, work: Path, log) -> Split:
    """Rows the model gets right, split in order into must_keep, must_fix sources, held-out sources
    and aux; must_fix = ``args.fix_recipe``'s successes, held out = each of ``args.heldout_recipes``'s
    on the held-out sources (the same sources for every recipe)."""
    info: dict = {}
    if task == "sst2" and args.sst2_rows:
        model_dir, info["sst2_training"] = sst2_finetune(name, args.sst2_rows, log)
    elif task == "sst2":
        model_dir = minilm(name)
    else:
        model_dir, info["rte_training"] = rte_finetune(name, args.rte_epochs, log)
    folder = work / f"{task}-{name}"
    train = read_tsv(task, "train")
    if task == "sst2":
        train = [r for r in train if len(r["text"].split()) >= 6]
    random.Random(args.seed).shuffle(train)
    dev = read_tsv(task, "dev")
    # a suite only to load the model through the suite machinery (labels, head)
    probe_dir = write_suite(work / f"{task}-{name}-probe", model_dir, task, {"probe.jsonl": "must_keep"})
    write_jsonl(probe_dir / "probe.jsonl", dev[:1], task)
    adapter = load_adapter(load_suite(probe_dir))
    need = args.keep + args.fix_pool + args.heldout_pool + args.aux
    pool, train_acc = correct_pool(adapter, task, train, need, log)
    if len(pool) < need:
        raise RuntimeError(f"{task}/{name}: only {len(pool)} correctly classified train rows, need {need}")
    keep, fix_src = pool[: args.keep], pool[args.keep : args.keep + args.fix_pool]
    held_end = args.keep + args.fix_pool + args.heldout_pool
    held_src, aux = pool[args.keep + args.fix_pool : held_end], pool[held_end:]
    info["train_sample_accuracy"] = train_acc
    fix, info["attack_fix"] = attack(
        args.attack_python, model_dir, task, fix_src, work, f"{task}-{name}-fix", args.budget, log, args.fix_recipe
    )
    held: list[dict] = []
    counts = {}
    for recipe in args.heldout_recipes.split(","):
        found, counts[recipe] = attack(
            args.attack_python, model_dir, task, held_src, work, f"{task}-{name}-held", args.budget, log, recipe
        )
        held += found
    # one recipe: the record keeps the shape it had before there could be several
    info["attack_heldout"] = next(iter(counts.values())) if len(counts) == 1 else counts
    folder.mkdir(parents=True, exist_ok=True)
    files = {"must_keep.jsonl": "must_keep", "must_fix.jsonl": "must_fix"}
    write_jsonl(folder / "must_keep.jsonl", keep, task)
    write_jsonl(folder / "must_fix.jsonl", fix, task)
    if aux:
        write_jsonl(folder / "aux.jsonl", aux, task)
        files["aux.jsonl"] = "aux"
    sizes = {"must_keep": len(keep), "must_fix": len(fix), "general": len(dev), "heldout": len(held)}
    if aux:
        sizes["aux"] = len(aux)
    return Split(
        model_dir=model_dir,
        suite_dir=write_suite(folder, model_dir, task, files),
        general=write_jsonl(work / f"{task}-dev.jsonl", dev, task),
        heldout=write_jsonl(work / f"{task}-{name}-heldout.jsonl", held, task),
        sizes=sizes,
        info=info,
    )


def run_one(task: str, name: str, args, work: Path, log) -> dict:
    started = time.perf_counter()
    split = build_split(task, name, args, work, log)
    info: dict = {"task": task, "model": name, "model_dir": str(split.model_dir)} | split.info
    suite, general, heldout = load_suite(split.suite_dir), split.general, split.heldout
    fix = [c for c in suite.cases if c.kind is Kind.MUST_FIX]
    keep = [c for c in suite.cases if c.kind is Kind.MUST_KEEP]
    cache = work / "cache"
    info["sizes"] = split.sizes
    log(f"{task}/{name}: compare (epochs ≤ {args.epochs})")
    train_settings = TrainSettings(max_epochs=args.epochs, seed=args.seed, restore_best=args.restore_best)
    settings = CompareSettings(train=train_settings, seed=args.seed, batch_size=64)
    comparison = compare_suite(suite, settings, general=general, heldout=heldout, cache_dir=cache, progress=log)
    info["compare"] = comparison.to_dict()
    info["compare_markdown"] = comparison.to_markdown(heading="####")
    log(f"{task}/{name}: certificates")
    info["certificates"] = certificate_table(suite, cache)
    ablations = {}
    for label, kwargs in (
        ("rank", [{"ranks": (r,)} for r in (1, 2, 8, 32)]),
        ("fix_size", [{"fix_size": n} for n in (10, 25, 50, 75) if n < len(fix)] + [{}]),
        ("keep_size", [{"keep_size": n} for n in (0, 50, 200, 400) if n < len(keep)] + [{}]),
    ):
        rows = []
        for kw in kwargs:
            run = compare_suite(
                suite, CompareSettings(methods=("warp",), seed=args.seed, batch_size=64, **kw),
                general=general, heldout=heldout, cache_dir=cache,
            ).to_dict()  # fmt: skip
            row = run["methods"][0]
            rows.append(
                {
                    "rank": row["rank"],
                    "fix": run["sizes"]["must_fix"],
                    "keep": run["sizes"]["must_keep"],
                    "attack_gen": row["attack_gen"],
                    "general_acc": row["general_acc"],
                    "iterations": row["details"]["iterations"],
                    "status": row["details"]["status"],
                    "eps_star_median": row["details"]["eps_star_median"],
                    "seconds": row["details"]["repair_seconds"],
                }
            )
        ablations[label] = rows
        log(f"{task}/{name}: ablation {label} done")
    info["ablations"] = ablations
    info["seconds"] = round(time.perf_counter() - started, 1)
    return info


# -- rendering --------------------------------------------------------------------------------


def pct(value) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def num(value, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def render(results: list[dict], meta: dict) -> str:
    lines = [
        "## Paper tables on real data (SST-2 / RTE, MiniLM example models)",
        "",
        f"Command: `{meta['command']}`  ",
        f"Date: {meta['date']}; machine: {meta['machine']}; {meta['versions']}.",
        "",
    ]
    for r in results:
        s = r["sizes"]
        lines += [
            f"### {r['task'].upper()} — MiniLM {r['model']} ({r['compare']['info']['repair_layer']} → "
            f"{r['compare']['info']['activation']})",
            "",
            f"Sizes: must_fix {s['must_fix']} ({meta['args']['fix_recipe']} successes on {meta['args']['fix_pool']} "
            f"correctly classified train rows; {r['attack_fix']}), must_keep {s['must_keep']}, general {s['general']} "
            f"(dev), held-out attacks {s['heldout']} ({meta['args']['heldout_recipes']} on "
            f"{meta['args']['heldout_pool']} other rows; {r['attack_heldout']}). "
            f"Model accuracy on the sampled train rows: {pct(r['train_sample_accuracy'])}."
            + (f" RTE fine-tuning: {r['rte_training']}." if "rte_training" in r else "")
            + (f" SST-2 fine-tuning: {r['sst2_training']}." if "sst2_training" in r else ""),
            "",
            r["compare_markdown"].strip(),
            "",
        ]
        c = r["certificates"]
        if "cert1" in c:
            lines += [
                "Certificates (WARP r=2, repair_cases):",
                "",
                "| | value |",
                "|---|---|",
                f"| Cert 1 (gap ≥ γ_s) | {c['cert1']} |",
                f"| must_fix gap min / mean / max | {num(c['gap_fix']['min'])} / {num(c['gap_fix']['mean'])} / "
                f"{num(c['gap_fix']['max'])} |",
                f"| Cert 2 (gap ≥ γ_h, label kept) | {c['cert2']} (excluded: {c['excluded_must_keep']}) |",
                f"| must_keep gap min / mean | {num(c['gap_keep']['min'])} / {num(c['gap_keep']['mean'])} |",
                f"| Cert 3 (ε* > 0, no PGD flip in the certified ball) | {c['cert3']} (flips found: "
                f"{c['pgd_flips_inside']}) |",
                "| ε* (paper) min / median / mean / max | "
                + " / ".join(num(c["eps_star"][k]) for k in ("min", "median", "mean", "max"))
                + " |",
                "| local radius min / median / mean / max | "
                + " / ".join(num(c["eps_local"][k]) for k in ("min", "median", "mean", "max"))
                + " |",
                f"| local / ε* median | {num(c['local_over_star']['median'])} |",
                f"| v-space attack flip radius / ε*: min / median / max | {num(c['attack_flip_over_star']['min'])} / "
                f"{num(c['attack_flip_over_star']['median'])} / {num(c['attack_flip_over_star']['max'])} |",
                f"| v-space attack flip radius / local: min / median / max | "
                f"{num(c['attack_flip_over_local']['min'])} / {num(c['attack_flip_over_local']['median'])} / "
                f"{num(c['attack_flip_over_local']['max'])} |",
                f"| Monte Carlo first-flip multiple of ε*: min / median / max (none ≤ 1000×: "
                f"{c['mc_multiplier_star']['n_infinite']}) | {num(c['mc_multiplier_star']['min'])} / "
                f"{num(c['mc_multiplier_star']['median'])} / {num(c['mc_multiplier_star']['max'])} |",
                f"| Monte Carlo first-flip multiple of the local radius: min / median / max (none: "
                f"{c['mc_multiplier_local']['n_infinite']}) | {num(c['mc_multiplier_local']['min'])} / "
                f"{num(c['mc_multiplier_local']['median'])} / {num(c['mc_multiplier_local']['max'])} |",
                f"| Lipschitz L; iterations; loop time | {num(c['lipschitz'])}; {c['iterations']}; "
                f"{c['loop_seconds']:.2f} s |",
                "",
            ]
        else:
            lines += [f"Certificates: repair {c['status']}: {c['message']}", ""]
        for label, title in (("rank", "Rank"), ("fix_size", "must_fix size"), ("keep_size", "must_keep size")):
            rows = r["ablations"][label]
            lines += [
                f"Ablation ({title}; WARP only):",
                "",
                f"| {title} | Atk. Gen | General Acc | Iterations | Status | ε* median | Loop time |",
                "|---|---|---|---|---|---|---|",
            ]
            for row in rows:
                key = {"rank": row["rank"], "fix_size": row["fix"], "keep_size": row["keep"]}[label]
                lines.append(
                    f"| {key} | {pct(row['attack_gen'])} | {pct(row['general_acc'])} | {row['iterations']} | "
                    f"{row['status']} | {num(row['eps_star_median'])} | {row['seconds']:.2f} s |"
                )
            lines.append("")
        lines += [
            f"Where WARP loses: {losses(r['compare'])}",
            "",
            f"Total time for this table: {r['seconds']:.0f} s.",
            "",
        ]
    return "\n".join(lines)


def losses(comparison: dict) -> str:
    rows = {m["method"]: m for m in comparison["methods"]}
    warp = next((m for m in comparison["methods"] if m["method"] == "warp"), None)
    if warp is None:
        return "no WARP row"
    out = []
    for column, title in (
        ("repair_acc", "Repair Acc"), ("remain_acc", "Remain Acc"), ("general_acc", "General Acc"),
        ("attack_gen", "Atk. Gen"),
    ):  # fmt: skip
        for method in ("original", "lora", "full_ft"):
            other = rows.get(method, {}).get(column)
            if other is not None and warp[column] is not None and other > warp[column]:
                out.append(f"{title}: {rows[method]['title']} {pct(other)} > WARP {pct(warp[column])}")
    for method in ("lora", "full_ft"):
        if method in rows and rows[method]["seconds"] is not None and rows[method]["seconds"] < warp["seconds"]:
            out.append(f"time: {rows[method]['title']} faster")
    return "; ".join(out) if out else "nowhere in this table"


def add_split_arguments(parser: argparse.ArgumentParser, *, keep, fix_pool, heldout_pool, budget, aux) -> None:
    """The options :func:`build_split` reads, with a benchmark's own defaults."""
    parser.add_argument("--keep", type=int, default=keep, help="must_keep size (RTE: --rte-keep)")
    parser.add_argument("--rte-keep", type=int, default=200)
    parser.add_argument("--fix-pool", type=int, default=fix_pool, help="clean rows attacked for must_fix")
    parser.add_argument(
        "--heldout-pool", type=int, default=heldout_pool, help="clean rows attacked for the held-out set"
    )
    parser.add_argument("--budget", type=int, default=budget, help="attack queries per row")
    parser.add_argument("--fix-recipe", default="DeepWordBugGao2018", help="the attack recipe that makes must_fix")
    parser.add_argument(
        "--heldout-recipes",
        default="DeepWordBugGao2018",
        help="comma-separated recipes run on the held-out rows (e.g. DeepWordBugGao2018,PWWSRen2019,Pruthi2019); "
        "the held-out accuracy is also given per recipe",
    )
    parser.add_argument("--aux", type=int, default=aux, help="correctly classified train rows given as aux cases")
    parser.add_argument("--rte-epochs", type=int, default=2)
    parser.add_argument(
        "--sst2-rows",
        type=int,
        default=0,
        help="SST-2: fine-tune the example model on this many SST-2 train sentences first (one epoch; "
        "0: the example model as it is, trained on airline tweets)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--attack-python", default="/tmp/ta-venv/bin/python", help="a Python with warp-check[attack] (TextAttack)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.paper_tables", description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("sst2", "rte", "all"), default="all")
    parser.add_argument("--models", default="distilbert,bert")
    add_split_arguments(parser, keep=800, fix_pool=150, heldout_pool=150, budget=300, aux=0)
    parser.add_argument("--epochs", type=int, default=20, help="baselines' epoch cap (paper: 300)")
    parser.add_argument("--restore-best", action="store_true", help="baselines keep their lowest-loss epoch's weights")
    parser.add_argument("--out", help="also write the tables as a Markdown fragment to this file")
    add_output_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    tasks = ("sst2", "rte") if args.task == "all" else (args.task,)
    results = []
    work = Path(tempfile.mkdtemp(prefix="warp-paper-"))
    try:
        for task in tasks:
            keep = args.keep if task == "sst2" else args.rte_keep
            for name in args.models.split(","):
                task_args = argparse.Namespace(**(vars(args) | {"keep": keep}))
                results.append(run_one(task, name, task_args, work, log))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    machine = machine_info()
    versions = machine["libraries"]
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "json", "save", "save_dir", "variant")}
    meta = {
        "command": command_line("paper_tables", sys.argv[1:] if argv is None else argv),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": f"{machine['cpu_count']} CPU cores ({machine['processor']}, shared), no GPU, "
        f"load {machine['load_average_1m']} at the end",
        "versions": f"torch {versions['torch']}, transformers {versions['transformers']}, peft {versions['peft']}",
        "args": settings,
    }
    text = render(results, meta)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    result = {"settings": settings, "tables": results}
    report("paper_tables", parser, args, argv, result, lambda _: print(text), ignore=("out", "attack_python"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
