"""A case written twice is one requirement: encoded once, constrained once, and every copy still gets
its own verdict, gaps and certificate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from testkit.suite_builder import split_cases, write_suite
from testkit.synthetic import synthetic_problem

import warp_check as wc
from warp_check.model.encode import encode_cases
from warp_check.repair.loop import repair_head
from warp_check.repair.records import CaseSet, RepairStatus
from warp_check.repair.settings import RepairSettings

pytest_plugins = ["pytester"]


def with_copies(cases: CaseSet, copies: list[int], prefix: str) -> CaseSet:
    """``cases`` then a copy of each row in ``copies`` (same v and label, another id)."""
    rows = list(range(len(cases))) + copies
    ids = cases.ids + tuple(f"{prefix}{n}-of-{cases.ids[i]}" for n, i in enumerate(copies))
    return CaseSet(ids, cases.V[rows], cases.labels[rows])


def test_merged_keeps_first_seen_rows_and_names_each_copys_case():
    V = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    cases = CaseSet(("a", "b", "c", "d", "e"), V, np.array([0, 1, 0, 1, 1]))
    merged, copies = cases.merged()
    # d has a's representation but another label: a different requirement, not a copy.
    assert merged.ids == ("a", "b", "d")
    assert copies == {"c": "a", "e": "b"}
    assert np.array_equal(merged.V, V[[0, 1, 3]]) and merged.labels.tolist() == [0, 1, 1]
    alone, none = merged.merged()
    assert alone is merged and none == {}


def test_merged_tells_rows_apart_by_a_single_ulp():
    v = np.array([0.1, 0.2, 0.3])
    nudged = v.copy()
    nudged[1] = np.nextafter(nudged[1], 1.0)
    merged, copies = CaseSet(("a", "b"), np.stack([v, nudged]), np.array([0, 0])).merged()
    assert len(merged) == 2 and copies == {}


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 3),
    fix_copies=st.lists(st.integers(0, 5), max_size=6),
    keep_copies=st.lists(st.integers(0, 39), max_size=12),
)
def test_a_repair_with_copies_is_the_repair_without_them(seed, fix_copies, keep_copies):
    head, fix, keep = synthetic_problem(d=16, n_fix=6, n_keep=40, seed=seed)
    settings = RepairSettings(max_iter=40)
    plain = repair_head(head, fix, keep, settings=settings)
    copied = repair_head(
        head, with_copies(fix, fix_copies, "fixcopy"), with_copies(keep, keep_copies, "keepcopy"), settings=settings
    )
    assert copied.status is plain.status
    assert np.array_equal(copied.head_after.W, plain.head_after.W)  # the same QPs: not a row more
    assert copied.merged == len(fix_copies) + len(keep_copies)
    assert [r.qp_rows for r in copied.iterations] == [r.qp_rows for r in plain.iterations]
    # Every copy speaks as its case does.
    for original, rows, prefix in ((fix, fix_copies, "fixcopy"), (keep, keep_copies, "keepcopy")):
        for copy_id, row in zip(with_copies(original, rows, prefix).ids[len(original) :], rows, strict=True):
            case = original.ids[row]
            assert copied.gaps_before[copy_id] == plain.gaps_before[case]
            assert copied.gaps_after[copy_id] == plain.gaps_after[case]
            if original is fix:
                assert copied.kappa_before[copy_id] == plain.kappa_before[case]
    # Counts count the suite's cases: a merged row counts for each case behind it.
    last, last_plain = copied.iterations[-1], plain.iterations[-1]
    assert last.fix_met + last.keep_met >= last_plain.fix_met + last_plain.keep_met
    if copied.status is RepairStatus.CONVERGED:
        assert (last.fix_met, last.keep_met) == (len(fix) + len(fix_copies), len(keep) + len(keep_copies))
    missed = {m.id for m in plain.misses}
    assert {m.id for m in copied.misses} == missed | {
        i for i in copied.gaps_before if "copy" in i and i.partition("-of-")[2] in missed
    }


def test_a_must_keep_case_wrong_before_repair_is_left_out_with_its_copies():
    head, fix, keep = synthetic_problem(d=16, n_fix=4, n_keep=20, seed=1)
    flipped = keep.labels.copy()
    flipped[3] = 1 - flipped[3]  # the model now gets keep3 wrong
    wrong = CaseSet(keep.ids, keep.V, flipped)
    result = repair_head(head, fix, with_copies(wrong, [3, 3, 5], "again"), settings=RepairSettings(max_iter=40))
    assert set(result.excluded_keep) == {"keep3", "again0-of-keep3", "again1-of-keep3"}
    assert result.merged == 3


def test_identical_inputs_are_encoded_once_and_share_their_v(distilbert_dir: Path, tmp_path: Path):
    clf = wc.ClassifierAdapter.from_pretrained(distilbert_dir)
    texts = ["a fine film", "a dull film", "a fine film", "a fine film", "A dull film"]
    cases = [wc.Case(id=f"c{i}", text=t, label=0, kind=wc.Kind.MUST_KEEP) for i, t in enumerate(texts)]
    encoded = encode_cases(clf, cases, progress=False)
    # The tiny model's tokenizer lowercases: "A dull film" is "a dull film" to it.
    lowercases = clf.tokenize(["A"], [None])[0]["input_ids"] == clf.tokenize(["a"], [None])[0]["input_ids"]
    distinct = 2 if lowercases else 3
    assert (encoded.encoded, encoded.from_cache, encoded.identical) == (distinct, 0, len(texts) - distinct)
    assert np.array_equal(encoded.V[0], encoded.V[2]) and np.array_equal(encoded.V[0], encoded.V[3])
    alone = encode_cases(clf, cases[:1], progress=False)
    # A copy's v is the v its text has on its own: alone it is another batch, a product of another row
    # count, which some CPUs' MKL kernels sum in another order (float32 ulps); shared copies above are bits.
    np.testing.assert_allclose(alone.V[0], encoded.V[2], rtol=1e-5, atol=1e-5)
    cached = encode_cases(clf, cases, progress=False, cache_dir=tmp_path / "cache")
    again = encode_cases(clf, cases, progress=False, cache_dir=tmp_path / "cache")
    assert (again.encoded, again.from_cache, again.identical) == (0, distinct, len(texts) - distinct)
    assert np.array_equal(again.V, cached.V)


@pytest.fixture(scope="module")
def split(distilbert_dir: Path) -> tuple[list[dict], list[dict]]:
    return split_cases(distilbert_dir, 24, seed=2)


def copies_of(records: list[dict], times: int, tag: str) -> list[dict]:
    return [dict(r, id=f"{r.get('id', n)}-{tag}{k}") for k in range(times) for n, r in enumerate(records)]


def test_a_suite_that_lists_cases_twice_repairs_to_the_same_weights_with_a_verdict_for_every_line(
    tmp_path: Path, distilbert_dir: Path, split
):
    wrong, right = split
    for n, r in enumerate(wrong + right):
        r.setdefault("id", f"case{n}")
    once = write_suite(tmp_path / "once", model=distilbert_dir, fix=wrong, keep=right)
    twice = write_suite(
        tmp_path / "twice",
        model=distilbert_dir,
        fix=wrong + copies_of(wrong, 2, "again"),
        keep=right + copies_of(right, 3, "again"),
    )
    outcomes = {}
    for folder in (once, twice):
        suite = wc.load_suite(folder)
        out = tmp_path / f"{folder.name}-repaired"
        outcomes[folder.name] = wc.repair_suite(suite, wc.load_adapter(suite), suite.settings(), out_dir=out)
        assert outcomes[folder.name].passed, outcomes[folder.name].message
    result = outcomes["twice"]
    assert len(result.verdicts) == 3 * len(wrong) + 4 * len(right)
    assert all(v.passed for v in result.verdicts)
    assert result.details.identical == result.details.merged == 2 * len(wrong) + 3 * len(right)
    assert (tmp_path / "once-repaired" / "model.safetensors").read_bytes() == (
        tmp_path / "twice-repaired" / "model.safetensors"
    ).read_bytes()
    certified = json.loads((tmp_path / "twice-repaired" / "warp_certificate.json").read_text())["cases"]
    assert len(certified) == len(result.verdicts)
    assert wc.verify(tmp_path / "twice-repaired").ok  # every line's certificate, recomputed from the saved files


def test_the_summary_says_how_many_lines_were_merged(pytester: pytest.Pytester, distilbert_dir: Path, split):
    wrong, right = split
    keep = [dict(right[0], id=f"same{k}") for k in range(40)]
    write_suite(pytester.path / "suite", model=distilbert_dir, fix=wrong[:1], keep=keep)
    result = pytester.runpytest("-p", "no:randomly", "--warp-repair", "--warp-out", str(pytester.path / "out"))
    result.assert_outcomes(passed=41)
    result.stdout.fnmatch_lines(
        [
            "  encoder: 2 case(s) encoded, 0 from the cache, 39 identical to an earlier case (encoded once)*",
            "  39 case(s) identical to another (same input and label) merged: each constrained once",
        ]
    )
