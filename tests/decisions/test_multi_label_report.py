"""Several labels per text in the report and in JUnit: a table per label (decisions stated, fixed,
kept, lost, and the traffic each label turned on or off) in index.html and report.md, and a JUnit
property per constrained label of each case.

Every expected figure is computed here: the labels' logits with plain transformers
(testkit.multi_label.logits_of), the traffic's changes from the certificate's record of each
changed text (its labels before and after, as bit sets), never from the report's own tally.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from testkit.multi_label import NAMES, build_multi_label, logits_of, texts, truth
from testkit.report_runs import check_run, repair_details, repair_run
from testkit.suite_builder import write_kind_suite

from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.decisions import MULTI_LABEL, SINGLE_LABEL, MultiLabel, logit_of
from warp_check.model import blocks as model_blocks
from warp_check.reports.folder import REPORT_HTML, REPORT_JSON, REPORT_MD, read_report, write_report
from warp_check.runs.result import Outcome, PartVerdict, RunResult

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest")
THRESHOLD = logit_of(0.6)  # 'intense' is on only above probability 0.6
PARTIAL = ("praise", "complaint")  # the labels one must_keep case constrains, the others left free


# -- the kind's parts ---------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-8, 8, allow_nan=False), min_size=4, max_size=4),
    st.lists(st.sampled_from((-1, 0, 1)), min_size=4, max_size=4).filter(any),
    st.floats(-2, 2, allow_nan=False),
)
def test_a_case_s_parts_are_its_constrained_labels_and_its_margin_is_their_least(logits, signs, threshold):
    kind = MultiLabel({3: threshold})
    answer = (tuple(j for j, s in enumerate(signs) if s > 0), tuple(j for j, s in enumerate(signs) if s < 0))
    parts = kind.part_answers(logits, answer)
    assert [p.part for p in parts] == [j for j, s in enumerate(signs) if s]
    for p in parts:
        t = threshold if p.part == 3 else 0.0
        assert p.asks == ("on" if signs[p.part] > 0 else "off")
        assert p.gap == (logits[p.part] - t) * signs[p.part]
    assert min(p.gap for p in parts) == kind.answer_of(logits, answer)[1]


@given(st.lists(st.booleans(), min_size=4, max_size=4), st.lists(st.booleans(), min_size=4, max_size=4))
def test_a_change_counts_under_each_label_it_turned_on_or_off(before, after):
    was, now = np.array(before), np.array(after)
    changes = MULTI_LABEL.part_changes(was, now)
    assert {(c.part, MULTI_LABEL.change_columns[c.column]) for c in changes} == {
        (j, "turned on" if after[j] else "turned off") for j in range(4) if before[j] != after[j]
    }
    # Cert 4's tally reads the same changes (its keys are unchanged: "+label", "−label").
    assert MULTI_LABEL.change_keys(was, now, NAMES.__getitem__) == tuple(
        [f"+{NAMES[j]}" for j in range(4) if after[j] and not before[j]]
        + [f"−{NAMES[j]}" for j in range(4) if before[j] and not after[j]]
    )


def test_a_single_label_answer_is_one_decision_with_no_parts_and_no_table():
    assert SINGLE_LABEL.part_word is None and SINGLE_LABEL.part_answers([0.1, 0.9], 1) == ()


# -- a four-label BERT through a check and a repair -----------------------------------------------


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_multi_label(tmp_path_factory.mktemp("multi_label_report") / "model")


@pytest.fixture(scope="module")
def cases(model_dir) -> tuple[list[dict], list[dict]]:
    """(must_fix, must_keep): texts the model gets wrong on some label, and texts it gets all right
    with room (the first stating two labels only)."""
    batch = texts(200, seed=3)
    t = _thresholds()
    wrong, right = [], []
    for i, (text, z) in enumerate(zip(batch, logits_of(model_dir, batch), strict=True)):
        want = np.zeros(len(NAMES), dtype=bool)
        want[list(truth(text))] = True
        gap = float(np.min(np.where(want, z - t, t - z)))
        record = {"id": f"c{i}", "text": text, "labels": [NAMES[j] for j in truth(text)]}
        if gap < 0 and len(wrong) < 5:
            wrong.append(record)
        elif gap > 0.5 and len(right) < 30:
            right.append(record)
    assert len(wrong) >= 3 and len(right) >= 20, "the tiny model's margins moved: pick another seed"
    first = right[0]
    stated = {
        "on": [n for n in PARTIAL if n in first["labels"]],
        "off": [n for n in PARTIAL if n not in first["labels"]],
    }
    right[0] = {"id": first["id"], "text": first["text"]} | {k: v for k, v in stated.items() if v}
    return wrong, right


def _thresholds() -> np.ndarray:
    t = np.zeros(len(NAMES))
    t[NAMES.index("intense")] = THRESHOLD
    return t


def _asked(record: dict) -> dict[int, bool]:
    """Per constrained label id, whether the case asks it on."""
    if "labels" in record:
        return {j: NAMES[j] in record["labels"] for j in range(len(NAMES))}
    return {NAMES.index(n): True for n in record.get("on", [])} | {NAMES.index(n): False for n in record.get("off", [])}


def _gaps(logits: np.ndarray, record: dict) -> dict[str, float]:
    """Per constrained label name, its margin: the logit against its threshold, signed by what is asked."""
    t = _thresholds()
    return {NAMES[j]: float((logits[j] - t[j]) * (1 if on else -1)) for j, on in _asked(record).items()}


def _junit_parts(path: Path) -> dict[str, dict[str, str]]:
    """Per case id, its properties named ``label:…``."""
    return {
        case.get("name"): {
            p.get("name"): p.get("value") for p in case.iter("property") if p.get("name").startswith("label:")
        }
        for case in ElementTree.parse(path).iter("testcase")
    }


def _parsed_value(value: str) -> tuple[str, str, float, float | None]:
    """``on, right, gap 1.23[, gap_before -0.5]`` as (asks, right or wrong, gap, gap before)."""
    asks, said, gap, *before = value.split(", ")
    assert gap.startswith("gap ") and all(b.startswith("gap_before ") for b in before), value
    return asks, said, float(gap[4:]), float(before[0][11:]) if before else None


class _PartsTable(HTMLParser):
    """The page's table of class ``parts``: its rows of cells, the header's first."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self._inside = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._inside = dict(attrs).get("class") == "parts"
        elif self._inside and tag == "tr":
            self.rows.append([])
        elif self._inside and tag in ("td", "th"):
            self.rows[-1].append("")

    def handle_endtag(self, tag):
        if tag == "table":
            self._inside = False

    def handle_data(self, data):
        if self._inside and self.rows and self.rows[-1]:
            self.rows[-1][-1] += data


def _page_table(report: Path) -> dict[str, dict[str, int]]:
    """index.html's per-label table: per label, its figures by header."""
    table = _PartsTable()
    table.feed((report / REPORT_HTML).read_text(encoding="utf-8"))
    assert table.rows, "no per-label table in the page"
    headers, *rows = table.rows
    assert headers[0] == "label"
    return {r[0]: {h: int(c) for h, c in zip(headers[1:], r[1:], strict=True)} for r in rows}


def _markdown_table(report: Path) -> dict[str, dict[str, int]]:
    """report.md's per-label table, as :func:`_page_table` reads the page's."""
    lines = (report / REPORT_MD).read_text(encoding="utf-8").splitlines()
    start = lines.index("### Per label") + 2
    headers = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return {r[0]: {h: int(c) for h, c in zip(headers[1:], r[1:], strict=True)} for r in rows}


def _in_order(report: Path) -> None:
    """Verdict first: the table after the headline figures, before the cases."""
    page = (report / REPORT_HTML).read_text(encoding="utf-8")
    assert page.index('class="facts"') < page.index('<table class="parts">') < page.index('<table class="cases"')
    md = (report / REPORT_MD).read_text(encoding="utf-8")
    assert md.index("- status:") < md.index("### Per label") < md.index("![Gap per case]") < md.index("| case | kind |")


def test_a_check_reports_each_label_s_decisions_and_junit_a_property_per_constrained_label(pytester, model_dir, cases):
    wrong, right = cases
    write_kind_suite(pytester.path / "suite", model_dir, wrong, right, model_table="thresholds = { intense = 0.6 }\n")
    records = wrong + right
    logits = logits_of(model_dir, [r["text"] for r in records])
    checked = pytester.runpytest(*INNER, "--junitxml=check.xml", "--warp-report", "rep")
    gaps = [_gaps(z, r) for z, r in zip(logits, records, strict=True)]
    failing = sum(min(g.values()) <= 0 for g in gaps)
    checked.assert_outcomes(passed=len(records) - failing, failed=failing)

    # JUnit: a property per constrained label (the partial case's two only), its answer and its gap.
    parts = _junit_parts(pytester.path / "check.xml")
    for record, gap in zip(records, gaps, strict=True):
        properties = parts[record["id"]]
        assert set(properties) == {f"label:{name}" for name in gap}, record["id"]
        for name, value in gap.items():
            asks, said, shown, before = _parsed_value(properties[f"label:{name}"])
            assert asks == ("on" if _asked(record)[NAMES.index(name)] else "off")
            assert said == ("right" if value > 0 else "wrong") and before is None
            assert shown == pytest.approx(value, abs=1e-4)
    assert set(parts[right[0]["id"]]) == {f"label:{name}" for name in PARTIAL}
    # A check answered from what the first one recorded, the model not loaded, says the same.
    warm = pytester.runpytest(*INNER, "--junitxml=warm.xml")
    warm.stdout.fnmatch_lines(["*model not loaded*"])
    assert _junit_parts(pytester.path / "warm.xml") == parts

    # The report: per label, the decisions stated and those right now, in the page and in report.md.
    expected = {}
    for name in NAMES:
        fix = [g[name] for r, g in zip(records, gaps, strict=True) if r in wrong and name in g]
        keep = [g[name] for r, g in zip(records, gaps, strict=True) if r in right and name in g]
        expected[name] = {
            "must_fix": len(fix),
            "must_fix wrong now": sum(g <= 0 for g in fix),
            "must_keep": len(keep),
            "must_keep wrong now": sum(g <= 0 for g in keep),
        }
    report = pytester.path / "rep"
    for table in (_page_table(report), _markdown_table(report)):
        assert list(table) == list(NAMES)  # label names, never integers
        assert table == expected
    _in_order(report)
    # report.json keeps each case's parts, and reads them back.
    (run,) = read_report(report / REPORT_JSON)
    assert {p.name for p in run.verdict(right[0]["id"]).parts} == set(PARTIAL)


def test_a_repair_reports_each_label_fixed_kept_and_changed_on_traffic(pytester, model_dir, cases, monkeypatch):
    wrong, right = cases
    # internal: the cases' v is read 4,096 rows at a time; no tiny suite reaches a second block otherwise
    monkeypatch.setattr(model_blocks, "BLOCK_ROWS", 4)
    write_kind_suite(pytester.path / "suite", model_dir, wrong, right, model_table="thresholds = { intense = 0.6 }\n")
    batch = texts(150, seed=99)
    (pytester.path / "traffic.jsonl").write_text("".join(json.dumps({"text": x}) + "\n" for x in batch))
    out = pytester.path / "repaired"
    repaired = pytester.runpytest(
        *INNER, "--warp-repair", "--warp-out", str(out), "--warp-traffic", "traffic.jsonl",
        "--warp-report", "rep", "--junitxml=repair.xml",
    )  # fmt: skip
    records = wrong + right
    repaired.assert_outcomes(passed=len(records) + 1)
    texts_ = [r["text"] for r in records]
    before = [_gaps(z, r) for z, r in zip(logits_of(model_dir, texts_), records, strict=True)]
    after = [_gaps(z, r) for z, r in zip(logits_of(out, texts_), records, strict=True)]
    certificate = json.loads((out / CERTIFICATE_NAME).read_text())

    # Cert 4's changed texts, label by label, from the certificate's record of each (bit j: label j on).
    turned = {name: [0, 0] for name in NAMES}
    for change in certificate["traffic"]["changes"]:
        for j, name in enumerate(NAMES):
            was, now = change["before"] >> j & 1, change["after"] >> j & 1
            if was != now:
                turned[name][0 if now else 1] += 1
    assert {f"+{n}": on for n, (on, _) in turned.items() if on} | {
        f"−{n}": off for n, (_, off) in turned.items() if off
    } == certificate["traffic"]["by_pair"]

    expected = {}
    for name in NAMES:
        fix = [(b[name], a[name]) for r, b, a in zip(records, before, after, strict=True) if r in wrong and name in b]
        keep = [(b[name], a[name]) for r, b, a in zip(records, before, after, strict=True) if r in right and name in b]
        expected[name] = {
            "must_fix": len(fix),
            "wrong before repair": sum(b <= 0 for b, _ in fix),
            "fixed": sum(b <= 0 < a for b, a in fix),
            "must_keep": len(keep),
            "kept": sum(b > 0 and a > 0 for b, a in keep),
            "lost": sum(b > 0 >= a for b, a in keep),
            "traffic: turned on": turned[name][0],
            "traffic: turned off": turned[name][1],
        }
    assert sum(e["fixed"] for e in expected.values()) >= len(wrong)  # each must_fix case had a label to fix
    report = pytester.path / "rep"
    for table in (_page_table(report), _markdown_table(report)):
        assert table == expected
    _in_order(report)

    # JUnit: each constrained label's answer after repair, and its gap before.
    parts = _junit_parts(pytester.path / "repair.xml")
    for record, was, now in zip(records, before, after, strict=True):
        assert set(parts[record["id"]]) == {f"label:{name}" for name in now}
        for name in now:
            asks, said, gap, gap_before = _parsed_value(parts[record["id"]][f"label:{name}"])
            assert said == "right" and gap == pytest.approx(now[name], abs=1e-3)
            assert gap_before == pytest.approx(was[name], abs=1e-3)


def test_a_single_label_report_has_no_per_label_table_and_its_cases_no_parts(tmp_path):
    runs = [repair_run(4, 10), check_run(12, wrong=2)]
    write_report(tmp_path, runs)
    assert '<table class="parts">' not in (tmp_path / REPORT_HTML).read_text(encoding="utf-8")
    assert "### Per " not in (tmp_path / REPORT_MD).read_text(encoding="utf-8")
    data = json.loads((tmp_path / REPORT_JSON).read_text(encoding="utf-8"))
    assert all(
        "parts" not in case and "decision" not in run["details"] for run in data["runs"] for case in run["cases"]
    )


def test_a_case_s_parts_round_trip_through_its_run_s_json():
    part = PartVerdict(word="label", name="praise", asks="on", gap=1.5, gap_before=-0.25)
    run = repair_run(1, 1)
    run = RunResult(**{f: getattr(run, f) for f in RunResult.JSON_FIELDS} | {
        "verdicts": tuple(v.__class__(**{**v.__dict__, "parts": (part,)}) for v in run.verdicts)
    })  # fmt: skip
    again = RunResult.from_dict(json.loads(json.dumps(run.to_dict())))
    assert again.verdicts[0].parts == (part,)
    assert part.junit() == ("label:praise", "on, right, gap 1.5, gap_before -0.25")
    missing = PartVerdict(word="label", name="praise", asks="off", gap=math.nan)
    assert missing.junit() == ("label:praise", "off, unknown, gap nan")


# -- a run built by hand: lost and unfixed labels, and the page in a browser ---------------------------


def _part(name: str, asks: str, before: float, after: float) -> PartVerdict:
    return PartVerdict(word="label", name=name, asks=asks, gap=after, gap_before=before)


HAND_PARTS = {
    "fix-00000": (_part("praise", "on", -0.5, 1.2), _part("complaint", "off", 1.0, 2.0)),  # praise fixed
    "fix-00001": (_part("praise", "on", -0.3, -0.1), _part("complaint", "off", 0.7, 0.5)),  # praise still wrong
    "keep-00002": (_part("praise", "off", 1.0, 0.5), _part("complaint", "on", 0.4, -0.2)),  # complaint lost
    "keep-00003": (_part("complaint", "on", -0.1, 0.3),),  # wrong before: neither kept nor lost
}
HAND_TABLE = {
    "praise": {"must_fix": 2, "wrong before repair": 2, "fixed": 1, "must_keep": 1, "kept": 1, "lost": 0},
    "complaint": {"must_fix": 2, "wrong before repair": 0, "fixed": 0, "must_keep": 2, "kept": 0, "lost": 1},
}


def _hand_run() -> RunResult:
    run = repair_run(2, 2, failed=1)
    verdicts = tuple(dataclasses.replace(v, parts=HAND_PARTS[v.case_id]) for v in run.verdicts)
    details = repair_details(2, 2, decision=MULTI_LABEL.name)
    return dataclasses.replace(run, verdicts=verdicts, details=details)


def test_a_label_counts_as_fixed_kept_or_lost_by_its_answers_before_and_after(tmp_path):
    write_report(tmp_path, [_hand_run()])
    assert _page_table(tmp_path) == HAND_TABLE and _markdown_table(tmp_path) == HAND_TABLE
    (again,) = read_report(tmp_path / REPORT_JSON)  # a report drawn again from its report.json
    write_report(tmp_path / "again", [again])
    assert _page_table(tmp_path / "again") == HAND_TABLE


def test_the_page_s_script_leaves_the_per_label_table_and_counts_the_cases_alone(tmp_path):
    """The script filters and sorts the case table of each run; the per-label table before it in the
    same section is plain HTML that it must not take for the case table."""
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if browser is None:
        if os.environ.get("WARP_REQUIRE_BROWSER") == "1":
            pytest.fail("WARP_REQUIRE_BROWSER=1 but no headless browser (chromium) is installed")
        pytest.skip("no headless browser (chromium) installed: the page's browser test cannot run")
    write_report(tmp_path, [_hand_run()])
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=30000", "--dump-dom",
        (tmp_path / REPORT_HTML).as_uri() + "#outcome=failed",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'data-ready="true"' in done.stdout, "the page's JavaScript did not run to its end"
    assert "showing 1 of 4 cases" in done.stdout  # the failing must_keep case, of the case table's four
    (tmp_path / "dumped").mkdir()
    (tmp_path / "dumped" / REPORT_HTML).write_text(done.stdout, encoding="utf-8")
    assert _page_table(tmp_path / "dumped") == HAND_TABLE
    assert [v.reported for v in _hand_run().verdicts].count(Outcome.FAILED) == 1
