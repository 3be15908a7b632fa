"""A thread count above the cores is capped at them, with one notice, wherever it was given.

The cores are pinned (``available_cores`` patched to 2), so the numbers hold on any machine.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
import torch
from testkit.suite_builder import record_encoder_batches

from warp_check import ClassifierAdapter, WarpWarning
from warp_check.cli import main
from warp_check.model import threads

CORES = 2


@pytest.fixture
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(CORES)), raising=False)


def test_a_thread_count_above_the_cores_takes_the_cores_and_says_so(two_cores):
    with pytest.warns(WarpWarning) as caught:
        assert threads.capped_threads(10_000) == CORES
    assert [str(w.message) for w in caught] == ["threads 10000 > 2 cores: using 2"]


@pytest.mark.parametrize("count", [1, CORES])
def test_a_thread_count_within_the_cores_is_taken_as_given_without_a_notice(two_cores, count):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert threads.capped_threads(count) == count
        with threads.torch_threads(count) as used:
            assert used == count == torch.get_num_threads()


def test_an_adapter_caps_its_threads_once_and_its_copies_keep_them_quietly(two_cores, distilbert_dir):
    with pytest.warns(WarpWarning, match=r"^threads 64 > 2 cores: using 2$") as caught:
        adapter = ClassifierAdapter.from_pretrained(distilbert_dir, threads=64)
    assert len(caught) == 1 and adapter.threads == CORES
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        copy = adapter.with_spec(adapter.spec)
    assert copy.threads == CORES
    assert ClassifierAdapter.from_pretrained(distilbert_dir).threads is None  # None: the default, not a count


def test_the_cli_encodes_on_the_cores_and_says_once_on_stderr_why(two_cores, tiny_suite: Path, monkeypatch, capsys):
    seen = record_encoder_batches(monkeypatch)
    main(["check", str(tiny_suite), "--threads", "10000", "--batch-size", "2", "--cache", "none", "-q"])
    err = capsys.readouterr().err
    assert err.count("threads 10000") == 1
    assert "warp-check: warning: threads 10000 > 2 cores: using 2\n" in err
    assert max(t for _, t, _ in seen) == CORES  # the batches encoded on the cores, not on 10000 threads


def test_the_cli_says_nothing_of_a_thread_count_within_the_cores(two_cores, tiny_suite: Path, capsys):
    main(["check", str(tiny_suite), "--threads", "2", "--cache", "none", "-q"])
    assert "threads" not in capsys.readouterr().err
