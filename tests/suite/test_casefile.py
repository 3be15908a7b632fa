"""warp_check.casefile: generated cases appended to a suite's JSONL, deduplicated, atomically."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warp_check.errors import SuiteError
from warp_check.suite.casefile import NewCase, append_cases, case_id


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().split(b"\n") if line.strip()]


def test_creates_the_file_with_stable_content_ids(tmp_path):
    target = tmp_path / "sub" / "found.jsonl"
    cases = [
        NewCase(text="graet food", label="positive", source="DeepWordBugGao2018", original="k1"),
        NewCase(text="a premise", text_pair="a hypothesis", label=1, source="pwws"),
    ]
    result = append_cases(target, cases, id_prefix="DeepWordBugGao2018")
    got = records(target)
    assert [r["id"] for r in got] == list(result.added)
    assert got[0] == {
        "id": case_id("DeepWordBugGao2018", "graet food"),
        "text": "graet food",
        "label": "positive",
        "source": "DeepWordBugGao2018",
        "original": "k1",
    }
    assert got[1]["text_pair"] == "a hypothesis" and got[1]["label"] == 1 and "original" not in got[1]
    # The id depends on the text only: another run (another process) finds the same id.
    assert case_id("DeepWordBugGao2018", "graet food") == result.added[0]
    assert case_id("x", "a premise", "a hypothesis") != case_id("x", "a premise", None)


def test_second_run_adds_nothing_and_keeps_the_file_byte_identical(tmp_path):
    target = tmp_path / "found.jsonl"
    cases = [NewCase(text=f"text {i}", label="negative") for i in range(5)]
    append_cases(target, cases, id_prefix="p")
    before = target.read_bytes()
    again = append_cases(target, cases + [cases[0]], id_prefix="p")
    assert again.added == () and again.duplicates == 6
    assert target.read_bytes() == before


def test_dedupes_against_hand_written_lines_and_keeps_them_byte_for_byte(tmp_path):
    target = tmp_path / "must_fix.jsonl"
    hand = '{"id": "mine",   "text": "graet food", "label": "positive"}\n\n{"id": "m2", "text": "x", "label": 0}'
    target.write_text(hand, encoding="utf-8")  # no trailing newline, odd spacing, a blank line
    result = append_cases(
        target,
        [NewCase(text="graet food", label="positive"), NewCase(text="new one", label="negative")],
        id_prefix="p",
    )
    assert result.duplicates == 1 and len(result.added) == 1
    text = target.read_text(encoding="utf-8")
    assert text.startswith(hand + "\n")
    assert json.loads(text.splitlines()[-1])["text"] == "new one"


def test_a_malformed_existing_line_is_named_and_the_file_untouched(tmp_path):
    target = tmp_path / "must_fix.jsonl"
    target.write_text('{"id": "a", "text": "t", "label": 0}\n{"id": oops}\n', encoding="utf-8")
    before = target.read_bytes()
    with pytest.raises(SuiteError) as info:
        append_cases(target, [NewCase(text="new", label=0)], id_prefix="p")
    assert info.value.line == 2 and str(target) in str(info.value)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["must_fix.jsonl"]  # no temp file, no lock litter


def test_keeps_an_existing_files_mode_and_new_files_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.jsonl"
        append_cases(fresh, [NewCase(text="a", label=0)], id_prefix="p")
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
        kept = tmp_path / "kept.jsonl"
        kept.write_text("", encoding="utf-8")
        kept.chmod(0o600)
        append_cases(kept, [NewCase(text="a", label=0)], id_prefix="p")
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_the_written_file_loads_as_must_fix_cases_of_a_suite(tmp_path, distilbert_dir):
    from testkit.suite_builder import write_suite

    from warp_check.suite.loader import load_suite

    keep = [{"id": "k", "text": "good", "label": "positive"}]
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, keep=keep)
    append_cases(folder / "fix.jsonl", [NewCase(text="goood", label="positive", original="k")], id_prefix="typo")
    with (folder / "warp.toml").open("a", encoding="utf-8") as handle:
        handle.write('\n[[cases]]\npath = "fix.jsonl"\nkind = "must_fix"\n')
    suite = load_suite(folder)
    fix = [c for c in suite.cases if c.kind == "must_fix"]
    assert [(c.text, c.id) for c in fix] == [("goood", case_id("typo", "goood"))]


def _append_many(args: tuple[str, int]) -> None:
    path, worker = args
    for i in range(20):
        append_cases(path, [NewCase(text=f"w{worker}-{i}", label=0), NewCase(text="shared", label=0)], id_prefix="p")


def test_concurrent_writers_lose_no_line(tmp_path):
    target = tmp_path / "found.jsonl"
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        pool.map(_append_many, [(str(target), w) for w in range(3)])
    texts = [r["text"] for r in records(target)]
    assert sorted(texts) == sorted([f"w{w}-{i}" for w in range(3) for i in range(20)] + ["shared"])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(min_size=1).filter(str.strip) | st.just("a\u2028b"), min_size=1, max_size=8))
def test_any_texts_round_trip_exactly_once(tmp_path_factory, texts):
    target = tmp_path_factory.mktemp("rt") / "found.jsonl"
    append_cases(target, [NewCase(text=t, label=0) for t in texts], id_prefix="hyp")
    append_cases(target, [NewCase(text=t, label=0) for t in texts], id_prefix="hyp")
    got = [r["text"] for r in records(target)]
    assert got == list(dict.fromkeys(texts))
