"""Issue 59's goal: Cert 4 between two releases holds on real traffic, and its gate fails a release
that changes too much.

* **OLD**: the example model (example_suites/reviews-distilbert's, ``minilm/models.py:distilbert``,
  built by its own script). **NEW**: OLD with its classifier's bias moved ``--shift`` towards
  'positive' (a second release that changes a few percent of predictions).
* **data**: SST-2 train sentences (``../shared/data/sst2``, GLUE; Socher et al. 2013), labels never
  read. A pool of ``--pool`` sentences is drawn once (seed 0); per seed, a shuffle of the pool salted
  by the seed gives ``--traffic`` sentences as the traffic and ``--other`` different ones.
* per seed: the product's measure (``certificates/traffic/between.py: release_changes``, the sample
  split by text hash, the bound at confidence 0.95) on the traffic; the share of predictions NEW
  actually changes on the other sentences, from each model's own v and head in float64 (the same
  arithmetic; the two sets share no sentence). The bound holds where it is ≥ that share; it claims
  the rate on the population the traffic is drawn from (the pool's share, also recorded), which the
  other sentences' share estimates with its own sampling noise.
* the gate: ``warp-check diff OLD NEW SUITE --traffic FILE --max-change 0.02`` on seed 0's traffic, its
  exit code and the words naming the bound, then the same command again, to show that the second
  comparison encodes nothing (the representation cache).

    python -m benchmarks.compare_releases --seeds 40 --save
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.example_models import minilm
from benchmarks.results import add_output_arguments, report

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "example_suites" / "reviews-distilbert"
SST2 = ROOT.parent / "shared" / "data" / "sst2" / "train.tsv"


def sst2_sentences() -> list[str]:
    with open(SST2, encoding="utf-8", newline="") as handle:
        rows = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        return sorted({row["sentence"].strip() for row in rows if row["sentence"].strip()})


def shifted_release(old: Path, to: Path, shift: float) -> Path:
    """A copy of ``old`` whose classifier bias leans ``shift`` towards class 1 ('positive')."""
    from safetensors.torch import load_file, save_file

    new = Path(shutil.copytree(old, to))
    weights = load_file(str(new / "model.safetensors"))
    weights["classifier.bias"] += weights["classifier.bias"].new_tensor([-shift, shift])
    save_file(weights, str(new / "model.safetensors"), metadata={"format": "pt"})
    return new


def run(args: argparse.Namespace) -> dict:
    from warp_check import load_suite
    from warp_check.certificates.traffic.between import release_changes
    from warp_check.certificates.traffic.changes import predictions
    from warp_check.certificates.traffic.sample import TrafficText, split_traffic, text_key
    from warp_check.cli import main
    from warp_check.decisions import SINGLE_LABEL
    from warp_check.model.encode import encode_cases
    from warp_check.releases.load import load_adapter

    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="compare-releases-"))
    cache = work / "cache"
    old_dir = minilm("distilbert")  # the suite's own factory builds (or finds) it
    new_dir = shifted_release(old_dir, work / "new", args.shift)
    old = load_adapter(load_suite(SUITE, model=old_dir))
    new = load_adapter(load_suite(SUITE, model=new_dir))

    sentences = sst2_sentences()
    pool = random.Random(0).sample(sentences, args.pool)

    # Each pool sentence's prediction by each model, once (the seeds' "other" sets read these).
    texts = [TrafficText(text=t, text_pair=None, key=text_key(t), where=f"pool {i}") for i, t in enumerate(pool)]
    cases = [t.case(i) for i, t in enumerate(texts)]
    answer = {}
    for name, adapter in (("old", old), ("new", new)):
        encoded = encode_cases(adapter, cases, batch_size=64, cache_dir=cache, progress=False)
        answer[name] = predictions(adapter.head(), encoded.V.astype(np.float64))
    flipped_in_pool = answer["old"] != answer["new"]
    index = {t: i for i, t in enumerate(pool)}

    seeds = []
    for seed in range(args.seeds):
        order = random.Random(f"compare-releases-{seed}").sample(pool, args.traffic + args.other)
        traffic, other = order[: args.traffic], order[args.traffic :]
        sample = split_traffic(
            ((t, None, f"seed {seed} row {i}") for i, t in enumerate(traffic)), source=f"seed-{seed}", confidence=0.95
        )
        measured = release_changes(old, new, sample, decision=SINGLE_LABEL, cache_dir=cache, batch_size=64)
        record = measured.record
        true_share = float(np.mean([flipped_in_pool[index[t]] for t in other]))
        seeds.append({
            "seed": seed,
            "n": record.n,
            "changed": record.changed,
            "bound": record.bound,
            "share_other": true_share,
            "holds": record.bound >= true_share,
            "encoded": measured.old.encoded + measured.new.encoded,
        })  # fmt: skip

    # The gate, as a user runs it, on seed 0's traffic.
    file = work / "traffic.jsonl"
    first = random.Random("compare-releases-0").sample(pool, args.traffic + args.other)[: args.traffic]
    file.write_text("".join(json.dumps({"text": t}) + "\n" for t in first), encoding="utf-8")
    argv = ["diff", str(old_dir), str(new_dir), str(SUITE), "--traffic", str(file), "--cache", str(work / "gate")]
    gates = []
    for _ in range(2):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main([*argv, "--max-change", str(args.max_change), "--json"])
        result = json.loads(out.getvalue())
        gates.append({
            "exit_code": code,
            "message": result["traffic"]["message"],
            "bound": result["traffic"]["properties"]["bound"],
            "encoded_old": result["traffic"]["properties"]["encoded_old"],
            "encoded_new": result["traffic"]["properties"]["encoded_new"],
            "paired_test": result["details"]["paired_test"],
        })  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    holds = sum(s["holds"] for s in seeds)
    # What the bound claims: the rate on the population the traffic is drawn from (here the pool, from
    # which each seed's traffic and other sentences are both drawn). The other sentences' share is that
    # rate measured on 1,000 more texts, with its own sampling noise (about 0.6 points at 3.7 %).
    pool_share = float(flipped_in_pool.mean())
    covers_pool = sum(s["bound"] >= pool_share for s in seeds)
    return {
        "old": str(old_dir.name),
        "new": f"old with classifier bias shifted {args.shift} towards positive",
        "data": "SST-2 train sentences (GLUE), labels unused",
        "pool": args.pool,
        "traffic_rows": args.traffic,
        "other_rows": args.other,
        "confidence": 0.95,
        "share_flipped_in_pool": pool_share,
        "bound_covers_pool_share": covers_pool,
        "seeds": seeds,
        "bound_holds": holds,
        "bound_holds_share": holds / len(seeds),
        "bound_mean": float(np.mean([s["bound"] for s in seeds])),
        "share_other_mean": float(np.mean([s["share_other"] for s in seeds])),
        "max_change": args.max_change,
        "gate": gates,
        "seconds": round(time.perf_counter() - started, 1),
    }


def print_text(result: dict) -> None:
    print(
        f"bound ≥ share flipped on {result['other_rows']} other sentences in {result['bound_holds']} of "
        f"{len(result['seeds'])} seeds ({100 * result['bound_holds_share']:.1f} %); mean bound "
        f"{100 * result['bound_mean']:.2f} %, mean share {100 * result['share_other_mean']:.2f} % "
        f"(pool {100 * result['share_flipped_in_pool']:.2f} %, the bound ≥ it in {result['bound_covers_pool_share']} "
        "seeds)"
    )
    for gate in result["gate"]:
        print(f"gate at {result['max_change']:g}: exit {gate['exit_code']}: {gate['message']}")
    print(f"{result['seconds']} s")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare_releases", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--shift", type=float, default=0.2, help="NEW's bias shift towards positive")
    parser.add_argument("--pool", type=int, default=6000, help="SST-2 train sentences drawn once")
    parser.add_argument("--traffic", type=int, default=3000, help="traffic rows per seed")
    parser.add_argument("--other", type=int, default=1000, help="other sentences per seed: the true share")
    parser.add_argument("--max-change", type=float, default=0.02, help="the gate's budget")
    add_output_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> dict:
    parser = build_parser()
    args = parser.parse_args(argv)
    return report("compare_releases", parser, args, argv, run(args), print_text)


if __name__ == "__main__":
    main()
