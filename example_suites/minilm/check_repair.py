"""Repair each example suite with the core API (no pytest) and verify the artefact from scratch.

    python example_suites/minilm/check_repair.py [--out DIR] [--keep]

Reads each suite's ``warp.toml`` ([[cases]] files and [repair] settings) and JSONL files, so it
checks exactly what the suite asks for; prints, per suite, the plain verdicts (must_fix should all
fail, must_keep all pass), the repair status, iterations and seconds, the Cert 1/2/3 summary and
whether ``warp_check.verify`` accepts the written model.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # a script beside models.py, not an installed package

import models  # noqa: E402

SUITES = {name: HERE.parent / f"reviews-{name}" for name in models.NAMES}


def load_cases(suite: Path, config: dict):
    from warp_check import Case

    cases = []
    for table in config["cases"]:
        path = suite / table["path"]
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            cases.append(
                Case(
                    id=row["id"],
                    text=row["text"],
                    label=models.LABELS.index(row["label"]),
                    kind=row.get("kind", table["kind"]),
                    source=row.get("source"),
                    origin=f"{path.name}:{number}",
                )
            )
    return cases


def check(name: str, out_root: Path) -> dict:
    import numpy as np

    from warp_check import ClassifierAdapter, Kind, RepairSettings, evaluate, repair_cases, verify

    suite = SUITES[name]
    config = tomllib.loads((suite / "warp.toml").read_text())
    start = time.perf_counter()
    path = getattr(models, name)()
    assembled_s = time.perf_counter() - start
    adapter = ClassifierAdapter.from_pretrained(path, max_length=config["model"].get("max_length", 128))
    cases = load_cases(suite, config)
    evaluation = evaluate(adapter, cases, progress=False)
    kinds = np.array([c.kind.value for c in cases])
    right = evaluation.gaps > 0
    plain = {
        kind.value: f"{int(right[kinds == kind.value].sum())}/{int((kinds == kind.value).sum())} right"
        for kind in (Kind.MUST_KEEP, Kind.MUST_FIX, Kind.AUX)
    }
    settings = RepairSettings.from_dict(config.get("repair", {}))
    out_dir = out_root / f"reviews-{name}-repaired"
    start = time.perf_counter()
    outcome = repair_cases(adapter, cases, settings, out_dir=out_dir, evaluation=evaluation, progress=False)
    repair_s = time.perf_counter() - start
    result = outcome.result
    report = {
        "suite": suite.name,
        "model": str(path),
        "assemble_or_reuse_s": round(assembled_s, 2),
        "plain": plain,
        "settings": {k: v for k, v in settings.to_dict().items() if k != "solver"},
        "status": result.status.value,
        "message": result.message,
        "iterations": len(result.iterations),
        "loop_s": round(result.seconds, 3),
        "repair_cases_s": round(repair_s, 2),
        "gsn_ft_applied": result.gsn_ft.applied,
    }
    if outcome.certificate is not None:
        report["summary"] = outcome.certificate.summary.to_json()
        report["artefact"] = str(outcome.artefact)
        verification = verify(outcome.artefact)
        report["verify_ok"] = verification.ok
        if not verification.ok:
            report["verify_failures"] = [str(f) for f in verification.failures()][:10]
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", choices=models.NAMES, default=list(models.NAMES))
    parser.add_argument("--out", type=Path, default=None, help="where the repaired models go (default: a temp dir)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        out_root = args.out or Path(tmp)
        out_root.mkdir(parents=True, exist_ok=True)
        for name in args.models:
            report = check(name, out_root)
            print(json.dumps(report, indent=2), flush=True)
            ok = ok and report.get("verify_ok", False)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
