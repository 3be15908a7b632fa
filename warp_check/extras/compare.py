"""WARP side by side with the paper's baselines, on the same cases (paper Table 3; Tables 6–8).

Methods, each scored on the same subsampled must_fix / must_keep cases:

* ``original``: the model as it is.
* ``lora``: same-layer LoRA (rank 2, α = 4, peft) on the repair layer, trained on
  must_fix ∪ must_keep (:mod:`warp_check.extras.baselines`).
* ``full_ft``: all layers fine-tuned on the same union (lr 1e-4, batch 16, ≤ 300 epochs, early
  stopping with patience 5 on the training loss; see :mod:`warp_check.extras.baselines`).
* ``warp``: :func:`warp_check.runs.repair_cases.repair_cases`, once per rank in ``ranks``.

Columns (the paper's Table 3): **Repair Acc** = accuracy on must_fix after the method, **Remain
Acc** on must_keep, **General Acc** on a clean held-out set (``general``), **Atk. Gen** on
held-out adversarial cases (``heldout``; all of them pooled; when their ``source`` names the
attack, the per-source accuracies and their unweighted mean, the paper's definition, are given
too), and wall time. A WARP run that did not converge ships no model: its row scores
``RepairResult.head_after`` (the input head, plus GSN-FT if that ran) and names the status.

Every method works on a deep copy of the model in memory; nothing is written unless the caller
asks (:func:`write_comparison`). Seeds fix the subsampling and the baselines' initialisation and
data order; ``threads`` pins torch's CPU threads for the run.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import importlib.metadata
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from warp_check.cases import Case, Kind
from warp_check.decisions import SINGLE_LABEL, DecisionKind
from warp_check.errors import SettingsError, WarpError
from warp_check.extras.baselines import TrainSettings, require_peft
from warp_check.model.threads import capped_threads
from warp_check.progress import Progress as StepProgress  # compare's own Progress is a line writer
from warp_check.repair.records import RepairStatus
from warp_check.validation import is_integer, require_integer

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.decisions.base import LabelF1
    from warp_check.model.adapter import ClassifierAdapter
    from warp_check.model.head import DenseHead
    from warp_check.pipeline.evaluation import Evaluation
    from warp_check.repair.settings import RepairSettings
    from warp_check.suite.loader import Suite

METHODS = ("original", "lora", "full_ft", "warp")
Progress = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class CompareSettings:
    """What to compare and on how much. Validated on construction; errors name the field."""

    methods: tuple[str, ...] = METHODS
    ranks: tuple[int, ...] | None = None  # WARP ranks; None: the repair settings' rank
    fix_size: int | None = None  # seeded subsample of must_fix (None: all)
    keep_size: int | None = None  # seeded subsample of must_keep (None: all; 0: none, paper Table 8)
    seed: int = 0
    threads: int | None = None  # torch CPU threads during the run (None: leave as is)
    batch_size: int = 32  # for encoding; training uses train.batch_size
    train: TrainSettings = field(default_factory=TrainSettings)

    def __post_init__(self) -> None:
        methods = self.methods
        if isinstance(methods, str) or not isinstance(methods, (tuple, list)) or not methods:
            raise SettingsError("methods", methods, f"must be a non-empty sequence of {', '.join(METHODS)}")
        object.__setattr__(self, "methods", tuple(methods))
        for method in self.methods:
            if method not in METHODS:
                raise SettingsError("methods", methods, f"unknown method {method!r}; use {', '.join(METHODS)}")
        if len(set(self.methods)) != len(self.methods):
            raise SettingsError("methods", methods, "names a method twice")
        if self.ranks is not None:
            ranks = self.ranks
            if isinstance(ranks, (str, int)) or not isinstance(ranks, (tuple, list)) or not ranks:
                raise SettingsError("ranks", ranks, "must be a non-empty sequence of integers >= 1")
            object.__setattr__(self, "ranks", tuple(ranks))
            if not all(is_integer(r, 1) for r in self.ranks):
                raise SettingsError("ranks", ranks, "must be a non-empty sequence of integers >= 1")
            if len(set(self.ranks)) != len(self.ranks):
                raise SettingsError("ranks", ranks, "names a rank twice")
        if self.fix_size is not None and not is_integer(self.fix_size, 1):
            raise SettingsError("fix_size", self.fix_size, "must be an integer >= 1 (or None for all)")
        if self.keep_size is not None and not is_integer(self.keep_size, 0):
            raise SettingsError("keep_size", self.keep_size, "must be an integer >= 0 (or None for all)")
        require_integer("seed", self.seed, 0)
        if self.threads is not None and not is_integer(self.threads, 1):
            raise SettingsError("threads", self.threads, "must be an integer >= 1 (or None)")
        require_integer("batch_size", self.batch_size, 1)
        if not isinstance(self.train, TrainSettings):
            raise SettingsError("train", self.train, "must be a TrainSettings")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# -- results ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Accuracy:
    correct: int
    total: int

    @property
    def value(self) -> float | None:
        return self.correct / self.total if self.total else None

    def to_dict(self) -> dict[str, Any]:
        return {"accuracy": self.value, "correct": self.correct, "total": self.total}


@dataclass(frozen=True, kw_only=True)
class Counted:
    """What the table counts, in its kind's words (plural): a row it scores, and a case (the rows one
    pytest item decides: a token classifier's sentence)."""

    rows: str
    cases: str

    @classmethod
    def of(cls, decision: DecisionKind) -> Counted:
        return cls(rows=decision.row_nouns, cases=decision.case_nouns)

    @property
    def whole(self) -> bool:
        """Whether a case is several rows, so that the table also counts cases whole."""
        return self.rows != self.cases


@dataclass(frozen=True, kw_only=True)
class MethodResult:
    """One row of the table."""

    method: str  # one of METHODS
    title: str
    rank: int | None
    repair: Accuracy
    remain: Accuracy
    general: Accuracy | None
    attack: Accuracy | None
    attack_by_source: dict[str, Accuracy]
    seconds: float | None  # wall time of producing the model (None for the original)
    details: dict[str, Any] = field(default_factory=dict)
    # Micro and macro F1 of the general set's label decisions, where the kind decides several labels.
    general_f1: LabelF1 | None = None
    # Where a case is several rows (a token classifier's sentence, a row per word): the cases whose
    # every row is right, must_fix and must_keep (None: a case is one row, as ``repair`` and ``remain``).
    repair_whole: Accuracy | None = None
    remain_whole: Accuracy | None = None

    @property
    def attack_source_mean(self) -> float | None:
        values = [a.value for a in self.attack_by_source.values() if a.value is not None]
        return sum(values) / len(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        def acc(a: Accuracy | None) -> float | None:
            return None if a is None else a.value

        return {
            "method": self.method,
            "title": self.title,
            "rank": self.rank,
            "repair_acc": acc(self.repair),
            "remain_acc": acc(self.remain),
            "general_acc": acc(self.general),
            "attack_gen": acc(self.attack),
            "attack_gen_source_mean": self.attack_source_mean,
            "general_micro_f1": None if self.general_f1 is None else self.general_f1.micro,
            "general_macro_f1": None if self.general_f1 is None else self.general_f1.macro,
            "repair_whole_acc": acc(self.repair_whole),
            "remain_whole_acc": acc(self.remain_whole),
            "counts": {
                "repair": self.repair.to_dict(),
                "remain": self.remain.to_dict(),
                "general": None if self.general is None else self.general.to_dict(),
                "attack": None if self.attack is None else self.attack.to_dict(),
                "repair_whole": None if self.repair_whole is None else self.repair_whole.to_dict(),
                "remain_whole": None if self.remain_whole is None else self.remain_whole.to_dict(),
            },
            "attack_gen_by_source": {k: v.to_dict() for k, v in self.attack_by_source.items()},
            "seconds": self.seconds,
            "details": self.details,
        }


@dataclass(frozen=True, kw_only=True)
class Comparison:
    settings: CompareSettings
    repair_settings: dict[str, Any]
    info: dict[str, Any]  # model, head, versions, timings shared by the rows
    sizes: dict[str, int | None]
    rows: tuple[MethodResult, ...]
    # What a row and a case are called (a token classifier: words, sentences); equal where a case is one row.
    counted: Counted = field(default_factory=lambda: Counted(rows="cases", cases="cases"))

    @property
    def passed(self) -> bool:
        """Every WARP run converged (or had nothing to repair): its certificates hold."""
        return all(r.details.get("ok", True) for r in self.rows if r.method == "warp")

    def row(self, method: str, rank: int | None = None) -> MethodResult:
        for r in self.rows:
            if r.method == method and (rank is None or r.rank == rank):
                return r
        raise KeyError((method, rank))

    def to_dict(self) -> dict[str, Any]:
        from warp_check.files import jsonable

        return jsonable(
            {
                "format": "warp-check-compare/1",
                "passed": self.passed,
                "info": self.info,
                "sizes": self.sizes,
                "counted": {"rows": self.counted.rows, "cases": self.counted.cases},
                "settings": self.settings.to_dict(),
                "repair_settings": self.repair_settings,
                "methods": [r.to_dict() for r in self.rows],
            }
        )

    def to_markdown(self, *, heading: str = "##") -> str:
        return render_markdown(self, heading=heading)


# -- the run ----------------------------------------------------------------------------------


def compare(
    adapter: ClassifierAdapter,
    cases: Sequence[Case],
    settings: CompareSettings | None = None,
    *,
    repair: RepairSettings | None = None,
    general: Sequence[Case] = (),
    heldout: Sequence[Case] = (),
    cache_dir: str | Path | None = None,
    progress: Progress | None = None,
    encoding_progress: bool | StepProgress = False,
) -> Comparison:
    """Run every method of ``settings.methods`` on ``cases`` and score each the same way.

    ``cases`` are a suite's must_fix / must_keep (and aux, which only WARP's GSN-FT may use);
    ``general`` and ``heldout`` are scored but never trained on. ``adapter.model`` is not
    modified. Raises SettingsError for a size or rank the cases or the layer cannot give.
    """
    from warp_check.repair.settings import RepairSettings

    settings = settings or CompareSettings()
    repair = repair or RepairSettings()
    ranks = settings.ranks or (repair.rank,)
    smallest = min(adapter.repair_layer.in_features, adapter.repair_layer.out_features)
    for rank in ranks:
        if rank > smallest:
            raise SettingsError("ranks", ranks, f"rank {rank} exceeds the repair layer's smallest dimension {smallest}")
    decision = adapter.decision
    chosen = select_cases(cases, settings, decision)
    say = progress or (lambda _message: None)

    threads = _set_threads(None if settings.threads is None else capped_threads(settings.threads))
    try:
        start = time.perf_counter()
        evaluation = _evaluate(adapter, chosen, settings, cache_dir, encoding_progress)
        encode_seconds = time.perf_counter() - start
        extra = {
            name: _evaluate(adapter, rows, settings, cache_dir, encoding_progress)
            for name, rows in (("general", general), ("heldout", heldout))
            if rows
        }
        scorer = _Scorer(adapter, evaluation, extra, settings)
        rows: list[MethodResult] = []
        for method in settings.methods:
            if method == "original":
                rows.append(scorer.from_head("original", "Original", None, adapter.head(), None, {}))
            elif method in ("lora", "full_ft"):
                rows.append(_baseline(method, adapter, chosen, settings, scorer, say))
            else:
                for rank in ranks:
                    encode = {"batch_size": settings.batch_size, "cache_dir": cache_dir}
                    rows.append(_warp(rank, adapter, evaluation, repair, scorer, encode_seconds, say, encode))
    finally:
        _set_threads(threads)
    counts = {k.value: sum(1 for c in chosen if c.kind is k) for k in Kind}
    counted = Counted.of(decision)
    whole = {
        f"{kind.value}_{counted.cases}": len({decision.group(c.id) for c in chosen if c.kind is kind})
        for kind in (Kind.MUST_FIX, Kind.MUST_KEEP)
        if counted.whole
    }
    return Comparison(
        settings=settings,
        repair_settings=repair.to_dict(),
        info=_info(adapter, encode_seconds),
        sizes={
            "must_fix": counts["must_fix"],
            "must_keep": counts["must_keep"],
            "aux": counts["aux"],
            "must_fix_available": sum(1 for c in cases if c.kind is Kind.MUST_FIX),
            "must_keep_available": sum(1 for c in cases if c.kind is Kind.MUST_KEEP),
            "general": len(general) if general else None,
            "heldout": len(heldout) if heldout else None,
            **whole,
        },
        rows=tuple(rows),
        counted=counted,
    )


def select_cases(cases: Sequence[Case], settings: CompareSettings, decision: DecisionKind = SINGLE_LABEL) -> list[Case]:
    """The seeded must_fix / must_keep subsamples (file order kept), plus every aux case; a size counts
    cases as their kind groups rows into them (a token classifier: sentences, each taken with all its words)."""
    fix = [c for c in cases if c.kind is Kind.MUST_FIX]
    keep = [c for c in cases if c.kind is Kind.MUST_KEEP]
    aux = [c for c in cases if c.kind is Kind.AUX]
    if not fix:
        raise WarpError("the suite has no must_fix cases: there is nothing to repair, so nothing to compare")
    rng = np.random.default_rng(settings.seed)

    def subsample(rows: list[Case], size: int | None, name: str, kind: str) -> list[Case]:
        if size is None:
            return rows
        groups = list(dict.fromkeys(decision.group(c.id) for c in rows))
        if size > len(groups):
            raise SettingsError(name, size, f"the suite has only {len(groups)} {kind} {decision.case_nouns}")
        picked = {groups[i] for i in rng.choice(len(groups), size=size, replace=False)}
        return [c for c in rows if decision.group(c.id) in picked]

    return (
        subsample(fix, settings.fix_size, "fix_size", "must_fix")
        + subsample(keep, settings.keep_size, "keep_size", "must_keep")
        + aux
    )


def _set_threads(threads: int | None) -> int | None:
    """Set torch's CPU threads; returns the previous value (None: nothing was changed)."""
    if threads is None:
        return None
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    return previous


def _evaluate(adapter, cases, settings: CompareSettings, cache_dir, shown: bool | StepProgress) -> Evaluation:
    from warp_check.pipeline.evaluation import evaluate

    return evaluate(adapter, cases, batch_size=settings.batch_size, cache_dir=cache_dir, progress=shown)


class _Scorer:
    """Accuracies of a model on the suite subsets and the extra sets, one way for every method."""

    def __init__(self, adapter, evaluation: Evaluation, extra: Mapping[str, Evaluation], settings) -> None:
        self.adapter = adapter
        self.evaluation = evaluation
        self.extra = dict(extra)
        self.settings = settings
        kinds = np.array([c.kind.value for c in evaluation.cases])
        self.fix = np.flatnonzero(kinds == Kind.MUST_FIX.value)
        self.keep = np.flatnonzero(kinds == Kind.MUST_KEEP.value)

    def from_head(self, method, title, rank, head: DenseHead, seconds, details) -> MethodResult:
        """Score a model that differs from the input at most in its head: v is reused."""
        predictions = {"suite": head.predict(self.evaluation.encoded.V.astype(np.float64))}
        for name, ev in self.extra.items():
            predictions[name] = head.predict(ev.encoded.V.astype(np.float64))
        return self._row(method, title, rank, predictions, seconds, details)

    def from_evaluations(self, method, title, rank, evaluations: Mapping[str, Evaluation], seconds, details):
        return self._row(method, title, rank, {k: v.predictions for k, v in evaluations.items()}, seconds, details)

    def _row(self, method, title, rank, predictions, seconds, details) -> MethodResult:
        correct = self.evaluation.decision.right(predictions["suite"], self.evaluation.answers(self.evaluation.cases))

        def acc(rows: np.ndarray) -> Accuracy:
            return Accuracy(int(correct[rows].sum()), int(len(rows)))

        def whole(rows: np.ndarray) -> Accuracy | None:
            """The cases of ``rows`` whose every row is right (None: a case is one row)."""
            if not Counted.of(self.evaluation.decision).whole:
                return None
            right: dict[str, bool] = {}
            for i in rows.tolist():
                group = self.evaluation.decision.group(self.evaluation.cases[i].id)
                right[group] = right.get(group, True) and bool(correct[i])
            return Accuracy(sum(right.values()), len(right))

        general = attack = general_f1 = None
        by_source: dict[str, Accuracy] = {}
        if "general" in self.extra:
            clean = self.extra["general"]
            general = _accuracy(clean, clean.cases, predictions["general"])
            general_f1 = clean.decision.label_f1(np.asarray(predictions["general"]), clean.answers(clean.cases))
        if "heldout" in self.extra:
            evaluation = self.extra["heldout"]
            held = evaluation.cases
            attack = _accuracy(evaluation, held, predictions["heldout"])
            sources = sorted({c.source for c in held if c.source})
            for source in sources:
                rows = [i for i, c in enumerate(held) if c.source == source]
                by_source[source] = _accuracy(evaluation, [held[i] for i in rows], predictions["heldout"][rows])
        return MethodResult(
            method=method,
            title=title,
            rank=rank,
            repair=acc(self.fix),
            remain=acc(self.keep),
            general=general,
            attack=attack,
            attack_by_source=by_source,
            seconds=seconds,
            details=details,
            general_f1=general_f1,
            repair_whole=whole(self.fix),
            remain_whole=whole(self.keep),
        )


def _accuracy(evaluation: Evaluation, cases: Sequence[Case], predictions: np.ndarray) -> Accuracy:
    """How many of ``cases`` the predictions get right, as their kind of decision judges them."""
    right = evaluation.decision.right(np.asarray(predictions), evaluation.answers(cases))
    return Accuracy(int(right.sum()), len(cases))


def _baseline(method, adapter, cases, settings: CompareSettings, scorer: _Scorer, say: Progress) -> MethodResult:
    from warp_check.extras.baselines import train_full, train_lora
    from warp_check.model.adapter import ClassifierAdapter
    from warp_check.pipeline.evaluation import evaluate

    train = train_lora if method == "lora" else train_full
    say(f"{method}: training on {len([c for c in cases if c.kind is not Kind.AUX])} cases")
    trained = train(adapter, cases, settings.train, progress=say)
    changed = changed_tensors(adapter.model, trained.model)
    head_prefixes = (f"{adapter.spec.repair_layer}.", f"{adapter.spec.classifier}.")
    upstream_changed = [name for name in changed if not name.startswith(head_prefixes)]
    new = ClassifierAdapter(
        trained.model,
        adapter.tokenizer,
        adapter.spec,
        max_length=adapter.max_length,
        check=True,
        device=adapter.device,  # where it trained: scored there too
        threads=adapter.threads,
    )
    details = {
        "trainable_parameters": trained.trainable_parameters,
        "epochs": trained.epochs,
        "stop_reason": trained.stop_reason,
        "kept_epoch": trained.kept_epoch,
        "final_loss": trained.losses[-1],
        "losses": list(trained.losses),
        "changed_tensors": len(changed),
        "changed_upstream_tensors": len(upstream_changed),
        "changed_head_tensors": sorted(set(changed) - set(upstream_changed)),
        "tensors": len(adapter.model.state_dict()),
    }
    if method == "lora":
        title = f"Same-layer LoRA (r={settings.train.lora_rank})"
    else:
        title = "All-layers Full FT"
    if not upstream_changed:  # v is unchanged: score the new head on the cached v
        return scorer.from_head(method, title, None, new.head(), trained.seconds, details)
    say(f"{method}: scoring the fine-tuned encoder")
    evaluations = {"suite": evaluate(new, scorer.evaluation.cases, batch_size=settings.batch_size, progress=False)}
    for name, ev in scorer.extra.items():
        evaluations[name] = evaluate(new, ev.cases, batch_size=settings.batch_size, progress=False)
    return scorer.from_evaluations(method, title, None, evaluations, trained.seconds, details)


def changed_tensors(before: Any, after: Any) -> list[str]:
    """Names of the state-dict tensors that differ between two models of one architecture."""
    import torch

    old, new = before.state_dict(), after.state_dict()
    if set(old) != set(new):
        missing = sorted(set(old) ^ set(new))[:5]
        raise WarpError(f"the trained model's tensors are not the input's (e.g. {missing})")
    return [name for name in old if not torch.equal(old[name], new[name])]


def _warp(
    rank, adapter, evaluation, repair: RepairSettings, scorer: _Scorer, encode_seconds, say, encode: dict
) -> MethodResult:
    from warp_check.runs.repair_cases import repair_cases

    say(f"warp: repairing at rank {rank}")
    start = time.perf_counter()
    outcome = repair_cases(
        adapter,
        evaluation.cases,
        dataclasses.replace(repair, rank=rank),
        evaluation=evaluation,
        progress=False,
        fallback=False,  # scored on this layer's v, beside LoRA on the same layer
        **encode,
    )
    seconds = time.perf_counter() - start + encode_seconds
    result, hood = outcome.result, outcome.neighbourhood
    fix_records = [r for r in outcome.certificates if r.kind == Kind.MUST_FIX.value]
    eps = np.array([r.eps_star for r in fix_records if r.eps_star is not None], dtype=np.float64)
    from warp_check.certify.cases import summarise

    details = {
        "status": result.status.value,
        "ok": result.repaired or result.status is RepairStatus.NOTHING_TO_REPAIR,
        "message": result.message,
        "iterations": len(result.iterations),
        "repair_seconds": result.seconds,
        "encode_seconds": encode_seconds,
        "certs": summarise(list(outcome.certificates)) if outcome.certificates else None,
        "eps_star_median": float(np.median(eps)) if eps.size else None,
        "eps_star_mean": float(eps.mean()) if eps.size else None,
        "gsn_ft_applied": result.gsn_ft.applied,
        "excluded_must_keep": len(result.excluded_keep),
        "decision_variables": rank * adapter.repair_layer.in_features,
        # Perturbed copies of the suite's cases the model got wrong, repaired and certified beside them.
        "neighbour_cases": len(hood.cases) if hood is not None and hood.left_out is None else 0,
    }
    return scorer.from_head("warp", f"WARP (r={rank})", rank, result.head_after, seconds, details)


def _installed_version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _info(adapter, encode_seconds: float) -> dict[str, Any]:
    import torch
    import transformers

    from warp_check.version import __version__

    return {
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "model": adapter.source,
        "model_type": getattr(adapter.model.config, "model_type", None),
        "repair_layer": adapter.spec.repair_layer,
        "activation": adapter.spec.activation,
        "classifier": adapter.spec.classifier,
        "encode_seconds": encode_seconds,
        "versions": {
            "warp_check": __version__,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "peft": _installed_version("peft"),
        },
        "threads": torch.get_num_threads(),
    }


# -- suites and files -------------------------------------------------------------------------


def read_cases_file(suite: Suite, path: str | Path) -> tuple[Case, ...]:
    """Cases of a JSONL file (a held-out or general set) with the suite's labels.

    Same format and the same file/line/field errors as a suite's case files; ``kind`` may be
    left out (these cases are only scored).
    """
    # The suite module owns the case format; its reader is reused so both files read alike.
    from warp_check.suite.case_files import CaseFile, CaseReader
    from warp_check.suite.toml_lines import SuiteToml

    reader = CaseReader(SuiteToml(suite.toml), suite.labels, suite.num_classes, suite.decision)
    reader.read(CaseFile(path=Path(path), kind=Kind.MUST_KEEP, line=None))
    if not reader.cases:
        raise WarpError(f"{path}: no cases in the file")
    return tuple(reader.cases)


def compare_suite(
    suite: Suite,
    settings: CompareSettings | None = None,
    *,
    general: str | Path | None = None,
    heldout: str | Path | None = None,
    cache_dir: str | Path | None = None,
    progress: Progress | None = None,
    encoding_progress: bool | StepProgress = False,
) -> Comparison:
    """:func:`compare` on a loaded suite with its repair settings and its model."""
    from warp_check.releases.load import load_adapter

    settings = settings or CompareSettings(batch_size=suite.model.batch_size)
    general_cases = read_cases_file(suite, general) if general is not None else ()
    heldout_cases = read_cases_file(suite, heldout) if heldout is not None else ()
    select_cases(suite.cases, settings, suite.decision)  # a size the suite cannot give fails before the model loads
    if "lora" in settings.methods:
        require_peft()  # before the model loads, not after the other methods have trained
    adapter = load_adapter(suite)
    comparison = compare(
        adapter,
        suite.cases,
        settings,
        repair=suite.repair,
        general=general_cases,
        heldout=heldout_cases,
        cache_dir=cache_dir,
        progress=progress,
        encoding_progress=encoding_progress,
    )
    info = comparison.info | {
        "suite": str(suite.toml),
        "suite_name": suite.name,
        "general": None if general is None else str(general),
        "heldout": None if heldout is None else str(heldout),
    }
    return dataclasses.replace(comparison, info=info)


# -- output -----------------------------------------------------------------------------------


def _pct(acc: Accuracy | None) -> str:
    if acc is None or acc.value is None:
        return "n/a"
    return f"{100 * acc.value:.1f}% ({acc.correct}/{acc.total})"


def _seconds(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:.1f} s" if value >= 1 else f"{value:.2f} s"


def render_markdown(comparison: Comparison, *, heading: str = "##") -> str:
    info, sizes, counted = comparison.info, comparison.sizes, comparison.counted
    name = info.get("suite_name") or "cases"
    lines = [f"{heading} warp-check compare: {name}", ""]
    of = f" {counted.rows}" if counted.whole else ""
    lines.append(
        f"Model `{info.get('model')}`, repair layer `{info.get('repair_layer')}` → {info.get('activation')} → "
        f"`{info.get('classifier')}`. must_fix {sizes['must_fix']}{of} (of {sizes['must_fix_available']}), "
        f"must_keep {sizes['must_keep']}{of} (of {sizes['must_keep_available']}), "
        f"general {sizes['general'] or 'none'}, held-out attacks {sizes['heldout'] or 'none'}; "
        f"seed {comparison.settings.seed}."
    )
    if counted.whole:
        fix, keep = sizes.get(f"must_fix_{counted.cases}"), sizes.get(f"must_keep_{counted.cases}")
        lines.append(
            f"A row is one {counted.rows[:-1]} and a case one {counted.cases[:-1]} ({fix} must_fix, {keep} "
            f"must_keep): Repair and Remain count {counted.rows} fixed and kept, and the {counted.cases} whose "
            f"every stated {counted.rows[:-1]} is right."
        )
    scored_f1 = any(row.general_f1 is not None for row in comparison.rows)  # a kind deciding several labels
    f1_heads = ["General micro-F1", "General macro-F1"] if scored_f1 else []
    whole_heads = [f"Repair ({counted.cases})", f"Remain ({counted.cases})"] if counted.whole else []
    heads = ["Method", "Repair Acc", "Remain Acc", *whole_heads, "General Acc", *f1_heads, "Atk. Gen", "Time"]
    lines += ["", "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for row in comparison.rows:
        title = row.title
        if row.method == "warp" and not row.details.get("ok", True):
            title += f" ({row.details['status']})"
        f1 = row.general_f1
        f1_cells = ([f"{f1.micro:.4f}", f"{f1.macro:.4f}"] if f1 is not None else ["n/a", "n/a"]) if scored_f1 else []
        whole_cells = [_pct(row.repair_whole), _pct(row.remain_whole)] if counted.whole else []
        scores = [row.repair, row.remain]
        cells = [title, *map(_pct, scores), *whole_cells, _pct(row.general), *f1_cells, _pct(row.attack)]
        lines.append("| " + " | ".join([*cells, _seconds(row.seconds)]) + " |")
    warp = [r for r in comparison.rows if r.method == "warp"]
    if warp:
        lines += [
            "",
            f"WARP runs (time includes encoding the cases once, {_seconds(info.get('encode_seconds'))}):",
            "",
            "| Rank | Status | Iterations | Cert 1 | Cert 2 | Cert 3 | ε* median | Loop time |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in warp:
            d = r.details
            certs = d.get("certs") or {}
            eps = d.get("eps_star_median")
            lines.append(
                f"| {r.rank} | {d['status']} | {d['iterations']} | {certs.get('cert1', '—')} | "
                f"{certs.get('cert2', '—')} | {certs.get('cert3', '—')} | "
                f"{'—' if eps is None else f'{eps:.4g}'} | {_seconds(d.get('repair_seconds'))} |"
            )
    baselines = [r for r in comparison.rows if r.method in ("lora", "full_ft")]
    if baselines:
        t = comparison.settings.train
        lines += [
            "",
            f"Baselines (lr {t.lr:g}, batch {t.batch_size}, ≤ {t.max_epochs} epochs, early stopping on the training "
            f"loss: patience {t.patience}, threshold {t.threshold:g}; "
            f"{'weights of the lowest-loss epoch' if t.restore_best else 'weights of the last epoch'}; seed {t.seed}):",
            "",
            "| Method | Trainable parameters | Tensors changed | Epochs | Stopped by | Weights of epoch | Final loss |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in baselines:
            d = r.details
            lines.append(
                f"| {r.title} | {d['trainable_parameters']:,} | {d['changed_tensors']}/{d['tensors']} | "
                f"{d['epochs']} | {d['stop_reason'].replace('_', ' ')} | {d['kept_epoch']} | "
                f"{d['final_loss']:.4g} |"
            )
    sources = sorted({s for r in comparison.rows for s in r.attack_by_source})
    if sources:
        lines += [
            "",
            "Attack generalisation by source:",
            "",
            "| Method | " + " | ".join(sources) + " | Mean |",
            "|---|" + "---|" * (len(sources) + 1),
        ]
        for r in comparison.rows:
            cells = [_pct(r.attack_by_source.get(s)).split(" ")[0] for s in sources]
            mean = r.attack_source_mean
            lines.append(
                f"| {r.title} | " + " | ".join(cells) + f" | {'n/a' if mean is None else f'{100 * mean:.1f}%'} |"
            )
    return "\n".join(lines) + "\n"


def check_out_path(path: str | Path, model_dir: str | Path | None) -> None:
    """Refuse a report path inside the input model's folder (the input is never touched)."""
    if model_dir is not None and Path(path).resolve().is_relative_to(Path(model_dir).resolve()):
        raise WarpError(f"{path}: will not write into the input model's folder {model_dir}")


def write_comparison(comparison: Comparison, path: str | Path) -> tuple[Path, Path]:
    """Write the Markdown to ``path`` and the JSON beside it (same name, ``.json``), atomically."""
    from warp_check.files import write_json_atomic, write_text_atomically

    path = Path(path)
    check_out_path(path, comparison.info.get("model"))
    json_path = path.with_suffix(".json") if path.suffix != ".json" else path.with_suffix(".compare.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, comparison.to_markdown())
    write_json_atomic(json_path, comparison.to_dict())
    return path, json_path


__all__ = [
    "METHODS",
    "Accuracy",
    "CompareSettings",
    "Comparison",
    "Counted",
    "MethodResult",
    "changed_tensors",
    "check_out_path",
    "compare",
    "compare_suite",
    "read_cases_file",
    "render_markdown",
    "select_cases",
    "write_comparison",
]
