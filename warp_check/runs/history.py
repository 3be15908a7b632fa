"""A release chain checked with a suite: which of its cases each model of the chain gets right,
what each link lost and gained against the model before it, and the drawdown since the first model
reached (the cases it got right that the newest gets wrong). The suite's deferred cases count as its other cases
do: a case moved out of must_fix because a budget could not buy it is still a case the chain can lose.

A certificate vouches for the cases it certifies; a model without one (fine-tuned elsewhere) is
vouched for by nothing, so every model of the chain is checked with the suite's cases
(:func:`~warp_check.runs.check.check_suite`, answered from the cache where it can be).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from warp_check.cases import Kind
from warp_check.certificates.chain import ChainVerification
from warp_check.runs.check import check_suite
from warp_check.suite.loader import load_suite


@dataclass(frozen=True, kw_only=True)
class LinkAnswers:
    """One model of the chain on the suite: the cases it gets right, and against the model before it
    (older), those it lost and those it gained (empty for the first model)."""

    model_dir: Path
    checked: int
    right: frozenset[str]
    lost: tuple[str, ...] = ()
    gained: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Drawdown:
    """The chain on the suite, newest model first: each link's answers, and the cases the first model
    reached got right (``right_first``) that the newest gets wrong (``lost``)."""

    links: tuple[LinkAnswers, ...]
    right_first: int
    lost: tuple[str, ...]
    deferred: frozenset[str] = frozenset()  # the suite's deferred cases (checked with the rest)

    @property
    def lost_deferred(self) -> tuple[str, ...]:
        """The cases of ``lost`` the suite defers."""
        return tuple(c for c in self.lost if c in self.deferred)


def chain_drawdown(
    suite_path: str | Path, chain: ChainVerification, *, cache_dir: str | Path | None = None
) -> Drawdown:
    """Every model of ``chain`` checked with the suite at ``suite_path`` (its must_fix, must_keep and deferred
    cases)."""
    answers = []
    deferred: set[str] = set()
    for link in chain.links:
        verdicts = check_suite(load_suite(suite_path, model=link.model_dir), cache_dir=cache_dir).verdicts
        deferred |= {v.case_id for v in verdicts if v.kind is Kind.DEFERRED}
        answers.append((link.model_dir, [v.case_id for v in verdicts], {v.case_id for v in verdicts if v.passed}))
    links = []
    for i, (model_dir, ids, right) in enumerate(answers):
        older = answers[i + 1][2] if i + 1 < len(answers) else None
        lost = tuple(c for c in ids if older is not None and c in older and c not in right)
        gained = tuple(c for c in ids if older is not None and c not in older and c in right)
        links.append(
            LinkAnswers(model_dir=model_dir, checked=len(ids), right=frozenset(right), lost=lost, gained=gained)
        )
    first_ids, first_right = answers[-1][1], answers[-1][2]
    newest = answers[0][2]
    return Drawdown(
        links=tuple(links),
        right_first=len(first_right),
        lost=tuple(c for c in first_ids if c in first_right and c not in newest),
        deferred=frozenset(deferred),
    )


__all__ = ["Drawdown", "LinkAnswers", "chain_drawdown"]
