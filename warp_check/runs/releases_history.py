"""Release after release: each model of a line of releases (a certificate chain, or folders given in
order) checked with one suite, and compared with the release before it as ``warp-check diff`` compares
two: the cases it lost (regressions) and gained (fixes), the paired test on them, and, with traffic,
Cert 4 between the two (the share of the traffic's predictions it changes, bounded exactly, held to
``max_change``).

Each model is loaded once and encodes each traffic text once (through the representation cache: a
second history encodes nothing); its answers serve both comparisons it is part of. A model whose labels
are not the first's is refused naming it (:func:`~warp_check.releases.baseline_folder.suite_on_baseline`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warp_check.certificates.chain import walk
from warp_check.certificates.traffic.between import (
    ReleaseAnswers,
    TrafficRows,
    changes_between,
    release_answers,
    traffic_rows,
)
from warp_check.certify.certificate import change_sentence, percent
from warp_check.errors import SettingsError
from warp_check.progress import Progress
from warp_check.releases.baseline_folder import suite_on_baseline
from warp_check.releases.load import load_adapter
from warp_check.runs.check import check, check_warm, warm_entry
from warp_check.runs.paired import PairedTest, paired_test
from warp_check.serial import Record, on_disk, to_json
from warp_check.suite.loader import Suite, load_suite

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.certificates.traffic.sample import TrafficSample


@dataclass(frozen=True, kw_only=True)
class TrafficBound(Record):
    """Cert 4 of a release against the one before it: ``changed`` of ``n`` traffic texts (sentences, for
    a token tagger) changed prediction, ``bound`` the exact one-sided bound on the share at ``confidence``."""

    n: int
    changed: int
    bound: float
    confidence: float
    max_change: float | None = field(default=None, metadata=on_disk(omit_none=True))
    by_pair: dict[str, int] = field(default_factory=dict)
    words: int | None = field(default=None, metadata=on_disk(omit_none=True))
    words_changed: int | None = field(default=None, metadata=on_disk(omit_none=True))
    encoded: int = 0  # this release's traffic texts encoded now (the rest came from the cache)

    @property
    def within_budget(self) -> bool:
        return self.max_change is None or self.bound <= self.max_change

    def sentence(self) -> str:
        words = None if self.words is None else (self.words_changed or 0, self.words)
        budget = ""
        if self.max_change is not None:
            budget = f"; {'within' if self.within_budget else 'OVER'} max_change = {percent(self.max_change)}"
        return change_sentence(self.bound, self.changed, self.n, self.confidence, words=words) + budget


@dataclass(frozen=True, kw_only=True)
class ReleaseStep(Record):
    """One release on the suite, and against the release before it (None for the first)."""

    model_dir: Path
    checked: int  # suite cases it answered
    right: int
    regressions: tuple[str, ...] = ()  # right on the release before, wrong on this one
    fixes: tuple[str, ...] = ()  # wrong on the release before, right on this one
    paired_test: PairedTest | None = field(default=None, metadata=on_disk(omit_none=True))
    traffic: TrafficBound | None = field(default=None, metadata=on_disk(omit_none=True))

    @property
    def pass_share(self) -> float:
        return self.right / self.checked if self.checked else 0.0

    @property
    def passed(self) -> bool:
        """Within the paired test's gate and the traffic budget (where given) against the release before."""
        return (self.paired_test is None or self.paired_test.passed) and (
            self.traffic is None or self.traffic.within_budget
        )


@dataclass(frozen=True, kw_only=True)
class ReleaseHistory(Record):
    """The releases, oldest first, on the suite at ``suite`` (and the traffic file, where measured)."""

    suite: str
    releases: tuple[ReleaseStep, ...]
    traffic: str | None = field(default=None, metadata=on_disk(omit_none=True))

    @property
    def passed(self) -> bool:
        return all(step.passed for step in self.releases)

    def to_dict(self) -> dict[str, Any]:
        """Its JSON (``history --json``, history.json)."""
        return to_json(self, null_nonfinite=True)

    def verdict(self) -> str:
        """The history's verdict in one sentence: passed, or which releases fail which gate."""
        failing = [(i, step) for i, step in enumerate(self.releases, 1) if not step.passed]
        if not failing:
            return f"PASSED: {len(self.releases)} release(s), each within its gates against the one before"
        said = []
        for i, step in failing:
            why = []
            if step.paired_test is not None and not step.paired_test.passed:
                why.append(
                    f"the paired test gives p = {step.paired_test.p_worse:.3g} that it is worse, below worse_p = "
                    f"{step.paired_test.worse_p:g}"
                )
            if step.traffic is not None and not step.traffic.within_budget:
                assert step.traffic.max_change is not None
                why.append(
                    f"Cert 4's bound {percent(step.traffic.bound)} is over max_change = "
                    f"{percent(step.traffic.max_change)}"
                )
            said.append(f"release {i} ({step.model_dir.name}): {' and '.join(why)}")
        return "FAILED: " + "; ".join(said)


def chain_models(model_dir: str | Path, *, came_from: Sequence[str | Path] = ()) -> tuple[Path, ...]:
    """The models of the certificate chain ending at ``model_dir``, oldest first (each certificate names
    its parent; past a model without one, the baseline its child's certificate names, or ``came_from``)."""
    return tuple(step.model_dir for step in reversed(walk(model_dir, came_from=came_from)))


def release_history(
    suite_path: str | Path,
    model_dirs: Sequence[str | Path],
    *,
    traffic: TrafficSample | None = None,
    worse_p: float | None = None,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = False,
    compute: Mapping[str, Any] | None = None,
) -> ReleaseHistory:
    """Each of ``model_dirs`` (oldest first) checked with the suite at ``suite_path`` and compared with the
    one before it: regressions, fixes, the paired test (gating at ``worse_p``), and Cert 4 on ``traffic``."""
    if len(model_dirs) < 1:
        raise SettingsError("models", list(model_dirs), "a history needs at least one model folder")
    first = load_suite(suite_path, model=model_dirs[0]).with_compute(**(compute or {}))
    rows = traffic_rows(traffic, first.decision) if traffic is not None else None
    steps: list[ReleaseStep] = []
    before: tuple[dict[str, bool], ReleaseAnswers | None] | None = None
    # Every release's labels checked against the first's before any model loads.
    suites = [first, *(suite_on_baseline(first, model_dir, compute) for model_dir in model_dirs[1:])]
    for model_dir, suite in zip(model_dirs, suites, strict=True):
        answers, on_traffic = _release(suite, rows, cache_dir=cache_dir, progress=progress)
        step = ReleaseStep(model_dir=Path(model_dir), checked=len(answers), right=sum(answers.values()))
        if before is not None:
            step = _against(step, answers, before[0], worse_p=worse_p)
            if rows is not None and traffic is not None and before[1] is not None and on_traffic is not None:
                changes = changes_between(before[1], on_traffic, rows, traffic, decision=first.decision,
                                          label_name=_label_name(first))  # fmt: skip
                record = changes.record
                bound = TrafficBound(
                    n=record.n, changed=record.changed, bound=record.bound, confidence=record.confidence,
                    max_change=record.max_change, by_pair=dict(record.by_pair), words=record.words,
                    words_changed=record.words_changed, encoded=on_traffic.encoding.encoded,
                )  # fmt: skip
                step = dataclasses.replace(step, traffic=bound)
        steps.append(step)
        before = (answers, on_traffic)
    return ReleaseHistory(
        suite=str(first.toml), releases=tuple(steps), traffic=None if traffic is None else traffic.source
    )


def _release(
    suite: Suite, rows: TrafficRows | None, *, cache_dir: str | Path | None, progress: bool | Progress
) -> tuple[dict[str, bool], ReleaseAnswers | None]:
    """The suite's answers (case id → right) of the suite's model, and its answers on the traffic's rows:
    the model loaded once, only where the cache cannot answer the suite alone or traffic is measured."""
    recalled = None if rows is not None else check_warm(suite, warm_entry(suite, cache_dir), cache_dir=cache_dir)
    if recalled is not None:
        return {v.case_id: v.passed for v in recalled.verdicts}, None
    adapter = load_adapter(suite)
    checked = check(suite, adapter, cache_dir=cache_dir, progress=progress)
    on_traffic = None
    if rows is not None:
        on_traffic = release_answers(
            adapter, rows, batch_size=suite.model.batch_size, cache_dir=cache_dir, progress=progress
        )
    return {v.case_id: v.passed for v in checked.verdicts}, on_traffic


def _label_name(suite: Suite) -> Callable[[int], str]:
    names = {index: name for name, index in suite.labels.items()}
    return lambda label: names.get(int(label), str(label))


def _against(step: ReleaseStep, now: dict[str, bool], then: dict[str, bool], *, worse_p: float | None) -> ReleaseStep:
    """``step`` with what it lost and gained against the release before it, and the paired test on them."""
    both = [case for case in now if case in then]
    return dataclasses.replace(
        step,
        regressions=tuple(c for c in both if then[c] and not now[c]),
        fixes=tuple(c for c in both if now[c] and not then[c]),
        paired_test=paired_test([(then[c], now[c]) for c in both], worse_p=worse_p),
    )


__all__ = ["ReleaseHistory", "ReleaseStep", "TrafficBound", "chain_models", "release_history"]
