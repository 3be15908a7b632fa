"""``warp-check neighbours``: a suite's neighbourhood written into its must_fix file.

A repair draws its neighbourhood itself (:mod:`warp_check.pipeline.neighbourhood`, the suite's
``[repair.neighbours]``). Writing the cases into the suite instead makes them reviewable cases of
their own: they are checked by every plain run, kept by later releases, and a repair then draws
nothing new for them (a variant already in the suite is never drawn again).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from warp_check.cases import NEIGHBOUR, Kind
from warp_check.pipeline.evaluation import evaluate
from warp_check.pipeline.neighbourhood import draw_neighbourhood
from warp_check.pipeline.sentence_neighbours import draw_sentence_neighbours, sentence_records
from warp_check.repair.settings import NeighbourSettings, SynonymUse
from warp_check.suite.casefile import AppendResult, NewCase, append_cases, append_sentences, writer_check
from warp_check.suite.loader import Suite

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter


@dataclass(frozen=True, kw_only=True)
class NeighboursAdded:
    """What :func:`add_neighbours` wrote, and whether its copies drew WordNet synonyms."""

    appended: AppendResult
    synonyms: SynonymUse


def add_neighbours(
    suite: Suite,
    adapter: ClassifierAdapter,
    out: str | Path,
    settings: NeighbourSettings | None = None,
    *,
    cache_dir: str | Path | None = None,
) -> NeighboursAdded:
    """Append the suite's neighbourhood (``settings``, by default the suite's ``[repair.neighbours]``;
    where those draw nothing, with the measured counts: :meth:`NeighbourSettings.drawing`) to the
    JSONL file ``out`` as must_fix cases, atomically and deduplicated, each with the id of the case
    it came from in ``original``."""
    settings = (settings or suite.repair.neighbours).drawing()
    batch_size = suite.model.batch_size
    evaluation = evaluate(adapter, suite.cases, batch_size=batch_size, cache_dir=cache_dir, progress=False)
    if suite.decision.per_word:  # a token suite's copies are sentences, every stated word's tag kept
        check = writer_check(suite, out, kind=Kind.MUST_FIX)
        words = draw_sentence_neighbours(adapter, evaluation, settings, suite.label_name, batch_size=batch_size,
                                         cache_dir=cache_dir)  # fmt: skip
        appended = append_sentences(out, sentence_records(words, suite.label_name), check=check)
        return NeighboursAdded(appended=appended, synonyms=words.synonyms)
    hood = draw_neighbourhood(adapter, evaluation, settings, batch_size=batch_size, cache_dir=cache_dir)
    new = [
        NewCase(
            id=case.id,
            text=case.text,
            text_pair=case.text_pair,
            label=suite.label_name(case.label),
            kind=Kind.MUST_FIX.value,
            source=NEIGHBOUR,
            original=case.id.rsplit("~", 1)[0],
        )
        for case in hood.cases
    ]
    appended = append_cases(out, new, id_prefix=NEIGHBOUR, check=writer_check(suite, out, kind=Kind.MUST_FIX))
    return NeighboursAdded(appended=appended, synonyms=hood.synonyms)
