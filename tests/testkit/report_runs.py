"""Runs built by hand for the report's tests: a repair of many cases with texts, gaps and radii,
without a model (the report renders records; the records' own tests build them from models)."""

from __future__ import annotations

import dataclasses
import itertools
import random
from html.parser import HTMLParser

from warp_check.cases import Kind
from warp_check.certificates.traffic.verdicts import Bought, BudgetFit, LeftOut, Price, PriceList, TrafficNote, repaired
from warp_check.certify.certificate import Summary, TrafficChange
from warp_check.repair.settings import RepairSettings
from warp_check.reports.html import render_html
from warp_check.runs.details import CheckDetails, GsnFtNote, IterationSummary, RepairDetails
from warp_check.runs.modes import Mode, RunStatus
from warp_check.runs.result import Outcome, RunResult, TrafficVerdict, Verdict

SUITE = {"model": "/models/m", "suite_sha256": "ab" * 32}
WORDS = (
    "a charming and often affecting journey unflinchingly bleak and desperate the film is strictly routine "
    "it 's slow very slow a gorgeous witty seductive movie the acting costumes music cinematography and sound "
    "are all astounding given the production 's austere locales"
).split()


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def repair_run(
    n_fix: int, n_keep: int, *, seed: int = 0, failed: int = 0, words: int = 18, texts: dict[str, str] | None = None,
    name: str = "suite", details: RepairDetails | None = None,
) -> RunResult:  # fmt: skip
    """A converged repair of ``n_fix`` must_fix and ``n_keep`` must_keep cases; the first ``failed``
    must_keep cases fail Cert 2. ``texts``: a case's text by id, where the test wants its own."""
    rng = random.Random(seed)
    verdicts = []
    for i in range(n_fix + n_keep):
        kind = Kind.MUST_FIX if i < n_fix else Kind.MUST_KEEP
        case_id = f"{'fix' if kind is Kind.MUST_FIX else 'keep'}-{i:05d}"
        before = -rng.uniform(0.05, 3.0) if kind is Kind.MUST_FIX else rng.uniform(0.3, 5.0)
        passed = not (kind is Kind.MUST_KEEP and i - n_fix < failed)
        after = (
            (rng.uniform(1.0, 4.0) if kind is Kind.MUST_FIX else before + rng.uniform(-0.2, 0.2)) if passed else -0.4
        )
        properties = {"label": rng.choice(("negative", "positive")), "gap_before": before, "gap_after": after}
        if kind is Kind.MUST_FIX:
            properties["radius"] = rng.uniform(0.01, 0.3)
        verdicts.append(
            Verdict(
                case_id=case_id,
                kind=kind,
                passed=passed,
                message="Cert 2 fails: the label changed" if not passed else "Cert 1 holds",
                text=(texts or {}).get(case_id, sentence(rng, words)),
                properties=properties,
            )  # fmt: skip
        )
    return RunResult(
        suite="/suites/s/warp.toml", name=name, mode=Mode.REPAIR, ok=True, status=RunStatus.CONVERGED,
        message="converged", verdicts=tuple(verdicts), details=details or repair_details(n_fix, n_keep),
    )  # fmt: skip


def repair_details(n_fix: int, n_keep: int, **changes) -> RepairDetails:
    history = tuple(
        IterationSummary(
            iteration=i,
            min_gap_fix=-1.0 + 0.25 * i,
            min_gap_keep=0.5 - 0.02 * i,
            fix_met=i,
            keep_met=n_keep,
            step_norm=0.5,
            seconds=0.1,
        )  # fmt: skip
        for i in range(1, 10)
    )
    values = dict(
        SUITE, counts={Kind.MUST_FIX: n_fix, Kind.MUST_KEEP: n_keep, Kind.AUX: 0},
        head="pre_classifier → relu → classifier", encoded=n_fix + n_keep, from_cache=0, encode_seconds=0.5,
        status=RunStatus.CONVERGED, repair_message="converged", iterations=len(history), repair_seconds=1.25,
        kappa_before=0.5, kappa_after=0.75, gsn_ft=GsnFtNote(applied=False, reason="κ high enough"),
        certs=Summary(cert1=f"{n_fix}/{n_fix}", cert2=f"{n_keep}/{n_keep}", cert3=f"{n_fix}/{n_fix}"), excluded=(),
        artefact="/out/repaired", history=history, settings=RepairSettings(), gamma_s=1.0, gamma_h=0.3,
        lipschitz=6.5,
    )  # fmt: skip
    return RepairDetails(**values | changes)


def check_run(n: int, *, wrong: int, seed: int = 0, baseline: bool = False) -> RunResult:
    """A check of ``n`` must_keep cases, the first ``wrong`` answered wrong; ``baseline``: judged
    against a baseline that got the first half of those right (regressions) and the rest wrong too."""
    rng = random.Random(seed)
    verdicts = []
    for i in range(n):
        right = i >= wrong
        gap = rng.uniform(0.1, 3.0) if right else -rng.uniform(0.1, 3.0)
        properties = {"label": "positive", "predicted": "positive" if right else "negative", "gap": gap}
        verdict = Verdict(
            case_id=f"case-{i:04d}", kind=Kind.MUST_KEEP, passed=right, message="" if right else "must_keep case wrong",
            text=sentence(rng, 10), properties=properties,
        )  # fmt: skip
        if baseline:
            regression = not right and i < wrong // 2
            old = abs(gap) if right or regression else -0.5
            verdict = dataclasses.replace(
                verdict, properties=properties | {"baseline_predicted": "positive" if old > 0 else "negative",
                                                  "baseline_gap": old},
                expected_failure=None if right or regression else "the baseline gets it wrong too",
                outcome=Outcome.PASSED if right else (Outcome.FAILED if regression else Outcome.XFAILED),
            )  # fmt: skip
        verdicts.append(verdict)
    details = CheckDetails(
        **SUITE, counts={Kind.MUST_KEEP: n}, selected=n, head="h", encoded=n, from_cache=0, encode_seconds=0.1,
        model_loaded=True,
    )  # fmt: skip
    return RunResult(
        suite="/suites/s/warp.toml", name="check", mode=Mode.CHECK, ok=True, status=RunStatus.CHECKED,
        message="checked", verdicts=tuple(verdicts), details=details,
    )  # fmt: skip


def prose_texts(n_fix: int, n_keep: int, *, chars: int = 100, seed: int = 0) -> dict[str, str]:
    """Texts for :func:`repair_run`'s cases that compress no better than real reviews: words of a
    made-up vocabulary of 20,000, drawn by Zipf's law as a language's words are, about ``chars``
    characters a text (SST-2's sentences: 106 characters on average, gzip to 40% of their size)."""
    rng = random.Random(seed)
    syllables = [c + v for c in "bcdfghjklmnprstvwyz" for v in ("a", "e", "i", "o", "u", "ou", "ea")]
    vocabulary = ["".join(rng.choices(syllables, k=rng.choice((1, 2, 2, 2, 3, 3, 4)))) for _ in range(20_000)]
    cumulative = list(itertools.accumulate(1 / (rank + 30) for rank in range(len(vocabulary))))
    texts = {}
    for i in range(n_fix + n_keep):
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < chars:
            words += rng.choices(vocabulary, cum_weights=cumulative)
            if rng.random() < 0.08:
                words.append(rng.choice((",", ".")))
        texts[f"{'fix' if i < n_fix else 'keep'}-{i:05d}"] = " ".join(words)
    return texts


class Table(HTMLParser):
    """The cells of every case table's body, row by row (end tags are optional in the page), the
    page's script elements and every element it holds, in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self.scripts = 0
        self.elements: list[str] = []
        self._in_body = False

    def handle_starttag(self, tag, attrs):
        self.elements.append(tag)
        if tag == "script":
            self.scripts += 1
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            if self.rows and self.rows[-1]:  # the page's line break between rows
                self.rows[-1][-1] = self.rows[-1][-1].removesuffix("\n")
            self.rows.append([])
        elif tag == "td" and self._in_body:
            self.rows[-1].append("")

    def handle_endtag(self, tag):
        if tag == "tbody":
            self._in_body = False
            if self.rows and self.rows[-1]:
                self.rows[-1][-1] = self.rows[-1][-1].removesuffix("\n")

    def handle_data(self, data):
        if self._in_body and self.rows and self.rows[-1]:
            self.rows[-1][-1] += data


def parsed(page: str) -> Table:
    table = Table()
    table.feed(page)
    return table


def page_of(*runs: RunResult) -> str:
    """index.html of ``runs`` as the report renders it, at a fixed version and time."""
    return render_html(runs, [f"run-{i}" for i in range(len(runs))], version="1.0", created="2026-01-01T00:00:00Z")


CANNOT_BUY = tuple(LeftOut(id=f"fix-{i:05d}", where=f"must_fix.jsonl:{i + 1}", nearest=9 - i) for i in range(4))
CHANGED = (
    TrafficChange(index=3, text="a gorgeous witty seductive movie", before=1, after=0),
    TrafficChange(index=17, text="it 's slow very slow", before=0, after=1),
)


def over_budget() -> RunResult:
    """A repair that fixed its cases on weights it never wrote: over max_change on the traffic."""
    fit = BudgetFit(
        budget=0.01, confidence=0.95, left_out=CANNOT_BUY, kept=2, n=500, changed=2, bound=0.009, within=True,
        repairs=5, seconds=3.0,
    )  # fmt: skip
    note = TrafficNote(
        source="traffic.jsonl", rows=3000, duplicates=0, in_suite=0, tune=1500, no_text=0, sample_sha256="0" * 64,
        n=1500, changed=60, bound=0.049, confidence=0.95, max_change=0.01, by_pair={"positive→negative": 60},
        changes=CHANGED, seconds=2.0, labels={"negative": 0, "positive": 1}, fit=fit,
    )  # fmt: skip
    passed, words = repaired(note)
    assert not passed
    details = repair_details(6, 10, artefact=None, traffic=note)
    run = repair_run(6, 10, details=details)
    return dataclasses.replace(run, traffic=TrafficVerdict(passed=False, message=words))


PRICES = PriceList(
    n=1500, confidence=0.95, floor=1, repairs=9, seconds=4.0,
    prices=tuple(Price(id=f"fix-{i:05d}", where=f"must_fix.jsonl:{i + 1}", changed=3 + 4 * i) for i in range(6)),
    bought=(
        Bought(budget=0.01, aim=9, cases=2, changed=8, bound=0.0098),
        Bought(budget=0.02, aim=21, cases=3, changed=19, bound=0.019),
        Bought(budget=0.05, aim=60, cases=5, changed=55, bound=0.045),
        Bought(budget=0.10, aim=130, cases=6, changed=80, bound=0.063),
    ),
)  # fmt: skip


def over_budget_priced() -> RunResult:
    """:func:`over_budget` whose advice reads the price list: what 1, 2, 5 and 10 % buy."""
    run = over_budget()
    note = dataclasses.replace(run.details.traffic, fit=PRICES.fit(0.01))
    passed, words = repaired(note)
    details = dataclasses.replace(run.details, traffic=note)
    return dataclasses.replace(run, details=details, traffic=TrafficVerdict(passed=passed, message=words))
