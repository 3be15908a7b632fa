"""Every Hugging Face sequence-classifier family warp-check is tried on: a tiny model of each,
built from its config class (hidden 32, 2 layers, no download), trained for a few seconds on
the test suite's synthetic sentiment task, then checked, repaired and audited.

Run: ``python -m benchmarks.families [--families bert,gpt2,...] [--json | --save]``. Prints, per
family, the head repaired (dense → σ → linear, or the final linear layer: found so, or fallen
back to where the dense form ``layer = "auto"`` found did not converge), the repair's iterations
and the certificate counts. ``tests/model/test_families.py`` runs the
same builders at CI size.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.results import add_output_arguments, report
from benchmarks.testkit import testkit
from warp_check.cli import main as cli
from warp_check.runs.pipeline import FELL_BACK


def measure(model_type: str, work: Path) -> dict[str, Any]:
    """Build, check (must exit 1), repair (0), audit the repaired folder (0); the figures of each."""
    families = testkit("families")
    start = time.perf_counter()
    model_dir = families.build(model_type, work / "model")
    folder = families.suite(model_dir, work / "suite")
    row: dict[str, Any] = {"family": model_type, "build_seconds": round(time.perf_counter() - start, 2)}
    if folder is None:
        return row | {"ok": False, "why": "the tiny model gets too few cases wrong or right"}
    out = work / "repaired"
    codes = {}
    with contextlib.redirect_stdout(io.StringIO()) as said:
        codes["check"] = cli(["check", str(folder), "-q"])
        codes["repair"] = cli(["repair", str(folder), "--out", str(out), "-q"])
        codes["audit"] = cli(["verify", str(out), "--suite", str(folder)]) if out.is_dir() else None
    summary = _certified(out / "warp_certificate.json") if out.is_dir() else {}
    ok = codes == {"check": 1, "repair": 0, "audit": 0}
    return row | {"ok": ok, "exit_codes": codes, **summary, "output": None if ok else said.getvalue()[-2000:]}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.families", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--families", default=",".join(testkit("families").FAMILIES), help="model types, comma-separated"
    )
    add_output_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    rows = []
    for model_type in args.families.split(","):
        with tempfile.TemporaryDirectory() as work:
            try:
                rows.append(measure(model_type, Path(work)))
            except Exception as exc:  # noqa: BLE001 — one family's crash is that family's row
                rows.append({"family": model_type, "ok": False, "why": f"{type(exc).__name__}: {exc}"[:500]})
    result = {"families": rows, "all_ok": all(r["ok"] for r in rows)}
    report("families", parser, args, argv, result, _print_table)
    return 0 if result["all_ok"] else 1


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
        **data["summary"],
    }


def _print_table(result: dict[str, Any]) -> None:
    print(f"{'family':<22} {'form':<24} {'head':<52} {'it':>3} {'cert1':>7} {'cert2':>7} {'cert3':>7}  ok")
    for r in result["families"]:
        form = r.get("form", "-") + (" (fell back)" if r.get("fell_back") else "")
        print(
            f"{r['family']:<22} {form:<24} {r.get('head', '-'):<52} {r.get('iterations', '-'):>3} "
            f"{r.get('cert1', '-'):>7} {r.get('cert2', '-'):>7} {r.get('cert3', '-'):>7}  {'yes' if r['ok'] else 'NO'}"
        )
        if not r["ok"]:
            print(f"    {r.get('why') or (r.get('output') or '')[-600:]}")


if __name__ == "__main__":
    sys.exit(main())
