"""Loading suites (warp.toml + JSONL) into validated objects; no model is loaded here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from warp_check.cases import Kind
from warp_check.errors import SettingsError, SuiteError
from warp_check.model.specs import HeadSpec
from warp_check.qp.backends.osqp import OsqpSettings
from warp_check.qp.settings import SolverSettings
from warp_check.repair.settings import KeepChoice, NeighbourSettings, RepairSettings
from warp_check.suite.loader import load_suite


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A folder that looks like a binary HF classifier (the loader reads only config.json)."""
    folder = tmp_path / "model"
    folder.mkdir()
    config = {"num_labels": 2, "id2label": {"0": "negative", "1": "positive"}}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.safetensors").write_bytes(b"")
    return folder


def write(folder: Path, toml: str, **files: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "warp.toml").write_text(toml)
    for name, text in files.items():
        (folder / name.replace("_jsonl", ".jsonl")).write_text(text)
    return folder


BASIC = """name = "reviews"
[model]
path = "../model"
max_length = 64

[[cases]]
path = "fix.jsonl"
kind = "must_fix"

[[cases]]
path = "keep.jsonl"
"""


def test_loads_cases_labels_kinds_and_locations(tmp_path, model):
    fix = (
        '{"id": "f1", "text": "not good", "label": "negative", "source": "deepwordbug"}\n'
        '\n{"text": "gr8", "label": 1}\n'
    )
    keep = (
        '{"text": "fine", "text_pair": "it was fine", "label": "positive", "kind": "must_keep"}\n'
        '{"text": "meh", "label": 0, "kind": "aux"}\n'
    )
    suite = load_suite(write(tmp_path / "s", BASIC, fix_jsonl=fix, keep_jsonl=keep))
    assert suite.name == "reviews" and suite.model_dir == model.resolve()
    assert suite.labels == {"negative": 0, "positive": 1} and suite.num_classes == 2
    assert [(c.id, c.kind, c.label) for c in suite.cases] == [
        ("f1", Kind.MUST_FIX, 0),
        ("fix.jsonl:3", Kind.MUST_FIX, 1),  # default id: file and line (line 2 is blank)
        ("keep.jsonl:1", Kind.MUST_KEEP, 1),
        ("keep.jsonl:2", Kind.AUX, 0),
    ]
    assert suite.cases[0].source == "deepwordbug" and suite.cases[2].text_pair == "it was fine"
    assert suite.locations["fix.jsonl:3"].line == 3 and suite.locations["f1"].path.name == "fix.jsonl"
    assert (suite.model.max_length, suite.model.batch_size, suite.layer) == (64, 32, "auto")
    assert suite.repair == RepairSettings()
    assert suite.key_lines["model.path"] == 3 and suite.key_lines["cases[1].path"] == 11
    assert suite.count(Kind.AUX) == 1 and suite.label_name(1) == "positive"


def test_labels_table_or_list_layer_forms_and_repair_settings(tmp_path, model):
    toml = """[model]
path = "../model"
layer = {repair_layer = "pre_classifier", activation = "relu", classifier = "classifier"}
[labels]
bad = 0
good = 1
[[cases]]
path = "fix.jsonl"
kind = "must_fix"
[repair]
rank = 4
lam = 5000
[repair.solver]
max_iter = 100
[repair.neighbours]
keep_cases = "all"
keep_choice = "random"
"""
    suite = load_suite(write(tmp_path / "s", toml, fix_jsonl='{"text": "x", "label": "good"}\n'))
    neighbours = NeighbourSettings(keep_cases=None, keep_choice=KeepChoice.RANDOM)
    assert suite.cases[0].label == 1 and suite.labels == {"bad": 0, "good": 1}
    assert suite.layer == HeadSpec(repair_layer="pre_classifier", activation="relu", classifier="classifier")
    solver = SolverSettings(backend_settings=(OsqpSettings(max_iter=100),))
    assert suite.repair == RepairSettings(rank=4, lam=5000.0, solver=solver, neighbours=neighbours)
    assert suite.settings(rank=8, gamma_h=0.1) == RepairSettings(
        rank=8, lam=5000.0, gamma_h=0.1, solver=solver, neighbours=neighbours
    )
    with pytest.raises(SettingsError, match="rank=0"):
        suite.settings(rank=0)
    listed = 'labels = ["bad", "good"]\n[model]\npath = "../model"\nlayer = ["pre_classifier", "relu", "classifier"]\n'
    listed += '[[cases]]\npath = "fix.jsonl"\nkind = "must_keep"\n'
    again = load_suite(write(tmp_path / "t", listed, fix_jsonl='{"text": "x", "label": "bad"}\n'))
    assert again.labels == {"bad": 0, "good": 1} and again.model.layer == ("pre_classifier", "relu", "classifier")


def test_the_model_override_and_a_factory_give_the_model_folder(tmp_path, model):
    folder = write(
        tmp_path / "s", BASIC.replace('"../model"', '"gone"'), fix_jsonl='{"text": "x", "label": 0}\n', keep_jsonl=""
    )
    assert load_suite(folder, model=model).model_dir == model.resolve()
    (folder / "helpers.py").write_text(f"MODEL = {str(model)!r}\n")
    (folder / "models.py").write_text("from helpers import MODEL\n\ndef build():\n    return MODEL\n")
    (folder / "warp.toml").write_text(BASIC.replace('path = "../model"', 'factory = "models.py:build"'))
    suite = load_suite(folder / "warp.toml")
    assert suite.model_dir == model.resolve() and suite.model.factory == "models.py:build"


@pytest.mark.parametrize(
    ("change", "files", "message"),
    [
        (
            ("max_length = 64", 'max_length = "long"'),
            {},
            "warp.toml:4: field 'model.max_length': must be an integer >= 1",
        ),
        (
            ('path = "../model"', 'path = "../model"\nfactory = "m.py:f"'),
            {},
            "field 'model.factory': give one of model.path, model.factory or model.id, not path and factory",
        ),
        (('[[cases]]\npath = "keep.jsonl"', '[[cases]]\npath = "fix.jsonl"'), {}, "is already listed in cases[0]"),
        (("max_length = 64", 'layer = ["a", "b"]'), {}, "field 'model.layer': ['a', 'b'] is not a layer"),
        (('name = "reviews"', 'name = ""'), {}, "warp.toml:1: field 'name': must be a non-empty string"),
        (("", "[labels]\nneg = 0\npos = 5\n"), {}, "field 'labels.pos': class id 5 is out of range: the model has 2"),
        (("", "[labels]\nneg = 0\npos = 0\n"), {}, "field 'labels.pos': class id 0 is already the label 'neg'"),
        (
            ("", "[repair.solver]\neps_abs = 2.0\n"),
            {},
            "field 'repair.solver.eps_abs': 2.0: must be a number in (0, 1)",
        ),
        (
            ("", "[repair.solver]\nsteps = 2\n"),
            {},
            "field 'repair.solver.steps': unknown key 'steps' in [repair.solver]",
        ),
        (("", "[repair]\npolish = true\n"), {}, "field 'repair.polish': unknown key 'polish' in [repair]"),
        (
            ("", '[repair.neighbours]\nkeep_choice = "closest"\n'),
            {},
            "warp.toml:13: field 'repair.neighbours.keep_choice': 'closest': must be one of nearest, random",
        ),
        (
            ("", "[repair.neighbours]\nper_case = 2.5\n"),
            {},
            "field 'repair.neighbours.per_case': must be an integer, got 2.5",
        ),
        (("", "[repair]\nneighbours = 8\n"), {}, "field 'repair.neighbours': must be a table ([repair.neighbours])"),
        (("", "[repair]\nrank = 2.5\n"), {}, "field 'repair.rank': must be an integer, got 2.5"),
        ((), {"keep_jsonl": '{"text": "x", "label": 0}\n'}, "keep.jsonl:1: field 'kind': missing field 'kind'"),
        ((), {"keep_jsonl": '{"text": "x", "text_pair": " ", "label": 0, "kind": "aux"}\n'}, "field 'text_pair'"),
        ((), {"keep_jsonl": '{"text": "' + "a" * 100_001 + '", "label": 0}\n'}, "is 100,001 characters long"),
        ((), {"keep_jsonl": '{"id": "a::b", "text": "x", "label": 0}\n'}, "must not contain '::'"),
        ((), {"keep_jsonl": '{"text": "x", "label": true}\n'}, "field 'label': must be a label name or a class id"),
    ],
)
def test_mistakes_name_file_line_and_field(tmp_path, model, change, files, message):
    toml = BASIC + change[1] if change and change[0] == "" else BASIC.replace(*change) if change else BASIC
    contents = {"fix_jsonl": '{"text": "x", "label": 0}\n', "keep_jsonl": ""} | files
    with pytest.raises(SuiteError) as caught:
        load_suite(write(tmp_path / "s", toml, **contents))
    assert message in str(caught.value)
    assert str(caught.value).startswith(str(tmp_path / "s"))


def test_digest_names_the_content(tmp_path, model):
    folder = write(tmp_path / "s", BASIC, fix_jsonl='{"text": "x", "label": 0}\n', keep_jsonl="")
    first = load_suite(folder).digest()
    assert load_suite(folder).digest() == first
    (folder / "fix.jsonl").write_text('{"text": "y", "label": 0}\n')
    assert load_suite(folder).digest() != first


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300))
def test_arbitrary_case_file_bytes_only_ever_raise_suite_errors(tmp_path, model, data):
    folder = write(tmp_path / "s", BASIC, keep_jsonl="")
    (folder / "fix.jsonl").write_bytes(data)
    try:
        load_suite(folder)
    except SuiteError as exc:
        assert exc.path is not None
    finally:
        (folder / "fix.jsonl").unlink()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200) | st.sampled_from([BASIC[:n] for n in range(0, len(BASIC), 7)]))
def test_arbitrary_warp_toml_only_ever_raises_suite_errors(tmp_path, model, text):
    folder = write(tmp_path / "s", text, fix_jsonl='{"text": "x", "label": 0}\n', keep_jsonl="")
    try:
        load_suite(folder)
    except SuiteError as exc:
        assert exc.path is not None
