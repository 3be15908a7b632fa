"""Neighbourhoods, not points: perturbed copies of suite cases that the model gets wrong.

A must_fix case is one adversarial text; the attacks a model meets later are its neighbours:
other typos, other casing, contractions, synonyms. :func:`neighbour_cases` draws up to
``per_case`` distinct perturbations of each must_fix text with :mod:`warp_check.extras.strategies`
(:func:`~warp_check.extras.strategies.perturbations`: typos, case and punctuation,
contractions, negation-preserving rewrites, and WordNet synonyms where asked), runs the model on
them, and returns those it gets wrong as new must_fix cases with the original's label (``source``
``"neighbour"``, id ``<original id>~<k>``). With ``keep_per_case``, the must_keep cases are
perturbed too (a seeded sample of ``keep_cases`` of them, which bounds the cost on large suites):
the variants of a clean case the model gets right that it gets wrong are the attacks it would meet
on other sentences, and become must_fix cases with that case's label. On SST-2 these lifted
held-out attacks of recipes the suite never saw far more than the must_fix neighbours alone
(benchmarks/RESULTS.md). Draws are seeded: the same cases give the same neighbours.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from warp_check.cases import Case, Kind
from warp_check.extras.strategies import perturbations
from warp_check.suite.casefile import AppendResult, NewCase, append_cases
from warp_check.suite.loader import Suite
from warp_check.validation import require_integer

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter

SOURCE = "neighbour"
DRAWS_PER_NEIGHBOUR = 10  # hypothesis repeats small edits: draws allowed per distinct text wanted
# Perturbations per must_keep case, and how many must_keep cases: the setting measured best on SST-2
# (2,000 must_keep × 8); the sample keeps the cost bounded (~20 ms a draw on 2 cores).
KEEP_PER_CASE = 8
KEEP_CASES = 2000


def perturbed_texts(text: str, count: int, *, seed: int, max_edits: int = 2, synonyms: bool = False) -> list[str]:
    """Up to ``count`` distinct perturbations of ``text`` (never ``text`` itself), in draw order."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    found: list[str] = []
    if count < 1:
        return found

    @hypothesis_seed(seed)
    @settings(
        max_examples=count * DRAWS_PER_NEIGHBOUR,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(perturbations(text, max_edits, synonyms=synonyms))
    def draw(variant: str) -> None:
        if len(found) < count and variant != text and variant.strip() and variant not in found:
            found.append(variant)

    draw()
    return found


def neighbour_cases(
    adapter: ClassifierAdapter,
    cases: Sequence[Case],
    *,
    per_case: int = 8,
    keep_per_case: int = KEEP_PER_CASE,
    keep_cases: int | None = KEEP_CASES,
    max_edits: int = 2,
    synonyms: bool = False,
    seed: int = 0,
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
) -> list[Case]:
    """Perturbations of each must_fix case of ``cases`` (``per_case`` drawn) and of must_keep cases
    (``keep_per_case`` drawn for each of a seeded sample of ``keep_cases``; None: every one) that
    the model gets wrong, as must_fix cases with the original's label."""
    from warp_check.runs.pipeline import evaluate

    require_integer("per_case", per_case, 0)
    require_integer("keep_per_case", keep_per_case, 0)
    if keep_cases is not None:
        require_integer("keep_cases", keep_cases, 0)
    # Neighbours of the suite's own cases, not of earlier neighbours: a second run adds nothing.
    # A case's seed is its position within its kind (must_keep's after every must_fix one), so
    # its neighbours depend neither on whether the other kind is perturbed nor on the sample.
    own = [c for c in cases if c.source != SOURCE]
    fix = [c for c in own if c.kind is Kind.MUST_FIX]
    keep = [c for c in own if c.kind is Kind.MUST_KEEP]
    sample = range(len(keep))
    if keep_cases is not None and keep_cases < len(keep):
        sample = sorted(random.Random(seed).sample(range(len(keep)), keep_cases))
    seeded = [(seed + i, c, per_case) for i, c in enumerate(fix) if per_case]
    seeded += [(seed + len(fix) + i, keep[i], keep_per_case) for i in sample if keep_per_case]
    drawn: list[Case] = []
    for case_seed, case, draws in seeded:
        texts = perturbed_texts(case.text, draws, seed=case_seed, max_edits=max_edits, synonyms=synonyms)
        drawn += [
            Case(id=f"{case.id}~{k}", text=t, label=case.label, kind=Kind.MUST_FIX, text_pair=case.text_pair,
                 source=SOURCE)
            for k, t in enumerate(texts)
        ]  # fmt: skip
    if not drawn:
        return []
    gaps = evaluate(adapter, drawn, batch_size=batch_size, cache_dir=cache_dir, progress=False).gaps
    return [case for case, gap in zip(drawn, gaps, strict=True) if gap <= 0]


def add_neighbours(
    suite: Suite,
    adapter: ClassifierAdapter,
    out: str | Path,
    *,
    per_case: int = 8,
    keep_per_case: int = KEEP_PER_CASE,
    keep_cases: int | None = KEEP_CASES,
    synonyms: bool = False,
    seed: int = 0,
    cache_dir: str | Path | None = None,
) -> AppendResult:
    """Append the suite's neighbours (:func:`neighbour_cases`) to the JSONL file ``out``, as must_fix
    cases, atomically and deduplicated, each with the id of the case it came from in ``original``."""
    found = neighbour_cases(
        adapter,
        suite.cases,
        per_case=per_case,
        keep_per_case=keep_per_case,
        keep_cases=keep_cases,
        synonyms=synonyms,
        seed=seed,
        cache_dir=cache_dir,
    )
    new = [
        NewCase(
            id=case.id,
            text=case.text,
            text_pair=case.text_pair,
            label=suite.label_name(case.label),
            kind=Kind.MUST_FIX.value,
            source=SOURCE,
            original=case.id.rsplit("~", 1)[0],
        )
        for case in found
    ]
    return append_cases(out, new, id_prefix=SOURCE)
