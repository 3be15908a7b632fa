"""[model] engine and [model.ray]: checked fields, the flags that override them, and a clear refusal of
engine 'ray' where Ray is not installed, before any work (these tests need no Ray)."""

from __future__ import annotations

import importlib.machinery
import sys
import types
from pathlib import Path

import pytest
from testkit.suite_builder import exit_code

from warp_check import SettingsError, SuiteError, load_suite
from warp_check.frontend import OPTION, BadValue, Problem
from warp_check.model.engines.settings import Engine, EngineSettings, RaySettings
from warp_check.releases.load import load_adapter


@pytest.mark.parametrize(
    ("fields", "field", "why"),
    [
        ({"num_gpus": -0.5}, "num_gpus", "must be >= 0"),
        ({"num_cpus": float("nan")}, "num_cpus", "must be a finite number"),
        ({"num_cpus": 0}, "num_cpus", "a worker needs a CPU or a GPU"),
        ({"num_workers": 0}, "num_workers", "must be an integer >= 1"),
        ({"batch_size": 2.5}, "batch_size", "must be an integer >= 1"),
        ({"address": " "}, "address", "must be a non-empty string"),
        ({"num_gpus": True}, "num_gpus", "must be a finite number"),
    ],
)
def test_ray_settings_refuse_bad_values_naming_the_field(fields, field, why):
    with pytest.raises(SettingsError, match=why) as refused:
        RaySettings(**fields)
    assert refused.value.field == field


def test_ray_settings_take_a_gpu_only_worker_and_give_each_worker_its_cpus_as_threads():
    assert RaySettings(num_cpus=0, num_gpus=1).worker_threads == 1
    assert RaySettings(num_cpus=3.5).worker_threads == 3
    assert EngineSettings().kind is Engine.LOCAL
    with pytest.raises(SettingsError, match="must be one of local, ray"):
        EngineSettings().using("spark")


def _ray_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, as where Ray is not installed


def _ray_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    ray = types.ModuleType("ray")  # found by importlib as an installed Ray is; these tests never start it
    ray.__spec__ = importlib.machinery.ModuleSpec("ray", None)
    monkeypatch.setitem(sys.modules, "ray", ray)


def _suite(tmp_path: Path, model: Path, model_lines: str) -> Path:
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "fix.jsonl").write_text('{"id": "a", "text": "the movie was good", "label": 1}\n', encoding="utf-8")
    (folder / "warp.toml").write_text(
        f'[model]\npath = "{model}"\n{model_lines}\n[[cases]]\npath = "fix.jsonl"\nkind = "must_fix"\n',
        encoding="utf-8",
    )
    return folder


def test_warp_toml_engine_and_ray_table_reach_the_adapter(tmp_path, distilbert_dir, monkeypatch):
    _ray_installed(monkeypatch)
    lines = 'engine = "ray"\n\n[model.ray]\naddress = "auto"\nnum_workers = 3\nnum_gpus = 0.5\nbatch_size = 16\n'
    suite = load_suite(_suite(tmp_path, distilbert_dir, lines))
    expected = RaySettings(address="auto", num_workers=3, num_gpus=0.5, batch_size=16)
    assert suite.model.engine == EngineSettings(kind=Engine.RAY, ray=expected)
    assert load_adapter(suite).engine == suite.model.engine
    local = suite.with_compute(engine="local")
    assert local.model.engine == EngineSettings(kind=Engine.LOCAL, ray=expected)  # [model.ray] kept for later


def test_engine_ray_in_warp_toml_without_ray_is_refused_at_its_line(tmp_path, distilbert_dir, monkeypatch):
    _ray_missing(monkeypatch)
    folder = _suite(tmp_path, distilbert_dir, 'batch_size = 8\nengine = "ray"\n')
    with pytest.raises(SuiteError) as refused:
        load_suite(folder)
    assert refused.value.line == 4 and refused.value.field == "model.engine"
    assert "pip install 'warp-check[ray]'" in str(refused.value)


def test_engine_ray_flag_without_ray_is_refused_before_any_work(tmp_path, distilbert_dir, monkeypatch, capsys):
    _ray_missing(monkeypatch)
    with pytest.raises(BadValue) as refused:
        OPTION["engine"].parse("ray")
    assert refused.value.problem is Problem.NO_RAY
    folder = _suite(tmp_path, distilbert_dir, "")
    with pytest.raises(SettingsError, match=r"pip install 'warp-check\[ray\]'"):
        load_suite(folder).with_compute(engine="ray")
    assert exit_code(["check", str(folder), "--engine", "ray", "--cache", "none"]) == 2
    err = capsys.readouterr().err
    assert "argument --engine: 'ray': needs Ray, which is not installed: pip install 'warp-check[ray]'" in err
    assert "Traceback" not in err
