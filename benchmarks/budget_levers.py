"""Issue 60, item 3: the levers that cut the price of one fix, side by side on one suite and traffic.

``benchmarks.budget_price --levers`` runs this. The measure is the **price of a single fix**: the suite
is repaired with one must_fix case alone (every must_keep case guarding, as the price list repairs
it), and the predictions that repair changes are counted on traffic-like text. ``--price-subset``
cases are priced: the suite's first must_fix cases, the same for every lever.

- **Where it is counted.** The traffic's tune part is dealt into two halves, A and B (alternate texts
  in key order). Guards come from A only. Every lever is priced on B, so a lever with guards is never
  measured on the texts it guards. The pool (traffic like the sample, seen by no repair) and SST-2 dev
  are counted too.
- **Guards** (issue 60's "guards from the tune part"): A's texts as must_keep cases, each labelled by
  the model's own prediction. ``guards`` joins all of them, held at their own margin (``keep_margin =
  "own"``). ``guards-gh`` joins only those the model predicts by at least γ_h, the rule of
  ``warp-check tune``.
- **The others** change one setting of the loop, from today's defaults with ``keep_margin = "own"``:
  the neighbourhood (its measured counts), μ, the rank, γ_s.

:func:`lever_price_run` is the full price list under one lever: ``price_list`` measured on B, and for
each budget the product's next repair of the cases bought (guards joined), Cert 4 on the bound part.
"""

from __future__ import annotations

import enum
import random
import time
from dataclasses import dataclass, field, replace

import numpy as np

from warp_check import Kind, evaluate
from warp_check.budget.fit import ladder_without
from warp_check.budget.price import PRICE_BUDGETS, price_list
from warp_check.cases import Case
from warp_check.certificates.traffic.changes import traffic_inputs
from warp_check.certificates.traffic.sample import Part, TrafficSample
from warp_check.perturb.draws import perturbed_texts
from warp_check.pipeline.evaluation import Evaluation
from warp_check.pipeline.ladder import Ladder, climb
from warp_check.pipeline.neighbourhood import draw_neighbourhood
from warp_check.repair.records import RepairStatus
from warp_check.repair.settings import KeepMargin, RepairSettings


class Guards(enum.Enum):
    """Which of the tune part's half A join the repair as must_keep cases labelled by the model."""

    NONE = "none"
    OWN = "own"  # every text, held at its own margin (keep_margin "own")
    GAMMA_H = "gamma_h"  # only those predicted by at least γ_h (warp-check tune's rule)


@dataclass(frozen=True, kw_only=True)
class Lever:
    """One way to repair: settings changed from the defaults (``keep_margin = "own"``), guards, a neighbourhood."""

    name: str
    what: str
    settings: dict = field(default_factory=dict)  # RepairSettings fields changed
    guards: Guards = Guards.NONE
    hood: bool = False  # the neighbourhood at its measured counts

    def repair_settings(self, base: RepairSettings) -> RepairSettings:
        settings = replace(base, keep_margin=KeepMargin.OWN, **self.settings)
        return replace(settings, neighbours=settings.neighbours.drawing()) if self.hood else settings


LEVERS = (
    Lever(name="baseline", what="today's defaults, keep_margin own"),
    Lever(name="guards", what="half A of the tune part as model-labelled must_keep, own margin", guards=Guards.OWN),
    Lever(name="guards-gh", what="the same, only texts predicted by ≥ γ_h", guards=Guards.GAMMA_H),
    Lever(name="hood", what="neighbourhood: 8 copies a must_fix case, 16 for the 500 nearest must_keep", hood=True),
    Lever(name="mu0", what="μ = 0 (the paper's step price)", settings={"mu": 0.0}),
    Lever(name="mu1e3", what="μ = 1,000", settings={"mu": 1000.0}),
    Lever(name="mu1e4", what="μ = 10,000", settings={"mu": 10000.0}),
    Lever(name="rank1", what="rank 1, never grown", settings={"rank": 1, "max_rank": 1}),
    Lever(name="rank8", what="rank 8 from the start", settings={"rank": 8}),
    Lever(name="gs0.5", what="γ_s = 0.5", settings={"gamma_s": 0.5}),
    Lever(name="gs0.1", what="γ_s = 0.1: the fix only just over the line", settings={"gamma_s": 0.1}),
    Lever(name="gs0.02", what="γ_s = 0.02: the limit of the γ_s lever", settings={"gamma_s": 0.02}),
    Lever(name="guards+gs0.1", what="guards (own) and γ_s = 0.1", settings={"gamma_s": 0.1}, guards=Guards.OWN),
    Lever(name="guards+mu1e4", what="guards (own) and μ = 10,000", settings={"mu": 10000.0}, guards=Guards.OWN),
)
LEVER_NAMES = tuple(lever.name for lever in LEVERS)


def lever_named(name: str) -> Lever:
    for lever in LEVERS:
        if lever.name == name:
            return lever
    raise SystemExit(f"benchmarks: no lever {name!r}; there are {', '.join(LEVER_NAMES)}")


def halves(sample: TrafficSample) -> tuple[TrafficSample, TrafficSample]:
    """The sample with its tune part cut to half A (even positions) and to half B (odd): guards come
    from A, prices are counted on B; the bound part is untouched in both."""
    return replace(sample, tune=sample.tune[0::2]), replace(sample, tune=sample.tune[1::2])


class LeverBench:
    """One suite's levers: the suite encoded once, half A as guards, half B, the pool and dev to count on."""

    def __init__(self, bench, log) -> None:
        self.bench = bench
        self.log = log
        adapter, cache = bench.adapter, bench.cache
        encode = {"batch_size": 64, "cache_dir": cache, "progress": False}
        self.evaluation = evaluate(adapter, bench.cases, **encode)
        self.half_a, self.half_b = halves(bench.sample)
        self.B = traffic_inputs(adapter, self.half_b, part=Part.TUNE, batch_size=64, cache_dir=cache).V
        probes = [replace(t.case(i), id=f"guard-{i}") for i, t in enumerate(self.half_a.tune)]
        predicted = evaluate(adapter, probes, **encode).predictions
        labelled = [replace(c, label=int(p)) for c, p in zip(probes, predicted, strict=True)]
        self.guard_evaluation = evaluate(adapter, labelled, **encode)
        self.fix_ids = [c.id for c in bench.cases if c.kind is Kind.MUST_FIX]
        self.head = adapter.head()
        self.was_B = self.head.predict(self.B)
        self.was_pool = self.head.predict(bench.pool_V)
        self.was_dev = self.head.predict(bench.dev_V)
        log(f"levers: half A {len(self.half_a.tune)} texts (guards), half B {len(self.B)} measured")

    def guards(self, which: Guards, gamma_h: float) -> Evaluation | None:
        """Half A's guards ``which`` chooses (None: none)."""
        if which is Guards.NONE:
            return None
        g = self.guard_evaluation
        return g if which is Guards.OWN else g.subset(np.flatnonzero(g.gaps >= gamma_h).tolist())

    def ladder(self, lever: Lever) -> tuple[Ladder, int]:
        """The suite (and the lever's guards and neighbourhood) as the price list's ladder, and the guards joined."""
        settings = lever.repair_settings(self.bench.suite.settings())
        guards = self.guards(lever.guards, settings.gamma_h)
        evaluation = self.evaluation.joined(guards)
        hood = None
        if settings.neighbours.enabled:
            hood = draw_neighbourhood(
                self.bench.adapter, self.evaluation, settings.neighbours, batch_size=64, cache_dir=self.bench.cache
            )
        ladder = Ladder(
            adapter=self.bench.adapter, evaluation=evaluation, settings=settings, hood=hood, fallback=False,
            batch_size=64, cache_dir=self.bench.cache, progress=False,
        )  # fmt: skip
        return ladder, 0 if guards is None else len(guards.cases)

    def counted(self, ladder: Ladder, fixing: set[str]) -> dict:
        """The repair of ``fixing`` alone (every other must_fix case left out): what it changes."""
        started = time.perf_counter()
        ended = climb(ladder_without(ladder, set(self.fix_ids) - fixing))
        seconds = round(time.perf_counter() - started, 2)
        result = ended.result
        if result.status is RepairStatus.NOTHING_TO_REPAIR:
            nothing = {"b": 0, "pool": 0, "pool_corrected": 0, "dev": 0, "dev_drop": 0.0}
            return {"converged": True, **nothing, "seconds": seconds}
        if not result.repaired:
            return {"converged": False, "message": result.message, "seconds": seconds}
        after = result.head_after
        now_dev = after.predict(self.bench.dev_V)
        labels = self.bench.dev_labels
        now_pool = after.predict(self.bench.pool_V)
        changed = now_pool != self.was_pool
        return {
            "converged": True,
            "b": int(np.sum(after.predict(self.B) != self.was_B)),
            "pool": int(np.sum(changed)),
            # of the pool's changes, those that now agree with SST-2's label: a fix's price is not all harm
            "pool_corrected": int(np.sum(changed & (now_pool == self.bench.pool_labels))),
            "dev": int(np.sum(now_dev != self.was_dev)),
            "dev_drop": float(100 * (np.mean(self.was_dev == labels) - np.mean(now_dev == labels))),
            "seconds": seconds,
        }

    def single_prices(self, lever: Lever, subset: int) -> dict:
        """The lever's floor and the price of each of the first ``subset`` must_fix cases alone."""
        started = time.perf_counter()
        ladder, joined = self.ladder(lever)
        floor = self.counted(ladder, set())
        rows = [{"id": i, **self.counted(ladder, {i})} for i in self.fix_ids[:subset]]
        b = [r["b"] for r in rows if r["converged"]]
        pool = [r["pool"] for r in rows if r["converged"]]
        summary = {
            "lever": lever.name,
            "what": lever.what,
            "guards": joined,
            "copies": 0 if ladder.hood is None else len(ladder.hood.cases),
            "n_b": len(self.B),
            "n_pool": len(self.was_pool),
            "floor": floor,
            "priced": len(rows),
            "converged": len(b),
            "b_quartiles": _quartiles(b),
            "pool_quartiles": _quartiles(pool),
            "b_median_share": float(np.median(b) / len(self.B)) if b else None,
            "pool_median_share": float(np.median(pool) / len(self.was_pool)) if pool else None,
            "dev_drop_median": float(np.median([r["dev_drop"] for r in rows if r["converged"]])) if b else None,
            "pool_corrected_share": _share([r.get("pool_corrected") for r in rows if r["converged"]], pool),
            "seconds": round(time.perf_counter() - started, 1),
            "cases": rows,
        }
        self.log(
            f"lever {lever.name}: floor {floor.get('b')}, single fix on B {summary['b_quartiles']} of {len(self.B)} "
            f"(pool {summary['pool_quartiles']} of {len(self.was_pool)}), {len(b)}/{len(rows)} converged, "
            f"{summary['seconds']:.0f} s"
        )
        return summary


def _share(corrected: list[int | None], changed: list[int]) -> float | None:
    """The share of all the pool's changes that agree with SST-2's label (None: none changed, or not counted)."""
    if not changed or None in corrected or sum(changed) == 0:
        return None
    return float(sum(corrected) / sum(changed))


def _quartiles(values: list[int]) -> list[float] | None:
    """min, first quartile, median, third quartile, max (None: no value)."""
    if not values:
        return None
    return [float(q) for q in np.percentile(values, [0, 25, 50, 75, 100])]


def lever_price_run(levers: LeverBench, lever: Lever, grid: list[float]) -> dict:
    """The price list under ``lever`` (measured on half B) and, for each budget, the product's next repair of
    the cases it buys (guards joined), within that budget as Cert 4 measures it on the bound part."""
    bench = levers.bench
    started = time.perf_counter()
    ladder, joined = levers.ladder(lever)
    prices = price_list(ladder, levers.half_b, tuple(sorted(set(grid) | set(PRICE_BUDGETS))))
    bench.log(f"price list, lever {lever.name} ({prices.repairs} repairs, {prices.seconds:.0f} s):\n{prices.table()}")
    settings = ladder.settings
    guards = list(levers.guards(lever.guards, settings.gamma_h).cases) if joined else []
    rows = []
    for budget in grid:
        bought = set(prices.ids_bought(budget))
        cases = [c for c in bench.cases if c.kind is not Kind.MUST_FIX or c.id in bought] + guards
        _, run = bench.repair(cases, settings, budget, f"lever {lever.name}, price {budget:.0%}")
        rows.append({"budget": budget, "method": f"price, {lever.name}", "price_bought": len(bought), **run})
    _, full = bench.repair(list(bench.cases) + guards, settings, None, f"lever {lever.name}, every must_fix case")
    return {
        "lever": lever.name,
        "guards": joined,
        "rows": rows,
        "full": full,
        "price_list": prices.to_json(),
        "price_seconds": round(time.perf_counter() - started, 1),
    }


def adversarial_fix(adapter, rows: list[dict], wanted: int, seed: int, cache, log) -> tuple[list[dict], set[str]]:
    """Up to ``wanted`` AdvGLUE-style must_fix cases: a perturbation (typos, casing and punctuation,
    contractions, negation-preserving rewrites; no WordNet here) of a sentence the model gets right that
    flips its prediction, labelled as the sentence. Returns the cases and the ids of the sentences used."""
    encode = {"batch_size": 64, "cache_dir": cache, "progress": False}
    order = list(rows)
    random.Random(f"warp-bench-adversarial:{seed}").shuffle(order)
    found: list[dict] = []
    used: set[str] = set()
    for begin in range(0, len(order), 200):
        chunk = order[begin : begin + 200]
        cases = [Case(id=r["id"], text=r["text"], label=r["label"], kind=Kind.MUST_KEEP) for r in chunk]
        right = evaluate(adapter, cases, **encode).predictions == np.array([r["label"] for r in chunk])
        variants = []
        for r, ok in zip(chunk, right, strict=True):
            if ok:
                texts = perturbed_texts(r["text"], 8, seed=seed, max_edits=2)
                variants += [(r, k, t) for k, t in enumerate(texts)]
        probes = [Case(id=f"{r['id']}-adv{k}", text=t, label=r["label"], kind=Kind.MUST_KEEP) for r, k, t in variants]
        if not probes:
            continue
        wrong = evaluate(adapter, probes, **encode).predictions != np.array([r["label"] for r, _, _ in variants])
        for (r, k, t), flipped in zip(variants, wrong, strict=True):
            if flipped and r["id"] not in used:
                used.add(r["id"])
                found.append({"id": f"{r['id']}-adv{k}", "text": t, "label": r["label"], "original": r["text"]})
        log(f"adversarial: {len(found)} found in {begin + len(chunk)} sentences")
        if len(found) >= wanted:
            break
    return found[:wanted], {f["id"].split("-adv")[0] for f in found[:wanted]}


__all__ = ["LEVERS", "LEVER_NAMES", "Guards", "Lever", "LeverBench", "adversarial_fix", "halves", "lever_price_run"]
