"""Warm checks (warp_check.cache.warm) and the file-digest memo behind them (warp_check.cache.fingerprint).

A check answered from the cache must say exactly what a check that loads the model says, and
anything that could change the answer — a byte of the model folder, the suite's layer or
max_length, a library version, a case the cache has not seen — must send it back to the model.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from testkit.suite_builder import write_suite

from warp_check.cache import fingerprint, warm
from warp_check.cache.fingerprint import FileDigests, folder_sha256
from warp_check.decisions import SINGLE_LABEL
from warp_check.releases.load import load_adapter
from warp_check.runs import check as check_run
from warp_check.suite.loader import load_suite


@pytest.fixture
def model_copy(tmp_path: Path, distilbert_dir: Path) -> Path:
    """A private copy of the tiny model, so a test may change its files."""
    return Path(shutil.copytree(distilbert_dir, tmp_path / "model"))


@pytest.fixture
def suite_dir(tmp_path: Path, model_copy: Path, tiny_split) -> Path:
    wrong, right = tiny_split
    return write_suite(tmp_path / "suite", model=model_copy, fix=wrong, keep=right)


def cold_check(suite_dir: Path, cache: Path, **kwargs):
    suite = load_suite(suite_dir / "warp.toml")
    return check_run.check(suite, load_adapter(suite), cache_dir=cache, **kwargs)


def warm_check(suite_dir: Path, cache: Path, **kwargs):
    suite = load_suite(suite_dir / "warp.toml")
    entry = check_run.warm_entry(suite, cache)
    return None if entry is None else check_run.check_warm(suite, entry, cache_dir=cache, **kwargs)


def comparable(result) -> list[dict]:
    return [v.to_dict() for v in result.verdicts]


def test_a_warm_check_says_exactly_what_the_cold_check_said(suite_dir: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    cold = cold_check(suite_dir, cache)
    assert cold.details.model_loaded is True and cold.details.encoded == len(cold.verdicts)
    warm_result = warm_check(suite_dir, cache)
    assert warm_result is not None
    assert warm_result.details.model_loaded is False and warm_result.details.from_cache == len(cold.verdicts)
    # Bit-identical gaps (same float32 v, same float64 head), same messages, same order.
    assert comparable(warm_result) == comparable(cold)
    assert warm_result.message == cold.message and warm_result.details.head == cold.details.head
    # A selection is answered warm too, in the suite's order.
    some = [v.case_id for v in cold.verdicts][::3]
    picked = warm_check(suite_dir, cache, ids=some)
    assert [v.case_id for v in picked.verdicts] == some
    assert comparable(picked) == [d for d in comparable(cold) if d["id"] in set(some)]


@pytest.mark.parametrize(
    "change",
    ["weight", "config", "tokenizer", "new_file"],
)
def test_any_change_to_the_model_folder_is_a_miss(suite_dir: Path, model_copy: Path, tmp_path: Path, change: str):
    cache = tmp_path / "cache"
    cold_check(suite_dir, cache)
    if change == "weight":  # one byte of one tensor, same size: only the content differs
        path = model_copy / "model.safetensors"
        data = bytearray(path.read_bytes())
        data[-3] ^= 0x01
        path.write_bytes(bytes(data))
    elif change == "config":
        path = model_copy / "config.json"
        config = json.loads(path.read_text())
        config["seq_classif_dropout"] = 0.3  # does not change v or logits, still a different folder
        path.write_text(json.dumps(config))
    elif change == "tokenizer":
        path = next(p for p in model_copy.iterdir() if p.name.startswith(("tokenizer", "vocab")))
        path.write_text(path.read_text() + "\n")
    else:
        (model_copy / "README.md").write_text("a note\n")
    assert warm_check(suite_dir, cache) is None
    # ... and the check that loads the model then records the folder as it is now.
    cold_check(suite_dir, cache)
    assert warm_check(suite_dir, cache) is not None


def test_a_suite_inside_its_model_folder_is_warm(model_copy: Path, tiny_split):
    # Its warp.toml, case files and .warp/ (the cache itself) are not the model: the digest skips them.
    wrong, right = tiny_split
    suite_dir = write_suite(model_copy / "gate", model=model_copy, fix=wrong, keep=right)
    cache = suite_dir / ".warp" / "cache"
    cold = cold_check(suite_dir, cache)
    (suite_dir / "notes.jsonl").write_text("{}\n")
    warm = warm_check(suite_dir, cache)
    assert warm is not None and comparable(warm) == comparable(cold)


def test_suite_state_and_hidden_files_are_not_model_files():
    suite_state = (".warp/cache/x.npy", ".git/HEAD", "gate/.warp/runs/r.json", "warp.toml", "gate/fix.jsonl")
    for name in suite_state:
        assert not fingerprint.is_model_file(Path(name)), name
    for name in ("model.safetensors", "config.json", "tokenizer.json", "vocab.txt", "onnx/model.onnx", "README.md"):
        assert fingerprint.is_model_file(Path(name)), name


def test_a_case_the_cache_has_not_seen_is_a_miss_and_entries_merge(
    suite_dir: Path, tmp_path: Path, model_copy: Path, tiny_split
):
    wrong, right = tiny_split
    cache = tmp_path / "cache"
    cold_check(suite_dir, cache)
    grown = write_suite(
        tmp_path / "grown",
        model=model_copy,
        fix=wrong,
        keep=[*right, {**right[0], "id": "extra", "text": "a new sentence"}],
    )
    assert warm_check(grown, cache) is None
    cold = cold_check(grown, cache)
    assert cold.details.encoded == 1  # only the new case went through the encoder
    # The entry now knows both suites' cases.
    assert warm_check(grown, cache) is not None and warm_check(suite_dir, cache) is not None


def test_layer_max_length_and_library_versions_are_part_of_the_key(suite_dir: Path, tmp_path: Path, monkeypatch):
    cache = tmp_path / "cache"
    cold_check(suite_dir, cache)
    toml = suite_dir / "warp.toml"
    original = toml.read_text()
    toml.write_text(original.replace("[model]\n", "[model]\nmax_length = 16\n", 1))
    assert warm_check(suite_dir, cache) is None
    toml.write_text(original)
    assert warm_check(suite_dir, cache) is not None
    real = importlib.metadata.version  # another tokenizers installed since
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "0.0.0-other" if name == "tokenizers" else real(name)
    )
    assert warm_check(suite_dir, cache) is None


def test_a_damaged_entry_is_a_miss_and_an_entry_needs_no_representations(suite_dir: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    cold = cold_check(suite_dir, cache)
    (entry,) = (cache / warm.WARM_DIR).glob(f"[!.]*{warm.ENTRY_SUFFIX}")
    data = entry.read_bytes()
    entry.write_bytes(data[: len(data) // 2])
    assert warm_check(suite_dir, cache) is None
    entry.write_text(json.dumps(json.loads(data) | {"format": "warp-check-warm/0"}))
    assert warm_check(suite_dir, cache) is None  # another format
    damaged = json.loads(data)
    damaged["logits"] = {k: ["x", None] for k in damaged["logits"]}
    entry.write_text(json.dumps(damaged))
    assert warm_check(suite_dir, cache) is None  # logits that are not numbers
    entry.write_bytes(data)
    for folder in [p for p in cache.iterdir() if p.is_dir() and p.name != warm.WARM_DIR]:
        shutil.rmtree(folder)  # the representation cache is gone: the entry holds the logits
    assert comparable(warm_check(suite_dir, cache)) == comparable(cold)


def test_lookup_reads_only(suite_dir: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    suite = load_suite(suite_dir / "warp.toml")
    assert check_run.warm_entry(suite, cache) is None
    assert not cache.exists()  # nothing hashed, nothing written with no entry to find
    assert check_run.warm_entry(suite, None) is None


def test_the_command_takes_the_warm_path(suite_dir: Path, tmp_path: Path, capsys):
    from testkit.suite_builder import exit_code

    cache = tmp_path / "cache"
    argv = ["check", str(suite_dir), "--cache", str(cache), "--json"]
    assert exit_code(argv) == 1  # the tiny model fails its must_fix cases
    first = json.loads(capsys.readouterr().out)
    assert exit_code(argv) == 1
    second = json.loads(capsys.readouterr().out)
    assert first["details"]["model_loaded"] is True and second["details"]["model_loaded"] is False
    assert first["cases"] == second["cases"]


# -- the file-digest memo ------------------------------------------------------------------------


def test_digests_are_remembered_while_the_file_is_unchanged(tmp_path: Path, monkeypatch):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"a" * 1000)
    old = time.time() - 60
    os.utime(path, (old, old))
    reads = []
    real = fingerprint.file_sha256
    # internal: whether a digest came from the memo or from the file is in no result (the same digest)
    monkeypatch.setattr(fingerprint, "file_sha256", lambda p: reads.append(p) or real(p))
    # ctime is now (utime changes it): trust needs the digest to be taken RACY_NS after it.
    # internal: a file written now is inside the 2 s racy window, and no test can move its ctime back
    monkeypatch.setattr(fingerprint, "RACY_NS", -(10**12))
    memo = tmp_path / "memo.json"
    first = FileDigests(memo)
    digest = first.sha256(path)
    first.save()
    assert FileDigests(memo).sha256(path) == digest and len(reads) == 1  # from the memo
    path.write_bytes(b"b" * 1000)  # same size: mtime/ctime tell
    again = FileDigests(memo)
    assert again.sha256(path) == real(path) != digest and len(reads) == 2
    memo.write_text("{not json")
    assert FileDigests(memo).sha256(path) == real(path)  # a damaged memo is ignored


def test_a_digest_taken_right_after_a_write_is_not_trusted(tmp_path: Path, monkeypatch):
    # git's racy-clean rule: a write in the same timestamp tick as the hashing leaves the stat
    # unchanged, so a digest taken within RACY_NS of the file's change is re-taken next time.
    path = tmp_path / "f"
    path.write_bytes(b"x")
    reads = []
    real = fingerprint.file_sha256
    # internal: whether a digest came from the memo or from the file is in no result (the same digest)
    monkeypatch.setattr(fingerprint, "file_sha256", lambda p: reads.append(p) or real(p))
    memo = tmp_path / "memo.json"
    digests = FileDigests(memo)
    digests.sha256(path)
    digests.save()
    FileDigests(memo).sha256(path)
    assert len(reads) == 2


def test_folder_digest_covers_names_and_contents(tmp_path: Path):
    folder = tmp_path / "m"
    (folder / "sub").mkdir(parents=True)
    (folder / "a").write_text("1")
    (folder / "sub" / "b").write_text("2")
    digests = FileDigests(None)
    base = folder_sha256(folder, digests)
    (folder / "sub" / "b").rename(folder / "sub" / "c")
    renamed = folder_sha256(folder, digests)
    assert renamed != base
    (folder / "sub" / "c").write_text("3")
    assert folder_sha256(folder, digests) not in (base, renamed)
    with pytest.raises(NotADirectoryError):
        folder_sha256(folder / "a", digests)


# -- the pure-Python answer ------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    st.integers(2, 5).flatmap(
        lambda k: st.tuples(
            st.lists(
                st.sampled_from([0.0, 1.0, -1.0, 0.5, math.inf, -math.inf, math.nan])
                | st.floats(allow_nan=True, allow_infinity=True),
                min_size=k,
                max_size=k,
            ),
            st.integers(0, k - 1),
        )
    )
)
def test_a_warm_answer_is_numpys_answer_bit_for_bit(case):
    # Ties, infinities and NaN included: numpy.argmax takes the first largest and NaN as largest.
    logits, label = case
    with np.errstate(invalid="ignore", over="ignore"):  # inf − inf is NaN in both
        predictions, gaps = SINGLE_LABEL.answers_from_logits(np.array([logits], dtype=np.float64), np.array([label]))
    predicted, gap = SINGLE_LABEL.answer_of(logits, label)
    assert predicted == int(predictions[0])
    assert np.array_equal(np.float64(gap), gaps[0], equal_nan=True)
    assert math.isnan(gap) or gap == float(gaps[0])
