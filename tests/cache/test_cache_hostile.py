"""The representation cache under hostile disks: a shard truncated, replaced by a folder, a FIFO or a
dangling link, or a disk that fills while a shard is written. Each is a miss, re-encoded with the same
answers (the damaged shard written afresh where it can be), or one warning with the same answers,
the same under pytest and the command; never a traceback, a hang or a half-written shard."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from testkit import disks
from testkit.inner_runs import warm_inner_runs
from testkit.suite_builder import exit_code, tree_digest

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:hypothesispytest")


@pytest.fixture(scope="module", autouse=True)
def _warm_imports() -> None:
    warm_inner_runs()


def check(suite: Path, cache: Path, capsys) -> tuple[int, dict, str]:
    capsys.readouterr()
    code = exit_code(["check", str(suite), "--cache", str(cache), "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def _answers(run: dict) -> list[tuple]:
    return [(c["id"], c["passed"], c["properties"]["gap"]) for c in run["cases"]]


@pytest.fixture
def cold(tiny_suite: Path, tmp_path: Path, capsys) -> dict:
    """A check that filled the cache: its answers, and the one shard it wrote (the warm entry removed, so
    the next check reads the shard rather than answering from the entry)."""
    cache = tmp_path / "cache"
    code, run, err = check(tiny_suite, cache, capsys)
    assert err == ""
    (shard,) = cache.rglob("*.safetensors")
    shutil.rmtree(cache / "warm")
    return {"code": code, "run": run, "cache": cache, "shard": shard, "bytes": shard.read_bytes()}


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _dangling(path: Path) -> None:
    path.unlink()
    path.symlink_to(path.with_name("gone.bin"))


def _loop(path: Path) -> None:
    path.unlink()
    path.symlink_to(path)  # ELOOP on every read: as unreadable as a shard can be for root


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated": _truncated,
    "fifo": _fifo,
    "dangling-link": _dangling,
    "link-loop": _loop,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_shard_is_re_encoded_with_the_same_answers_and_written_afresh(tiny_suite, cold, capsys, damage):
    DAMAGE[damage](cold["shard"])
    code, run, err = check(tiny_suite, cold["cache"], capsys)  # a FIFO read would never return
    assert (code, err) == (cold["code"], "")
    assert run["details"]["encoded"] == len(run["cases"]) and _answers(run) == _answers(cold["run"])
    assert cold["shard"].is_file() and cold["shard"].read_bytes() == cold["bytes"]  # healed, bit for bit
    shutil.rmtree(cold["cache"] / "warm")
    code, run, _ = check(tiny_suite, cold["cache"], capsys)
    assert run["details"]["encoded"] == 0 and _answers(run) == _answers(cold["run"])


def test_a_shard_replaced_by_a_folder_is_a_miss_and_one_warning_naming_it(tiny_suite, cold, capsys):
    _folder(cold["shard"])
    code, run, err = check(tiny_suite, cold["cache"], capsys)
    (line,) = err.splitlines()
    assert line.startswith("warp-check: warning: the representation cache") and "Is a directory" in line
    assert str(cold["shard"]) in line and "move what is in the way" in line and "free space" not in line
    assert code == cold["code"] and _answers(run) == _answers(cold["run"])
    assert cold["shard"].is_dir() and not any(cold["shard"].iterdir())  # the user's folder left as it was


def test_pytest_says_the_same_warning_for_a_folder_in_the_way_with_the_same_outcomes(
    tiny_suite, cold, pytester, capsys
):
    _folder(cold["shard"])
    _, _, err = check(tiny_suite, cold["cache"], capsys)
    said = err.removeprefix("warp-check: warning: ").strip()
    shutil.rmtree(cold["cache"] / "warm", ignore_errors=True)
    args = (*INNER, str(tiny_suite))
    without = pytester.runpytest(*args, "--warp-cache", "none")
    result = pytester.runpytest(*args, "-W", "error", "--warp-cache", str(cold["cache"]))
    assert result.ret == without.ret and result.parseoutcomes() == without.parseoutcomes()
    out = result.stdout.str()
    assert out.count("the representation cache") == 1 and said in out.replace("\n", "")
    assert "Traceback" not in out


def test_pytest_re_encodes_a_truncated_shard_with_the_outcomes_of_no_cache(tiny_suite, cold, pytester):
    _truncated(cold["shard"])
    args = (*INNER, str(tiny_suite))
    without = pytester.runpytest(*args, "--warp-cache", "none")
    result = pytester.runpytest(*args, "-W", "error", "--warp-cache", str(cold["cache"]))
    assert result.ret == without.ret and result.parseoutcomes() == without.parseoutcomes()
    assert "warning" not in result.stdout.str() and cold["shard"].read_bytes() == cold["bytes"]


def test_a_repair_over_a_truncated_shard_writes_the_model_a_repair_without_cache_writes(
    tiny_suite, cold, tmp_path, capsys
):
    _truncated(cold["shard"])
    args = ["repair", str(tiny_suite), "-q"]
    assert exit_code([*args, "--out", str(tmp_path / "plain"), "--cache", "none"]) == 0
    assert exit_code([*args, "--out", str(tmp_path / "cached"), "--cache", str(cold["cache"])]) == 0
    assert "Traceback" not in capsys.readouterr().err
    skip = "warp_certificate.json"  # its times differ; its claims are checked by the gaps below
    plain, cached = tmp_path / "plain", tmp_path / "cached"
    assert (plain / "model.safetensors").read_bytes() == (cached / "model.safetensors").read_bytes()
    gaps = [json.loads((f / skip).read_text())["cases"] for f in (plain, cached)]
    assert [c["gap_after"] for c in gaps[0]] == [c["gap_after"] for c in gaps[1]]


def test_a_disk_that_fills_while_a_shard_is_written_leaves_no_half_shard(tiny_suite, small_disk, capsys, tmp_path):
    code, clean, _ = check(tiny_suite, tmp_path / "elsewhere", capsys)
    cache = small_disk / "cache"
    (cache / "warm").mkdir(parents=True)
    disks.fill(small_disk, leave=4096)  # room to start the shard, not to finish it
    got, run, err = check(tiny_suite, cache, capsys)
    (line,) = err.splitlines()
    assert line.startswith("warp-check: warning: the representation cache") and "No space left" in line
    assert "free space there" in line and (got, _answers(run)) == (code, _answers(clean))
    assert not list(cache.rglob("*.safetensors")) and not list(cache.rglob(".tmp-*"))  # nothing half written


def test_a_full_cache_disk_leaves_an_earlier_repair_in_out_byte_identical(tiny_suite, small_disk, tmp_path, capsys):
    out = tmp_path / "repaired"
    assert exit_code(["repair", str(tiny_suite), "--out", str(out), "--cache", "none", "-q"]) == 0
    before = tree_digest(out)
    disks.fill(small_disk, leave=0)
    capsys.readouterr()
    assert exit_code(["check", str(tiny_suite), "--model", str(out), "--cache", str(small_disk / "c"), "-q"]) == 0
    (line,) = capsys.readouterr().err.splitlines()
    assert "No space left on device" in line and "free space there" in line and tree_digest(out) == before
