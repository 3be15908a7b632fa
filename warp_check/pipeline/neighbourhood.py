"""Neighbourhoods, not points: perturbed copies of a suite's cases that the model gets wrong.

A must_fix case is one adversarial text; the attacks a model meets later are its neighbours and
the neighbours of the clean texts it gets right: other typos, other casing, contractions,
synonyms. :func:`draw_neighbourhood` perturbs each must_fix case and the must_keep cases nearest
the decision boundary (:class:`~warp_check.repair.settings.NeighbourSettings`) with
:func:`~warp_check.perturb.perturbed_texts`, runs the model on the variants, and keeps
those it gets wrong as must_fix cases with the label of the case they came from (``source``
``"neighbour"``, id ``<case id>~<k>``). The repair then covers the attack's neighbourhood: on real
SST-2 this lifted held-out attacks of recipes the suite never saw far more than any setting of the
loop (benchmarks/RESULTS.md).

Draws are seeded by the case's position within its kind, so they depend neither on the other kind
nor on which must_keep cases are chosen. A variant whose input is a case's already (the suite's
own neighbours, or two texts that tokenise alike) is left out: it could only repeat or contradict
that case. Of a text pair the first text is perturbed: copies that perturbed the second too (an NLI
hypothesis, which attacks do edit) cost real RTE models 1.3-2.8 points of dev accuracy for no
held-out gain. Copies are drawn blind, so one may contradict a suite case: the repair drops those it
cannot meet (:mod:`~warp_check.pipeline.ladder`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from warp_check.cache.draws import DrawMemo
from warp_check.cases import NEIGHBOUR, Case, Kind
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.encode import input_keys
from warp_check.perturb import draw_key, drawing_code, perturbed_texts, wordnet_available
from warp_check.pipeline.evaluation import Evaluation, evaluate
from warp_check.progress import Progress, as_progress
from warp_check.repair.settings import KeepChoice, NeighbourSettings, SynonymUse

DRAWN_CACHE = "neighbourhood-draws"  # beside the representations: every variant drawn, right or wrong


@dataclass(frozen=True, kw_only=True)
class Neighbourhood:
    """What a neighbourhood draw found: the variants the model gets wrong, encoded."""

    perturbed: int  # cases perturbed (must_fix and must_keep)
    drawn: int  # distinct new variants drawn and run
    evaluation: Evaluation | None  # of the variants the model gets wrong (None: none)
    seconds: float
    dropped: tuple[str, ...] = ()  # copies a failed repair's best iterate missed, left out before it was tried again
    left_out: str | None = None  # why the repair went on without any of them (it failed with them)
    synonyms: SynonymUse = SynonymUse.OFF  # whether the copies drew WordNet synonyms

    @property
    def cases(self) -> tuple[Case, ...]:
        return self.evaluation.cases if self.evaluation is not None else ()

    def without(self, ids: set[str]) -> Neighbourhood:
        """The neighbourhood less the copies ``ids`` (recorded as dropped); None as its evaluation when
        none is left."""
        keep = [i for i, c in enumerate(self.cases) if c.id not in ids]
        gone = tuple(c.id for c in self.cases if c.id in ids)
        evaluation = self.evaluation.subset(keep) if keep else None
        return replace(self, evaluation=evaluation, dropped=self.dropped + gone)


def drawn_from(copy_id: str) -> str:
    """The case a copy was drawn from: its id is ``<case id>~<k>``, primed where that id was taken."""
    return copy_id.rstrip("'").rpartition("~")[0]


def chosen_cases(cases: Sequence[Case], gaps: np.ndarray, settings: NeighbourSettings) -> list[tuple[int, Case, int]]:
    """(seed, case, draws) for every case the settings perturb, ``gaps`` being the model's on ``cases``."""
    gap_of = {c.id: float(g) for c, g in zip(cases, gaps, strict=True)}
    # Neighbours of the suite's own cases, not of earlier neighbours: a second run adds nothing.
    own = [c for c in cases if c.source != NEIGHBOUR]
    fix = [c for c in own if c.kind is Kind.MUST_FIX]
    keep = [c for c in own if c.kind is Kind.MUST_KEEP]
    # A must_keep case the model gets wrong is left out of the repair: its variants would be too.
    right = [i for i, c in enumerate(keep) if gap_of[c.id] > 0]
    sample = right
    if settings.keep_cases is not None and settings.keep_cases < len(right):
        if settings.keep_choice is KeepChoice.NEAREST:
            sample = sorted(sorted(right, key=lambda i: (gap_of[keep[i].id], i))[: settings.keep_cases])
        else:
            sample = sorted(random.Random(settings.seed).sample(right, settings.keep_cases))
    seed = settings.seed
    chosen = [(seed + i, c, settings.per_case) for i, c in enumerate(fix) if settings.per_case]
    chosen += [(seed + len(fix) + i, keep[i], settings.keep_per_case) for i in sample if settings.keep_per_case]
    return chosen


def synonym_use(settings: NeighbourSettings) -> SynonymUse:
    """Whether a draw with ``settings`` uses WordNet synonyms here: ``synonyms = "auto"`` (None) uses
    them where nltk and its WordNet data are installed."""
    if settings.synonyms is None:
        return SynonymUse.USED if wordnet_available() else SynonymUse.NOT_INSTALLED
    return SynonymUse.USED if settings.synonyms else SynonymUse.OFF


def draw_neighbourhood(
    adapter: ClassifierAdapter,
    evaluation: Evaluation,
    settings: NeighbourSettings,
    *,
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = False,
) -> Neighbourhood:
    """The variants of ``evaluation``'s cases the model gets wrong, as must_fix cases (see the module)."""
    progress = as_progress(progress)
    start = time.perf_counter()
    chosen = chosen_cases(evaluation.cases, evaluation.gaps, settings) if settings.enabled else []
    ids = {c.id for c in evaluation.cases}
    drawn: list[Case] = []
    use = synonym_use(settings) if chosen else SynonymUse.OFF
    synonyms = use is SynonymUse.USED
    memo = DrawMemo(cache_dir, drawing_code(synonyms)) if chosen else DrawMemo(None, "")
    with progress.step("drawing neighbours", total=len(chosen)) as step:
        for case_seed, case, count in chosen:
            how = {"seed": case_seed, "max_edits": settings.max_edits, "synonyms": synonyms}
            key = draw_key(case.text, count, **how)
            texts = memo.get(key)
            if texts is None:
                texts = perturbed_texts(case.text, count, **how)
                memo.put(key, texts)
            for k, text in enumerate(texts):
                ident = f"{case.id}~{k}"
                while ident in ids:  # the suite has a case of that id already (a neighbour of other settings)
                    ident += "'"
                ids.add(ident)
                drawn.append(
                    Case(id=ident, text=text, label=case.label, kind=Kind.MUST_FIX, text_pair=case.text_pair,
                         source=NEIGHBOUR)
                )  # fmt: skip
            step.advance(1)
    memo.save()
    # A variant the model sees as one of the cases (or of the variants) already could only repeat or
    # contradict it, and one it sees as no text cannot be run: neither is encoded, so what is
    # encoded does not depend on what a cache holds (the v of a batch depends on its company).
    known = set(evaluation.encoded.input_keys)
    fresh = []
    for case, key in zip(drawn, input_keys(adapter, drawn), strict=True):
        if key is not None and key not in known:
            known.add(key)
            fresh.append(case)
    found = None
    if fresh:
        # Which variants are wrong is read from one pass over them all (cached apart); those kept are
        # then encoded on their own, as an audit of the certificate encodes them: a v carries its
        # batch's rounding, and a repair that grew the weights ×100 turns 1e-6 into a missed margin.
        drawn_cache = Path(cache_dir) / DRAWN_CACHE if cache_dir is not None else None
        variants = evaluate(adapter, fresh, batch_size=batch_size, cache_dir=drawn_cache, progress=progress)
        wrong = [fresh[i] for i in np.flatnonzero(variants.gaps <= 0)]
        if wrong:
            alone = evaluate(adapter, wrong, batch_size=batch_size, cache_dir=cache_dir, progress=progress)
            still = np.flatnonzero(alone.gaps <= 0)  # the same answers, to the last bit or two
            found = alone.subset(still) if still.size else None
    return Neighbourhood(
        perturbed=len(chosen),
        drawn=len(fresh),
        evaluation=found,
        seconds=time.perf_counter() - start,
        synonyms=use,
    )
