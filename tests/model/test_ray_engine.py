"""engine 'ray': the encoder pass on a local Ray (2 CPUs) gives the local pass's v bit for bit, writes
the cache shards the local pass writes, and survives a worker killed mid-pass or fails cleanly.

Few and slow (every Ray worker imports torch and loads the model): the module is marked slow."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from testkit.tiny_models import synthetic_cases

from warp_check import Case, ClassifierAdapter, EngineError, Kind, ModelError, encode_cases
from warp_check.cli import main
from warp_check.model.engines.ray import FAULTS_ENV
from warp_check.model.engines.settings import Engine, EngineSettings, RaySettings

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'warp-check[ray]')")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A local Ray on 2 CPUs whose workers read their injected faults from the folder returned."""
    folder = tmp_path_factory.mktemp("ray_faults")
    before = os.environ.get(FAULTS_ENV)
    os.environ[FAULTS_ENV] = str(folder)  # the workers inherit the environment Ray starts with
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield folder
    finally:
        ray.shutdown()
        if before is None:
            del os.environ[FAULTS_ENV]
        else:
            os.environ[FAULTS_ENV] = before


RAY = EngineSettings(kind=Engine.RAY, ray=RaySettings(num_workers=2))


@pytest.fixture
def cases() -> list[Case]:
    raw = synthetic_cases("binary", 60, seed=5)
    return [Case(id=f"c{i}", text=c["text"], label=c["label"], kind=Kind.MUST_KEEP) for i, c in enumerate(raw)]


def _shards(cache: Path) -> dict[str, bytes]:
    return {p.relative_to(cache).as_posix(): p.read_bytes() for p in sorted(cache.rglob("*.safetensors"))}


def test_ray_gives_the_local_v_bit_for_bit_and_the_same_shards_which_a_later_local_check_reads(
    faults, distilbert_dir, cases, tmp_path
):
    local = ClassifierAdapter.from_pretrained(distilbert_dir)
    on_ray = ClassifierAdapter.from_pretrained(distilbert_dir, engine=RAY)
    expected = encode_cases(local, cases, batch_size=8, cache_dir=tmp_path / "local", progress=False)
    got = encode_cases(on_ray, cases, batch_size=8, cache_dir=tmp_path / "ray", progress=False)
    assert got.encoded == len(cases) and got.from_cache == 0
    assert got.V.dtype == np.float32
    assert np.array_equal(got.V, expected.V)
    assert got.input_keys == expected.input_keys
    assert _shards(tmp_path / "ray") == _shards(tmp_path / "local")  # same keys, same file, same bytes

    later = encode_cases(local, cases, batch_size=8, cache_dir=tmp_path / "ray", progress=False)
    assert later.encoded == 0 and later.from_cache == len(cases)
    assert np.array_equal(later.V, expected.V)


def test_a_worker_killed_mid_pass_is_restarted_and_the_pass_finishes(faults, distilbert_dir, cases, tmp_path):
    expected = encode_cases(ClassifierAdapter.from_pretrained(distilbert_dir), cases, batch_size=8, progress=False)
    (faults / "crash-once").touch()
    on_ray = ClassifierAdapter.from_pretrained(distilbert_dir, engine=RAY)
    got = encode_cases(on_ray, cases, batch_size=8, cache_dir=tmp_path, progress=False)
    assert not (faults / "crash-once").exists(), "no worker was killed"
    assert got.encoded == len(cases)
    assert np.array_equal(got.V, expected.V)


def test_a_worker_that_keeps_dying_fails_the_pass_cleanly_and_caches_nothing(faults, distilbert_dir, cases, tmp_path):
    (faults / "crash-always").touch()
    engine = EngineSettings(kind=Engine.RAY, ray=RaySettings(num_workers=1, max_restarts=1))
    try:
        on_ray = ClassifierAdapter.from_pretrained(distilbert_dir, engine=engine)
        with pytest.raises(EngineError, match=r"a Ray worker died \(restarted 1 times") as failed:
            encode_cases(on_ray, cases, batch_size=8, cache_dir=tmp_path, progress=False)
    finally:
        (faults / "crash-always").unlink()
    assert "nothing was cached" in str(failed.value)
    assert _shards(tmp_path) == {}
    again = encode_cases(ClassifierAdapter.from_pretrained(distilbert_dir), cases, cache_dir=tmp_path, progress=False)
    assert again.from_cache == 0 and again.encoded == len(cases)


def test_a_model_changed_after_loading_is_refused_by_the_workers_naming_the_folder(
    faults, distilbert_dir, cases, tmp_path
):
    import torch

    changed = ClassifierAdapter.from_pretrained(distilbert_dir, engine=RAY)
    with torch.no_grad():
        changed.model.distilbert.embeddings.word_embeddings.weight.mul_(1.5)  # upstream of v: not the folder's
    with pytest.raises(ModelError, match="on a Ray worker is not the model the driver loaded") as refused:
        encode_cases(changed, cases, cache_dir=tmp_path, progress=False)
    assert str(distilbert_dir) in str(refused.value) and "Traceback" not in str(refused.value)
    assert _shards(tmp_path) == {}


def test_a_model_not_loaded_from_a_folder_is_refused_before_ray_runs_anything(faults, distilbert_dir, cases):
    loaded = ClassifierAdapter.from_pretrained(distilbert_dir)
    built = ClassifierAdapter(loaded.model, loaded.tokenizer, loaded.spec, engine=RAY)  # no source folder
    with pytest.raises(ModelError, match="loads the model from its folder on every worker"):
        encode_cases(built, cases, progress=False)


def test_the_cli_engine_flag_runs_the_check_on_ray_with_the_local_verdicts(faults, tiny_suite, tmp_path, capsys):
    local = main(["check", str(tiny_suite), "--cache", str(tmp_path / "local"), "--json"])
    expected = json.loads(capsys.readouterr().out)
    on_ray = main(["check", str(tiny_suite), "--cache", str(tmp_path / "ray"), "--json", "--engine", "ray"])
    got = json.loads(capsys.readouterr().out)
    assert on_ray == local == 1  # the tiny suite's must_fix cases fail before a repair
    assert got["cases"] == expected["cases"]  # every verdict and gap, the same
    assert _shards(tmp_path / "ray") == _shards(tmp_path / "local")
