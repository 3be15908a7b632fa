"""Benchmark (issue 21): do repairs generalise? WARP's settings side by side on held-back data.

For each task × model, one split (``benchmarks.paper_tables.build_split``: must_keep, must_fix
from ``--fix-recipe``, held-out attacks from each of ``--heldout-recipes`` on other rows, aux,
the dev set as general accuracy; attacks cached), then:

* the baselines once per split (original, same-layer LoRA and all-layers fine-tuning, both with
  ``--restore-best``'s rule: the lowest-loss epoch's weights), through
  :func:`warp_check.extras.compare.compare`, cached under
  ``$XDG_CACHE_HOME/warp-check/benchmarks/baselines`` by the split's files and the training
  settings: a second run reads them;
* every WARP variant of ``--variants`` (the table ``VARIANTS``: repair settings, and
  neighbourhood cases added to must_fix) through :func:`warp_check.runs.repair_cases.repair_cases`:
  repair, keep, general and held-out accuracy (pooled, per recipe, and in-recipe / cross-recipe),
  the dev predictions that changed, Cert 1/2/3 and the loop's time; once per neighbourhood draw
  seed of ``--seeds`` (a held-out figure moves ±3 points with the seed), with each variant's mean
  over them.

``--unlabelled N`` (SST-2) also points the suite at N train sentences outside the fine-tune set
and the split, labelled by the model itself (:func:`warp_check.sources.predictions.import_predicted`,
``warp-check import --predicted``): what unlabelled text a user has does for a repair.

Run from the repository root: ``python -m benchmarks.generalise --task sst2 --models
distilbert,bert --attack-python /path/to/attack-venv/bin/python --save``. Needs TextAttack in
``--attack-python`` only for attacks not in the cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from benchmarks import budgets
from benchmarks.data import cache_root, read_jsonl, read_tsv
from benchmarks.example_models import sst2_training_rows
from benchmarks.measure import machine_info
from benchmarks.paper_tables import add_split_arguments, build_split
from benchmarks.results import add_output_arguments, report
from warp_check import Kind, evaluate, load_suite, repair_cases
from warp_check.cases import NEIGHBOUR
from warp_check.data_files import ImportSettings
from warp_check.extras.baselines import TrainSettings
from warp_check.extras.compare import CompareSettings, compare, read_cases_file
from warp_check.releases.load import load_adapter
from warp_check.repair.settings import KeepChoice, NeighbourSettings, RepairSettings
from warp_check.sources.predictions import import_predicted


@dataclass(frozen=True, kw_only=True)
class Variant:
    """A WARP run of the table: settings that differ from RepairSettings(), the neighbourhood among them."""

    settings: dict = field(default_factory=dict)
    neighbours: NeighbourSettings = field(default_factory=NeighbourSettings)
    # "auto": the layer the suite names (the dense layer before the head); "final": the final linear
    # layer, the head's fallback: one exact QP on a 2 × d_in update, far fewer degrees of freedom.
    layer: str = "auto"


OFF = NeighbourSettings.off()
RANDOM = KeepChoice.RANDOM


def sampled(per_case: int = 8, keep_per_case: int = 0, keep_cases: int | None = 2000, **more) -> NeighbourSettings:
    """A neighbourhood over a seeded sample of must_keep cases (the first measured form)."""
    return NeighbourSettings(per_case=per_case, keep_per_case=keep_per_case, keep_cases=keep_cases,
                             keep_choice=RANDOM, **{"synonyms": False} | more)  # fmt: skip


def nearest(keep_cases: int, per_case: int = 8, keep_per_case: int = 8, max_edits: int = 2) -> NeighbourSettings:
    return NeighbourSettings(per_case=per_case, keep_per_case=keep_per_case, keep_cases=keep_cases,
                             max_edits=max_edits, synonyms=False)  # fmt: skip


PAPER = {"mu": 0.0, "max_rank": 2, "price_growth": 1.0}  # the paper's loop: ρ/2‖ΔW‖², rank 2, λ fixed
# A setting a variant does not name is the default of the code that runs it (a saved result's code
# stamp says which): "default" was 8 copies a must_keep case at mu = 10 until 2026-11-25, "k8-mu10" now;
# then 16 at mu = 100, "on" now; since 2026-11-25 (the evening) the neighbourhood is off by default.
# The variants measured before then name that mu (and, before synonyms = "auto" became the default
# the same day, synonyms = false), so that each still means what its results measured.
MU10 = {"mu": 10.0}
ON = NeighbourSettings().drawing()  # the neighbourhood turned on: 8 copies a must_fix case, 16 a must_keep one
VARIANTS: dict[str, Variant] = {
    "paper": Variant(settings=PAPER, neighbours=OFF),
    "default": Variant(),  # the defaults: the loop's and the neighbourhood's
    "on": Variant(neighbours=ON),  # the defaults with the neighbourhood on (the default until 2026-11-25's evening)
    # Beside "on": fewer copies, for less general accuracy lost.
    "on-fix-only": Variant(neighbours=replace(ON, keep_per_case=0)),  # copies of must_fix cases alone
    "near100": Variant(neighbours=replace(ON, keep_cases=100)),
    "k4": Variant(neighbours=replace(ON, keep_per_case=4)),
    "k8-mu10": Variant(settings=MU10, neighbours=nearest(500)),  # the defaults before 2026-11-25
    # The loop alone: function space on the must_keep cases, the rank grows.
    "loop": Variant(settings=MU10, neighbours=OFF),
    "mu1": Variant(settings={"mu": 1.0}, neighbours=OFF),
    "mu100": Variant(settings={"mu": 100.0}, neighbours=OFF),
    "mu1000": Variant(settings={"mu": 1000.0}, neighbours=OFF),
    "mu10000": Variant(settings={"mu": 10000.0}, neighbours=OFF),
    "mu1000-g05": Variant(settings={"mu": 1000.0, "gamma_s": 0.5}, neighbours=OFF),
    "paper-rank8": Variant(settings={"mu": 0.0, "rank": 8, "max_rank": 8, "price_growth": 1.0}, neighbours=OFF),
    "gamma2": Variant(settings=MU10 | {"gamma_s": 2.0}, neighbours=OFF),
    "gsnft": Variant(settings=MU10 | {"gsn_threshold": 1e9}, neighbours=OFF),
    "gsn": Variant(settings={"gsn_threshold": 1e9}),  # the defaults, GSN-FT on the aux cases always run
    "nbr8": Variant(settings=MU10, neighbours=sampled()),
    "nbr8-mu100": Variant(settings={"mu": 100.0}, neighbours=sampled()),
    "nbr8-syn": Variant(settings=MU10, neighbours=sampled(synonyms=True)),
    "keep2": Variant(settings=MU10, neighbours=sampled(per_case=0, keep_per_case=2)),
    "nbr8-keep1": Variant(settings=MU10, neighbours=sampled(keep_per_case=1)),
    "nbr8-keep2": Variant(settings=MU10, neighbours=sampled(keep_per_case=2)),
    "nbr8-keep4": Variant(settings=MU10, neighbours=sampled(keep_per_case=4)),
    "nbr8-keep8": Variant(settings=MU10, neighbours=sampled(keep_per_case=8)),
    "nbr16-keep4": Variant(settings=MU10, neighbours=sampled(per_case=16, keep_per_case=4)),
    "nbr8-keep4-mu100": Variant(settings={"mu": 100.0}, neighbours=sampled(keep_per_case=4)),
    "nbr8-keep8-mu100": Variant(settings={"mu": 100.0}, neighbours=sampled(keep_per_case=8)),
    "nbr8-keep2-syn": Variant(settings=MU10, neighbours=sampled(keep_per_case=2, synonyms=True)),
    "nbr8-keep2-mu100": Variant(settings={"mu": 100.0}, neighbours=sampled(keep_per_case=2)),
    "nbr8-rand500": Variant(settings=MU10, neighbours=sampled(keep_per_case=8, keep_cases=500)),
    "near250": Variant(settings=MU10, neighbours=nearest(250)),
    "near500": Variant(settings=MU10, neighbours=nearest(500)),
    "near1000": Variant(settings=MU10, neighbours=nearest(1000)),
    "near500-mu100": Variant(settings={"mu": 100.0}, neighbours=nearest(500)),
    "near500-syn": Variant(settings=MU10, neighbours=replace(nearest(500), synonyms=True)),
    "near250-k16": Variant(settings=MU10, neighbours=nearest(250, keep_per_case=16)),
    "near500-k16": Variant(settings=MU10, neighbours=nearest(500, keep_per_case=16)),
    "near1000-syn": Variant(settings=MU10, neighbours=replace(nearest(1000), synonyms=True)),
    "near500-e3": Variant(settings=MU10, neighbours=nearest(500, max_edits=3)),
    "near500-k16-e3": Variant(settings=MU10, neighbours=nearest(500, keep_per_case=16, max_edits=3)),
    "near500-f16-k16": Variant(settings=MU10, neighbours=nearest(500, per_case=16, keep_per_case=16)),
    # A smaller margin for the must_fix cases and their neighbours: less change, less dev lost?
    "gamma05": Variant(settings=MU10 | {"gamma_s": 0.5}, neighbours=nearest(500)),
    # The function-space price raised with the neighbourhood: the dev accuracy back?
    "k8-mu100": Variant(settings={"mu": 100.0}, neighbours=nearest(500)),
    "k16-mu100": Variant(settings={"mu": 100.0}, neighbours=nearest(500, keep_per_case=16)),
    # Beside the defaults: more copies of the must_fix cases, more edits a copy.
    "f16": Variant(neighbours=replace(ON, per_case=16, synonyms=False)),
    "e3": Variant(neighbours=replace(ON, max_edits=3, synonyms=False)),
    # Beside the defaults: a wider margin for the must_fix cases and their copies; WordNet synonyms
    # required, or never ("auto", the default since 2026-11-25, is "syn" where nltk and WordNet are
    # installed and "no-syn" where not: a row's "synonyms" says which it drew).
    "g2": Variant(settings={"gamma_s": 2.0}, neighbours=replace(ON, synonyms=False)),
    "syn": Variant(neighbours=replace(ON, synonyms=True)),
    "no-syn": Variant(neighbours=replace(ON, synonyms=False)),
    # Beside the defaults: more must_keep cases perturbed (SST-2 has 2,000), or more copies of each (RTE, 200).
    "n1000": Variant(neighbours=replace(ON, keep_cases=1000)),
    "k32": Variant(neighbours=replace(ON, keep_per_case=32)),
    # Beside the defaults: a smaller margin for the must_fix cases, less change for fewer fixed attacks.
    "gs05": Variant(settings={"gamma_s": 0.5}),
    "gs03": Variant(settings={"gamma_s": 0.3}),
    # The neighbourhood on with a smaller must_fix margin (its copies meet it too): its dev price lower?
    "on-gs05": Variant(settings={"gamma_s": 0.5}, neighbours=ON),
    "on-gs03": Variant(settings={"gamma_s": 0.3}, neighbours=ON),
    "near100-gs05": Variant(settings={"gamma_s": 0.5}, neighbours=replace(ON, keep_cases=100)),
    # The rank held down: less room to memorise the must_fix cases, more need of what they share?
    "maxr8": Variant(settings={"max_rank": 8}),
    "r8": Variant(settings={"rank": 8, "max_rank": 8}),
    "on-maxr8": Variant(settings={"max_rank": 8}, neighbours=ON),
    # The final linear layer instead of the dense one: does a repair of less room generalise better?
    "final": Variant(layer="final"),
    "final-gs05": Variant(settings={"gamma_s": 0.5}, layer="final"),
    "final-mu1000": Variant(settings={"mu": 1000.0}, layer="final"),
    "final-near100": Variant(neighbours=replace(ON, keep_cases=100), layer="final"),
}


def baselines(adapter, cases, general, heldout, split_key: str, args, cache: Path, log) -> dict:
    """original, LoRA and full FT (restore-best) on the split, cached by split and training settings."""
    methods = tuple(m for m in ("original", "lora", "full_ft") if m in args.baselines.split(",") or m == "original")
    train = TrainSettings(max_epochs=args.epochs, seed=args.seed, restore_best=True)
    key = hashlib.sha256(json.dumps([split_key, methods, train.__dict__], sort_keys=True, default=str).encode())
    path = cache_root() / "baselines" / f"{key.hexdigest()[:16]}.json"
    if path.is_file():
        log(f"baselines from the cache {path}")
        return json.loads(path.read_text())
    settings = CompareSettings(methods=methods, train=train, seed=args.seed, batch_size=64)
    result = compare(adapter, cases, settings, general=general, heldout=heldout, cache_dir=cache, progress=log)
    record = result.to_dict()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)
    return record


def score(head, V: np.ndarray, cases) -> tuple[float, np.ndarray]:
    predictions = head.predict(V)
    labels = np.array([c.label for c in cases])
    return float(np.mean(predictions == labels)), predictions


def at_layer(adapter, layer: str):
    """The adapter repairing ``layer`` of :class:`Variant`: its own head, or its final linear layer."""
    if layer == "auto":
        return adapter
    if layer != "final" or adapter.spec.fallback is None:
        raise ValueError(f"layer {layer!r}: only 'auto' and, for a dense head, 'final' (the head is {adapter.spec})")
    return adapter.with_spec(adapter.spec.fallback)


def run_variant(name, seed, adapters, suite_cases, evaluations, fix_recipe, args, cache, log) -> dict:
    """``adapters`` and ``evaluations`` (general, held-out) by layer: v is the input of the layer repaired."""
    variant = VARIANTS[name]
    adapter, (general_ev, heldout_ev) = adapters[variant.layer], evaluations[variant.layer]
    settings = RepairSettings(**variant.settings, neighbours=replace(variant.neighbours, seed=seed))
    evaluation = evaluate(adapter, list(suite_cases), batch_size=64, cache_dir=cache, progress=False)
    start = time.perf_counter()
    outcome = repair_cases(
        adapter, evaluation.cases, settings, evaluation=evaluation, batch_size=64, cache_dir=cache, progress=False
    )
    seconds = time.perf_counter() - start
    result, hood = outcome.result, outcome.neighbourhood
    evaluation = outcome.evaluation  # the suite's cases and the neighbourhood's
    head0, head = adapter.head(), result.head_after
    labels = np.array([c.label for c in evaluation.cases])
    kinds = np.array([c.kind.value for c in evaluation.cases])
    original_fix = np.array([c.kind is Kind.MUST_FIX and c.source != NEIGHBOUR for c in evaluation.cases])
    right = head.predict(evaluation.encoded.V.astype(np.float64)) == labels
    dev_V = general_ev.encoded.V.astype(np.float64)
    general_acc, dev_after = score(head, dev_V, general_ev.cases)
    dev_before = head0.predict(dev_V)
    held_V = heldout_ev.encoded.V.astype(np.float64)
    _, held_pred = score(head, held_V, heldout_ev.cases)
    held_right = held_pred == np.array([c.label for c in heldout_ev.cases])
    sources = np.array([c.source or "" for c in heldout_ev.cases])
    by_source = {s: float(held_right[sources == s].mean()) for s in sorted(set(sources))}
    cross = [s for s in by_source if s != fix_recipe]
    from warp_check.certify.cases import summarise

    row = {
        "variant": name,
        "seed": seed,
        "settings": variant.settings,
        "layer": adapter.spec.repair_layer,
        "neighbours": result.settings.to_dict()["neighbours"],  # as drawn: synonyms "auto" resolved
        "synonyms": hood.synonyms.value if hood else "off",
        "neighbours_drawn": hood.drawn if hood else 0,
        "neighbour_cases": len(hood.cases) if hood else 0,
        "neighbours_dropped": len(hood.dropped) if hood else 0,
        "neighbours_left_out": hood.left_out if hood else None,
        "neighbour_seconds": hood.seconds if hood else 0.0,
        "status": result.status.value,
        "iterations": len(result.iterations),
        "repair_acc": float(right[original_fix].mean()),
        "repair_acc_with_neighbours": float(right[kinds == Kind.MUST_FIX.value].mean()),
        "remain_acc": float(right[kinds == Kind.MUST_KEEP.value].mean()),
        "general_acc": general_acc,
        "dev_changed": int(np.sum(dev_after != dev_before)),
        "attack_gen": float(held_right.mean()),
        "attack_gen_by_source": by_source,
        "attack_in_recipe": by_source.get(fix_recipe),
        "attack_cross_recipe": float(np.mean([by_source[s] for s in cross])) if cross else None,
        "certs": summarise(list(outcome.certificates)) if outcome.certificates else None,
        "gsn_ft": {  # the mean κ of the must_fix cases before GSN-FT and at the step it kept
            "applied": result.gsn_ft.applied,
            "chosen_step": result.gsn_ft.chosen_step,
            "kappa": [result.gsn_ft.kappa_per_step[i] for i in (0, result.gsn_ft.chosen_step)]
            if result.gsn_ft.kappa_per_step
            else None,
        },
        "loop_seconds": result.seconds,
        "seconds": seconds,
        "weight_change": float(np.linalg.norm(head.W - head0.W)),
    }
    log(
        f"{name} s{seed}: {row['status']} in {row['iterations']} it, repair {row['repair_acc']:.3f} keep "
        f"{row['remain_acc']:.3f} dev {general_acc:.4f} (changed {row['dev_changed']}) held {row['attack_gen']:.3f} "
        f"{by_source} certs {row['certs']} {result.seconds:.1f} s"
    )
    return row


def split_digest(split) -> str:
    """The split's files and model: the key its baselines are cached by."""
    digest = hashlib.sha256()
    for path in sorted(split.suite_dir.glob("*.jsonl")) + [split.general, split.heldout]:
        digest.update(path.name.encode() + path.read_bytes())
    digest.update(split.model_dir.name.encode())
    return digest.hexdigest()


def run_one(task: str, name: str, args, work: Path, log) -> dict:
    started = time.perf_counter()
    split = build_split(task, name, args, work, log)
    if args.budgets:
        table = budgets.run_budgets(task, name, split, args, work, split_digest(split), log)
        return table | {"seconds": round(time.perf_counter() - started, 1)}
    suite = load_suite(split.suite_dir)
    adapter = load_adapter(suite)
    if args.unlabelled:
        point_at_unlabelled(split, suite, adapter, args, work / f"{task}-{name}-unlabelled.jsonl", log)
        suite = load_suite(split.suite_dir)  # with the predicted cases listed
    general = read_cases_file(suite, split.general)
    heldout = read_cases_file(suite, split.heldout)
    cache = cache_root() / "encodings"
    base = baselines(adapter, suite.cases, general, heldout, split_digest(split), args, cache, log)
    layers = dict.fromkeys(VARIANTS[v].layer for v in args.variants.split(","))
    adapters = {layer: at_layer(adapter, layer) for layer in layers}
    encode = {"batch_size": 64, "cache_dir": cache, "progress": False}
    evaluations = {layer: (evaluate(at, general, **encode), evaluate(at, heldout, **encode)) for layer, at in
                   adapters.items()}  # fmt: skip
    rows = [
        run_variant(v, seed, adapters, suite.cases, evaluations, args.fix_recipe, args, cache, log)
        for v in args.variants.split(",")
        for seed in args.seeds
    ]
    return {
        "task": task,
        "model": name,
        "model_dir": str(split.model_dir),
        "sizes": split.sizes,
        "split": split.info,
        "baselines": [_baseline_row(m, args.fix_recipe) for m in base["methods"]],
        "warp": rows,
        "means": seed_means(rows),
        "seconds": round(time.perf_counter() - started, 1),
    }


def point_at_unlabelled(split, suite, adapter, args, source: Path, log) -> None:
    """``args.unlabelled`` SST-2 train sentences of at least six words, neither fine-tuned on nor in
    the split (the suite's cases, the held-out attacks, and the clean sentences either was attacked
    from), a seed-7 sample, added to the suite as ``warp-check import --predicted`` adds them;
    ``split.sizes``: how many were offered, kept, and left out within γ_h or as repeats."""
    import random

    cases = [row for path in split.suite_dir.glob("*.jsonl") for row in read_jsonl(path)] + read_jsonl(split.heldout)
    attacked = {row["original"] for row in cases if row.get("original")}
    train = read_tsv("sst2", "train")
    taken = {row["text"] for row in cases} | {row["text"] for row in train if row["id"] in attacked}
    taken |= {row["text"] for row in sst2_training_rows(args.sst2_rows)}
    texts = dict.fromkeys(r["text"] for r in train if r["text"] not in taken and len(r["text"].split()) >= 6)
    rows = list(texts)
    random.Random(7).shuffle(rows)
    source.write_text("".join(json.dumps({"text": text}) + "\n" for text in rows[: args.unlabelled]))
    out = split.suite_dir / "predicted.jsonl"
    result = import_predicted(suite, source, out, ImportSettings(format="jsonl", predicted=True), adapter=adapter)
    with open(split.suite_dir / "warp.toml", "a", encoding="utf-8") as toml:
        toml.write(f'\n[[cases]]\npath = "{out.name}"\n')
    split.sizes.update(
        unlabelled=result.rows,
        predicted=len(result.appended.added),
        predicted_within_gamma_h=result.near_boundary,
        predicted_left_out_as_suite_or_repeat=result.in_suite + result.repeated,
        predicted_left_out_no_text=result.no_text,
    )
    log(f"unlabelled: {result.rows} rows, {len(result.appended.added)} kept as predicted {result.by_label}, "
        f"{result.near_boundary} within gamma_h")  # fmt: skip


MEANS_OF = ("repair_acc", "remain_acc", "general_acc", "attack_gen", "attack_in_recipe", "attack_cross_recipe")


def seed_means(rows: list[dict]) -> list[dict]:
    """Per variant, the mean, least and most of each figure over its seeds (a seed alone: itself)."""
    out = []
    for name in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == name]
        converged = all(r["status"] == "converged" for r in mine)
        row = {"variant": name, "seeds": [r["seed"] for r in mine], "all_converged": converged}
        for key in MEANS_OF:
            values = [r[key] for r in mine if r[key] is not None]
            row[key] = {"mean": float(np.mean(values)), "min": min(values), "max": max(values)} if values else None
        out.append(row)
    return out


def _baseline_row(method: dict, fix_recipe: str) -> dict:
    by_source = {k: v["accuracy"] for k, v in method["attack_gen_by_source"].items()}
    cross = [v for k, v in by_source.items() if k != fix_recipe]
    return {
        "method": method["method"],
        "title": method["title"],
        "repair_acc": method["repair_acc"],
        "remain_acc": method["remain_acc"],
        "general_acc": method["general_acc"],
        "attack_gen": method["attack_gen"],
        "attack_gen_by_source": by_source,
        "attack_in_recipe": by_source.get(fix_recipe),
        "attack_cross_recipe": float(np.mean(cross)) if cross else None,
        "seconds": method["seconds"],
        "epochs": method["details"].get("epochs"),
        "kept_epoch": method["details"].get("kept_epoch"),
    }


def pct(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def render(results: list[dict]) -> str:
    lines = []
    for r in results:
        lines += [
            f"## {r['task']} / {r['model']}: sizes {r['sizes']}",
            "",
            "| method | repair | keep | dev | dev changed | held-out | in-recipe | cross-recipe | Cert 1 | Cert 2 "
            "| time |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for b in r["baselines"]:
            lines.append(
                f"| {b['title']} | {pct(b['repair_acc'])} | {pct(b['remain_acc'])} | {pct(b['general_acc'])} | — | "
                f"{pct(b['attack_gen'])} | {pct(b['attack_in_recipe'])} | {pct(b['attack_cross_recipe'])} | — | — | "
                f"{b['seconds'] or 0:.0f} s |"
            )
        for w in r["warp"]:
            certs = w["certs"] or {}
            lines.append(
                f"| WARP {w['variant']} s{w['seed']} ({w['status']}) | {pct(w['repair_acc'])} | "
                f"{pct(w['remain_acc'])} | "
                f"{pct(w['general_acc'])} | {w['dev_changed']} | {pct(w['attack_gen'])} | "
                f"{pct(w['attack_in_recipe'])} | "
                f"{pct(w['attack_cross_recipe'])} | {certs.get('cert1', '—')} | {certs.get('cert2', '—')} | "
                f"{w['loop_seconds']:.1f} s |"
            )
        means = [m for m in r.get("means", ()) if len(m["seeds"]) > 1]
        if means:
            lines += ["", "| variant (mean of seeds, least–most) | repair | keep | dev | held-out | cross-recipe |"]
            lines += ["|---|---|---|---|---|---|"]
            for m in means:
                cells = " | ".join(_spread(m[k]) for k in ("repair_acc", "remain_acc", "general_acc", "attack_gen",
                                                            "attack_cross_recipe"))  # fmt: skip
                lines.append(f"| WARP {m['variant']} (seeds {','.join(map(str, m['seeds']))}) | {cells} |")
        lines.append("")
    return "\n".join(lines)


def _spread(figure: dict | None) -> str:
    if figure is None:
        return "—"
    return f"{pct(figure['mean'])} ({pct(figure['min'])}–{pct(figure['max'])})"


def _seed_list(text: str) -> list[int]:
    if not all(s.strip().isdigit() for s in text.split(",")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of seeds (0, 1, ...)")
    return [int(s) for s in text.split(",")]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.generalise", description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("sst2", "rte"), default="sst2")
    parser.add_argument("--models", default="distilbert,bert")
    add_split_arguments(parser, keep=2000, fix_pool=70, heldout_pool=80, budget=200, aux=500)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"of: {', '.join(VARIANTS)}")
    parser.add_argument(
        "--seeds",
        type=_seed_list,
        default=[0],
        help="neighbourhood draw seeds, comma-separated: each variant runs once per seed",
    )
    parser.add_argument("--baselines", default="lora,full_ft", help="baselines besides the original (cached)")
    parser.add_argument("--epochs", type=int, default=30, help="baselines' epoch cap")
    parser.add_argument(
        "--unlabelled",
        type=int,
        default=0,
        metavar="N",
        help="SST-2: also N unlabelled train sentences as must_keep cases labelled by the model (import --predicted)",
    )
    parser.add_argument(
        "--budgets",
        type=_budget_list,
        default=[],
        metavar="B,B,...",
        help="SST-2 (issue 41): per seed and budget (max_change, e.g. 0.01,0.02,0.05) tune's choice repaired "
        "with Cert 4 on --traffic texts, beside FT/LoRA checkpoints at the same dev drop (--variants unused)",
    )
    parser.add_argument(
        "--traffic",
        type=int,
        default=4000,
        metavar="N",
        help="with --budgets: N SST-2 train sentences outside the fine-tune set and the split, as [traffic]",
    )
    parser.add_argument(
        "--traffic-pool",
        type=int,
        default=4000,
        metavar="N",
        help="with --budgets: N more such sentences, none in the seed's traffic, each repair's change measured on "
        "(the rate U promises, on traffic like its sample); 0: none",
    )
    parser.add_argument(
        "--budget-fit",
        action="store_true",
        help="with --budgets: no tune; the suite's own settings repaired with each max_change, and over it the "
        "repair without the must_fix cases the run names as past the budget",
    )
    add_output_arguments(parser)
    return parser


def _budget_list(text: str) -> list[float]:
    try:
        values = [float(s) for s in text.split(",")]
    except ValueError:
        values = []
    if not values or not all(0 < v <= 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of shares in (0, 1], e.g. 0.01,0.05")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    unknown = [v for v in args.variants.split(",") if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {', '.join(unknown)}; known: {', '.join(VARIANTS)}")

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    if args.task == "rte":
        args.keep = args.rte_keep
    if args.unlabelled and args.task != "sst2":
        parser.error("--unlabelled: SST-2 only (the RTE models are fine-tuned on every train pair)")
    if args.budgets and (args.task != "sst2" or args.unlabelled):
        parser.error("--budgets: SST-2 only (its traffic is SST-2 train sentences), without --unlabelled")
    work = Path(tempfile.mkdtemp(prefix="warp-generalise-"))
    try:
        results = [run_one(args.task, name, args, work, log) for name in args.models.split(",")]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    settings = {k: v for k, v in vars(args).items() if k not in ("json", "save", "save_dir", "variant")}
    machine = machine_info()
    result = {"settings": settings, "load_average_1m_at_end": machine["load_average_1m"], "tables": results}
    if args.budgets:
        result["summary"] = budgets.summary(results, args.budgets)

        def show(_) -> None:
            print(budgets.render(results, args.budgets))
            print(json.dumps(result["summary"], indent=2))
    else:

        def show(_) -> None:
            print(render(results))

    report("generalise", parser, args, argv, result, show, ignore=("attack_python",))
    return 0


if __name__ == "__main__":
    sys.exit(main())
