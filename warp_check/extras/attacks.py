"""must_fix cases from TextAttack recipes (``warp-check attack``).

A recipe searches for a small change to a clean case (one the model gets right) that flips the
model's label. Every success becomes a must_fix case: the changed text, the clean case's label,
``source`` = the recipe, ``original`` = the clean case's id. TextAttack calls each attempt one of:

* **succeeded**: the label flipped; this is the new must_fix case;
* **failed**: the search ended, or used up its query budget, without flipping the label;
* **skipped**: the model is already wrong on the clean case, so there is nothing to attack.

Only recipes that run without the network are offered (measured with textattack 0.3.11); asking
for any other one fails before textattack is imported, naming what it would download. TextAttack
is an optional extra (``warp-check[attack]``: it pulls flair, which needs transformers < 5) and is
imported lazily, never at warp-check import. Throughput comes from querying the model through the
suite's own :class:`~warp_check.model.adapter.ClassifierAdapter`: batches padded to their longest input (not
to ``model_max_length``) with only the inputs the model's ``forward`` accepts.

Every success is re-predicted with the adapter before it is written, and only the cases the model
really gets wrong are kept. Cases are appended with :func:`warp_check.suite.casefile.append_cases`:
content ids (a second run adds nothing), atomic and locked, once at the end of the run (also after
Ctrl-C, with what was found until then).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import hashlib
import importlib.metadata
import importlib.util
import os
import sys
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warp_check.cases import Case, Kind
from warp_check.errors import SettingsError, WarpError
from warp_check.model.threads import capped_threads
from warp_check.progress import Progress, as_progress
from warp_check.validation import require_integer

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter
    from warp_check.suite.loader import Suite

INSTALL_HINT = 'pip install "warp-check[attack]"'
PREPARE_SCRIPT = ".ci/prepare_nltk_offline.sh"  # in the warp-check repository
TA_MARKER = "post_install_check_3"  # textattack 0.3.11 downloads NLTK data at import unless this file exists
SOURCE_KINDS = (Kind.MUST_KEEP, Kind.AUX)  # clean cases; must_fix cases are wrong already (all skipped)


class AttackUnavailable(WarpError):
    """The recipe cannot run here (unknown, needs the network, or its extra/data is missing)."""


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """A TextAttack recipe warp-check runs offline, and the NLTK data it needs."""

    name: str  # textattack.attack_recipes.<name>
    id_prefix: str  # of the case ids it writes: "<id_prefix>-<hash of the text>"
    nltk_data: tuple[str, ...]  # nltk.data resource names
    what: str  # what it changes, for the output
    caveat: str | None = None


_STOPWORDS = "corpora/stopwords/english"
_WORDNET = "corpora/wordnet"
_NLTK_NAMES = {_STOPWORDS: "the English stop-word list", _WORDNET: "WordNet 3.0"}
_SYNONYM_CAVEAT = (
    'WordNet synonyms can change the meaning ("great flight" -> "bully flight"): read the new cases and '
    "delete those whose label is no longer the clean case's before repairing"
)

RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            name="DeepWordBugGao2018",
            id_prefix="deepwordbug",
            nltk_data=(_STOPWORDS,),
            what="character edits (swap, substitute, delete, insert) in the most important words",
        ),
        Recipe(name="Pruthi2019", id_prefix="pruthi", nltk_data=(), what="keyboard-typo character edits"),
        Recipe(
            name="PWWSRen2019",
            id_prefix="pwws",
            nltk_data=(_STOPWORDS, _WORDNET),
            what="WordNet synonym swaps ordered by word saliency",
            caveat=_SYNONYM_CAVEAT,
        ),
        Recipe(
            name="LEAP2023",
            id_prefix="leap",
            nltk_data=(_STOPWORDS, _WORDNET),
            what="WordNet synonym swaps searched by particle swarm",
            caveat=_SYNONYM_CAVEAT,
        ),
    )
}

# Recipes that would download something, measured offline with HF_HUB_OFFLINE=1: the name of what
# they load. Refused before textattack is imported (without HF_HUB_OFFLINE a hub model took 46 s to fail).
_USE = "the Universal Sentence Encoder (TensorFlow Hub; needs tensorflow)"
_PARAGRAMCF = "counter-fitted word embeddings ('paragramcf', from TextAttack's S3 bucket)"
NEEDS_NETWORK: dict[str, str] = {
    "A2TYoo2021": f"the hub models stsb-distilbert-base (SBERT) and distilroberta-base, {_PARAGRAMCF}, "
    "and NLTK's POS tagger",
    "BAEGarg2019": f"the hub model bert-base-uncased (masked LM), {_USE}, and NLTK's POS tagger",
    "BERTAttackLi2020": f"the hub model bert-base-uncased (masked LM) and {_USE}",
    "CLARE2020": f"the hub model distilroberta-base (masked LM) and {_USE}",
    "GeneticAlgorithmAlzantot2018": f"{_PARAGRAMCF} and TextAttack's Google 1-billion-words language model",
    "FasterGeneticAlgorithmJia2019": f"{_PARAGRAMCF} and TextAttack's learning-to-write language model",
    "IGAWang2019": _PARAGRAMCF,
    "Kuleshov2017": f"{_PARAGRAMCF} and the hub model gpt2",
    "TextFoolerJin2019": f"{_PARAGRAMCF}, {_USE}, and NLTK's POS tagger",
    "TextBuggerLi2018": f"{_PARAGRAMCF}, {_USE}, and a homoglyph table missing from the textattack 0.3.11 wheel",
    "PSOZang2020": "HowNet word candidates (from TextAttack's S3 bucket)",
    "CheckList2020": "flair's NER model ner-english (downloaded at the first attack)",
    "Seq2SickCheng2018BlackBox": f"{_PARAGRAMCF} and the hub model facebook/bart-large-cnn; it attacks "
    "sequence-to-sequence models, not classifiers",
    "HotFlipEbrahimi2017": "gradients of one of TextAttack's own word-embedding models (LSTM/CNN); it cannot attack "
    "Hugging Face transformers",
    "MorpheusTan2020": "a sequence-to-sequence model (it minimises BLEU); it does not attack classifiers",
    "BadCharacters2021": "a targeted, NER or translation goal and a homoglyph table missing from the 0.3.11 wheel",
    "FrenchRecipe": "French WordNet (Open Multilingual Wordnet) and hub models; it attacks French text",
    "SpanishRecipe": "Spanish WordNet (Open Multilingual Wordnet) and hub models; it attacks Spanish text",
    "ChineseRecipe": "HowNet candidates and a Chinese masked LM from the hub; it attacks Chinese text",
}
NOT_FOR_MUST_FIX: dict[str, str] = {
    "InputReductionFeng2018": "it deletes words while keeping the model's label (TextAttack reports every attempt as "
    "'maximized'), so it never flips a label and cannot produce must_fix cases",
}


# -- choosing a recipe (no textattack import) -----------------------------------------------------


def resolve_recipe(name: str) -> Recipe:
    """The offline recipe called ``name`` (case-insensitive; a unique prefix such as 'pwws' is enough).

    Raises :class:`AttackUnavailable` naming what an online-only recipe needs, why a recipe cannot
    produce must_fix cases, or the close matches of an unknown name.
    """
    known = {n.lower(): n for n in (*RECIPES, *NEEDS_NETWORK, *NOT_FOR_MUST_FIX)}
    known |= {r.id_prefix: r.name for r in RECIPES.values()}  # short names: 'pwws', 'deepwordbug'...
    wanted = name.strip().lower()
    canonical = known.get(wanted)
    if canonical is None and len(wanted) >= 3:
        prefixed = {n for key, n in known.items() if key.startswith(wanted)}
        canonical = prefixed.pop() if len(prefixed) == 1 else None
    offline = ", ".join(RECIPES)
    if canonical is None:
        prefixed = [key for key in known if wanted and key.startswith(wanted)]
        close = prefixed[:3] or difflib.get_close_matches(wanted, list(known), n=3, cutoff=0.5)
        names = list(dict.fromkeys(known[c] for c in close))
        hint = f"did you mean {' or '.join(names)}? " if names else ""
        raise AttackUnavailable(f"unknown recipe {name!r}; {hint}recipes that run offline: {offline}")
    if canonical in RECIPES:
        return RECIPES[canonical]
    if canonical in NOT_FOR_MUST_FIX:
        raise AttackUnavailable(f"{canonical} is not offered: {NOT_FOR_MUST_FIX[canonical]}; use one of {offline}")
    raise AttackUnavailable(
        f"{canonical} needs {NEEDS_NETWORK[canonical]}, which warp-check does not download (it runs offline); "
        f"use one of {offline}"
    )


def check_ready(recipe: Recipe) -> None:
    """Fail fast, before importing textattack: the extra, the NLTK data, TextAttack's marker."""
    transformers_version = _version("transformers")
    too_new = int(transformers_version.split(".")[0]) >= 5
    # textattack 0.3.11 pulls flair, which needs transformers < 5: the extra downgrades transformers.
    separate = (
        f"; it needs transformers < 5 (through flair) and this environment has {transformers_version}: "
        "install it in a separate virtual environment"
        if too_new
        else ""
    )
    if importlib.util.find_spec("textattack") is None:
        raise AttackUnavailable(
            f"`warp-check attack` needs TextAttack, which is not installed: {INSTALL_HINT}{separate}"
        )
    if too_new:
        raise AttackUnavailable(f"TextAttack is installed but cannot import here{separate} with {INSTALL_HINT}")
    missing = [_NLTK_NAMES[r] for r in recipe.nltk_data if not _nltk_has(r)]
    if missing:
        raise AttackUnavailable(
            f"{recipe.name} needs NLTK data that is not installed: {' and '.join(missing)} "
            f"(NLTK_DATA={os.environ.get('NLTK_DATA', '<unset>')}). Prepare it without the network with "
            f"`bash {PREPARE_SCRIPT} DIR ~/.cache/textattack` from the warp-check repository, then "
            "`export NLTK_DATA=DIR`"
        )
    marker = _textattack_cache() / TA_MARKER
    if not marker.is_file():
        # Without it, `import textattack` calls nltk.download() for six packages: a network wait.
        raise AttackUnavailable(
            f"TextAttack's post-install marker {marker} is missing, so importing textattack would try to download "
            f"NLTK data: create it with `mkdir -p {marker.parent} && touch {marker}` (or run "
            f"`bash {PREPARE_SCRIPT} DIR {marker.parent}`)"
        )


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        raise AttackUnavailable(
            f"`warp-check attack` needs {package}, which is not installed: {INSTALL_HINT}"
        ) from None


def _nltk_has(resource: str) -> bool:
    import nltk.data

    try:
        nltk.data.find(resource)
    except LookupError:
        return False
    return True


def _textattack_cache() -> Path:
    # textattack/shared/utils/install.py: TA_CACHE_DIR, else ~/.cache/textattack (not XDG_CACHE_HOME).
    return Path(os.environ.get("TA_CACHE_DIR") or os.path.expanduser("~/.cache/textattack"))


# -- settings and results ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RecipeSettings:
    """How one recipe runs: its seed, how many clean cases, the model query budget per case."""

    recipe: str = "DeepWordBugGao2018"  # an offline recipe's exact name (see :func:`resolve_recipe`)
    seed: int = 0
    max_cases: int | None = None  # the first N clean cases in suite order; None: all
    query_budget: int | None = None  # model queries per case; None: the recipe's own (unbounded)
    batch_size: int = 32  # texts per forward pass
    source_kind: Kind = Kind.MUST_KEEP
    threads: int | None = None  # torch CPU threads while attacking; None: torch's default

    def __post_init__(self) -> None:
        if self.recipe not in RECIPES:
            raise SettingsError("recipe", self.recipe, f"not an offline recipe; use one of {', '.join(RECIPES)}")
        for name, low in (("seed", 0), ("max_cases", 1), ("query_budget", 1), ("batch_size", 1), ("threads", 1)):
            value = getattr(self, name)
            if value is None and name in ("max_cases", "query_budget", "threads"):
                continue
            require_integer(name, value, low)
        try:
            kind = Kind(self.source_kind)
        except ValueError:
            kind = None
        if kind not in SOURCE_KINDS:
            names = " or ".join(k.value for k in SOURCE_KINDS)
            raise SettingsError("source_kind", self.source_kind, f"attack clean cases: {names}")
        object.__setattr__(self, "source_kind", kind)

    def seed_for(self, case_id: str) -> int:
        """One seed per case from (seed, case id): results depend on neither order nor max_cases."""
        digest = hashlib.sha256(f"{self.seed}\0{case_id}".encode()).digest()
        return int.from_bytes(digest[:4], "big")  # numpy takes seeds below 2**32


STATUSES = ("succeeded", "failed", "skipped")


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """One clean case attacked: what TextAttack said, and the changed text when it succeeded."""

    case_id: str
    status: str  # one of STATUSES
    queries: int
    text: str | None = None  # the adversarial text (succeeded only)
    text_pair: str | None = None


@dataclass(frozen=True, kw_only=True)
class AttackRun:
    """A recipe run on a suite, and what was written."""

    recipe: str
    settings: RecipeSettings
    selected: int  # clean cases chosen (after max_cases)
    attempts: tuple[Attempt, ...]
    interrupted: bool
    build_seconds: float
    attack_seconds: float
    out: Path | None
    added: tuple[str, ...] = ()
    duplicates: int = 0  # successes whose text is already in the out file or the suite
    dropped: tuple[tuple[str, float], ...] = ()  # (clean case id, gap): re-predicted right (nan: blank text)
    caveat: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def count(self, status: str) -> int:
        return sum(a.status == status for a in self.attempts)

    @property
    def examples_per_second(self) -> float:
        return len(self.attempts) / self.attack_seconds if self.attack_seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "seed": self.settings.seed,
            "from": self.settings.source_kind.value,
            "max_cases": self.settings.max_cases,
            "query_budget": self.settings.query_budget,
            "selected": self.selected,
            "attempted": len(self.attempts),
            "counts": {s: self.count(s) for s in STATUSES},
            "interrupted": self.interrupted,
            "build_seconds": self.build_seconds,
            "attack_seconds": self.attack_seconds,
            "examples_per_second": self.examples_per_second,
            "mean_queries": (sum(a.queries for a in self.attempts) / len(self.attempts)) if self.attempts else 0.0,
            "out": None if self.out is None else str(self.out),
            "added": list(self.added),
            "duplicates": self.duplicates,
            "dropped": [{"original": case_id, "gap": gap} for case_id, gap in self.dropped],
            "caveat": self.caveat,
            "notes": list(self.notes),
            "attempts": [dataclasses.asdict(a) for a in self.attempts],
        }


# -- where the cases go ---------------------------------------------------------------------------


def default_out(suite: Suite) -> Path:
    """The suite's one must_fix case file; a usage error when it has none or several."""
    files = [f.path for f in suite.case_files if f.kind is Kind.MUST_FIX]
    if len(files) == 1:
        return files[0]
    what = "no [[cases]] file of kind must_fix" if not files else f"{len(files)} must_fix case files"
    raise WarpError(f"{suite.toml} has {what}: say where the new cases go with --out FILE.jsonl")


def check_out(suite: Suite, out: Path) -> str | None:
    """Refuse a case file of the suite whose lines default to another kind; a note when ``out`` is
    not part of the suite (its cases are not tested until warp.toml lists it)."""
    resolved = out.resolve()
    for case_file in suite.case_files:
        if case_file.path.resolve() == resolved:
            if case_file.kind is not Kind.MUST_FIX:
                kind = case_file.kind.value if case_file.kind else "no default kind"
                raise WarpError(
                    f"--out {out} is the suite's {kind} file; adversarial cases are must_fix: "
                    "give the suite's must_fix file or a new one"
                )
            return None
    try:
        rel = os.path.relpath(resolved, suite.root)
    except ValueError:  # another drive (Windows)
        rel = str(resolved)
    return f'{out} is not in the suite yet: add it to {suite.toml.name} as [[cases]] path = "{rel}", kind = "must_fix"'


# -- running a recipe -----------------------------------------------------------------------------


def run_attack(
    suite: Suite,
    adapter: ClassifierAdapter,
    settings: RecipeSettings,
    *,
    out: Path | None,
    progress: bool | Progress = False,
) -> AttackRun:
    """Attack the suite's clean cases and append the successes the model really gets wrong to ``out``
    (None: write nothing). Ctrl-C stops the search; what was found until then is still written and
    the run says ``interrupted``."""
    recipe = RECIPES[settings.recipe]
    notes: list[str] = []
    if out is not None:
        note = check_out(suite, out)
        if note:
            notes.append(note)
    clean = [c for c in suite.cases if c.kind is settings.source_kind]
    if settings.max_cases is not None:
        clean = clean[: settings.max_cases]
    attempts, interrupted, build_seconds, attack_seconds = attack_cases(adapter, clean, settings, progress=progress)
    # A success whose text edits left nothing but blanks is no case (a suite rejects blank text).
    blank = [a for a in attempts if a.status == "succeeded" and not all(t.strip() for t in _texts(a))]
    succeeded = [a for a in attempts if a.status == "succeeded" and a not in blank]
    by_id = {c.id: c for c in clean}
    confirmed, dropped = confirm_wrong(adapter, [(by_id[a.case_id], a) for a in succeeded], settings.batch_size)
    dropped += [(a.case_id, float("nan")) for a in blank]
    from warp_check.suite.casefile import NewCase, append_cases, writer_check

    in_suite = {(c.text, c.text_pair) for c in suite.cases}
    new_cases = [
        NewCase(
            text=a.text or "",
            text_pair=a.text_pair,
            label=suite.label_name(by_id[a.case_id].label),
            source=recipe.name,
            original=a.case_id,
        )
        for a in confirmed
        if (a.text, a.text_pair) not in in_suite
    ]
    duplicates = len(confirmed) - len(new_cases)
    added: tuple[str, ...] = ()
    if new_cases and out is not None:
        check = writer_check(suite, out, kind=Kind.MUST_FIX)
        result = append_cases(out, new_cases, id_prefix=recipe.id_prefix, check=check)
        added, duplicates = result.added, duplicates + result.duplicates
    return AttackRun(
        recipe=recipe.name,
        settings=settings,
        selected=len(clean),
        attempts=tuple(attempts),
        interrupted=interrupted,
        build_seconds=build_seconds,
        attack_seconds=attack_seconds,
        out=out,
        added=added,
        duplicates=duplicates,
        dropped=tuple(dropped),
        caveat=recipe.caveat,
        notes=tuple(notes),
    )


def _texts(attempt: Attempt) -> list[str]:
    return [attempt.text or ""] + ([] if attempt.text_pair is None else [attempt.text_pair])


def attack_cases(
    adapter: ClassifierAdapter, cases: Sequence[Case], settings: RecipeSettings, *, progress: bool | Progress = False
) -> tuple[list[Attempt], bool, float, float]:
    """(attempts, interrupted, build seconds, attack seconds) for ``cases`` under the recipe."""
    start = time.perf_counter()
    attack = build_attack(adapter, settings)
    build_seconds = time.perf_counter() - start
    from textattack.shared.utils import set_seed

    attempts: list[Attempt] = []
    interrupted = False
    counts = dict.fromkeys(STATUSES, 0)
    start = time.perf_counter()
    try:
        with as_progress(progress).step(f"attacking with {settings.recipe}", total=len(cases)) as step:
            with _quiet_textattack(), _torch_threads(settings.threads):
                for case in cases:
                    set_seed(settings.seed_for(case.id))
                    attempt = _attack_one(attack, case)
                    attempts.append(attempt)
                    counts[attempt.status] += 1
                    step.advance(1, note=", ".join(f"{n} {status}" for status, n in counts.items()))
    except KeyboardInterrupt:
        interrupted = True
    return attempts, interrupted, build_seconds, time.perf_counter() - start


def _attack_one(attack: Any, case: Case) -> Attempt:
    from textattack.attack_results import FailedAttackResult, SkippedAttackResult, SuccessfulAttackResult

    example: str | OrderedDict[str, str] = case.text
    if case.text_pair is not None:
        example = OrderedDict(premise=case.text, hypothesis=case.text_pair)
    try:
        result = attack.attack(example, int(case.label))  # TextAttack rejects numpy ints
    except ValueError:
        # textattack 0.3.11's BeamSearch (Pruthi2019) takes the argmax of an empty list when the
        # query budget runs out mid-step, instead of returning a failed attack: it is one.
        goal = attack.goal_function
        if goal.num_queries < goal.query_budget:
            raise
        return Attempt(case_id=case.id, status="failed", queries=int(goal.num_queries))
    queries = int(getattr(result, "num_queries", 0) or 0)
    if isinstance(result, SuccessfulAttackResult):
        changed = result.perturbed_result.attacked_text.tokenizer_input
        text, pair = (changed, None) if isinstance(changed, str) else (changed[0], changed[1])
        return Attempt(case_id=case.id, status="succeeded", queries=queries, text=text, text_pair=pair)
    if isinstance(result, SkippedAttackResult):
        return Attempt(case_id=case.id, status="skipped", queries=queries)
    if isinstance(result, FailedAttackResult):
        return Attempt(case_id=case.id, status="failed", queries=queries)
    raise WarpError(f"{type(result).__name__} from the recipe on case {case.id!r}: not a label-flipping attack")


def confirm_wrong(
    adapter: ClassifierAdapter, found: Sequence[tuple[Case, Attempt]], batch_size: int = 32
) -> tuple[list[Attempt], list[tuple[str, float]]]:
    """(the attempts the adapter really gets wrong, [(case id, gap)] of those it gets right).

    TextAttack saw the same model, but in other batches (other padding): a flip right at the
    decision boundary may not survive; a must_fix case the model already passes is no must_fix case.
    """
    if not found:
        return [], []
    from warp_check.pipeline.evaluation import evaluate

    probes = [
        Case(id=f"probe-{i}", text=a.text or "", text_pair=a.text_pair, label=case.label, kind=Kind.MUST_FIX)
        for i, (case, a) in enumerate(found)
    ]
    gaps = evaluate(adapter, probes, batch_size=batch_size, cache_dir=None, progress=False).gaps
    kept = [a for (_, a), gap in zip(found, gaps, strict=True) if gap <= 0]
    dropped = [(a.case_id, float(gap)) for (_, a), gap in zip(found, gaps, strict=True) if gap > 0]
    return kept, dropped


# -- textattack itself (lazy) -----------------------------------------------------------------------


def build_attack(adapter: ClassifierAdapter, settings: RecipeSettings) -> Any:
    """The recipe's ``textattack.Attack`` on the adapter's model, offline."""
    textattack = import_textattack()
    recipe_class = getattr(textattack.attack_recipes, settings.recipe)
    # WordSwapWordNet (PWWS, LEAP) calls nltk.download("omw-1.4") on every build: offline it is a
    # network wait for data the English recipes never read (wordnet.langs() is ['eng'] without it).
    from unittest import mock

    with mock.patch("nltk.download", return_value=True), _quiet_textattack():
        attack = recipe_class.build(_model_wrapper(adapter))
    attack.goal_function.batch_size = settings.batch_size
    if settings.query_budget is not None:
        attack.goal_function.query_budget = settings.query_budget
    return attack


def import_textattack() -> Any:
    """``import textattack`` offline, leaving the process environment as it was (HF_HUB_OFFLINE aside).

    textattack sets TOKENIZERS_PARALLELISM and a few KMP_/WANDB_ variables at import, and with
    TA_CACHE_DIR set it points XDG_CACHE_HOME, HF_HOME... at its cache for the whole process.
    """
    if "textattack" in sys.modules:
        return sys.modules["textattack"]
    os.environ["HF_HUB_OFFLINE"] = "1"  # a hub look-up fails at once instead of after ~45 s of retries
    hub_constants = sys.modules.get("huggingface_hub.constants")
    if hub_constants is not None:  # read at its import: too late for the variable alone
        hub_constants.HF_HUB_OFFLINE = True
    # transformers first: textattack's set_cache_dir() then finds it imported and does not warn
    # (FutureWarning on PYTORCH_TRANSFORMERS_CACHE, an error under -W error).
    import transformers  # noqa: F401

    before = dict(os.environ)
    try:
        import textattack
    finally:
        for key in set(os.environ) - set(before):
            del os.environ[key]
        for key, value in before.items():
            if os.environ.get(key) != value:
                os.environ[key] = value
    return textattack


@contextlib.contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    # Each query batch is small: on a busy machine one thread was 9x faster than two (measured).
    import torch

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(capped_threads(threads))
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def _quiet_textattack() -> Iterator[None]:
    """textattack's logger says at the first query whether the goal function suits the model: noise."""
    import logging

    logger = logging.getLogger("textattack.shared.utils.install")  # textattack's one logger
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _model_wrapper(adapter: ClassifierAdapter) -> Any:
    return _wrapper_class()(adapter)


_WRAPPER: list[type] = []  # the class, made once textattack is importable


def _wrapper_class() -> type:
    if _WRAPPER:
        return _WRAPPER[0]
    from textattack.models.wrappers import HuggingFaceModelWrapper

    class AdapterModelWrapper(HuggingFaceModelWrapper):
        """TextAttack's view of the suite's model, through warp-check's adapter: each batch padded to
        its longest input and cut at the suite's max_length (the stock wrapper pads to
        model_max_length: 5.6x slower measured), only the inputs forward() accepts (DistilBERT
        rejects token_type_ids), text pairs as (premise, hypothesis) tuples."""

        def __init__(self, adapter: ClassifierAdapter) -> None:
            super().__init__(adapter.model, adapter.tokenizer)
            self.adapter = adapter

        def __call__(self, text_input_list: list[Any]) -> Any:
            pairs = [None if isinstance(t, str) else t[1] for t in text_input_list]
            texts = [t if isinstance(t, str) else t[0] for t in text_input_list]
            features = self.adapter.tokenize(texts, pairs)
            return self.adapter.forward_batch(features)[1]  # logits; TextAttack applies the softmax

    _WRAPPER.append(AdapterModelWrapper)
    return AdapterModelWrapper


STATUS_MEANING = {
    "succeeded": "the label flipped: a new must_fix case",
    "failed": "the search ended or used its query budget without flipping the label",
    "skipped": "the model is already wrong on the clean case: nothing to attack",
}

__all__ = [
    "NEEDS_NETWORK",
    "NOT_FOR_MUST_FIX",
    "RECIPES",
    "STATUSES",
    "STATUS_MEANING",
    "Attempt",
    "AttackRun",
    "AttackUnavailable",
    "Recipe",
    "RecipeSettings",
    "attack_cases",
    "build_attack",
    "check_out",
    "check_ready",
    "confirm_wrong",
    "default_out",
    "import_textattack",
    "resolve_recipe",
    "run_attack",
]
