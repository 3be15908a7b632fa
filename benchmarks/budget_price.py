"""Issue 60: the price of a fix. More repair within the same traffic budget, on real SST-2.

Per model (``--models``: the MiniLM example models, ``distilbert`` ReLU head and ``bert`` tanh head,
trained on airline tweets: the weak models of ``benchmarks/budgets.py``) and seed:

* **the suite**, all real SST-2 train sentences of six words or more, shuffled by the seed: the first
  ``--must-fix`` the model gets wrong are must_fix, the first ``--must-keep`` it gets right are
  must_keep, the next ``--traffic`` sentences (either) are the ``[traffic]`` sample (confidence 0.95),
  and ``--pool`` more are a pool of traffic like it, never seen by the repair. Dev (SST-2 dev) is
  never seen by any of it.
* **keep margin** (item 1): the must_keep-only repair and the full repair, under ``keep_margin =
  "gamma_h"`` and ``"own"``: the share of predictions changed on dev, on the pool and on the tune part,
  Cert 4's bound, dev drop, Cert 1/2.
* **budgets** (item 2), under ``--keep-margin``: at each of ``--budgets``, today's search
  (``fit_to_budget``: the run over its budget names the cases it cannot buy; the next run repairs
  without them) beside the price list (``price_list``: each case priced by its own repair on the tune
  part, the cheapest bought first; the next run repairs those alone): each next run as the product
  repairs with ``max_change`` set, measured by Cert 4 on the bound part, on dev and on the pool.

* **levers** (item 3, :mod:`benchmarks.budget_levers`): ``--levers`` prices ``--price-subset`` must_fix cases
  alone under each lever, counted on half of the tune part (guards come from the other half);
  ``--lever-price`` runs the price list and its next runs under a lever.
* ``--strength strong``: the SST-2 fine-tunes (88 %) instead of the weak models; ``--must-fix-source
  adversarial``: AdvGLUE-style must_fix, perturbations that flip a right prediction.

``python -m benchmarks.budget_price --models distilbert --seeds 0 --budgets 0.02,0.05 --save``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks.budget_levers import LEVER_NAMES, LeverBench, adversarial_fix, lever_named, lever_price_run
from benchmarks.data import LABELS, cache_root, read_tsv, write_jsonl, write_suite
from benchmarks.example_models import EXAMPLE_SUITES, minilm, sst2_finetune
from benchmarks.results import add_output_arguments, report
from warp_check import Kind, evaluate, load_suite, repair_cases
from warp_check.budget.price import PRICE_BUDGETS, price_list
from warp_check.cases import Case
from warp_check.certificates.traffic.reading import load_traffic
from warp_check.pipeline.ladder import Ladder
from warp_check.releases.load import load_adapter

CONFIDENCE = 0.95
STRONG_ROWS = 20_000  # the strong models: one epoch on this many SST-2 train sentences (88 % on dev)


def model_of(name: str, args, log) -> tuple[Path, dict | None]:
    """The model ``--strength`` names: the weak example model, or its SST-2 fine-tune (built once, cached) and
    the fine-tune's record (its training time and dev accuracy)."""
    if args.strength == "weak":
        return minilm(name), None
    return sst2_finetune(name, STRONG_ROWS, log)


def build_suite(name: str, seed: int, args, folder: Path, log) -> tuple[Path, list[Case]]:
    """The seed's suite (see the module) in ``folder``, and the pool's cases."""
    model_dir, _ = model_of(name, args, log)
    rows = [r for r in read_tsv("sst2", "train") if len(r["text"].split()) >= 6]
    rows = list({r["text"]: r for r in rows}.values())
    random.Random(f"warp-bench-price:{seed}").shuffle(rows)
    if args.strength == "weak":
        adapter = load_adapter(load_suite(EXAMPLE_SUITES / f"reviews-{name}"))
    else:  # the fine-tune read as a suite of it reads it
        probe = folder / "probe"
        probe.mkdir(parents=True)
        write_jsonl(probe / "one.jsonl", rows[:1], "sst2")
        adapter = load_adapter(load_suite(write_suite(probe, model_dir, "sst2", {"one.jsonl": "must_keep"})))
    head = rows[: 4 * args.must_keep]
    cases = [Case(id=r["id"], text=r["text"], label=r["label"], kind=Kind.MUST_KEEP) for r in head]
    predicted = evaluate(adapter, cases, batch_size=64, cache_dir=cache_root() / "encodings", progress=False)
    right = predicted.predictions == np.array([r["label"] for r in head])
    if args.must_fix_source == "natural":
        fix = [r for r, ok in zip(head, right, strict=True) if not ok][: args.must_fix]
        used: set[str] = set()
    else:  # attacks on sentences past the head, so no must_keep case is an attack's source
        fix, used = adversarial_fix(
            adapter, rows[4 * args.must_keep : 6 * args.must_keep], args.must_fix, seed, cache_root() / "encodings", log
        )
    keep = [r for r, ok in zip(head, right, strict=True) if ok][: args.must_keep]
    rest = [r for r in rows[4 * args.must_keep :] if r["id"] not in used]
    if args.must_fix_source == "adversarial":  # the traffic and pool after every sentence the attacks read
        rest = rest[2 * args.must_keep :]
    traffic, pool = rest[: args.traffic], rest[args.traffic : args.traffic + args.pool]
    suite = folder / "suite"
    suite.mkdir(parents=True)
    write_jsonl(suite / "must_fix.jsonl", fix, "sst2")
    write_jsonl(suite / "must_keep.jsonl", keep, "sst2")
    write_suite(suite, model_dir, "sst2", {"must_fix.jsonl": "must_fix", "must_keep.jsonl": "must_keep"})
    (suite / "traffic.jsonl").write_text("".join(json.dumps({"text": r["text"]}) + "\n" for r in traffic))
    with open(suite / "warp.toml", "a", encoding="utf-8") as toml:
        toml.write(f'\n[traffic]\npath = "traffic.jsonl"\ntext = "text"\nconfidence = {CONFIDENCE}\n')
    log(f"{name} s{seed}: {len(fix)} must_fix, {len(keep)} must_keep, traffic {len(traffic)}, pool {len(pool)}")
    pool_cases = [
        Case(id=f"pool-{i}", text=r["text"], label=r["label"], kind=Kind.MUST_KEEP) for i, r in enumerate(pool)
    ]
    return suite, pool_cases


class Bench:
    """One suite's repairs and what they change, measured on dev and the pool."""

    def __init__(self, suite_dir: Path, pool: list[Case], log) -> None:
        self.suite = load_suite(suite_dir)
        self.adapter = load_adapter(self.suite)
        self.sample = load_traffic(self.suite)
        self.cache = cache_root() / "encodings"
        self.log = log
        dev = [Case(id=r["id"], text=r["text"], label=r["label"], kind=Kind.MUST_KEEP) for r in read_tsv("sst2", "dev")]
        encode = {"batch_size": 64, "cache_dir": self.cache, "progress": False}
        self.dev_V = evaluate(self.adapter, dev, **encode).encoded.V.astype(np.float64)
        self.dev_labels = np.array([c.label for c in dev])
        self.pool_V = evaluate(self.adapter, pool, **encode).encoded.V.astype(np.float64)
        self.pool_labels = np.array([c.label for c in pool])  # SST-2's: whether a change corrects or breaks
        self.cases = list(self.suite.cases)

    def repair(self, cases: list[Case], settings, budget: float | None, label: str) -> tuple[object, dict]:
        """The product's repair of ``cases`` with the traffic at ``budget``: its outcome and figures."""
        started = time.perf_counter()
        outcome = repair_cases(
            self.adapter, cases, settings, batch_size=64, cache_dir=self.cache, progress=False,
            traffic=replace(self.sample, max_change=budget), label_name=self.suite.label_name,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        res = outcome.result
        figures: dict = {"run": label, "budget": budget, "keep_margin": settings.keep_margin.value}
        if not res.repaired:
            figures |= {"converged": False, "message": res.message, "seconds": round(seconds, 1)}
            self.log(f"{label}: not converged: {res.message}")
            return outcome, figures
        before, after = self.adapter.head(), res.head_after
        was, now = before.predict(self.dev_V), after.predict(self.dev_V)
        fix = [r for r in outcome.certificates if r.kind is Kind.MUST_FIX]
        keep = [r for r in outcome.certificates if r.kind is Kind.MUST_KEEP and r.cert2 is not None]
        record = outcome.traffic
        figures |= {
            "converged": True,
            "must_fix": len(fix),
            "must_fix_certified": sum(1 for r in fix if r.cert1 and r.cert3),
            "must_keep_certified": sum(1 for r in keep if r.cert2),
            "must_keep": len(keep),
            "bound": record.bound,
            "changed": record.changed,
            "n": record.n,
            "within": budget is None or record.bound <= budget,
            "written": not outcome.over_budget,
            "dev_change_rate": float(np.mean(was != now)),
            "dev_drop_points": float(100 * (np.mean(was == self.dev_labels) - np.mean(now == self.dev_labels))),
            "pool_change_rate": float(np.mean(before.predict(self.pool_V) != after.predict(self.pool_V))),
            "seconds": round(seconds, 1),
        }
        self.log(
            f"{label}: fixed {figures['must_fix_certified']}/{len(fix)}, U {record.bound:.4f} "
            f"({record.changed}/{record.n}), dev change {figures['dev_change_rate']:.4f}, pool "
            f"{figures['pool_change_rate']:.4f}, dev drop {figures['dev_drop_points']:.2f}, {seconds:.0f} s"
        )
        return outcome, figures

    def ladder(self, settings) -> Ladder:
        evaluation = evaluate(self.adapter, self.cases, batch_size=64, cache_dir=self.cache, progress=False)
        return Ladder(
            adapter=self.adapter, evaluation=evaluation, settings=settings, fallback=False, batch_size=64,
            cache_dir=self.cache, progress=False,
        )  # fmt: skip


def keep_margins(bench: Bench) -> list[dict]:
    """Item 1: the must_keep-only and the full repair under each keep margin."""
    rows = []
    keep_only = [c for c in bench.cases if c.kind is Kind.MUST_KEEP]
    for margin in ("gamma_h", "own"):
        settings = replace(bench.suite.settings(), keep_margin=margin)
        for what, cases in (("must_keep only", keep_only), ("full", bench.cases)):
            _, figures = bench.repair(cases, settings, None, f"{what}, keep_margin {margin}")
            rows.append(figures | {"what": what})
    return rows


def budgets(bench: Bench, grid: list[float], margin: str) -> dict:
    """Item 2: at each budget, today's search and the price list, each followed by the next run."""
    settings = replace(bench.suite.settings(), keep_margin=margin)
    rows = []
    for budget in grid:
        outcome, first = bench.repair(bench.cases, settings, budget, f"greedy {budget:.0%}: the suite")
        fit = outcome.budget_fit
        left = {c.id for c in fit.left_out} if fit is not None else set()
        row = {"budget": budget, "greedy_left_out": len(left), "greedy_seconds": fit.seconds if fit else 0.0}
        if fit is not None:
            _, run = bench.repair(
                [c for c in bench.cases if c.id not in left], settings, budget, f"greedy {budget:.0%}"
            )
        else:
            run = first
        rows.append(row | {"method": "greedy", **run})
    started = time.perf_counter()
    ladder = bench.ladder(settings)
    prices = price_list(ladder, bench.sample, tuple(sorted(set(grid) | set(PRICE_BUDGETS))))
    bench.log(f"price list ({prices.repairs} repairs, {prices.seconds:.0f} s):\n{prices.table()}")
    for budget in grid:
        bought = set(prices.ids_bought(budget))
        fix_out = {c.id for c in bench.cases if c.kind is Kind.MUST_FIX} - bought
        cases = [c for c in bench.cases if c.id not in fix_out]
        _, run = bench.repair(cases, settings, budget, f"price {budget:.0%}")
        rows.append({"budget": budget, "method": "price", "price_bought": len(bought), **run})
    return {
        "keep_margin": margin,
        "rows": rows,
        "price_list": prices.to_json(),
        "price_seconds": round(time.perf_counter() - started, 1),
    }


def render(result: dict) -> str:
    lines = []
    for t in result["tables"]:
        lines += [f"## {t['model']} ({t['head']}) seed {t['seed']}", ""]
        run_head = ["| run | budget | fixed | U | tune changed | dev change | pool change | dev drop | s |"]
        run_head += ["|---|---|---|---|---|---|---|---|---|"]
        if t["keep_margin"]:
            lines += ["keep margin (item 1):", "", *run_head]
            lines += [_row(r["what"], r) for r in t["keep_margin"]] + [""]
        if "budgets" in t:
            lines += [f"budgets (keep_margin {t['budgets']['keep_margin']}):", "", *run_head]
            lines += [_row(r["method"], r) for r in t["budgets"]["rows"]] + [""]
        if t.get("levers"):
            lines += ["levers (item 3): one fix's price, min / q1 / median / q3 / max changes:", ""]
            lines += ["| lever | guards | floor (B) | one fix on B | pool | corrects | converged | dev drop | s |"]
            lines += ["|---|---|---|---|---|---|---|---|---|"]
            for r in t["levers"]:
                share = r.get("pool_corrected_share")
                corrects = "—" if share is None else f"{100 * share:.0f} %"
                drop = "—" if r["dev_drop_median"] is None else f"{r['dev_drop_median']:.2f}"
                floor = r["floor"].get("b", "not converged")
                lines.append(
                    f"| {r['lever']} | {r['guards']} | {floor} | {_spread(r['b_quartiles'], r['n_b'])} | "
                    f"{_spread(r['pool_quartiles'], r['n_pool'])} | {corrects} | {r['converged']}/{r['priced']} | "
                    f"{drop} | {r['seconds']:.0f} |"
                )
            lines.append("")
        for run in t.get("lever_price", []):
            lines += [f"price list under lever {run['lever']} ({run['guards']} guards):", "", *run_head]
            lines += [_row(r["method"], r) for r in run["rows"]] + [_row("every must_fix case", run["full"]), ""]
    return "\n".join(lines)


def _spread(quartiles: list[float] | None, n: int) -> str:
    if quartiles is None:
        return "—"
    low, _, median, _, high = quartiles
    return (
        f"{low:g} / {quartiles[1]:g} / **{median:g}** / {quartiles[3]:g} / {high:g} of {n} ({100 * median / n:.1f} %)"
    )


def _row(label: str, r: dict) -> str:
    second = "none" if r.get("budget") is None else f"{r['budget']:.0%}"
    if r.get("price_bought") == 0:
        return f"| {label} | {second} | nothing bought (0 changes) |||||||"
    if not r.get("converged"):
        return f"| {label} | {second} | not converged |||||||"
    return (
        f"| {label} | {second} | {r['must_fix_certified']}/{r['must_fix']} | {100 * r['bound']:.2f} % | "
        f"{r['changed']}/{r['n']} | {100 * r['dev_change_rate']:.2f} % | {100 * r['pool_change_rate']:.2f} % | "
        f"{r['dev_drop_points']:.2f} | {r['seconds']:.0f} |"
    )


def _names(levers: str) -> list[str]:
    return list(LEVER_NAMES) if levers == "all" else [n for n in levers.split(",") if n]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.budget_price", description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="distilbert", help="comma-separated: distilbert (ReLU), bert (tanh)")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--budgets", default="0.02,0.05")
    parser.add_argument("--must-fix", type=int, default=60)
    parser.add_argument("--must-keep", type=int, default=2000)
    parser.add_argument("--traffic", type=int, default=4000)
    parser.add_argument("--pool", type=int, default=2000)
    parser.add_argument("--keep-margin", default="own", choices=("gamma_h", "own"), help="for the budget runs")
    parser.add_argument("--skip-keep-margin", action="store_true", help="leave out item 1's runs")
    parser.add_argument("--skip-budgets", action="store_true", help="leave out item 2's runs (greedy beside price)")
    parser.add_argument(
        "--strength",
        default="weak",
        choices=("weak", "strong"),
        help="weak: the example models (73-74 %% on SST-2); strong: their SST-2 fine-tune (88 %%)",
    )
    parser.add_argument(
        "--must-fix-source",
        default="natural",
        choices=("natural", "adversarial"),
        help="natural: SST-2 sentences the model gets wrong; adversarial: perturbations that flip it",
    )
    parser.add_argument("--levers", default="", help=f"comma-separated, or all: {', '.join(LEVER_NAMES)}")
    parser.add_argument("--price-subset", type=int, default=20, help="must_fix cases each lever prices alone")
    parser.add_argument("--lever-price", default="", help="comma-separated levers: the price list and its repairs")
    add_output_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f} s] {message}", file=sys.stderr, flush=True)

    grid = [float(b) for b in args.budgets.split(",")]
    tables = []
    with tempfile.TemporaryDirectory(prefix="warp-price-") as work:
        for name in args.models.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                suite, pool = build_suite(name, seed, args, Path(work) / f"{name}-s{seed}", log)
                bench = Bench(suite, pool, log)
                table = {"model": name, "head": bench.adapter.spec.activation, "seed": seed}
                table["strength"], table["must_fix_source"] = args.strength, args.must_fix_source
                table["model_training"] = model_of(name, args, log)[1]
                table["keep_margin"] = [] if args.skip_keep_margin else keep_margins(bench)
                if not args.skip_budgets:
                    table["budgets"] = budgets(bench, grid, args.keep_margin)
                if args.levers or args.lever_price:
                    levers = LeverBench(bench, log)
                    table["levers"] = [
                        levers.single_prices(lever_named(n), args.price_subset) for n in _names(args.levers)
                    ]
                    table["lever_price"] = [
                        lever_price_run(levers, lever_named(n), grid) for n in _names(args.lever_price)
                    ]
                tables.append(table)
    result = {
        "settings": {k: v for k, v in vars(args).items() if k not in ("save", "save_dir", "json", "variant")},
        "labels": LABELS["sst2"],
        "tables": tables,
    }
    report("budget_price", parser, args, argv, result, lambda r: print(render(r)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
