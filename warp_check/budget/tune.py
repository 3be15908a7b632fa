"""``warp-check tune``: the strongest repair whose change on the traffic stays within a budget.

Every lever measured so far moves a repair along one curve of attacks fixed against predictions
changed (issue 41); the tuner walks a small, fixed grid of them (:func:`candidates`) and estimates,
for each, both ends of that trade on data no repair of the estimate saw:

- **Fix rate of unseen cases.** The must_fix cases are split into ``folds`` folds (sorted by the
  SHA-256 of their ids, dealt in turn: deterministic, disjoint, balanced). Each fold is repaired
  without it (its cases and the neighbourhood copies drawn from them are left out) and scored: the
  share of the fold's cases, and of copies drawn from them (:data:`SCORING_COPIES` a case, the model
  getting them wrong), that the repaired head gets right (gap > 0), summed over the folds.
- **Change bound.** Measured on the traffic's *tune* part only (the bound part is Cert 4's: the
  choice must not spend it). Its texts are dealt into the same number of folds; fold f's texts are
  measured on the repair that left out must_fix fold f, and guards (below) come from the other
  folds' texts, so every text is measured once, by a repair that never kept it. The count of
  changed predictions gives the same Clopper–Pearson bound as Cert 4.
- **Guards** are the tune part's texts joined as must_keep cases labelled by the model's own
  prediction where its margin is at least γ_h (the ``import --predicted`` rule); a text the model
  sees as a suite case, or as a copy, is not a guard.

A token classifier (a tag per word) is tuned on the same terms with its traffic counted as Cert 4
counts it: each text a row per word, a text changed where any word's tag changed, and the bound over
the **sentences** (its kind's ``traffic_count``); folds deal sentences, whole, never their words
apart, and a guard is a word tagged by at least γ_h. Its candidates draw no neighbourhood (none is
built for token suites), so scoring copies and the copies levers are left out.

The choice: the highest estimated fix rate among candidates whose every fold converged and whose
bound is within the budget; ties go to the smaller bound, then the fewer levers moved, then the
grid's order. Nothing is encoded twice: the suite, the copies (drawn once per neighbourhood setting,
from the draw cache) and the traffic are encoded once and every repair runs on the head alone
(the repair ladder without the final-layer fallback, which would encode again).
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from warp_check.cases import Case, Kind
from warp_check.certificates.traffic.sample import TrafficSample, TrafficText
from warp_check.certify.binomial import change_bound
from warp_check.decisions import SINGLE_LABEL, DecisionKind
from warp_check.decisions.token_tags import words_of
from warp_check.errors import SettingsError, SuiteError
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.encode import input_keys
from warp_check.model.head import DenseHead
from warp_check.pipeline.evaluation import Evaluation, evaluate
from warp_check.pipeline.ladder import Ladder, climb
from warp_check.pipeline.neighbourhood import Neighbourhood, draw_neighbourhood, drawn_from
from warp_check.progress import Progress, as_progress
from warp_check.repair.linearise import gaps
from warp_check.repair.settings import NeighbourSettings, RepairSettings
from warp_check.suite.casefile import NewCase, append_cases, append_sentences, writer_check
from warp_check.suite.loader import Suite
from warp_check.suite.toml_lines import TomlEdit, edited_toml, rewrite_toml, writable_toml
from warp_check.validation import require_integer, require_number

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_FOLDS = 3
# Copies of each held-out must_fix case scored with it: the attacks' neighbourhood, drawn once and
# alike for every candidate (a candidate's own copies would make the estimates incomparable).
SCORING_COPIES = 8
GUARDS_FILE = "traffic_guards.jsonl"  # where --write puts the guards the choice joined
GUARD_SOURCE = "prediction:traffic"
WRITE_HINT = "make it writable (chmod u+w) for --write, or tune without --write"


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One point of the grid: the suite's settings with some levers moved."""

    name: str
    gamma_s: float
    mu: float
    per_case: int  # neighbourhood copies a must_fix case
    keep_per_case: int  # and a perturbed must_keep case
    guards: bool  # the tune part's texts joined as must_keep cases labelled by the model
    levers: int  # how many levers differ from the suite's settings (simpler first on a tie)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise SettingsError("name", self.name, "must be a non-empty string")
        require_number("gamma_s", self.gamma_s)
        require_number("mu", self.mu, allow_zero=True)
        for name in ("per_case", "keep_per_case", "levers"):
            require_integer(name, getattr(self, name), 0)
        if not isinstance(self.guards, bool):
            raise SettingsError("guards", self.guards, "must be true or false")

    def settings(self, base: RepairSettings) -> RepairSettings:
        """``base`` with this candidate's levers."""
        hood = replace(base.neighbours, per_case=self.per_case, keep_per_case=self.keep_per_case)
        return replace(base, gamma_s=self.gamma_s, mu=self.mu, neighbours=hood)


@dataclass(frozen=True, kw_only=True)
class CandidateScore:
    """A candidate's estimates, summed over the folds."""

    candidate: Candidate
    fixed: int  # held-out must_fix cases and their copies the repairs got right
    scored: int  # held-out must_fix cases and copies scored
    changed: int  # tune-part texts whose prediction (a token classifier: any word's tag) the fold's repair changed
    measured: int  # tune-part texts measured (a token classifier: sentences)
    bound: float  # Clopper–Pearson upper bound on the change rate (1.0 where nothing was measured)
    confidence: float
    guards: int  # guards joined (the most in any fold; 0 without them)
    seconds: float
    failed: str | None = None  # a fold whose repair did not converge: the candidate cannot be chosen

    @property
    def fix_rate(self) -> float:
        return self.fixed / self.scored if self.scored else 0.0

    def within(self, budget: float | None) -> bool:
        return self.failed is None and (budget is None or self.bound <= budget)

    def as_json(self, budget: float | None) -> dict[str, Any]:
        """The score as ``warp-check tune --json`` writes it (the budget benchmark's results too)."""
        c = self.candidate
        return {
            "name": c.name,
            "gamma_s": c.gamma_s,
            "mu": c.mu,
            "per_case": c.per_case,
            "keep_per_case": c.keep_per_case,
            "guards": c.guards,
            "guards_joined": self.guards,
            "fix_rate": self.fix_rate,
            "fixed": self.fixed,
            "scored": self.scored,
            "changed": self.changed,
            "measured": self.measured,
            "bound": self.bound,
            "within_budget": self.within(budget),
            "failed": self.failed,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True, kw_only=True)
class TuneResult:
    """The grid's scores and the choice (None: no candidate converged within the budget)."""

    scores: tuple[CandidateScore, ...]
    chosen: CandidateScore | None
    budget: float | None
    folds: int
    base: RepairSettings
    must_fix: int
    tune_texts: int  # tune-part texts measured
    guard_pool: tuple[Case, ...]  # tune-part texts predicted by at least γ_h, labelled so (a guards choice joins them)
    seconds: float
    decision: DecisionKind = SINGLE_LABEL  # the suite's kind: what the counts are of (a token classifier: sentences)

    def at_budget(self, budget: float | None) -> TuneResult:
        """The same table chosen from at another budget: the scores do not depend on it, only the choice."""
        return replace(self, chosen=choose(self.scores, budget), budget=budget)

    @property
    def settings(self) -> RepairSettings | None:
        """The repair settings of the choice."""
        return self.chosen.candidate.settings(self.base) if self.chosen else None

    @property
    def message(self) -> str:
        kind = self.decision
        if self.chosen is not None:
            c = self.chosen
            changes = kind.changes_share.format(share=f"{c.bound:.3%}")
            return (
                f"chosen: '{c.candidate.name}': fixes an estimated {c.fix_rate:.1%} of unseen must_fix "
                f"{kind.row_nouns} ({c.fixed} of {c.scored}), {changes} on the tune part "
                f"({c.changed} of {c.measured} {kind.text_nouns}, {c.confidence:.0%})"
            )
        converged = [s for s in self.scores if s.failed is None]
        if not converged:
            return "no candidate's repair converged in every fold: see the table's notes"
        least = min(converged, key=lambda s: (s.bound, s.candidate.levers))
        head = (
            f"no candidate keeps within max_change = {self.budget:.3%}: the least-changing, "
            f"'{least.candidate.name}', is bounded by {least.bound:.3%} ({least.changed} of {least.measured} "
            f"{kind.text_nouns} changed); "
        )
        if least.changed / max(least.measured, 1) >= self.budget:
            # More traffic only tightens the bound toward the share observed, already past the budget.
            return head + (
                f"the share of {kind.text_nouns} it changes, {least.changed / least.measured:.3%}, is itself past "
                f"the budget, so more traffic cannot help: a larger max_change, or fewer must_fix {kind.case_nouns} "
                "(a repair's change grows with what it must fix; `warp-check repair` with this max_change names the "
                "ones it cannot buy)"
            )
        return head + "try more traffic (the bound tightens as the sample grows) or a larger max_change"

    def counted(self) -> dict[str, str]:
        """What each count of the table is of, in the kind's words (``warp-check tune --json``)."""
        kind = self.decision
        return {"must_fix": kind.case_nouns, "scored": kind.row_nouns, "measured": kind.text_nouns,
                "guards": kind.row_nouns}  # fmt: skip


def candidates(base: RepairSettings) -> tuple[Candidate, ...]:
    """The grid, in its fixed order: five settings of the loop, each without and with guards.

    The suite's own settings; μ ×10 (a dearer move of kept inputs; 100 where μ is 0); γ_s halved
    (looser fixes); the neighbourhood at half its measured counts (4 copies a must_fix case, 8 a
    must_keep one) and at them (8 / 16). Candidates that equal an earlier one are left out.
    """
    hood = base.neighbours
    levels = (
        ("suite's settings", base.gamma_s, base.mu, hood.per_case, hood.keep_per_case),
        ("mu x10", base.gamma_s, base.mu * 10 if base.mu > 0 else 100.0, hood.per_case, hood.keep_per_case),
        ("gamma_s / 2", base.gamma_s / 2, base.mu, hood.per_case, hood.keep_per_case),
        ("copies 4/8", base.gamma_s, base.mu, 4, 8),
        ("copies 8/16", base.gamma_s, base.mu, 8, 16),
    )
    grid: list[Candidate] = []
    seen: set[tuple] = set()
    for guards in (False, True):
        for name, gamma_s, mu, per_case, keep_per_case in levels:
            key = (gamma_s, mu, per_case, keep_per_case, guards)
            if key in seen:
                continue
            seen.add(key)
            moved = (
                (gamma_s != base.gamma_s)
                + (mu != base.mu)
                + ((per_case, keep_per_case) != (hood.per_case, hood.keep_per_case))
                + guards
            )
            label = f"{name} + guards" if guards else name
            grid.append(Candidate(name=label, gamma_s=gamma_s, mu=mu, per_case=per_case,
                                  keep_per_case=keep_per_case, guards=guards, levers=int(moved)))  # fmt: skip
    return tuple(grid)


def fold_of(ids: Sequence[str], folds: int) -> dict[str, int]:
    """Each id's fold: the ids sorted by their SHA-256, dealt in turn (deterministic, disjoint, balanced)."""
    ordered = sorted(ids, key=lambda i: (hashlib.sha256(i.encode("utf-8")).hexdigest(), i))
    return {ident: n % folds for n, ident in enumerate(ordered)}


def case_folds(ids: Sequence[str], decision: DecisionKind, folds: int) -> dict[str, int]:
    """Each must_fix row's fold: its case's (a token classifier's sentence: its words go together)."""
    groups = fold_of(sorted({decision.group(i) for i in ids}), folds)
    return {ident: groups[decision.group(ident)] for ident in ids}


@dataclass(frozen=True)
class _Traffic:
    """The tune part as the model takes it: each text once, its fold, v, and the model's label."""

    texts: tuple[TrafficText, ...]
    evaluation: Evaluation | None  # labels = the model's predictions (None: no text measurable)
    folds: np.ndarray  # fold of each row (a text, or a word of one)
    guard: np.ndarray  # bool: predicted by at least γ_h and no suite case's or copy's input
    draw_of: np.ndarray  # per row, the index of its text in ``texts``


@dataclass(frozen=True)
class _Fixed:
    """What every candidate shares: the suite, the held-out scoring copies, the traffic."""

    adapter: ClassifierAdapter
    evaluation: Evaluation
    fold: dict[str, int]
    scoring: Evaluation | None  # copies of must_fix cases scored with their fold (None: none)
    traffic: _Traffic
    base: RepairSettings
    batch_size: int
    cache_dir: str | Path | None


def tune(
    suite: Suite,
    adapter: ClassifierAdapter,
    traffic: TrafficSample,
    *,
    folds: int = DEFAULT_FOLDS,
    max_change: float | None = None,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = False,
    grid: Sequence[Candidate] | None = None,
) -> TuneResult:
    """Score every candidate of ``grid`` (default :func:`candidates`) by k-fold over the must_fix cases
    and choose within ``max_change`` (default the traffic's budget; None: no budget)."""
    started = time.perf_counter()
    check_folds(suite, folds)
    budget = max_change if max_change is not None else traffic.max_change
    base = suite.settings()
    cases = list(suite.cases)
    fix_ids = [c.id for c in cases if c.kind is Kind.MUST_FIX]
    per_word = adapter.decision.per_word
    # A token classifier's candidates draw no neighbourhood: none is built for its sentences yet.
    if grid is None:
        grid = [c for c in candidates(base) if not (per_word and _draws_copies(c))]
    grid = tuple(grid)
    drawing = [c.name for c in grid if _draws_copies(c)]
    if per_word and drawing:
        why = "draws a neighbourhood, which is not built for a token classifier yet: per_case and keep_per_case 0"
        raise SettingsError("grid", drawing[0], why)
    batch = suite.model.batch_size
    evaluation = evaluate(adapter, cases, batch_size=batch, cache_dir=cache_dir, progress=progress)
    fixed = _Fixed(
        adapter=adapter,
        evaluation=evaluation,
        fold=case_folds(fix_ids, adapter.decision, folds),
        scoring=None,
        traffic=_no_traffic(),
        base=base,
        batch_size=batch,
        cache_dir=cache_dir,
    )
    if not per_word:  # no neighbourhood is drawn of a token classifier's sentences
        copies = NeighbourSettings(per_case=SCORING_COPIES, keep_per_case=0, seed=base.neighbours.seed)
        fixed = replace(fixed, scoring=_draw(fixed, copies).evaluation)
    fixed = replace(fixed, traffic=_tune_part(fixed, traffic, folds))
    if not fixed.traffic.texts:
        why = (
            f"no text of the traffic's tune part is left to bound a candidate's changes on ({len(traffic.tune):,} "
            "in it, each a suite case's input or no text to the model): give more traffic texts"
        )
        raise SuiteError(why, path=traffic.source, field="traffic.path")
    hoods: dict[NeighbourSettings, Neighbourhood | None] = {}
    scores = []
    with as_progress(progress).step("tuning: candidates scored", total=len(grid), unit="candidate") as step:
        for candidate in grid:
            score = _score(fixed, candidate, folds, traffic.confidence, hoods)
            scores.append(score)
            failed = f" ({score.failed})" if score.failed else ""
            step.advance(note=f"{candidate.name}: fix {score.fix_rate:.1%}, bound {score.bound:.2%}{failed}")
    return TuneResult(
        scores=tuple(scores),
        chosen=choose(scores, budget),
        budget=budget,
        folds=folds,
        base=base,
        must_fix=len({adapter.decision.group(i) for i in fix_ids}),
        tune_texts=len(fixed.traffic.texts),
        guard_pool=_guard_pool(fixed.traffic),
        seconds=time.perf_counter() - started,
        decision=adapter.decision,
    )


def choose(scores: Sequence[CandidateScore], budget: float | None) -> CandidateScore | None:
    """The choice among ``scores`` (in the grid's order): the highest estimated fix rate among the
    candidates converged in every fold and bounded within ``budget``; ties to the smaller bound, the
    fewer levers moved, the grid's order. None where none is eligible."""
    order = {id(s): n for n, s in enumerate(scores)}
    eligible = [s for s in scores if s.within(budget)]
    return min(eligible, key=lambda s: (-s.fix_rate, s.bound, s.candidate.levers, order[id(s)]), default=None)


def _draws_copies(candidate: Candidate) -> bool:
    return candidate.per_case > 0 or candidate.keep_per_case > 0


def check_folds(suite: Suite, folds: int) -> int:
    """``folds`` where the suite's must_fix cases can fill them (each fold holds at least one); a
    SettingsError saying the most it can be otherwise. Returns the count of must_fix cases."""
    require_folds(folds)
    fix = len({suite.decision.group(c.id) for c in suite.cases if c.kind is Kind.MUST_FIX})
    if fix < 2:
        raise SettingsError(
            "folds", folds, f"the suite has {fix} must_fix case(s): tune needs at least 2 (one a fold, 2 folds at "
            "least); add must_fix cases (warp-check import, neighbours or attack)"
        )  # fmt: skip
    if folds > fix:
        raise SettingsError(
            "folds", folds, f"at most {fix}: the suite has {fix} must_fix cases and each fold holds at least one"
        )
    return fix


def check_tune(suite: Suite, *, folds: int, write: bool) -> None:
    """What would refuse a tune of ``suite`` or its write, found before minutes of repairs: a
    SettingsError for ``folds`` the must_fix cases cannot fill, a SuiteError for a warp.toml that
    ``write`` could not rewrite."""
    check_folds(suite, folds)
    if write:
        writable_toml(suite.toml, hint=WRITE_HINT)


def _lists(text: str, root: Path, path: Path) -> bool:
    """Whether the warp.toml ``text`` has a ``[[cases]]`` table for ``path`` (read relative to ``root``)."""
    try:
        tables = tomllib.loads(text).get("cases")
    except ValueError:
        return False
    return isinstance(tables, list) and any(
        isinstance(t, dict) and isinstance(t.get("path"), str) and (root / t["path"]).resolve() == path.resolve()
        for t in tables
    )


def require_folds(folds: int) -> None:
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise SettingsError("folds", folds, "must be an integer >= 2 (each fold is repaired without it)")


def _draw(fixed: _Fixed, settings: NeighbourSettings) -> Neighbourhood:
    return draw_neighbourhood(
        fixed.adapter, fixed.evaluation, settings, batch_size=fixed.batch_size, cache_dir=fixed.cache_dir
    )


def _no_traffic() -> _Traffic:
    return _Traffic((), None, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64))


def _tune_part(fixed: _Fixed, sample: TrafficSample, folds: int) -> _Traffic:
    """The tune part's texts the model can take, once each (by input), none a suite case's input; a
    kind deciding per word takes each text as its rows, and a text whole or not at all."""
    adapter, base = fixed.adapter, fixed.base
    decision = adapter.decision
    unstated = decision.unstated(adapter.num_classes)
    named = [f"guard-{t.key[:16]}" for t in sample.tune]
    split = decision.traffic_rows([(name, t.text) for name, t in zip(named, sample.tune, strict=True)])
    if split is None:
        probes = [replace(text.case(i), label=unstated) for i, text in enumerate(sample.tune)]
        ids, draw_of = named, list(range(len(probes)))
    else:
        probes = [
            Case(id=r.id, text=r.text, label=unstated, kind=Kind.MUST_KEEP, origin=sample.tune[r.draw].where)
            for r in split
        ]
        ids, draw_of = [r.id for r in split], [r.draw for r in split]
    keys = input_keys(adapter, probes)
    taken = set(fixed.evaluation.encoded.input_keys or input_keys(adapter, fixed.evaluation.cases))
    rows_of: dict[int, list[int]] = {}
    for row, draw in enumerate(draw_of):
        rows_of.setdefault(draw, []).append(row)
    drawn, rows = [], []
    for draw, own in rows_of.items():
        own_keys = {keys[r] for r in own}
        if None not in own_keys and not own_keys & taken:
            taken |= own_keys
            drawn.append(draw)
            rows += own
    texts = tuple(sample.tune[i] for i in drawn)
    if not rows:
        return _no_traffic()
    measured = evaluate(adapter, [probes[i] for i in rows], batch_size=fixed.batch_size, cache_dir=fixed.cache_dir,
                        progress=False)  # fmt: skip
    decision = adapter.head().decision
    predicted, margin = decision.prediction_margins(measured.logits)
    labelled = tuple(
        Case(id=ids[r], text=probes[r].text, text_pair=probes[r].text_pair,
             label=decision.answer_of_prediction(label, adapter.num_classes), kind=Kind.MUST_KEEP,
             source=GUARD_SOURCE, origin=probes[r].origin)
        for r, label in zip(rows, predicted, strict=True)
    )  # fmt: skip
    evaluation = Evaluation(
        labelled,
        replace(measured.encoded, ids=tuple(c.id for c in labelled)),
        predicted,
        margin,
        measured.logits,
        measured.seconds,
    )
    scoring_keys = set(fixed.scoring.encoded.input_keys) if fixed.scoring is not None else set()
    inputs = measured.encoded.input_keys or tuple(keys[i] for i in rows)
    guard = np.array([m >= base.gamma_h and k not in scoring_keys for m, k in zip(margin, inputs, strict=True)])
    place = {draw: at for at, draw in enumerate(drawn)}
    row_draws = np.asarray([place[draw_of[r]] for r in rows], dtype=np.int64)
    return _Traffic(texts, evaluation, row_draws % folds, guard, row_draws)


def _score(
    fixed: _Fixed,
    candidate: Candidate,
    folds: int,
    confidence: float,
    hoods: dict[NeighbourSettings, Neighbourhood | None],
) -> CandidateScore:
    started = time.perf_counter()
    settings = candidate.settings(fixed.base)
    hood = None
    if settings.neighbours.enabled:
        if settings.neighbours not in hoods:
            hoods[settings.neighbours] = _draw(fixed, settings.neighbours)
        hood = hoods[settings.neighbours]
    fixed_count = scored = changed = measured = most_guards = 0
    failed = None
    for f in range(folds):
        repair = fold_repair(fixed, settings, hood, candidate.guards, f)
        most_guards = max(most_guards, repair.guards)
        if not repair.converged:
            failed = f"fold {f + 1} did not converge: {repair.message}"
            continue
        V, labels = _held_out(fixed, f)
        fixed_count += int(np.sum(gaps(repair.head_after, V, labels) > 0))
        scored += len(labels)
        traffic = fixed.traffic
        if traffic.evaluation is not None:
            rows = np.flatnonzero(traffic.folds == f)
            Vt = traffic.evaluation.encoded.V[rows].astype(np.float64)
            after = repair.head_after
            moved = np.flatnonzero(after.decision.changed(repair.head_before.predict(Vt), after.predict(Vt)))
            # Cert 4's count: a text changed where any of its rows did (a token classifier: a sentence).
            changed += after.decision.traffic_count(moved, traffic.draw_of[rows]).draws_changed
            measured += len(np.unique(traffic.draw_of[rows]))
    bound = change_bound(changed, measured, confidence) if measured else 1.0
    return CandidateScore(
        candidate=candidate,
        fixed=fixed_count,
        scored=scored,
        changed=changed,
        measured=measured,
        bound=bound,
        confidence=confidence,
        guards=most_guards,
        seconds=time.perf_counter() - started,
        failed=failed,
    )


@dataclass(frozen=True)
class FoldRepair:
    """One fold's repair: the head before and after, and what it was given."""

    head_before: DenseHead
    head_after: DenseHead
    converged: bool
    message: str
    guards: int


def fold_repair(
    fixed: _Fixed, settings: RepairSettings, hood: Neighbourhood | None, guards: bool, fold: int
) -> FoldRepair:
    """The suite repaired without must_fix fold ``fold`` and the copies drawn from it (with guards:
    the tune part's guards outside traffic fold ``fold``)."""
    evaluation = fixed.evaluation
    rows = [i for i, c in enumerate(evaluation.cases) if c.kind is not Kind.MUST_FIX or fixed.fold[c.id] != fold]
    train = evaluation.subset(rows)
    joined = 0
    traffic = fixed.traffic
    if guards and traffic.evaluation is not None:
        copy_keys = set(hood.evaluation.encoded.input_keys) if hood is not None and hood.evaluation else set()
        keys = traffic.evaluation.encoded.input_keys
        chosen = [
            i for i in np.flatnonzero(traffic.guard & (traffic.folds != fold)).tolist()
            if not keys or keys[i] not in copy_keys
        ]  # fmt: skip
        if chosen:
            train = train.joined(traffic.evaluation.subset(chosen))
            joined = len(chosen)
    if hood is not None and hood.evaluation is not None:
        # The fold's copies, and any copy that is an input the fold is scored on, stay unseen.
        held = _scoring_keys(fixed, fold)
        keys = hood.evaluation.encoded.input_keys or (None,) * len(hood.cases)
        away = {
            c.id
            for c, key in zip(hood.cases, keys, strict=True)
            if fixed.fold.get(drawn_from(c.id), -1) == fold or key in held
        }
        hood = replace(hood.without(away), dropped=()) if away else hood
    ladder = Ladder(
        adapter=fixed.adapter,
        evaluation=train,
        settings=settings,
        hood=hood,
        fallback=False,  # the final linear layer would be encoded again, for every fold
        batch_size=fixed.batch_size,
        cache_dir=fixed.cache_dir,
        progress=False,
    )
    ended = climb(ladder)
    return FoldRepair(
        head_before=ended.attempt.head,
        head_after=ended.attempt.result.head_after,
        converged=ended.result.repaired,
        message=ended.result.message,
        guards=joined,
    )


def _scoring_keys(fixed: _Fixed, fold: int) -> set[str]:
    """The inputs of the scoring copies of must_fix fold ``fold``."""
    scoring = fixed.scoring
    if scoring is None or not scoring.encoded.input_keys:
        return set()
    keys = scoring.encoded.input_keys
    return {keys[i] for i, c in enumerate(scoring.cases) if fixed.fold.get(drawn_from(c.id), -1) == fold}


def _held_out(fixed: _Fixed, fold: int) -> tuple[np.ndarray, np.ndarray]:
    """v and labels of must_fix fold ``fold`` and its scoring copies."""
    evaluation = fixed.evaluation
    rows = [i for i, c in enumerate(evaluation.cases) if c.kind is Kind.MUST_FIX and fixed.fold[c.id] == fold]
    V = [evaluation.encoded.V[rows]]
    labels = [evaluation.answers([evaluation.cases[i] for i in rows])]
    if fixed.scoring is not None:
        copies = [i for i, c in enumerate(fixed.scoring.cases) if fixed.fold.get(drawn_from(c.id), -1) == fold]
        V.append(fixed.scoring.encoded.V[copies])
        labels.append(fixed.scoring.answers([fixed.scoring.cases[i] for i in copies]))
    return np.concatenate(V).astype(np.float64), np.concatenate(labels)


def _guard_pool(traffic: _Traffic) -> tuple[Case, ...]:
    if traffic.evaluation is None:
        return ()
    return tuple(c for c, ok in zip(traffic.evaluation.cases, traffic.guard, strict=True) if ok)


def write_choice(suite: Suite, result: TuneResult) -> tuple[Path, Path | None]:
    """The choice into the suite: its [repair] keys edited in warp.toml (comments kept, written
    atomically) and, where it joins guards, the guards appended to :data:`GUARDS_FILE` (listed as a
    must_keep file if the suite does not list it). Returns warp.toml and the guards file (None: none)."""
    if result.chosen is None:
        raise SettingsError("chosen", None, "no candidate was chosen: nothing to write")
    candidate = result.chosen.candidate
    base = result.base
    # Only what the choice moves: a key the suite leaves at its default stays unwritten.
    edits = [
        TomlEdit(table=table, key=key, value=value)
        for table, key, value, was in (
            ("repair", "gamma_s", candidate.gamma_s, base.gamma_s),
            ("repair", "mu", candidate.mu, base.mu),
            ("repair.neighbours", "per_case", candidate.per_case, base.neighbours.per_case),
            ("repair.neighbours", "keep_per_case", candidate.keep_per_case, base.neighbours.keep_per_case),
        )
        if value != was
    ]
    guards_path = suite.root / GUARDS_FILE if candidate.guards else None
    # Listed already: by the suite as loaded, or by a writer that finished while this one waited.
    listed = guards_path is not None and any(f.path.resolve() == guards_path.resolve() for f in suite.case_files)

    def change(text: str) -> str:
        add = guards_path is not None and not (listed or _lists(text, suite.root, guards_path))
        try:
            edited = edited_toml(text, edits, cases=(GUARDS_FILE, "must_keep") if add else None)
        except ValueError as exc:
            raise SuiteError(str(exc), path=suite.toml) from None
        if guards_path is not None:  # only once warp.toml's new text is known good: a refusal appends nothing
            check = writer_check(suite, guards_path, kind=Kind.MUST_KEEP)
            if suite.decision.per_word:
                append_sentences(guards_path, _guard_sentences(suite, result.guard_pool), check=check)
            else:
                guards = [
                    NewCase(text=c.text, text_pair=c.text_pair, label=suite.label_name(c.label), source=c.source,
                            kind=Kind.MUST_KEEP.value)
                    for c in result.guard_pool
                ]  # fmt: skip
                append_cases(guards_path, guards, id_prefix="guard", check=check)
        return edited

    rewrite_toml(suite.toml, change, hint=WRITE_HINT)
    return suite.toml, guards_path


def _guard_sentences(suite: Suite, guards: Sequence[Case]) -> list[dict[str, Any]]:
    """A token classifier's guards (word rows) as the sentences a case file states: each word a guard
    tagged as the model tags it, the others free (null)."""
    sentences: dict[str, tuple[tuple[str, ...], dict[int, int]]] = {}
    for guard in guards:
        words, word = words_of(guard.text)
        sentences.setdefault(suite.decision.group(guard.id), (words, {}))[1][word] = int(guard.label)
    return [
        {"id": sentence, "tokens": list(words),
         "tags": [suite.label_name(tags[w]) if w in tags else None for w in range(len(words))], "source": GUARD_SOURCE}
        for sentence, (words, tags) in sentences.items()
    ]  # fmt: skip


__all__ = [
    "DEFAULT_FOLDS", "GUARDS_FILE", "SCORING_COPIES", "WRITE_HINT", "Candidate", "CandidateScore", "FoldRepair",
    "TuneResult", "candidates", "case_folds", "check_folds", "check_tune", "fold_of", "fold_repair", "tune",
    "write_choice",
]  # fmt: skip
