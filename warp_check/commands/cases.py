"""The commands that add cases to a suite: ``import``, ``neighbours``, ``promote`` and ``attack``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from warp_check import (
    WITHOUT_SYNONYMS,
    ImportSettings,
    KeepChoice,
    Kind,
    NeighbourSettings,
    RecipeSettings,
    SettingsError,
    SynonymUse,
    add_neighbours,
    default_cache_dir,
    import_cases,
    import_conll,
    import_predicted,
    import_split,
    import_tagged_by_model,
    load_adapter,
    load_suite,
    promote,
    resolve_model,
    resolve_recipe,
    run_attack,
    workdir,
)
from warp_check.commands.arguments import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROGRESS_OPTIONS,
    Use,
    cache_of,
    count_or_all,
    count_or_zero,
    progress_of,
    suite_and_cache,
)
from warp_check.frontend import (
    ADVGLUE_FIELDS,
    ATTACK_STATUS_MEANING,
    ATTACK_STATUSES,
    IMPORT_FORMATS,
    case_file_of,
    check_attack_out,
    check_recipe_ready,
    import_format_of,
    must_fix_file,
)

# The declared options each command takes (warp_check.options); their own arguments follow.
IMPORT_OPTIONS = (
    Use(name="out", metavar="FILE", help="the JSONL case file to append to (default: the suite's file of --kind)"),
    *PROGRESS_OPTIONS,
)
NEIGHBOURS_OPTIONS = (
    Use(name="out", metavar="FILE", help="JSONL file to append to (default: the must_fix file)"),
    Use(name="seed", help="seed of the perturbations drawn (default: the suite's [repair.neighbours] seed)"),
)
PROMOTE_OPTIONS = (
    Use(name="revision", help="revision of REPAIRED where it is a Hub id (default main)"),
    Use(name="dry_run", help="say what would move, change nothing"),
    "cache",
    *PROGRESS_OPTIONS,
)
ATTACK_OPTIONS = (
    Use(
        name="out", metavar="FILE.jsonl", help="where new cases go (default: the suite's must_fix file, if it has one)"
    ),
    Use(name="seed", metavar="S", default=0, help="search seed, per case (default 0)"),
    Use(name="threads", help="torch CPU threads (1 is fastest on a busy machine)"),
    "model",
    "revision",
    Use(name="dry_run", help="attack and report, write nothing"),
    "json",
    Use(name="quiet", help="progress as one line, not a bar; no per-case lists"),
    *PROGRESS_OPTIONS,
)


def import_arguments(importer: argparse.ArgumentParser) -> None:
    importer.add_argument("--format", choices=IMPORT_FORMATS, help="default: from the file's name")
    importer.add_argument("--kind", choices=[k.value for k in Kind if k is not Kind.DEFERRED], default="must_keep")
    importer.add_argument("--text", default="text", metavar="COLUMN", help="column of the text (default text)")
    importer.add_argument("--text-pair", metavar="COLUMN", help="column of the second text, for pair tasks")
    importer.add_argument("--label", metavar="COLUMN", help="column of the label (default label)")
    importer.add_argument("--id", metavar="COLUMN", help="column of the case id (default: one made from the text)")
    importer.add_argument("--source", dest="case_source", metavar="TEXT", help="source written on every case")
    importer.add_argument("--task", choices=sorted(ADVGLUE_FIELDS), help="AdvGLUE: which task of dev.json")
    importer.add_argument(
        "--predicted",
        action="store_true",
        help="unlabelled text: label each row by the model's own prediction (no label column read) and append "
        "those predicted by at least the must_keep margin gamma_h as must_keep cases, which a repair then keeps "
        "(source prediction:FILE)",
    )
    importer.add_argument(
        "--split-by-model",
        action="store_true",
        help="run the suite's model on the labelled rows: those it gets right go to --out (default: the must_keep "
        "file) as must_keep cases, those it gets wrong to --fix-out (default: the must_fix file) as must_fix cases",
    )
    importer.add_argument(
        "--drop-wrong",
        action="store_true",
        help="run the suite's model on the labelled rows and leave out those it gets wrong (the rest: must_keep)",
    )
    importer.add_argument(
        "--fix-out", metavar="FILE", help="with --split-by-model: where wrong rows go (default: the must_fix file)"
    )


def neighbours_arguments(neighbours: argparse.ArgumentParser) -> None:
    defaults = NeighbourSettings().drawing()
    neighbours.add_argument(
        "--per-case",
        type=count_or_zero,
        metavar="N",
        help=f"perturbations drawn a must_fix case (default: the suite's [repair.neighbours], {defaults.per_case})",
    )
    neighbours.add_argument(
        "--per-keep-case",
        type=count_or_zero,
        metavar="N",
        help=f"perturbations drawn a must_keep case ({defaults.keep_per_case}): those the model gets wrong become "
        "must_fix cases; 0 perturbs must_fix cases only",
    )
    neighbours.add_argument(
        "--keep-cases",
        type=count_or_all,
        default=argparse.SUPPRESS,  # None means every one: absent means the suite's
        metavar="N",
        help=f"how many must_keep cases are perturbed ({defaults.keep_cases}; all: every one)",
    )
    neighbours.add_argument(
        "--keep-choice",
        choices=[c.value for c in KeepChoice],
        help=f"which must_keep cases: nearest the decision boundary, or a seeded sample ({defaults.keep_choice.value})",
    )
    neighbours.add_argument(
        "--synonyms",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="WordNet synonyms too, or never (default: the suite's; auto: where nltk and WordNet are installed)",
    )


def promote_arguments(promote: argparse.ArgumentParser) -> None:
    promote.add_argument(
        "--from",
        dest="repaired",
        metavar="REPAIRED",
        required=True,
        help="the repaired model: a folder, or a Hub id read from the local Hugging Face cache",
    )


def attack_arguments(attack: argparse.ArgumentParser) -> None:
    attack.add_argument(
        "--recipe", required=True, metavar="NAME", help="TextAttack recipe (a unique prefix such as 'pwws' will do)"
    )
    attack.add_argument(
        "--from", dest="source_kind", choices=("must_keep", "aux"), default="must_keep", help="clean cases to attack"
    )
    attack.add_argument("--max", dest="max_cases", type=int, metavar="N", help="only the first N clean cases")
    attack.add_argument("--query-budget", type=int, metavar="Q", help="model queries per case (default: unbounded)")


# -- attack ------------------------------------------------------------------------------------

ATTACK_FLAGS = {
    "max_cases": "--max",
    "seed": "--seed",
    "query_budget": "--query-budget",
    "source_kind": "--from",
    "threads": "--threads",
}


def import_command(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite, empty=True)  # a suite just made has no cases yet
    try:
        file_format = args.format or import_format_of(args.source)
    except SettingsError as exc:
        print(f"warp-check import: error: --format: {exc.why}", file=sys.stderr)
        return EXIT_USAGE
    if suite.decision.per_word and args.predicted:
        return _import_tagged(suite, args, file_format)
    if suite.decision.per_word or file_format == "conll":
        return _import_conll(suite, args, file_format)
    if args.predicted and (args.kind != Kind.MUST_KEEP.value or args.label is not None):
        why = f"makes must_keep cases, not {args.kind}" if args.label is None else "reads no label column (--label)"
        print(f"warp-check import: error: --predicted {why}", file=sys.stderr)
        return EXIT_USAGE
    by_model = args.split_by_model or args.drop_wrong
    refusal = _split_refusal(args) if by_model or args.fix_out else None
    if refusal is not None:
        print(f"warp-check import: error: {refusal}", file=sys.stderr)
        return EXIT_USAGE
    args.out = Path(args.out) if args.out else case_file_of(suite, Kind(args.kind))
    settings = ImportSettings(
        format=file_format,
        text=args.text,
        text_pair=args.text_pair,
        label=args.label or "label",
        id=args.id,
        kind=Kind(args.kind),
        source=args.case_source,
        task=args.task,
        predicted=args.predicted,
    )
    if args.predicted:
        return _import_predicted(suite, args, settings)
    if by_model:
        return _import_split(suite, args, settings)
    result = import_cases(suite, args.source, args.out, settings)
    appended = result.appended
    print(
        f"{result.rows} row(s) read from {args.source}: {len(appended.added)} case(s) appended to {appended.path}, "
        f"{appended.duplicates} already there"
    )
    _say_where_to_list(suite, appended)
    return EXIT_OK


def _import_conll(suite, args: argparse.Namespace, file_format: str) -> int:
    """A token classifier's sentences from a CoNLL file (warp_check.sources.conll)."""
    if not suite.decision.per_word:
        why = f"--format conll: a token classifier's format; this suite's model decides {suite.decision.name}"
    elif file_format != "conll":
        why = (
            f"--format {file_format}: a token classifier's suite imports sentences of tagged words (--format conll), "
            "or untagged texts the model tags (--predicted)"
        )
    elif args.predicted or args.drop_wrong:
        why = f"{'--predicted' if args.predicted else '--drop-wrong'} is not built for a token classifier's suite yet"
    elif args.split_by_model and args.kind != Kind.MUST_KEEP.value:
        why = f"--split-by-model makes must_keep cases of the sentences the model tags right, not {args.kind} cases"
    else:
        why = None
    if why is not None:
        print(f"warp-check import: error: {why}", file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.out) if args.out else case_file_of(suite, Kind(args.kind))
    fix_out = (
        (Path(args.fix_out) if args.fix_out else case_file_of(suite, Kind.MUST_FIX)) if args.split_by_model else None
    )
    workdir(suite)
    result = import_conll(
        suite,
        args.source,
        load_adapter(suite),
        out=out,
        kind=Kind(args.kind),
        fix_out=fix_out,
        cache_dir=default_cache_dir(suite),
        progress=progress_of(args),
    )
    print(f"{result.sentences} sentence(s) read from {args.source}")
    for appended, what in ((result.kept, "right" if fix_out else "read"), (result.fixed, "wrong")):
        if appended is not None:
            added = f"{len(appended.added)} sentence(s) appended to {appended.path}"
            print(f"  {what}: {added}, {appended.duplicates} already there")
            _say_where_to_list(suite, appended)
    return EXIT_OK


def _import_tagged(suite, args: argparse.Namespace, file_format: str) -> int:
    """Untagged sentences (CoNLL words alone, or a text column) each word tagged by the model."""
    if args.kind != Kind.MUST_KEEP.value or args.label is not None:
        why = f"makes must_keep cases, not {args.kind}" if args.label is None else "reads no tag column (--label)"
    elif args.split_by_model or args.drop_wrong or args.fix_out:
        why = "tags sentences by the model; --split-by-model, --drop-wrong and --fix-out sort tagged ones: give one"
    elif args.text_pair is not None:
        why = "a token classifier tags one sentence: no --text-pair"
    else:
        why = None
    if why is not None:
        print(f"warp-check import: error: --predicted {why}", file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.out) if args.out else case_file_of(suite, Kind.MUST_KEEP)
    settings = ImportSettings(
        format=file_format,
        text=args.text,
        text_pair=None,
        label="label",
        id=args.id,
        kind=Kind.MUST_KEEP,
        source=args.case_source,
        task=args.task,
        predicted=True,
    )
    workdir(suite)
    result = import_tagged_by_model(
        suite, args.source, out, settings, cache_dir=default_cache_dir(suite), progress=progress_of(args)
    )
    appended = result.appended
    tags = ", ".join(f"{count} {name}" for name, count in result.by_tag) or "none"
    print(
        f"{result.sentences} sentence(s) read from {args.source}, each word tagged by the model ({tags}): "
        f"{len(appended.added)} must_keep sentence(s) appended to {appended.path}, {appended.duplicates} already there"
    )
    if result.words_free:
        print(
            f"  left free: {result.words_free} of {result.words} word(s) tagged by less than the must_keep margin "
            f"gamma_h = {result.gamma_h:g} (a repair would have to move them to keep them)"
        )
    for count, why in (
        (result.unclear, "with no word tagged by at least gamma_h"),
        (result.repeated, "the model sees as an earlier sentence of the file"),
        (result.in_suite, "the model sees as sentences of the suite (their tags are the suite's)"),
        (result.no_text, "the model sees as no text (nothing but special and unknown tokens)"),
    ):
        if count:
            print(f"  left out: {count} sentence(s) {why}")
    _say_where_to_list(suite, appended, caution=" (they keep the model's tags, right or wrong: read them first)")
    return EXIT_OK


def _split_refusal(args: argparse.Namespace) -> str | None:
    """Why the flags that sort rows by the model do not go with the others given, or None."""
    flag = "--split-by-model" if args.split_by_model else "--drop-wrong"
    if args.fix_out and not args.split_by_model:
        return "--fix-out goes with --split-by-model (where the rows the model gets wrong go)"
    if args.split_by_model and args.drop_wrong:
        return "--split-by-model sends wrong rows to must_fix, --drop-wrong leaves them out: give one"
    if args.predicted:
        return f"{flag} sorts labelled rows by the model; --predicted labels rows by the model: give one"
    if args.kind != Kind.MUST_KEEP.value:
        return f"{flag} makes must_keep cases of the rows the model gets right, not {args.kind} cases"
    return None


def _import_split(suite, args: argparse.Namespace, settings: ImportSettings) -> int:
    fix_out = None if args.drop_wrong else Path(args.fix_out) if args.fix_out else case_file_of(suite, Kind.MUST_FIX)
    workdir(suite)
    result = import_split(
        suite,
        args.source,
        settings,
        keep_out=args.out,
        fix_out=fix_out,
        cache_dir=default_cache_dir(suite),
        progress=True,
    )
    kept = result.kept
    print(f"{result.rows} row(s) read from {args.source}; the model gets {result.right} right and {result.wrong} wrong")
    print(
        f"  right: {len(kept.added)} must_keep case(s) appended to {kept.path}"
        + (f", {kept.duplicates} already there" if kept.duplicates else "")
    )
    if result.fixed is None:
        print(f"  wrong: {result.dropped} left out (--drop-wrong)")
    else:
        fixed = result.fixed
        print(
            f"  wrong: {len(fixed.added)} must_fix case(s) appended to {fixed.path}"
            + (f", {fixed.duplicates} already there" if fixed.duplicates else "")
        )
    for appended in (kept, result.fixed):
        if appended is not None:
            _say_where_to_list(suite, appended)
    return EXIT_OK


def _say_where_to_list(suite, appended, *, caution: str = "") -> None:
    """A line saying how to list ``appended``'s file in warp.toml, where cases went to a file the suite does
    not list (they are not tested until it does)."""
    listed = {case_file.path.resolve() for case_file in suite.case_files}
    if appended.added and appended.path.resolve() not in listed:
        where = appended.path.resolve()
        shown = where.relative_to(suite.root) if where.is_relative_to(suite.root) else where
        print(f'  to use them, list the file in {suite.toml.name}: [[cases]] path = "{shown}"{caution}')


def _import_predicted(suite, args: argparse.Namespace, settings: ImportSettings) -> int:
    workdir(suite)
    result = import_predicted(
        suite, args.source, args.out, settings, cache_dir=default_cache_dir(suite), progress=progress_of(args)
    )
    appended = result.appended
    labels = ", ".join(f"{count} {name}" for name, count in result.by_label) or "none"
    print(
        f"{result.rows} row(s) read from {args.source}, labelled by the model's predictions ({labels}): "
        f"{len(appended.added)} must_keep case(s) appended to {appended.path}, {appended.duplicates} already there"
    )
    if result.repeated:
        print(f"  left out: {result.repeated} the model sees as an earlier row of the file")
    if result.near_boundary:
        print(
            f"  left out: {result.near_boundary} predicted by less than the must_keep margin gamma_h = "
            f"{result.gamma_h:g} (a repair would have to move them to keep them)"
        )
    if result.in_suite:
        print(f"  left out: {result.in_suite} the model sees as cases of the suite (their labels are the suite's)")
    if result.no_text:
        print(f"  left out: {result.no_text} the model sees as no text (nothing but special and unknown tokens)")
    _say_where_to_list(suite, appended, caution=" (they keep the model's predictions, right or wrong: read them first)")
    return EXIT_OK


def neighbours_command(args: argparse.Namespace) -> int:
    suite, cache = suite_and_cache(args)
    out = Path(args.out) if args.out else must_fix_file(suite)
    adapter = load_adapter(suite)
    flags = {
        "per_case": args.per_case,
        "keep_per_case": args.per_keep_case,
        "keep_choice": args.keep_choice,
        "synonyms": args.synonyms,
        "seed": args.seed,
    }
    changes = {name: value for name, value in flags.items() if value is not None}
    if hasattr(args, "keep_cases"):
        changes["keep_cases"] = args.keep_cases
    # The suite's neighbourhood, or where it draws nothing (the default) the measured counts: the
    # command is asked to draw. Its flags change either.
    settings = dataclasses.replace(suite.repair.neighbours.drawing(), **changes)
    added = add_neighbours(suite, adapter, out, settings, cache_dir=cache)
    appended = added.appended
    already = f"; {appended.duplicates} already there" if appended.duplicates else ""
    nouns = suite.decision.case_nouns  # a line of a token suite is a sentence
    print(f"{len(appended.added)} neighbour {nouns} the model gets wrong appended to {appended.path}{already}")
    if added.synonyms is SynonymUse.NOT_INSTALLED:
        print(f"  note: {WITHOUT_SYNONYMS}")
    return EXIT_OK


def promote_command(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite)
    folder = resolve_model(args.repaired, args.revision).folder
    promotion = promote(
        suite, folder, dry_run=args.dry_run, cache_dir=cache_of(args, suite), progress=progress_of(args)
    )
    dry = args.dry_run
    moved = len(promotion.promoted) - len(promotion.in_place)
    done = []
    if moved or not promotion.in_place:
        to = f" to {promotion.keep_file}" if promotion.keep_file is not None else ""
        done.append(f"{'would move' if dry else 'moved'} {moved} fixed must_fix case(s){to}")
    if promotion.in_place:
        files = ", ".join(str(path) for path in promotion.in_place_files)
        verb = "would rewrite" if dry else "rewrote"
        done.append(f"{verb} {len(promotion.in_place)} fixed must_fix case(s) in place as must_keep in {files}")
    print(
        f"{'; '.join(done)} (fixed_by {promotion.certificate_sha256[:12]}…); {len(promotion.not_fixed)} not certified "
        "fixed, left as must_fix"
    )
    if promotion.already_kept:
        went = "would go" if dry else "removed"
        print(
            f"  {len(promotion.already_kept)} already in must_keep (the same text and label), their must_fix line "
            f"{went}: {', '.join(promotion.already_kept)}"
        )
    return EXIT_OK


def attack_command(args: argparse.Namespace) -> int:
    recipe = resolve_recipe(args.recipe)  # refuses online-only and unknown recipes before any import
    try:
        settings = RecipeSettings(
            recipe=recipe.name,
            seed=args.seed,
            max_cases=args.max_cases,
            query_budget=args.query_budget,
            source_kind=args.source_kind,
            threads=args.threads,
        )
    except SettingsError as exc:
        print(f"warp-check attack: error: {ATTACK_FLAGS.get(exc.field, exc.field)}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    check_recipe_ready(recipe)
    suite = load_suite(args.suite, model=args.model, revision=args.revision)
    suite.refuse_per_word("attack")
    settings = dataclasses.replace(settings, batch_size=suite.model.batch_size)
    out = None if args.dry_run else Path(args.out) if args.out else must_fix_file(suite)
    if out is not None:
        check_attack_out(suite, out)  # a wrong --out is a usage error before the model loads, not after
    run = run_attack(suite, load_adapter(suite), settings, out=out, progress=progress_of(args))
    if args.json:
        print(json.dumps({"suite": str(suite.toml), **run.to_dict()}, indent=2))
    else:
        _print_attack(suite, run, quiet=args.quiet)
    return EXIT_INTERRUPTED if run.interrupted else EXIT_OK


def _print_attack(suite, run, *, quiet: bool) -> None:
    kind, seed = run.settings.source_kind.value, run.settings.seed
    print(f"suite '{suite.name}' ({suite.toml}): {run.recipe} on {run.selected} {kind} case(s), seed {seed}")
    for status in ATTACK_STATUSES:
        print(f"  {status:<9} {run.count(status):>5}  {ATTACK_STATUS_MEANING[status]}")
    data = run.to_dict()
    print(
        f"  speed: {run.examples_per_second:.3g} case(s)/s ({run.attack_seconds:.1f} s attacking, "
        f"{data['mean_queries']:.3g} model queries per case; {run.build_seconds:.1f} s loading the recipe)"
    )
    if run.interrupted:
        print(f"  interrupted after {len(run.attempts)} of {run.selected} case(s): what was found until then is kept")
    if run.dropped:
        print(f"  dropped {len(run.dropped)} success(es): the model gets them right when re-checked (boundary flips)")
        for case_id, gap in run.dropped if not quiet else ():
            print(f"    from {case_id}: gap {gap:+.3g}")
    succeeded = run.count("succeeded")
    if run.out is None:
        print(f"  dry run: nothing written ({succeeded - len(run.dropped)} case(s) would be offered)")
    elif run.added:
        extra = f" ({run.duplicates} already there)" if run.duplicates else ""
        print(f"  wrote {len(run.added)} new must_fix case(s) to {run.out}{extra}")
    elif succeeded:
        print(f"  nothing written: every case found is already in {run.out} or the suite")
    else:
        print("  nothing written: no attack succeeded")
    for note in run.notes:
        print(f"  note: {note}")
    if run.caveat and run.added:
        print(f"  caution: {run.caveat}")
