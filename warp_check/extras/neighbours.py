"""Neighbourhoods, not points: perturbed copies of suite cases that the model gets wrong.

A must_fix case is one adversarial text; the attacks a model meets later are its neighbours:
other typos, other casing, contractions, synonyms. :func:`neighbour_cases` draws up to
``per_case`` distinct perturbations of each must_fix text with :mod:`warp_check.extras.strategies`
(:func:`~warp_check.extras.strategies.perturbations`: typos, case and punctuation,
contractions, negation-preserving rewrites, and WordNet synonyms where asked), runs the model on
them, and returns those it gets wrong as new must_fix cases with the original's label (``source``
``"neighbour"``, id ``<original id>~<k>``). With ``keep_per_case``, the must_keep cases are
perturbed too: the variants of a clean case the model gets right that it gets wrong are the
attacks it would meet on other sentences, and become must_fix cases with that case's label.
Draws are seeded: the same cases give the same neighbours.
"""

from __future__ import annotations

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
    keep_per_case: int = 0,
    max_edits: int = 2,
    synonyms: bool = False,
    seed: int = 0,
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
) -> list[Case]:
    """Perturbations of each must_fix case of ``cases`` (``per_case`` drawn) and of each must_keep case
    (``keep_per_case``) that the model gets wrong, as must_fix cases with the original's label."""
    from warp_check.runs.pipeline import evaluate

    require_integer("per_case", per_case, 0)
    require_integer("keep_per_case", keep_per_case, 0)
    count = {Kind.MUST_FIX: per_case, Kind.MUST_KEEP: keep_per_case}
    drawn: list[Case] = []
    # Neighbours of the suite's own cases, not of earlier neighbours: a second run adds nothing.
    # Seeds count within each kind (must_keep's after every must_fix one), so a must_fix case's
    # neighbours do not depend on whether must_keep cases are perturbed too.
    originals = [c for c in cases if count.get(c.kind, 0) and c.source != SOURCE]
    first = {Kind.MUST_FIX: 0, Kind.MUST_KEEP: sum(c.kind is Kind.MUST_FIX and c.source != SOURCE for c in cases)}
    index = dict(first)
    for case in sorted(originals, key=lambda c: c.kind is not Kind.MUST_FIX):
        texts = perturbed_texts(
            case.text, count[case.kind], seed=seed + index[case.kind], max_edits=max_edits, synonyms=synonyms
        )
        index[case.kind] += 1
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
    keep_per_case: int = 0,
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
