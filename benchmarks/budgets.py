"""Issue 41, point 5: the strongest repair within a traffic budget, measured on held-back data, beside
full fine-tuning and LoRA at the same dev accuracy drop (``generalise --budgets ... --traffic N``).

For one split (``generalise``'s), per seed:

* **traffic**: N SST-2 train sentences of six words or more, none fine-tuned on, none in the split
  (the suite's cases, the held-out attacks, the sentences either was attacked from), never dev; a
  shuffle salted by the seed picks them, so each seed's Cert 4 sample (the bound part) is another
  draw of traffic: the seeds are independent runs of the bound. The suite names the file in
  ``[traffic]`` (confidence 0.95), as a user's suite would.
* **tune** once (``warp_check.budget.tune.tune``, ``warp-check tune``): its candidates' scores do not
  depend on the budget, only the choice does, so each budget's choice is made from its table by
  tune's own rule (``TuneResult.at_budget``).
* **repair** once per distinct chosen candidate: the choice written into a copy of the suite
  (``write_choice``, ``tune --write``: settings and guards), then the product's repair with the
  traffic (``repair_cases``, Cert 4 measured before anything is written); a budget's row passes
  where Cert 4's bound U is within it and every must_fix case is certified. tune's choice with no
  budget is repaired too (row "none"): where no budget can be met, a run of the bound all the same.
* measured on dev (never seen by any of it): the share of predictions the repair changes (the true
  change rate U bounds), the accuracy drop; the held-out attacks fixed.
* measured on a **pool** (``--traffic-pool N``): N more texts drawn by the traffic's rule, none in the
  seed's sample (either part): the change rate on traffic like the sample, which is what U promises;
  dev's rate is that promise carried to other sentences (SST-2's train phrases are not its dev).

The neighbourhood's draw seed and the tuner's folds (by the SHA-256 of case ids) stay fixed: the
seed moves the traffic alone, so copies are drawn once per model (the draw cache) and only the bound's
sample differs between runs.

Full fine-tuning and LoRA: trained once per split by ``warp_check.extras.baselines`` (``train_full``,
``train_lora``, the compare baselines' settings), scored on dev and the held-out attacks after every
epoch through their ``after_epoch`` (:func:`checkpoint_curve`); for a WARP row, the checkpoint with
the most held-out attacks fixed among those whose dev drop is at most WARP's (:func:`same_drop`).
Cached like generalise's baselines.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from itertools import islice
from pathlib import Path

import numpy as np

from benchmarks.data import cache_root, read_jsonl, read_tsv
from benchmarks.example_models import sst2_training_rows
from warp_check import Kind, evaluate, load_suite, repair_cases
from warp_check.budget.tune import tune, write_choice
from warp_check.cases import Case
from warp_check.certificates.traffic.reading import load_traffic
from warp_check.certificates.traffic.sample import text_key
from warp_check.extras.baselines import TrainSettings
from warp_check.releases.load import load_adapter
from warp_check.releases.restore import reference_for

CONFIDENCE = 0.95
CHECKPOINTS_FORMAT = "warp-bench-checkpoints/1"  # part of the cache key: bump when checkpoint_curve changes


# -- traffic --------------------------------------------------------------------------------------


def eligible_texts(train: list[dict], taken: set[str]) -> list[str]:
    """The texts of ``train`` rows (each once) of six words or more and not in ``taken``: what traffic is drawn from."""
    return list(dict.fromkeys(r["text"] for r in train if r["text"] not in taken and len(r["text"].split()) >= 6))


def traffic_texts(train: list[dict], taken: set[str], n: int, seed: int) -> list[str]:
    """``n`` of :func:`eligible_texts`, drawn by a shuffle salted by ``seed`` (another seed, another
    sample; the same seed, the same one)."""
    texts = eligible_texts(train, taken)
    random.Random(f"warp-bench-traffic:{seed}").shuffle(texts)
    return texts[:n]


def pool_texts(train: list[dict], taken: set[str], traffic: list[str], n: int) -> list[str]:
    """``n`` of :func:`eligible_texts` none of which is in ``traffic`` (as the sample's key reads a text:
    a respaced copy is the same text), so held out from both parts of the sample U is measured on.

    The shuffle's salt is its own and has no seed: one draw for every seed, less each seed's sample, so
    most of the pool (and its cached encodings) is the same from seed to seed, as dev is."""
    sampled = {text_key(t) for t in traffic}
    texts = eligible_texts(train, taken)
    random.Random("warp-bench-pool").shuffle(texts)
    return list(islice((t for t in texts if text_key(t) not in sampled), n))


def pool_encoder(texts: list[str], measured_at, encode: dict) -> Callable[[object], np.ndarray | None]:
    """v of the pool's texts at a head spec's layer, by the adapter and path dev is encoded with
    (``evaluate``, the same encoding cache), once per spec; None where the pool is empty. The label
    is a placeholder: only the heads' predictions before and after are compared."""
    cases = [Case(id=f"pool-{i}", text=t, label=0, kind=Kind.MUST_KEEP) for i, t in enumerate(texts)]
    by_spec: dict = {}

    def at(spec) -> np.ndarray | None:
        if not cases:
            return None
        if spec not in by_spec:
            by_spec[spec] = evaluate(measured_at(spec)[0], cases, **encode).encoded.V.astype(np.float64)
        return by_spec[spec]

    return at


def split_texts(split, sst2_rows: int) -> set[str]:
    """The texts a traffic sample must not hold: the split's cases (every suite file, aux too), the
    held-out attacks, the clean sentences either was attacked from, and the fine-tune's sentences."""
    cases = [row for path in split.suite_dir.glob("*.jsonl") for row in read_jsonl(path)] + read_jsonl(split.heldout)
    attacked = {row["original"] for row in cases if row.get("original")}
    train = read_tsv("sst2", "train")
    taken = {row["text"] for row in cases} | {row["text"] for row in train if row["id"] in attacked}
    return taken | {row["text"] for row in sst2_training_rows(sst2_rows)}


def suite_with_traffic(split, texts: list[str], folder: Path) -> Path:
    """A copy of the split's suite whose ``[traffic]`` names ``texts`` (no budget: tune and each row set theirs)."""
    shutil.copytree(split.suite_dir, folder)
    (folder / "traffic.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    with open(folder / "warp.toml", "a", encoding="utf-8") as toml:
        toml.write(f'\n[traffic]\npath = "traffic.jsonl"\ntext = "text"\nconfidence = {CONFIDENCE}\n')
    return folder


# -- the choice -----------------------------------------------------------------------------------


# -- the baselines' checkpoints ---------------------------------------------------------------------


def same_drop(curve: list[dict], dev_correct: int) -> dict | None:
    """The checkpoint with the most held-out attacks fixed among those with at least ``dev_correct``
    dev sentences right (a dev drop at most WARP's); the earlier epoch on a tie; None where none is."""
    eligible = [c for c in curve if c["dev_correct"] >= dev_correct]
    return min(eligible, key=lambda c: (-c["heldout_correct"], c["epoch"]), default=None)


def same_change(curve: list[dict], dev_changed: int) -> dict | None:
    """The checkpoint with the most held-out attacks fixed among those changing at most ``dev_changed``
    dev predictions (the budget's own currency: a model that gains dev accuracy by changing many
    predictions is not within a change budget); the earlier epoch on a tie; None where none is."""
    eligible = [c for c in curve if c["dev_changed"] <= dev_changed]
    return min(eligible, key=lambda c: (-c["heldout_correct"], c["epoch"]), default=None)


def checkpoint_curve(adapter, cases, general, heldout, method: str, train: TrainSettings, log) -> list[dict]:
    """``method`` ("full_ft" or "lora") trained as ``warp_check.extras.baselines`` trains it, scored after
    every epoch: dev accuracy and predictions changed against the original, held-out attacks fixed."""
    import torch

    from warp_check.extras import baselines

    def features(rows):
        return adapter.tokenize([c.text for c in rows], [c.text_pair for c in rows])

    dev_features, held_features = features(general), features(heldout)
    dev_labels = np.array([c.label for c in general])
    held_labels = np.array([c.label for c in heldout])

    def predict(model, feats) -> np.ndarray:
        out = []
        with torch.inference_mode():
            for begin in range(0, len(feats), 64):
                out.append(model(**adapter.padded(feats[begin : begin + 64])).logits.argmax(-1).cpu().numpy())
        return np.concatenate(out)

    dev_before = predict(adapter.model.eval(), dev_features)
    curve: list[dict] = []
    started = time.perf_counter()

    def after_epoch(epoch: int, loss: float, net) -> None:
        net.eval()  # no dropout drawn: training sets train() again before the next epoch
        seconds = time.perf_counter() - started
        dev, held = predict(net, dev_features), predict(net, held_features)
        curve.append(
            {
                "epoch": epoch,
                "loss": loss,
                "dev_correct": int(np.sum(dev == dev_labels)),
                "dev_accuracy": float(np.mean(dev == dev_labels)),
                "dev_changed": int(np.sum(dev != dev_before)),
                "dev_change_rate": float(np.mean(dev != dev_before)),
                "heldout_correct": int(np.sum(held == held_labels)),
                "heldout_fixed": float(np.mean(held == held_labels)),
                "train_seconds": round(seconds, 1),
            }
        )
        log(
            f"{method} epoch {epoch}/{train.max_epochs}, training loss {loss:.6f}: dev {curve[-1]['dev_accuracy']:.4f} "
            f"(changed {curve[-1]['dev_changed']}), held-out {curve[-1]['heldout_fixed']:.3f}"
        )

    trainer = baselines.train_lora if method == "lora" else baselines.train_full
    trainer(adapter, cases, train, after_epoch=after_epoch)
    return curve


def checkpoints(adapter, cases, general, heldout, split_key: str, args, log) -> dict:
    """Both baselines' curves on the split, cached by the split and the training settings."""
    train = TrainSettings(max_epochs=args.epochs, seed=args.seed, restore_best=True)
    methods = [m for m in ("full_ft", "lora") if m in args.baselines.split(",")]
    key = hashlib.sha256(
        json.dumps([CHECKPOINTS_FORMAT, split_key, methods, train.__dict__], sort_keys=True, default=str).encode()
    )
    path = cache_root() / "baselines" / f"checkpoints-{key.hexdigest()[:16]}.json"
    if path.is_file():
        log(f"baseline checkpoints from the cache {path}")
        return json.loads(path.read_text())
    record = {"train": train.__dict__, "methods": {}}
    for method in methods:
        started = time.perf_counter()
        curve = checkpoint_curve(adapter, cases, general, heldout, method, train, log)
        record["methods"][method] = {"curve": curve, "seconds": round(time.perf_counter() - started, 1)}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)
    return record


# -- one split ------------------------------------------------------------------------------------


def run_budgets(task: str, name: str, split, args, work: Path, split_key: str, log) -> dict:
    """Every seed × budget of ``args`` on the split (see the module's docstring)."""
    from warp_check.certify.cases import summarise
    from warp_check.extras.compare import read_cases_file

    budgets = args.budgets
    cache = cache_root() / "encodings"
    base_suite = load_suite(split.suite_dir)
    adapter = load_adapter(base_suite)
    general = read_cases_file(base_suite, split.general)
    heldout = read_cases_file(base_suite, split.heldout)
    taken = split_texts(split, args.sst2_rows)
    train = read_tsv("sst2", "train")
    encode = {"batch_size": 64, "cache_dir": cache, "progress": False}
    layers: dict = {}  # per head spec: (adapter, dev evaluation, held-out evaluation, dev right before)

    def measured_at(spec):
        if spec not in layers:
            at = adapter if spec == adapter.spec else adapter.with_spec(spec)
            dev_ev, held_ev = evaluate(at, general, **encode), evaluate(at, heldout, **encode)
            layers[spec] = (at, dev_ev, held_ev)
        return layers[spec]

    runs, rows, tunes = [], [], []
    for seed in args.seeds:
        texts = traffic_texts(train, taken, args.traffic, seed)
        folder = suite_with_traffic(split, texts, work / f"{task}-{name}-traffic-s{seed}")
        suite = load_suite(folder)
        sample = load_traffic(suite)
        pool = pool_texts(train, taken, texts, args.traffic_pool)
        pool_at = pool_encoder(pool, measured_at, encode)
        log(
            f"{name} s{seed}: traffic {len(texts)} texts, bound part {len(sample.bound)}, tune part "
            f"{len(sample.tune)}; pool {len(pool)}"
        )
        if args.budget_fit:
            fit_runs, fit_rows = budget_fit_rows(
                suite, sample, adapter, budgets, measured_at, cache, summarise, log, pool_at=pool_at
            )
            runs += [r | {"model": name, "seed": seed} for r in fit_runs]
            rows += [r | {"model": name, "seed": seed} for r in fit_rows]
            continue
        result = tune(suite, adapter, sample, cache_dir=cache, progress=False)
        tunes.append(
            {
                "seed": seed,
                "seconds": round(result.seconds, 1),
                "tune_texts": result.tune_texts,
                "guard_pool": len(result.guard_pool),
                "candidates": [s.as_json(None) for s in result.scores],
            }
        )
        log(
            f"{name} s{seed}: tune {result.seconds:.0f} s: "
            + "; ".join(
                f"{s.candidate.name} fix {s.fix_rate:.3f} bound {s.bound:.4f}" + (" FAILED" if s.failed else "")
                for s in result.scores
            )
        )
        repaired: dict[str, dict] = {}
        # None last: tune's choice with no budget (the bound measured, gating nothing), so that a seed
        # whose every budget is out of reach still gives one run of the bound against the true change.
        for budget in [*budgets, None]:
            at = result.at_budget(budget)
            chosen = at.chosen
            row = {"model": name, "seed": seed, "budget": budget, "tune_seconds": round(result.seconds, 1)}
            if chosen is None:
                row |= {"chosen": None, "passed": False, "failure": at.message}
                rows.append(row)
                log(f"{name} s{seed} budget {_share(budget)}: {row['failure']}")
                continue
            label = chosen.candidate.name
            if label not in repaired:
                repaired[label] = repair_run(
                    suite, result, chosen, adapter, measured_at, folder, len(repaired), cache, summarise, log,
                    pool_at=pool_at,
                ) | {"model": name, "seed": seed, "candidate": label}  # fmt: skip
                runs.append(repaired[label])
            run = repaired[label]
            within = run["converged"] and (budget is None or run["bound"] <= budget)
            certified = run["converged"] and run["must_fix_certified"] == run["must_fix"]
            failure = None
            if not run["converged"]:
                failure = run["message"]
            elif not within:
                failure = (
                    f"over budget: changes at most {run['bound']:.3%} of predictions on traffic like this "
                    f"({run['changed']} of {run['n']}, {CONFIDENCE:.0%}) > max_change {budget:g}: nothing written"
                )
            elif not certified:
                failure = f"must_fix certified {run['must_fix_certified']} of {run['must_fix']}"
            row |= {
                "chosen": label,
                "estimate_fix_rate": chosen.fix_rate,
                "estimate_bound": chosen.bound,
                "passed": failure is None,
                "failure": failure,
                **{k: run[k] for k in RUN_FIGURES},
            }
            rows.append(row)
            figures = (
                f"U {run['bound']:.4f} true {run['dev_change_rate']:.4f} drop {run['dev_drop_points']:.2f} "
                f"held {run['heldout_fixed']:.3f} "
                if run["converged"]
                else ""
            )
            log(f"{name} s{seed} budget {_share(budget)}: {label}: {figures}{failure or 'passed'}")
    # The baselines last: the WARP rows are the point, and the slower part must not hold them back.
    curves = checkpoints(adapter, list(base_suite.cases), general, heldout, split_key, args, log)
    for row in rows:
        for method, record in curves["methods"].items():
            if row.get("dev_correct") is not None:
                row[method] = same_drop(record["curve"], row["dev_correct"])
    original_dev = next(iter(layers.values()))[1] if layers else None
    return {
        "task": task,
        "model": name,
        "head": adapter.spec.activation,
        "model_dir": str(split.model_dir),
        "sizes": split.sizes | {"traffic": args.traffic, "traffic_pool": args.traffic_pool},
        "split": split.info,
        "original_dev_accuracy": float(np.mean(original_dev.predictions == [c.label for c in general]))
        if original_dev is not None
        else None,
        "baselines": curves,
        "tunes": tunes,
        "repairs": runs,
        "rows": rows,
    }


RUN_FIGURES = (
    "bound",
    "changed",
    "n",
    "dev_change_rate",
    "dev_changed",
    "dev_drop_points",
    "dev_correct",
    "heldout_fixed",
    "must_fix",
    "must_fix_certified",
    "repair_seconds",
    "guards",
    "layer",
    "pool_n",
    "pool_changed",
    "pool_change_rate",
)
POOL_FIGURES = ("pool_n", "pool_changed", "pool_change_rate")


def budget_fit_rows(
    suite, sample, adapter, budgets, measured_at, cache, summarise, log, *, pool_at=None
) -> tuple[list, list]:
    """The run as a user meets it with the suite's own settings (``--budget-fit``): per budget, the repair
    with ``max_change`` set; over it, the must_fix cases the run names as past the budget
    (``RepairOutcome.budget_fit``), then the repair without them (the user's next run), measured."""
    settings = suite.settings()
    cases = list(suite.cases)

    def repaired(given: list, budget: float | None):
        """The product's repair of ``given`` with the traffic at ``budget``: its outcome and figures."""
        started = time.perf_counter()
        outcome = repair_cases(adapter, given, settings, batch_size=suite.model.batch_size, cache_dir=cache,
                               progress=False, traffic=replace(sample, max_change=budget),
                               label_name=suite.label_name)  # fmt: skip
        seconds = time.perf_counter() - started
        return outcome, measured_outcome(outcome, settings, seconds, 0, measured_at, summarise, pool_at=pool_at)

    runs, rows = [], []
    for budget in [*budgets, None]:
        row: dict = {"budget": budget, "tune_seconds": 0.0}  # no tune: the search's seconds are under "fit"
        outcome, first = repaired(cases, budget)
        runs.append(first | {"candidate": "suite's settings"})
        fit = outcome.budget_fit
        if fit is None:  # within the budget (or none): the suite's own repair is the row
            run, label = first, "suite's settings"
        else:
            named = {c.id for c in fit.left_out}
            row["fit"] = {
                "left_out": [c.id for c in fit.left_out], "within": fit.within, "why": fit.why, "kept": fit.kept,
                "tune_changed": fit.changed, "tune_n": fit.n, "tune_bound": fit.bound, "repairs": fit.repairs,
                "seconds": round(fit.seconds, 1), "first_bound": first["bound"],
                "first_dev_drop_points": first["dev_drop_points"],
            }  # fmt: skip
            label = f"less {len(named)} must_fix"
            _, run = repaired([c for c in cases if c.id not in named], budget)
            runs.append(run | {"candidate": label})
        within = run["converged"] and (budget is None or run["bound"] <= budget)
        certified = run["converged"] and run["must_fix_certified"] == run["must_fix"]
        failure = None if within and certified else (run["message"] if not run["converged"] else "over budget")
        row |= {"chosen": label, "passed": failure is None, "failure": failure, **{k: run[k] for k in RUN_FIGURES}}
        rows.append(row)
        fitted = row.get("fit")
        left = f", {len(fitted['left_out'])} must_fix left out in {fitted['repairs']} repairs" if fitted else ""
        log(
            f"budget {_share(budget)}: {label}{left}: U {run['bound']} true {run['dev_change_rate']} "
            f"pool {run['pool_change_rate']} drop {run['dev_drop_points']} held {run['heldout_fixed']} "
            f"{failure or 'passed'}"
        )
    return runs, rows


def repair_run(
    suite, result, chosen, adapter, measured_at, folder, index, cache, summarise, log, *, pool_at=None
) -> dict:
    """The repair of ``chosen`` as a user gets it: written into a copy of the suite by ``write_choice``
    (``tune --write``), then repaired with the traffic (``warp-check repair``'s ``repair_cases``)."""
    copy_dir = folder.parent / f"{folder.name}-c{index}"
    shutil.copytree(folder, copy_dir)
    write_choice(load_suite(copy_dir), replace(result, chosen=chosen))
    suite = load_suite(copy_dir)
    sample = load_traffic(suite)
    settings = suite.settings()
    reference = reference_for(adapter.source, None, option="--baseline") if settings.restore_regressions else None
    assert reference is None, "the benchmark's models carry no certificate chain to restore against"
    started = time.perf_counter()
    outcome = repair_cases(
        adapter,
        list(suite.cases),
        settings,
        batch_size=suite.model.batch_size,
        cache_dir=cache,
        progress=False,
        traffic=sample,
        label_name=suite.label_name,
    )
    guards = sum(1 for c in suite.cases if c.source == "prediction:traffic")
    seconds = time.perf_counter() - started
    return measured_outcome(outcome, settings, seconds, guards, measured_at, summarise, pool_at=pool_at)


def measured_outcome(outcome, settings, seconds: float, guards: int, measured_at, summarise, *, pool_at=None) -> dict:
    """A repair's figures: Cert 4 as the product measured it, then dev, the held-out attacks and the
    pool (``pool_at``: its v at a spec's layer, :func:`pool_encoder`; None: no pool)."""
    res = outcome.result
    if not res.repaired:
        return {
            "converged": False,
            "message": res.message,
            "repair_seconds": round(seconds, 1),
            "guards": guards,
            **dict.fromkeys(k for k in RUN_FIGURES if k not in ("repair_seconds", "guards")),
        }
    at, dev_ev, held_ev = measured_at(outcome.spec)
    before, after = at.head(), res.head_after
    dev_V, held_V = dev_ev.encoded.V.astype(np.float64), held_ev.encoded.V.astype(np.float64)
    dev_labels = np.array([c.label for c in dev_ev.cases])
    was, now = before.predict(dev_V), after.predict(dev_V)
    held_now = after.predict(held_V)
    fix_records = [r for r in outcome.certificates if r.kind is Kind.MUST_FIX]
    record = outcome.traffic
    return {
        "converged": True,
        "message": res.message,
        "layer": outcome.spec.repair_layer,
        "bound": record.bound,
        "changed": record.changed,
        "n": record.n,
        "dev_changed": int(np.sum(was != now)),
        "dev_change_rate": float(np.mean(was != now)),
        "dev_correct": int(np.sum(now == dev_labels)),
        "dev_drop_points": float(100 * (np.mean(was == dev_labels) - np.mean(now == dev_labels))),
        "heldout_fixed": float(np.mean(held_now == np.array([c.label for c in held_ev.cases]))),
        **pool_figures(before, after, pool_at(outcome.spec) if pool_at is not None else None),
        "must_fix": len(fix_records),
        "must_fix_certified": sum(1 for r in fix_records if r.cert1),
        "certs": summarise(list(outcome.certificates)),
        "repair_seconds": round(seconds, 1),
        "guards": guards,
        "settings": {
            "gamma_s": settings.gamma_s,
            "mu": settings.mu,
            "per_case": settings.neighbours.per_case,
            "keep_per_case": settings.neighbours.keep_per_case,
        },
    }


def pool_figures(before, after, V: np.ndarray | None) -> dict:
    """The predictions the repair changes on the pool's ``V`` (the heads before and after, as on dev);
    None each where there is no pool."""
    if V is None or not len(V):
        return dict.fromkeys(POOL_FIGURES)
    changed = int(np.sum(before.predict(V) != after.predict(V)))
    return {"pool_n": len(V), "pool_changed": changed, "pool_change_rate": changed / len(V)}


# -- the summary ----------------------------------------------------------------------------------


def pair_of(row: dict) -> tuple:
    """A row's repair × sample: the model, the seed (its traffic sample), the repair chosen and, from a
    budget fit, the cases left out: budgets that leave out the same cases (or none) run the same repair."""
    fit = row.get("fit")
    return row["model"], row["seed"], row["chosen"], tuple(sorted(fit["left_out"])) if fit else ()


def like_traffic(tables: list[dict]) -> dict:
    """The bound against the pool's change rate (traffic like its sample: its premise held) beside dev's,
    over the rows with both, then over their distinct repair × sample pairs (a pair counted once; tables
    apart: a weak and a strong model share a name and seeds, not a repair)."""
    measured, pairs = [], []
    for table in tables:
        mine = [r for r in table["rows"] if r.get("bound") is not None and r.get("pool_change_rate") is not None]
        measured += mine
        pairs += {pair_of(r): r for r in mine}.values()

    def within(some: list[dict], key: str) -> int:
        return sum(1 for r in some if r[key] <= r["bound"])

    return {
        "rows": len(measured),
        "pool_change_within_U": within(measured, "pool_change_rate"),
        "dev_change_within_U": within(measured, "dev_change_rate"),
        "distinct_pairs": len(pairs),
        "distinct_pool_change_within_U": within(pairs, "pool_change_rate"),
        "distinct_dev_change_within_U": within(pairs, "dev_change_rate"),
    }


def summary(tables: list[dict], budgets: list[float]) -> dict:
    """The issue's goals over every table: the bound held (per distinct repair; on dev and on the pool
    of traffic-like texts, :func:`like_traffic`), dev drop at 1 %,
    WARP's held-out fixed against FT's and LoRA's at the same or a larger dev drop."""
    repairs = [r for t in tables for r in t["repairs"] if r["converged"]]
    held = sum(1 for r in repairs if r["dev_change_rate"] <= r["bound"])
    rows = [r for t in tables for r in t["rows"]]
    out: dict = {
        "bound_holds": {
            "runs": len(repairs),
            "true_change_within_U": held,
            "share": held / len(repairs) if repairs else None,
            "goal": 0.95,
        },
        "rows_bound_holds": {
            "rows": sum(1 for r in rows if r.get("bound") is not None),
            "true_change_within_U": sum(
                1 for r in rows if r.get("bound") is not None and r["dev_change_rate"] <= r["bound"]
            ),
        },
        "bound_holds_like_traffic": like_traffic(tables),
        "by_budget": {},
    }
    for budget in budgets:
        mine = [r for r in rows if r["budget"] == budget]
        entry: dict = {"rows": len(mine), "passed": sum(1 for r in mine if r["passed"])}
        drops: dict = {}
        for r in mine:
            if r.get("dev_drop_points") is not None:
                drops.setdefault(r["model"], []).append(r["dev_drop_points"])
        entry["max_dev_drop_points"] = {m: max(v) for m, v in drops.items()}
        entry["no_choice_or_failed"] = [f"{r['model']} s{r['seed']}: {r['failure']}" for r in mine if not r["passed"]]
        for method in ("full_ft", "lora"):
            curves = {t["model"]: t["baselines"]["methods"][method]["curve"] for t in tables
                      if method in t["baselines"]["methods"]}  # fmt: skip
            at_change = [(r, same_change(curves[r["model"]], r["dev_changed"])) for r in mine
                         if r.get("dev_changed") is not None and r["model"] in curves]  # fmt: skip
            entry[f"warp_at_least_{method}_same_change"] = {
                "rows": len(at_change),
                "met": sum(1 for r, c in at_change if c is None or r["heldout_fixed"] >= c["heldout_fixed"]),
                "none_at_that_change": sum(1 for _, c in at_change if c is None),
            }
            scored = [r for r in mine if r.get("heldout_fixed") is not None and method in r]
            met = [r for r in scored if r[method] is None or r["heldout_fixed"] >= r[method]["heldout_fixed"]]
            entry[f"warp_at_least_{method}"] = {
                "rows": len(scored),
                "met": len(met),
                "none_at_that_drop": sum(1 for r in scored if r[method] is None),
            }
        out["by_budget"][str(budget)] = entry
    if 0.01 in budgets:
        at1 = out["by_budget"]["0.01"]["max_dev_drop_points"]
        out["dev_drop_within_1_point_at_1pct"] = {m: d <= 1.0 for m, d in at1.items()}
    return out


def _share(budget: float | None) -> str:
    return "none" if budget is None else f"{budget:.0%}"


def render(tables: list[dict], budgets: list[float]) -> str:
    """Per model × budget, then tune's choice with no budget ("none"): means over the seeds (dev drop: its
    largest too); pool change: on the pool of traffic-like texts; FT / LoRA: the checkpoint at the same or
    a smaller dev drop, averaged over the rows."""
    lines = [
        "| model | budget | chosen | passed | U | true change | pool change | dev drop mean (max) | held-out "
        "| FT at ≤ drop | LoRA at ≤ drop | FT at ≤ change | LoRA at ≤ change | choice / repair s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in tables:
        for budget in [*budgets, None]:
            mine = [r for r in t["rows"] if r["budget"] == budget]
            done = [r for r in mine if r.get("bound") is not None]

            def mean(key, rows=done):
                return float(np.mean([r[key] for r in rows])) if rows else None

            def base(method, rows=done):
                got = [r[method] for r in rows if r.get(method)]
                if not got:
                    return "none" if rows else "—"
                epochs = ",".join(str(g["epoch"]) for g in got)
                return f"{100 * np.mean([g['heldout_fixed'] for g in got]):.1f} (ep {epochs})"

            def at_change(method, rows=done, table=t):
                curve = table["baselines"]["methods"].get(method, {}).get("curve")
                if not curve:
                    return "—"
                got = [same_change(curve, r["dev_changed"]) for r in rows]
                if not [g for g in got if g]:
                    return "none" if rows else "—"
                return f"{100 * np.mean([g['heldout_fixed'] if g else 0.0 for g in got]):.1f}"

            chosen = ", ".join(sorted({r["chosen"] or "none" for r in mine}))
            cells = [
                t["model"],
                _share(budget),
                chosen,
                f"{sum(r['passed'] for r in mine)}/{len(mine)}",
                _p(mean("bound"), 2),
                _p(mean("dev_change_rate"), 2),
                _p(mean("pool_change_rate") if all(r.get("pool_change_rate") is not None for r in done) else None, 2),
                f"{mean('dev_drop_points'):.2f} ({max(r['dev_drop_points'] for r in done):.2f})" if done else "—",
                _p(mean("heldout_fixed"), 1),
                base("full_ft"),
                base("lora"),
                at_change("full_ft"),
                at_change("lora"),
                f"{np.mean([_choice_seconds(r) for r in mine]):.0f} / {mean('repair_seconds'):.0f}" if done else "—",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _choice_seconds(row: dict) -> float:
    """What choosing the row's repair took: tune's table, or the search that named the cases left out."""
    return row["fit"]["seconds"] if row.get("fit") else row["tune_seconds"]


def _p(value, digits: int) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.budgets RECORD.json ...``: the table and the goals over saved
    ``generalise --budgets`` records together (one record a model, where they ran side by side)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.budgets", description=main.__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", type=Path)
    args = parser.parse_args(argv)
    tables, grid = [], []
    for path in args.records:
        result = json.loads(path.read_text())["result"]
        tables += result["tables"]
        grid += [b for b in result["settings"]["budgets"] if b not in grid]
    print(render(tables, grid))
    print(json.dumps(summary(tables, grid), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
