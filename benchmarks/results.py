"""A benchmark's result as a dated JSON record: what ``--json`` prints and ``--save`` writes.

A record holds the benchmark's name, the command that reproduces it, the date (UTC) and time it
was measured, the machine (``measure.machine_info``), the code (``measure.code_version``) and
the benchmark's own ``result``. ``--save`` writes it atomically to
``<save dir>/<YYYY-MM-DD>-<benchmark>[-<variant>].json`` (default dir: benchmarks/results/, the
files benchmarks/RESULTS.md cites); the variant names the options that differ from their
defaults unless ``--variant`` says otherwise, and a second run of the same day and variant
replaces the first. Nothing is written without ``--save``.

Records transcribed from notes taken before the benchmarks saved their own carry
``"transcribed": true`` and, in ``code``, the commit that first recorded the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.measure import code_version, machine_info
from warp_check.files import jsonable, write_json_atomic

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REQUIRED_KEYS = ("benchmark", "command", "date", "machine", "code", "result")
FILE_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})-([a-z_0-9]+)(?:-([A-Za-z0-9.+_-]+))?\.json$")
_OUTPUT_OPTIONS = ("json", "save", "save_dir", "variant")  # how a result is reported, not what was measured
_SAVE_OPTIONS = {"--save": 0, "--save-dir": 1, "--variant": 1}  # left out of the recorded command: option → values


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--json``, ``--save``, ``--save-dir`` and ``--variant``, the same for every benchmark."""
    parser.add_argument("--json", action="store_true", help="print the result as one JSON record (what --save writes)")
    parser.add_argument(
        "--save",
        action="store_true",
        help="also write the record to SAVE_DIR/<YYYY-MM-DD>-<benchmark>[-<variant>].json (atomically)",
    )
    parser.add_argument(
        "--save-dir", type=Path, default=RESULTS_DIR, help="where --save writes (default: benchmarks/results)"
    )
    parser.add_argument(
        "--variant", help="the file name's last part (default: the options that differ from their defaults)"
    )


def report(
    benchmark: str,
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    argv: Sequence[str] | None,
    result: dict[str, Any],
    print_text: Callable[[dict[str, Any]], None],
    *,
    ignore: Sequence[str] = (),
) -> dict[str, Any]:
    """Print the result (``--json``: the record, else ``print_text(result)``), save it if asked;
    returns the record. ``ignore``: options that name outputs or environments, not a variant."""
    record = make_record(benchmark, sys.argv[1:] if argv is None else argv, result)
    if args.json:
        print(json.dumps(jsonable(record), allow_nan=False))
    else:
        print_text(result)
    if args.save:
        variant = args.variant if args.variant is not None else variant_of(parser, args, ignore=ignore)
        path = save(record, args.save_dir, variant)
        print(f"saved {path}", file=sys.stderr)
    return record


def make_record(benchmark: str, argv: Sequence[str], result: dict[str, Any]) -> dict[str, Any]:
    """The record of a run that has just finished (the machine's load average is the one now)."""
    now = time.gmtime()
    return {
        "benchmark": benchmark,
        "command": command_line(benchmark, argv),
        "date": time.strftime("%Y-%m-%d", now),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", now),
        "machine": machine_info(),
        "code": code_version(),
        "result": result,
    }


def command_line(benchmark: str, argv: Sequence[str]) -> str:
    """``python -m benchmarks.<benchmark> ARGS``, less the options that only say where to save."""
    kept: list[str] = []
    skip = 0
    for arg in argv:
        if skip:
            skip -= 1
            continue
        name, has_value, _ = arg.partition("=")
        if name in _SAVE_OPTIONS:
            skip = 0 if has_value else _SAVE_OPTIONS[name]
            continue
        kept.append(arg)
    return shlex.join(["python", "-m", f"benchmarks.{benchmark}", *kept])


def variant_of(parser: argparse.ArgumentParser, args: argparse.Namespace, *, ignore: Sequence[str] = ()) -> str:
    """The options that differ from their defaults, as a file-name part: ``rank8-backend-osqp``."""
    defaults = vars(parser.parse_args([]))
    parts = []
    for name, value in vars(args).items():
        if name in _OUTPUT_OPTIONS or name in ignore or value == defaults.get(name):
            continue
        label = name.replace("_", "-")
        if isinstance(value, bool):
            parts.append(label)
        elif isinstance(value, list) and all(isinstance(v, int) for v in value):
            parts.append(f"{label}-{'+'.join(map(str, value))}")  # seeds: which, or two runs share a name
        elif isinstance(value, list):
            parts.append(f"{label}{len(value)}")  # positional folders: how many, not their paths
        elif isinstance(value, (int, float)):
            parts.append(f"{label}{value}")
        else:
            parts.append(f"{label}-{value}")
    name = re.sub(r"[^A-Za-z0-9.+_-]", "+", "-".join(parts))
    if len(name) <= 100:
        return name
    # Cut to a file name's length, and told apart by a digest of the whole: two runs whose options
    # differ only past the cut must not share a file.
    return f"{name[:91]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def save(record: dict[str, Any], folder: Path, variant: str = "") -> Path:
    """Write ``record`` to ``folder/<date>-<benchmark>[-<variant>].json`` atomically; returns the path."""
    name = f"{record['date']}-{record['benchmark']}" + (f"-{variant}" if variant else "")
    return write_json_atomic(Path(folder) / f"{name}.json", record)


def problems_of(path: Path) -> list[str]:
    """What is wrong with a results file (empty: nothing): its name, JSON and required keys."""
    match = FILE_NAME.match(path.name)
    if match is None:
        return [f"{path.name}: not named <YYYY-MM-DD>-<benchmark>[-<variant>].json"]
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"{path.name}: not JSON ({exc})"]
    if not isinstance(record, dict):
        return [f"{path.name}: a JSON {type(record).__name__}, not an object"]
    found = [f"{path.name}: no {key!r}" for key in REQUIRED_KEYS if key not in record]
    date, benchmark = match[1], match[2]
    if record.get("date") != date:
        found.append(f"{path.name}: date {record.get('date')!r} is not the file name's {date}")
    if record.get("benchmark") != benchmark:
        found.append(f"{path.name}: benchmark {record.get('benchmark')!r} is not the file name's {benchmark}")
    try:
        named, _ = split_command(str(record.get("command", "")))
    except ValueError as exc:
        found.append(f"{path.name}: {exc}")
    else:
        if named != benchmark:
            found.append(f"{path.name}: the command runs benchmarks.{named}, not benchmarks.{benchmark}")
    return found


def split_command(command: str) -> tuple[str, list[str]]:
    """(benchmark, arguments) of ``[VAR=value ...] python -m benchmarks.<benchmark> ARGS``."""
    words = shlex.split(command)
    while words and "=" in words[0] and not words[0].startswith("-"):
        words.pop(0)  # environment settings, e.g. OMP_NUM_THREADS=1
    if len(words) < 3 or words[:2] != ["python", "-m"] or not words[2].startswith("benchmarks."):
        raise ValueError(f"command {command!r} is not `python -m benchmarks.<name> ...`")
    return words[2].removeprefix("benchmarks."), words[3:]
