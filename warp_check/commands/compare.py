"""``warp-check compare``: WARP beside same-layer LoRA and all-layers fine-tuning."""

from __future__ import annotations

import argparse
import json
import sys

from warp_check import CompareSettings, SettingsError, TrainSettings, compare_suite, load_suite, write_comparison
from warp_check.commands.arguments import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    PROGRESS_OPTIONS,
    Use,
    model_cache,
    progress_of,
)
from warp_check.frontend import COMPARE_METHODS, check_comparison_out

# The declared options compare takes (warp_check.options); its own arguments follow.
COMPARE_OPTIONS = (
    "model",
    "revision",
    Use(name="seed", default=0, help="subsampling and training seed (default 0)"),
    Use(name="threads", help="torch CPU threads for the run"),
    Use(name="cache", help="representation cache folder, or 'none' (default <suite>/.warp/cache)"),
    "no_cache",
    Use(name="json", help="print the comparison as JSON"),
    Use(name="out", metavar="FILE.md", help="also write the Markdown here and the JSON beside it"),
    Use(name="quiet", help="no stage lines on stderr; encoding progress as one line, not a bar"),
    *PROGRESS_OPTIONS,
)


def compare_arguments(compare: argparse.ArgumentParser) -> None:
    compare.add_argument("--heldout", metavar="FILE.jsonl", help="held-out adversarial cases (Atk. Gen column)")
    compare.add_argument("--general", metavar="FILE.jsonl", help="clean held-out cases (General Acc column)")
    compare.add_argument("--ranks", type=_int_list, metavar="R,R,...", help="WARP ranks (default [repair] rank)")
    compare.add_argument("--fix-size", type=int, metavar="N", help="seeded subsample of N must_fix cases")
    compare.add_argument("--keep-size", type=int, metavar="N", help="seeded subsample of N must_keep cases (0: none)")
    compare.add_argument(
        "--methods", type=_name_list, metavar="M,M,...", help="of original,lora,full_ft,warp (default: all)"
    )
    compare.add_argument("--epochs", type=int, metavar="N", help="baselines' epoch limit (default 300)")
    compare.add_argument(
        "--restore-best",
        action="store_true",
        help="baselines keep the weights of their lowest-loss epoch (default: the last epoch's, as the paper)",
    )


# -- compare ----------------------------------------------------------------------------------

COMPARE_FLAGS = {
    "methods": "--methods",
    "ranks": "--ranks",
    "fix_size": "--fix-size",
    "keep_size": "--keep-size",
    "max_epochs": "--epochs",
    "restore_best": "--restore-best",
    "seed": "--seed",
    "threads": "--threads",
    "rank": "--ranks",
}


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None


def _name_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def compare_command(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite, model=args.model, revision=args.revision)
    if args.out:
        check_comparison_out(args.out, suite.model_dir)  # before the training, not after
    cache = model_cache(args, suite.model_dir, suite)
    quiet = args.quiet

    def progress(message: str) -> None:
        if not quiet:
            print(f"compare: {message}", file=sys.stderr, flush=True)

    try:
        epochs = {} if args.epochs is None else {"max_epochs": args.epochs}
        train = TrainSettings(seed=args.seed, restore_best=args.restore_best, **epochs)
        settings = CompareSettings(
            methods=args.methods if args.methods is not None else COMPARE_METHODS,
            ranks=args.ranks,
            fix_size=args.fix_size,
            keep_size=args.keep_size,
            seed=args.seed,
            threads=args.threads,
            batch_size=suite.model.batch_size,
            train=train,
        )
        comparison = compare_suite(
            suite,
            settings,
            general=args.general,
            heldout=args.heldout,
            cache_dir=cache,
            progress=progress,
            encoding_progress=progress_of(args),
        )
    except SettingsError as exc:
        print(f"warp-check compare: error: {COMPARE_FLAGS.get(exc.field, exc.field)}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(comparison.to_dict(), indent=2))
    else:
        print(comparison.to_markdown(), end="")
    if args.out:
        md, js = write_comparison(comparison, args.out)
        print(f"comparison: {md} and {js}", file=sys.stderr if args.json else sys.stdout)
    if not comparison.passed:
        failed = [r.title for r in comparison.rows if r.method == "warp" and not r.details.get("ok", True)]
        print(f"warp-check compare: {', '.join(failed)} did not converge", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
