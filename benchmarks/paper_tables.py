"""Benchmark: the paper's tables (3, 4, 6–8, Appendix D) on real data, CPU only. Not in CI.

For each task and model:

* **Models.** SST-2: the two MiniLM example models (``example_suites/minilm/models.py``:
  DistilBERT layout with a ReLU ``pre_classifier`` head, BERT with the tanh pooler head). They
  were trained on airline tweets, not SST-2; their SST-2 accuracy is reported as it is. RTE: the
  same assembled models fine-tuned here on RTE train pairs (all layers, AdamW lr 5e-5, batch 16,
  ``--rte-epochs`` epochs, max_length 128, seed 0), cached under
  ``$XDG_CACHE_HOME/warp-check/benchmarks/`` keyed by a hash of the settings.
* **Cases.** Data is read from ``../shared/data`` (never copied into the repository). A seeded
  sample of train sentences (SST-2: at least 6 words) is encoded; those the model gets right by a
  gap ≥ 0.05 are split, in order, into must_keep (``--keep``), attack sources for must_fix
  (``--fix-pool``) and attack sources for the held-out attack set (``--heldout-pool``), all
  disjoint. must_fix and held-out cases come from ``warp-check attack --recipe
  DeepWordBugGao2018`` (issue 5; TextAttack, run in the ``--attack-python`` environment that has
  it) on those sources: every success the model really gets wrong. General accuracy: the dev set
  (SST-2 872, RTE 277).
* **Runs.** ``warp_check.compare`` (original, same-layer LoRA r=2 α=4, all-layers full FT,
  WARP r=2; baselines capped at ``--epochs``), the certificate table from ``repair_cases`` (Cert
  1/2/3 counts, gaps, ε* and the local radius, tightness of both against the v-space min-norm
  attack and the paper's Monte Carlo test), and WARP-only ablations: ranks 1/2/8/32, must_fix size,
  must_keep size (seeded subsamples).

Run: ``python benchmarks/paper_tables.py --task sst2 --models distilbert --out sst2.md`` (the
commands and sizes behind benchmarks/RESULTS.md are written at the top of each of its tables).
Writes only ``--out`` / ``--json``, the model cache and a temporary folder it removes.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "example_suites" / "minilm"))

import argparse  # noqa: E402
import csv  # noqa: E402
import hashlib  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
LABELS = {"sst2": ["negative", "positive"], "rte": ["entailment", "not_entailment"]}
MARGIN = 0.05
RTE_FORMAT = "warp-bench-rte/1"


# -- data -------------------------------------------------------------------------------------


def read_tsv(task: str, split: str) -> list[dict]:
    path = DATA / task / f"{split}.tsv"
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    out = []
    for i, row in enumerate(rows):
        if task == "sst2":
            out.append({"id": f"{split}-{i}", "text": row["sentence"].strip(), "label": int(row["label"])})
        else:
            out.append(
                {
                    "id": f"{split}-{row['idx']}",
                    "text": row["sentence1"].strip(),
                    "text_pair": row["sentence2"].strip(),
                    "label": int(row["label"]),
                }
            )
    return out


def write_jsonl(path: Path, rows: list[dict], task: str) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            record = {k: v for k, v in row.items() if k in ("id", "text", "text_pair", "source", "original")}
            record["label"] = LABELS[task][row["label"]] if isinstance(row["label"], int) else row["label"]
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_suite(folder: Path, model_dir: Path, task: str, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"labels = {json.dumps(LABELS[task])}\n", f"[model]\npath = {json.dumps(str(model_dir))}\n"]
    for name, kind in files.items():
        lines.append(f'[[cases]]\npath = "{name}"\nkind = "{kind}"\n')
    (folder / "warp.toml").write_text("\n".join(lines), encoding="utf-8")
    return folder


# -- models -----------------------------------------------------------------------------------


def sst2_model(name: str) -> Path:
    import models  # example_suites/minilm/models.py

    return models.assemble(name)


def cache_root() -> Path:
    """Where the benchmarks keep what they build once: ``$XDG_CACHE_HOME/warp-check/benchmarks``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "warp-check" / "benchmarks"


def rte_model(name: str, epochs: int, log) -> tuple[Path, dict]:
    """The example model ``name`` fine-tuned on RTE train pairs; cached by a hash of the recipe."""
    import models

    base = models.assemble(name)
    recipe = {"format": RTE_FORMAT, "base": base.name, "epochs": epochs, "lr": 5e-5, "batch": 16, "seed": 0}
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
    root = cache_root()
    final = root / f"rte-minilm-{name}-{key}"
    if (final / "training.json").is_file():
        return final, json.loads((final / "training.json").read_text())
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(base)
    model.config.id2label = dict(enumerate(LABELS["rte"]))
    model.config.label2id = {v: k for k, v in model.config.id2label.items()}
    train = read_tsv("rte", "train")
    accepted = set(inspect.signature(model.forward).parameters)
    optimiser = torch.optim.AdamW(model.parameters(), lr=recipe["lr"])
    generator = torch.Generator().manual_seed(0)
    start = time.perf_counter()
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(train), generator=generator).tolist()
        total = 0.0
        for begin in range(0, len(order), recipe["batch"]):
            rows = [train[i] for i in order[begin : begin + recipe["batch"]]]
            batch = tokenizer(
                [r["text"] for r in rows], [r["text_pair"] for r in rows],
                truncation=True, max_length=128, padding=True, return_tensors="pt",
            )  # fmt: skip
            batch = {k: v for k, v in batch.items() if k in accepted}
            loss = F.cross_entropy(model(**batch).logits, torch.tensor([r["label"] for r in rows]))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(rows)
        seconds = time.perf_counter() - start
        log(f"rte {name}: epoch {epoch + 1}/{epochs}, loss {total / len(train):.4f}, {seconds:.0f} s")
    model.eval()
    dev = read_tsv("rte", "dev")
    with torch.inference_mode():
        correct = 0
        for begin in range(0, len(dev), 64):
            rows = dev[begin : begin + 64]
            batch = tokenizer(
                [r["text"] for r in rows], [r["text_pair"] for r in rows],
                truncation=True, max_length=128, padding=True, return_tensors="pt",
            )  # fmt: skip
            batch = {k: v for k, v in batch.items() if k in accepted}
            correct += int((model(**batch).logits.argmax(-1) == torch.tensor([r["label"] for r in rows])).sum())
    info = recipe | {"seconds": round(time.perf_counter() - start, 1), "dev_accuracy": correct / len(dev)}
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    (tmp / "training.json").write_text(json.dumps(info, indent=2))
    os.replace(tmp, final)
    return final, info


# -- cases ------------------------------------------------------------------------------------


def correct_pool(adapter, task: str, rows: list[dict], want: int, log) -> tuple[list[dict], float]:
    """Rows the model gets right by ≥ MARGIN, in order, until ``want``; also the accuracy seen."""
    from warp_check import Case, Kind, evaluate

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


def attack(python: str, model_dir: Path, task: str, sources: list[dict], work: Path, name: str, budget: int, log):
    """``warp-check attack --recipe DeepWordBugGao2018`` on ``sources``; returns the cases found."""
    folder = write_suite(work / f"attack-{name}", model_dir, task, {"clean.jsonl": "must_keep"})
    write_jsonl(folder / "clean.jsonl", sources, task)
    out = folder / "found.jsonl"
    env = os.environ | {"HF_HUB_OFFLINE": "1", "NLTK_DATA": os.environ.get("NLTK_DATA", "/tmp/nltk-off")}
    command = [
        python, "-m", "warp_check.cli", "attack", str(folder), "--recipe", "DeepWordBugGao2018",
        "--out", str(out), "--query-budget", str(budget), "--json", "-q",
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=7200)
    if done.returncode != 0:
        raise RuntimeError(f"warp-check attack failed ({done.returncode}): {done.stderr[-2000:]}")
    found = read_jsonl(out)
    report = json.loads(done.stdout)
    log(f"attack {name}: {len(found)} cases from {len(sources)} sources in {time.perf_counter() - start:.0f} s")
    return found, report["counts"] | {"seconds": round(time.perf_counter() - start, 1)}


# -- certificates -----------------------------------------------------------------------------


def certificate_table(suite, cache: Path) -> dict:
    from warp_check import evaluate, monte_carlo_flip_multiplier, repair_cases
    from warp_check.runs.load import load_adapter

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


def run_one(task: str, name: str, args, work: Path, log) -> dict:
    from warp_check import load_suite
    from warp_check.extras.baselines import TrainSettings
    from warp_check.extras.compare import CompareSettings, compare_suite
    from warp_check.runs.load import load_adapter

    started = time.perf_counter()
    info: dict = {"task": task, "model": name}
    if task == "sst2":
        model_dir = sst2_model(name)
    else:
        model_dir, info["rte_training"] = rte_model(name, args.rte_epochs, log)
    info["model_dir"] = str(model_dir)
    folder = work / f"{task}-{name}"
    train = read_tsv(task, "train")
    if task == "sst2":
        train = [r for r in train if len(r["text"].split()) >= 6]
    random.Random(args.seed).shuffle(train)
    dev = read_tsv(task, "dev")
    # a suite only to load the model through the suite machinery (labels, head)
    probe_dir = write_suite(work / f"{task}-{name}-probe", model_dir, task, {"probe.jsonl": "must_keep"})
    write_jsonl(probe_dir / "probe.jsonl", dev[:1], task)
    probe = load_suite(probe_dir)
    adapter = load_adapter(probe)
    need = args.keep + args.fix_pool + args.heldout_pool
    pool, train_acc = correct_pool(adapter, task, train, need, log)
    if len(pool) < need:
        raise RuntimeError(f"{task}/{name}: only {len(pool)} correctly classified train rows, need {need}")
    keep, fix_src = pool[: args.keep], pool[args.keep : args.keep + args.fix_pool]
    held_src = pool[args.keep + args.fix_pool :]
    info["train_sample_accuracy"] = train_acc
    fix, info["attack_fix"] = attack(
        args.attack_python, model_dir, task, fix_src, work, f"{task}-{name}-fix", args.budget, log
    )
    held, info["attack_heldout"] = attack(
        args.attack_python, model_dir, task, held_src, work, f"{task}-{name}-held", args.budget, log
    )
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(folder / "must_keep.jsonl", keep, task)
    write_jsonl(folder / "must_fix.jsonl", fix, task)
    general = write_jsonl(work / f"{task}-dev.jsonl", dev, task)
    heldout = write_jsonl(work / f"{task}-{name}-heldout.jsonl", held, task)
    suite = load_suite(
        write_suite(folder, model_dir, task, {"must_keep.jsonl": "must_keep", "must_fix.jsonl": "must_fix"})
    )
    cache = work / "cache"
    info["sizes"] = {"must_keep": len(keep), "must_fix": len(fix), "general": len(dev), "heldout": len(held)}
    log(f"{task}/{name}: compare (epochs ≤ {args.epochs})")
    train_settings = TrainSettings(max_epochs=args.epochs, seed=args.seed, restore_best=args.restore_best)
    settings = CompareSettings(train=train_settings, seed=args.seed, batch_size=64)
    main = compare_suite(suite, settings, general=general, heldout=heldout, cache_dir=cache, progress=log)
    info["compare"] = main.to_dict()
    info["compare_markdown"] = main.to_markdown(heading="####")
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
            f"Sizes: must_fix {s['must_fix']} (DeepWordBugGao2018 successes on {meta['args']['fix_pool']} correctly "
            f"classified train rows; {r['attack_fix']}), must_keep {s['must_keep']}, general {s['general']} (dev), "
            f"held-out attacks {s['heldout']} (on {meta['args']['heldout_pool']} other rows; {r['attack_heldout']}). "
            f"Model accuracy on the sampled train rows: {pct(r['train_sample_accuracy'])}."
            + (f" RTE fine-tuning: {r['rte_training']}." if "rte_training" in r else ""),
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
                + " / ".join(num(c["eps_star"][k]) for k in ("min", "median", "mean", "max")) + " |",
                "| local radius min / median / mean / max | "
                + " / ".join(num(c["eps_local"][k]) for k in ("min", "median", "mean", "max")) + " |",
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
        lines += [f"Where WARP loses: {losses(r['compare'])}",
            "",
            f"Total time for this table: {r['seconds']:.0f} s.", ""]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("sst2", "rte", "all"), default="all")
    parser.add_argument("--models", default="distilbert,bert")
    parser.add_argument("--keep", type=int, default=800, help="must_keep size (RTE: --rte-keep)")
    parser.add_argument("--rte-keep", type=int, default=200)
    parser.add_argument("--fix-pool", type=int, default=150, help="clean rows attacked for must_fix")
    parser.add_argument("--heldout-pool", type=int, default=150, help="clean rows attacked for the held-out set")
    parser.add_argument("--budget", type=int, default=300, help="attack queries per row")
    parser.add_argument("--epochs", type=int, default=20, help="baselines' epoch cap (paper: 300)")
    parser.add_argument("--rte-epochs", type=int, default=2)
    parser.add_argument(
        "--restore-best", action="store_true", help="baselines keep their lowest-loss epoch's weights"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--attack-python", default="/tmp/ta-venv/bin/python")
    parser.add_argument("--out", help="Markdown fragment")
    parser.add_argument("--json", help="all numbers as JSON")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    import _synthetic
    import peft
    import torch
    import transformers

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
    machine = _synthetic.machine_info()
    meta = {
        "command": "python benchmarks/paper_tables.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": f"{machine['cpu_count']} CPU cores ({machine['processor']}, shared), no GPU, "
        f"load {machine['load_average_1m']} at the end",
        "versions": f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}",
        "args": vars(args),
    }
    text = render(results, meta)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=2, default=str))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
