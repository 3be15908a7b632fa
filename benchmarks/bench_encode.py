"""Benchmark: cases per second of warp-check's encoder pass against a plain transformers loop.

Both run the same model, on the same device, in the same process, over the same sentences
(SST-2 train, in file order), with the same batch size, one after the other, twice each in
alternation (the better of the two of each is reported: CPU timings move with the machine's
load). warp-check's pass is :func:`warp_check.model.encode.encode_cases` with no cache: it
tokenizes, sorts by length, captures v at the repair layer and checks the head against the
model's logits on every batch. The plain loop is what a user would write: tokenize a batch
with padding, ``model(**batch).logits`` under ``torch.inference_mode()``. Goal: ratio ≥ 0.8.

Models: ``minilm`` (the example's all-MiniLM-L6-v2 DistilBERT model) and ``bert-base`` (a
BERT-base-sized model built from ``BertConfig()`` with random weights: 12 layers, 768 wide;
its speed does not depend on its weights).

``--against ray`` measures warp-check's pass twice instead, side by side in one run: in this
process (torch's threads on every core) and on Ray Data (``[model] engine = "ray"``: a local Ray
on the same cores, one worker per core with one thread each, the same batches), both with no
cache. The Ray time is the whole pass as a user waits for it: starting the workers and loading
the model on each included (Ray itself is started before, as a cluster would be). Goal: Ray ≤
1.25× the local pass; the point of Ray is more machines, not this one.

Run: ``python -m benchmarks.bench_encode --model minilm --device cpu --cases 2000``;
``python -m benchmarks.bench_encode --against ray --cases 10000 --json``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.data import read_tsv
from benchmarks.example_models import minilm
from benchmarks.results import add_output_arguments, report


def bert_base(folder: Path) -> Path:
    """A BERT-base-sized sequence classifier (random weights) with MiniLM's tokenizer, saved to ``folder``."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(num_labels=2)).eval()
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm("distilbert")).save_pretrained(folder)
    return folder


def plain_loop(model_dir: Path, texts: list[str], batch_size: int, device: str) -> float:
    """Seconds for a plain transformers forward loop over ``texts``."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).to(device).eval()
    start = time.perf_counter()
    with torch.inference_mode():
        for lo in range(0, len(texts), batch_size):
            batch = tokenizer(
                texts[lo : lo + batch_size], padding=True, truncation=True, max_length=128, return_tensors="pt"
            )
            model(**{k: v.to(device) for k, v in batch.items()}).logits.cpu()
    _synchronise(device)
    return time.perf_counter() - start


def warp_pass(model_dir: Path, texts: list[str], batch_size: int, device: str) -> float:
    """Seconds for warp-check's encoder pass (no cache) over ``texts``."""
    from warp_check.cases import Case, Kind
    from warp_check.model.adapter import ClassifierAdapter
    from warp_check.model.encode import encode_cases

    adapter = ClassifierAdapter.from_pretrained(model_dir, device=device)
    cases = [Case(id=str(i), text=t, label=0, kind=Kind.MUST_KEEP) for i, t in enumerate(texts)]
    start = time.perf_counter()
    encode_cases(adapter, cases, batch_size=batch_size, progress=False)
    _synchronise(device)
    return time.perf_counter() - start


def ray_pass(model_dir: Path, texts: list[str], batch_size: int, device: str, workers: int) -> float:
    """Seconds for warp-check's pass (no cache) on a local Ray: ``workers`` workers of one CPU each."""
    from warp_check.cases import Case, Kind
    from warp_check.model.adapter import ClassifierAdapter
    from warp_check.model.encode import encode_cases
    from warp_check.model.engines.settings import Engine, EngineSettings, RaySettings

    engine = EngineSettings(kind=Engine.RAY, ray=RaySettings(num_workers=workers, num_cpus=1))
    adapter = ClassifierAdapter.from_pretrained(model_dir, device=device, engine=engine)
    cases = [Case(id=str(i), text=t, label=0, kind=Kind.MUST_KEEP) for i, t in enumerate(texts)]
    start = time.perf_counter()
    encode_cases(adapter, cases, batch_size=batch_size, progress=False)
    return time.perf_counter() - start


def measure_ray(model_dir: Path, texts: list[str], batch_size: int, device: str, threads: int | None) -> dict[str, Any]:
    """The local pass and the Ray pass on the same cores, one after the other."""
    import os

    import ray
    import torch

    cores = len(os.sched_getaffinity(0))
    torch.set_num_threads(threads or cores)
    ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        local = warp_pass(model_dir, texts, batch_size, device)
        on_ray = ray_pass(model_dir, texts, batch_size, device, workers=cores)
    finally:
        ray.shutdown()
    return {
        "cases": len(texts),
        "cores": cores,
        "local_torch_threads": torch.get_num_threads(),
        "ray_workers": cores,
        "local_seconds": round(local, 2),
        "ray_seconds": round(on_ray, 2),
        "local_cases_per_s": round(len(texts) / local, 1),
        "ray_cases_per_s": round(len(texts) / on_ray, 1),
        "ray_over_local": round(on_ray / local, 3),
        "goal": 1.25,
        "goal_met": on_ray / local <= 1.25,
    }


def _synchronise(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def measure(model_dir: Path, texts: list[str], batch_size: int, device: str, threads: int | None) -> dict[str, Any]:
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    plain, warp = [], []
    for _ in range(2):  # alternating, so a load change on the machine hits both
        plain.append(plain_loop(model_dir, texts, batch_size, device))
        warp.append(warp_pass(model_dir, texts, batch_size, device))
    best_plain, best_warp = min(plain), min(warp)
    return {
        "cases": len(texts),
        "plain_cases_per_s": round(len(texts) / best_plain, 1),
        "warp_cases_per_s": round(len(texts) / best_warp, 1),
        "ratio": round(best_plain / best_warp, 3),
        "goal": 0.8,
        "goal_met": best_plain / best_warp >= 0.8,
        "plain_seconds": [round(s, 3) for s in plain],
        "warp_seconds": [round(s, 3) for s in warp],
        "torch_threads": torch.get_num_threads(),
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_encode", description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("minilm", "bert-base"), default="minilm")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument(
        "--against",
        choices=("plain", "ray"),
        default="plain",
        help="plain: a plain transformers loop (default); ray: the same pass on a local Ray (the ray extra)",
    )
    add_output_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    texts = [row["text"] for row in read_tsv("sst2", "train")[: args.cases]]
    with tempfile.TemporaryDirectory() as work:
        model_dir = minilm("distilbert") if args.model == "minilm" else bert_base(Path(work) / "bert-base")
        result = {"model": args.model, "device": args.device, "batch_size": args.batch_size}
        if args.against == "ray":
            result |= measure_ray(model_dir, texts, args.batch_size, args.device, args.threads)
        else:
            result |= measure(model_dir, texts, args.batch_size, args.device, args.threads)
    report("bench_encode", parser, args, argv, result, _print)
    return 0 if result["goal_met"] else 1


def _print(result: dict[str, Any]) -> None:
    if "ray_seconds" in result:
        print(
            f"{result['model']} on {result['device']}, {result['cases']} cases, batch {result['batch_size']}, "
            f"{result['cores']} cores: local {result['local_seconds']} s ({result['local_torch_threads']} torch "
            f"threads), Ray {result['ray_seconds']} s ({result['ray_workers']} workers of 1 thread); Ray / local "
            f"{result['ray_over_local']} (goal ≤ {result['goal']}: {'met' if result['goal_met'] else 'MISSED'})"
        )
        return
    print(
        f"{result['model']} on {result['device']}, {result['cases']} cases, batch {result['batch_size']}, "
        f"{result['torch_threads']} torch thread(s): plain {result['plain_cases_per_s']} cases/s, "
        f"warp-check {result['warp_cases_per_s']} cases/s, ratio {result['ratio']} (goal ≥ {result['goal']}: "
        f"{'met' if result['goal_met'] else 'MISSED'})"
    )


if __name__ == "__main__":
    sys.exit(main())
