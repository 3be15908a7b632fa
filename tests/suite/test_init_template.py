"""The warp.toml ``warp-check init`` writes: every table a suite reads, every key at its default with
a note, ``[traffic]`` commented out with its keys; the site's warp.toml reference shows exactly that
file; a model a flag gives is blamed as the flag, never as warp.toml's ``model.path``."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path

import pytest
from testkit import REPO
from testkit.suite_builder import exit_code, write_suite

from warp_check.certificates.traffic.settings import TrafficSettings
from warp_check.errors import SettingsError
from warp_check.model.hub_cache import ModelSource
from warp_check.options import OPTIONS
from warp_check.qp import registry
from warp_check.repair.settings import RepairSettings
from warp_check.suite import template
from warp_check.suite.init import init_suite, suite_toml
from warp_check.suite.loader import load_suite
from warp_check.suite.model_source import ModelSettings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib

_HEADER = re.compile(r"^(?:# )?\[([a-z_.]+)\]")
_KEY = re.compile(r"^(?:# )?([a-z_]+) = ")


def written_keys(text: str) -> dict[str, bool]:
    """Every ``table.key`` the text writes, set (True) or commented out (False)."""
    keys: dict[str, bool] = {}
    table = ""
    for line in text.splitlines():
        if header := _HEADER.match(line):
            table = header[1]
        elif key := _KEY.match(line):
            keys[f"{table}.{key[1]}" if table else key[1]] = not line.startswith("#")
    return keys


def documented_example() -> str:
    """The TOML block the site's warp.toml reference shows as the file init writes, as its build renders it."""
    spec = importlib.util.spec_from_file_location("docs_reference", REPO / "docs" / "hooks" / "reference.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    page = hook.render((REPO / "docs" / "reference" / "warp-toml.md").read_text(encoding="utf-8"))
    after = page[page.index("The file `init` writes") :]
    block = re.search(r"```toml\n(.*?)```", after, re.S)
    assert block, "the warp.toml reference shows no TOML block after 'The file `init` writes'"
    return block[1]


EXAMPLE = suite_toml(
    Path("/work/reviews"), ModelSource(folder=Path("/work/models/sentiment")), {0: "negative", 1: "positive"}
)


def test_every_option_that_overrides_warp_toml_is_a_key_init_writes():
    keys = written_keys(EXAMPLE)
    overriding = [option.toml for option in OPTIONS if option.toml is not None]
    assert overriding, "no option overrides a warp.toml key: the test would check nothing"
    missing = [key for key in overriding if key not in keys and key != "repair.neighbours"]
    assert missing == [], f"options init does not write: add them to warp_check/suite/template.py: {missing}"
    assert "repair.neighbours" in {_HEADER.match(line)[1] for line in EXAMPLE.splitlines() if _HEADER.match(line)}


def test_every_field_of_every_table_is_written_with_a_note():
    keys = written_keys(EXAMPLE)
    for table in template.tables():
        for key in table.keys():
            assert f"{table.name}.{key}" in keys, f"[{table.name}] {key} is not written"
            assert table.notes.get(key), f"[{table.name}] {key} has no note in warp_check/suite/template.py"
    for backend in registry.registered():
        fields = {f.name for f in dataclasses.fields(backend.settings)}
        assert set(template.BACKEND_NOTES[backend.name]) == fields, f"notes of backend {backend.name}"
    assert {t.name for t in template.tables()} >= {"model", "model.ray", "repair", "repair.solver", "traffic"}
    assert all(len(line) <= 120 for line in EXAMPLE.splitlines())


def test_a_table_gaining_a_field_is_written_and_the_note_check_catches_it():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Grown(RepairSettings):
        new_knob: float = 0.25

    grown = dataclasses.replace(template.REPAIR, record=Grown)
    assert "new_knob = 0.25" in grown.lines()
    assert "new_knob" in grown.keys() and "new_knob" not in grown.notes


def test_what_init_writes_loads_as_the_defaults_and_traffic_uncommented_loads_too(distilbert_dir, tmp_path):
    folder = tmp_path / "suite"
    init_suite(folder, distilbert_dir)
    text = (folder / "warp.toml").read_text(encoding="utf-8")
    assert text == suite_toml(folder, ModelSource(folder=distilbert_dir), {0: "negative", 1: "positive"})
    suite = load_suite(folder, empty=True)
    assert suite.repair == RepairSettings()
    assert dataclasses.replace(suite.model, path=None) == ModelSettings()
    assert suite.traffic is None and suite.name == "suite"
    assert written_keys(text)["repair.rank"] and not written_keys(text)["traffic.path"]

    # [traffic] commented out with its keys: uncommented (the lines the template marks), it is read.
    (folder / "traffic.jsonl").write_text('{"text": "fine"}\n', encoding="utf-8")
    start = text.index("# [traffic]")
    block = [line[2:] for line in text[start:].splitlines() if line.startswith("# ")]
    kept = [line for line in block if not re.match(r"(format|text_pair|task) = ", line)]
    (folder / "warp.toml").write_text(text[:start] + "\n".join(kept) + "\n", encoding="utf-8")
    traffic = load_suite(folder, empty=True).traffic
    assert traffic == TrafficSettings(path=(folder / "traffic.jsonl").resolve(), max_change=0.01)


def test_the_docs_show_exactly_the_file_init_writes():
    assert documented_example() == EXAMPLE


def test_a_hub_model_is_written_as_its_id_pinned_and_the_folder_keys_commented():
    from warp_check.model.hub_cache import HubModel

    hub = HubModel(id="acme/sentiment", revision="main", commit="a" * 40)
    text = suite_toml(Path("/work/s"), ModelSource(folder=Path("/cache/snap"), hub=hub), {})
    keys = written_keys(text)
    assert keys["model.id"] and keys["model.revision"] and not keys["model.path"]
    assert tomllib.loads(text)["model"] == {
        "id": "acme/sentiment",
        "revision": "a" * 40,
        "layer": "auto",
        "max_length": 128,
        "batch_size": 32,
        "device": "auto",
        "engine": "local",
        "ray": {"num_cpus": 1.0, "num_gpus": 0.0, "max_restarts": 3},
    }
    assert "(main when the suite was made)" in text


@pytest.fixture()
def unreadable_model(tmp_path: Path) -> Path:
    """A model folder whose config.json is not JSON: the folder checks pass, reading its config fails."""
    model = tmp_path / "broken-model"
    model.mkdir()
    (model / "config.json").write_text("{not json", encoding="utf-8")
    (model / "model.safetensors").write_bytes(b"")
    return model


def test_a_flag_given_model_whose_config_fails_is_the_flags_mistake(
    distilbert_dir, tiny_split, unreadable_model, tmp_path, capsys
):
    wrong, right = tiny_split
    suite = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong, keep=right)
    with pytest.raises(SettingsError) as caught:
        load_suite(suite, model=unreadable_model)
    assert caught.value.field == "model" and "config.json cannot be read" in caught.value.why
    assert exit_code(["check", str(suite), "--model", str(unreadable_model)]) == 2
    err = capsys.readouterr().err
    assert "--model: model folder" in err and "config.json cannot be read" in err
    assert "warp.toml" not in err and "model.path" not in err


def test_the_plugin_names_warp_model_for_it(distilbert_dir, tiny_split, unreadable_model, tmp_path, pytester):
    wrong, right = tiny_split
    suite = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong, keep=right)
    result = pytester.runpytest_inprocess(str(suite), f"--warp-model={unreadable_model}", "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert "--warp-model: model folder" in out and "config.json cannot be read" in out
    assert "field 'model.path'" not in out


pytest_plugins = ["pytester"]
