"""How the plugin walks suite folders: a suite met again through a symlink is collected once, and
a symlink back into a folder being walked is not followed. Also the thread cap's one notice.

In-process with pytester on a tiny DistilBERT (3 cases per suite: fast to collect and run).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from testkit.inner_runs import warm_inner_runs
from testkit.suite_builder import record_encoder_batches, split_cases, write_suite

from pytest_warp.plugin import is_symlink_loop

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest")

needs_symlinks = pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="needs directory symlinks")


@pytest.fixture(scope="module", autouse=True)
def _warm_imports(distilbert_dir: Path) -> None:
    warm_inner_runs(distilbert_dir)


@pytest.fixture(scope="module")
def cases(distilbert_dir: Path) -> tuple[list[dict], list[dict]]:
    """(must_fix, must_keep): one case the tiny model gets wrong, two it gets right."""
    wrong, right = split_cases(distilbert_dir, 24, seed=2)
    return wrong[:1], right[:2]


@pytest.fixture
def suite(pytester: pytest.Pytester, distilbert_dir: Path, cases) -> Path:
    wrong, right = cases
    return write_suite(pytester.path / "suite", model=distilbert_dir, fix=wrong, keep=right)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*INNER, "--warp-cache", "none", *args)


def case_ids(cases) -> list[str]:
    wrong, right = cases
    return [case["id"] for case in wrong + right]


@needs_symlinks
@pytest.mark.parametrize("link, target", [("suite/loop", "."), ("suite/inner/up", "../.."), ("loop", ".")])
def test_a_symlink_back_into_the_walked_folders_collects_each_case_once(pytester, suite, cases, link, target):
    (pytester.path / link).parent.mkdir(exist_ok=True)
    os.symlink(target, pytester.path / link)
    wrong, right = cases
    result = run(pytester, "-v")
    result.assert_outcomes(passed=len(right), failed=len(wrong))
    assert "in the suite)" not in result.stdout.str()  # no "(of 2 in the suite)": each case counted once
    assert len(result.stdout.lines) < 60


@needs_symlinks
def test_a_symlink_to_a_sibling_suite_folder_collects_that_suite_once(pytester, suite, cases):
    os.symlink("suite", pytester.path / "alias")
    wrong, right = cases
    run(pytester).assert_outcomes(passed=len(right), failed=len(wrong))
    listed = run(pytester, "--collect-only", "-q").stdout.lines
    assert sum("warp.toml::" in line for line in listed) == len(wrong) + len(right)


@needs_symlinks
def test_a_suite_given_through_its_link_or_case_by_case_is_still_collected(pytester, suite, cases):
    os.symlink("suite", pytester.path / "alias")
    wrong, right = cases
    run(pytester, "alias").assert_outcomes(passed=len(right), failed=len(wrong))
    first, second = case_ids(cases)[-2:]  # two must_keep cases, named one node id each
    run(pytester, f"suite/warp.toml::{first}", f"suite/warp.toml::{second}").assert_outcomes(passed=2)


@needs_symlinks
def test_a_loop_is_a_symlink_to_a_folder_above_it_through_any_links(tmp_path: Path):
    for folder in ("a", "c", "d"):
        (tmp_path / folder).mkdir()
    os.symlink("../c", tmp_path / "a" / "b")  # a/b -> c and c/e -> a: a/b/e is a again
    os.symlink("../a", tmp_path / "c" / "e")
    os.symlink("../d", tmp_path / "a" / "sibling")
    assert is_symlink_loop(tmp_path / "a" / "b" / "e")
    assert not is_symlink_loop(tmp_path / "a" / "b")
    assert not is_symlink_loop(tmp_path / "a" / "sibling")
    assert not is_symlink_loop(tmp_path / "a")


def test_threads_above_the_cores_run_on_the_cores_with_one_notice_in_the_summary(pytester, suite, cases, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)  # a two-core machine
    seen = record_encoder_batches(monkeypatch)
    wrong, right = cases
    result = run(pytester, "--warp-threads", "10000", "--warp-batch-size", "1", "-W", "error")
    result.assert_outcomes(passed=len(right), failed=len(wrong))
    assert result.stdout.str().count("threads 10000") == 1
    result.stdout.fnmatch_lines(["=*= warp-check =*=", "*", "  warning: threads 10000 > 2 cores: using 2"])
    assert max(t for _, t, _ in seen) == 2


def test_threads_within_the_cores_run_as_given_without_a_notice(pytester, suite, cases, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)  # a two-core machine
    seen = record_encoder_batches(monkeypatch)
    wrong, right = cases
    result = run(pytester, "--warp-threads", "2", "--warp-batch-size", "1")
    result.assert_outcomes(passed=len(right), failed=len(wrong))
    assert "warning:" not in result.stdout.str()
    assert max(t for _, t, _ in seen) == 2
