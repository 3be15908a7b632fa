"""The bad-input corpus (tests/bad_inputs/): every malformed suite is one clear message, both ways.

Each sub-folder of ``tests/bad_inputs`` is one broken suite: ``warp.toml.in`` (``{model}`` is
the tiny DistilBERT's folder; left out: a plain suite on that model with one must_fix file),
its other files as they are (``fix.jsonl`` left out: one good case), and ``expected.txt``, the
one message (an fnmatch pattern where only ``*`` is special; ``suite/`` stands for the folder).
Inputs that cannot live in git (symlink loops, a megabyte of text, damaged weights) are made
by the function of the same name in ``GENERATED``. Adding a case is adding a folder.

Both frontends must say it: ``pytest`` as one collection error per suite, with no traceback,
and ``warp-check check`` as exit 2 with the message as its only line. The loaders are also
fuzzed with arbitrary bytes and arbitrary JSON/TOML values: only SuiteError ever escapes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testkit.inner_runs import warm_inner_runs

from warp_check.cases import Kind
from warp_check.cli import main
from warp_check.errors import SuiteError
from warp_check.suite.loader import load_suite

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest")
CORPUS = Path(__file__).parent / "bad_inputs"
DEFAULT_TOML = '[model]\npath = "{model}"\n\n[[cases]]\npath = "fix.jsonl"\nkind = "must_fix"\n'
GOOD = '{"id": "a", "text": "the movie was good", "label": "positive"}\n'


def _copy_model(model_dir: Path, folder: Path) -> Path:
    target = folder / "model"
    shutil.copytree(model_dir, target)
    return target


def _local_model_suite(folder: Path) -> None:
    (folder / "warp.toml").write_text(DEFAULT_TOML.replace("{model}", "model"), encoding="utf-8")


def _deeply_nested_toml(folder: Path, model_dir: Path) -> None:
    (folder / "warp.toml").write_text("x = " + "[" * 5000 + "\n", encoding="utf-8")


def _huge_integer_toml(folder: Path, model_dir: Path) -> None:
    text = DEFAULT_TOML.replace("{model}", str(model_dir)) + "\n[repair]\nrank = " + "1" * 5000 + "\n"
    (folder / "warp.toml").write_text(text, encoding="utf-8")


def _huge_integer_jsonl(folder: Path, model_dir: Path) -> None:
    (folder / "fix.jsonl").write_text(GOOD + '{"text": "good", "label": ' + "1" * 5000 + "}\n", encoding="utf-8")


def _one_megabyte_text(folder: Path, model_dir: Path) -> None:
    record = {"id": "big", "text": "good " * 200_000, "label": "positive"}
    (folder / "fix.jsonl").write_text(GOOD + json.dumps(record) + "\n", encoding="utf-8")


def _deeply_nested_jsonl(folder: Path, model_dir: Path) -> None:
    (folder / "fix.jsonl").write_text('{"text": ' + "[" * 100_000 + "\n", encoding="utf-8")


def _not_utf8_then_good(folder: Path, model_dir: Path) -> None:
    (folder / "fix.jsonl").write_bytes(GOOD.encode() + b'{"text": "\xff\xfe", "label": 1}\n' + GOOD.encode())


def _case_file_symlink_loop(folder: Path, model_dir: Path) -> None:
    os.symlink("fix.jsonl", folder / "loop.jsonl")
    os.symlink("loop.jsonl", folder / "fix.jsonl")


def _model_path_symlink_loop(folder: Path, model_dir: Path) -> None:
    os.symlink("model", folder / "loop")
    os.symlink("loop", folder / "model")
    _local_model_suite(folder)


def _weights_truncated(folder: Path, model_dir: Path) -> None:
    weights = _copy_model(model_dir, folder) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    _local_model_suite(folder)


def _weights_nan(folder: Path, model_dir: Path) -> None:
    from safetensors.torch import load_file, save_file

    weights = _copy_model(model_dir, folder) / "model.safetensors"
    state = load_file(str(weights))
    state["pre_classifier.weight"][3, 5] = float("nan")
    save_file(state, str(weights), metadata={"format": "pt"})
    _local_model_suite(folder)


def _without_weights(folder: Path, model_dir: Path) -> None:
    (_copy_model(model_dir, folder) / "model.safetensors").unlink()
    _local_model_suite(folder)


GENERATED: dict[str, Callable[[Path, Path], None]] = {
    "toml-deeply-nested": _deeply_nested_toml,
    "toml-huge-integer": _huge_integer_toml,
    "jsonl-huge-integer": _huge_integer_jsonl,
    "jsonl-one-megabyte-text": _one_megabyte_text,
    "jsonl-deeply-nested": _deeply_nested_jsonl,
    "jsonl-not-utf8-then-good": _not_utf8_then_good,
    "case-file-symlink-loop": _case_file_symlink_loop,
    "model-path-symlink-loop": _model_path_symlink_loop,
    "model-weights-truncated": _weights_truncated,
    "model-weights-nan": _weights_nan,
    "model-without-weights": _without_weights,
}
NAMES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())


def literal(pattern: str) -> str:
    """An fnmatch pattern where only ``*`` is special."""
    return pattern.replace("[", "[[]").replace("?", "[?]")


def expected(name: str) -> str:
    return (CORPUS / name / "expected.txt").read_text(encoding="utf-8").strip()


def materialise(name: str, folder: Path, model_dir: Path) -> Path:
    """Write the broken suite ``name`` into ``folder`` (created); returns it."""
    source = CORPUS / name
    folder.mkdir(parents=True)
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if path.is_dir() or rel.name == "expected.txt":
            continue
        target = folder / ("warp.toml" if rel.name == "warp.toml.in" else rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = path.read_bytes()
        if rel.name == "warp.toml.in":
            data = data.replace(b"{model}", str(model_dir).encode())
        target.write_bytes(data)
    if name in GENERATED:
        GENERATED[name](folder, model_dir)
    if not (folder / "warp.toml").exists() and not (folder / "warp.toml").is_symlink():
        (folder / "warp.toml").write_text(DEFAULT_TOML.replace("{model}", str(model_dir)), encoding="utf-8")
    if not (folder / "fix.jsonl").exists() and not (folder / "fix.jsonl").is_symlink():
        (folder / "fix.jsonl").write_text(GOOD, encoding="utf-8")
    return folder


def test_the_corpus_is_complete():
    assert len(NAMES) >= 30
    for name in NAMES:
        assert (CORPUS / name / "expected.txt").is_file(), f"{name}: no expected.txt"
        assert "suite/" in expected(name), f"{name}: the message must name the file"
    assert set(GENERATED) <= set(NAMES)


@pytest.fixture(scope="module", autouse=True)
def _warm_imports(distilbert_dir: Path) -> None:
    warm_inner_runs(distilbert_dir)


def test_every_bad_input_is_one_collection_error_without_a_traceback(pytester, distilbert_dir):
    lines = []
    for name in NAMES:
        materialise(name, pytester.path / name, distilbert_dir)
        lines += [f"*ERROR collecting {name}/warp.toml*", literal(expected(name).replace("suite/", f"{name}/"))]
    result = pytester.runpytest(*INNER, "--collect-only", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(lines)
    result.stdout.fnmatch_lines([f"*no tests collected, {len(NAMES)} errors*"])
    output = result.stdout.str()
    assert "Traceback" not in output and not re.search(r"^\s+raise ", output, re.MULTILINE)
    assert output.count("ERROR collecting") == len(NAMES)  # one error per suite


@pytest.mark.parametrize("name", NAMES)
def test_every_bad_input_makes_warp_check_exit_2_with_one_line(name, tmp_path, distilbert_dir, capsys):
    folder = materialise(name, tmp_path / name, distilbert_dir)
    assert main(["check", str(folder), "--cache", "none"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    pattern = "warp-check check: error: " + expected(name).replace("suite/", f"{folder}/")
    assert _fnmatch(line, pattern), f"\n{line}\n!=\n{pattern}"


def _fnmatch(line: str, pattern: str) -> bool:
    from fnmatch import fnmatchcase

    return fnmatchcase(line, literal(pattern))


# -- fuzzing the loaders -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fuzz_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder the loader accepts as a binary classifier (it reads only config.json)."""
    folder = tmp_path_factory.mktemp("fuzz") / "model"
    folder.mkdir()
    config = {"num_labels": 2, "id2label": {"0": "negative", "1": "positive"}}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.safetensors").write_bytes(b"")
    return folder


def _only_suite_errors(folder: Path) -> None:
    """Loading either fails with a SuiteError that names its file, or gives a suite that keeps the
    loader's promises: unique ids, real texts, labels the model has, each case at its file:line."""
    try:
        suite = load_suite(folder)
    except SuiteError as exc:
        assert exc.path is not None and str(exc).startswith(exc.path)
        return
    assert any(case.kind is not Kind.AUX for case in suite.cases)
    assert len({case.id for case in suite.cases}) == len(suite.cases)
    for case in suite.cases:
        assert case.text.strip() and case.id.strip()
        assert 0 <= case.label < (suite.num_classes or 2)
        assert case.label in suite.labels.values()
        location = suite.locations[case.id]
        lines = location.path.read_bytes().split(b"\n")
        assert json.loads(lines[location.line - 1])["text"] == case.text
    assert 1 <= suite.repair.rank and 0 < suite.repair.gamma_h <= suite.repair.gamma_s


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
toml_atoms = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["auto", "must_fix", "must_keep", "aux", "relu", "fix.jsonl", "../model", "m.py:f"])
)
json_values = st.recursive(
    toml_atoms,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@FUZZ
@given(data=st.binary(max_size=400) | st.sampled_from([DEFAULT_TOML.encode()[:n] for n in range(0, 80, 5)]))
def test_warp_toml_of_arbitrary_bytes_only_raises_suite_errors(tmp_path, fuzz_model, data):
    folder = tmp_path / "s"
    folder.mkdir(exist_ok=True)
    (folder / "fix.jsonl").write_text(GOOD)
    (folder / "warp.toml").write_bytes(data)
    _only_suite_errors(folder)


def _toml_value(value) -> str:
    """A TOML rendering of a JSON-like value (None: an empty inline table)."""
    if value is None:
        return "{}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return {"inf": "inf", "-inf": "-inf"}.get(repr(value), "nan")
        return repr(value)
    if isinstance(value, (int, str)):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


TOML_KEYS = [
    "name",
    "model.path",
    "model.factory",
    "model.layer",
    "model.max_length",
    "model.batch_size",
    "model.engine",
    "model.ray",
    "model.ray.address",
    "model.ray.num_gpus",
    "model.ray.num_workers",
    "labels.negative",
    "labels",
    "cases.path",
    "cases.kind",
    "repair.rank",
    "repair.gamma_s",
    "repair.gamma_h",
    "repair.lam",
    "repair.blas_threads",
    "repair.solver",
    "repair.solver.max_iter",
    "repair.solver.eps_abs",
    "unknown",
]


@FUZZ
@given(values=st.dictionaries(st.sampled_from(TOML_KEYS), json_values, min_size=1, max_size=4))
def test_warp_toml_with_arbitrary_values_for_its_keys_only_raises_suite_errors(tmp_path, fuzz_model, values):
    tables: dict[str, dict[str, object]] = {"": {}, "model": {"path": str(fuzz_model)}, "cases": {"path": "fix.jsonl"}}
    for dotted, value in values.items():
        table, _, key = dotted.rpartition(".")
        tables.setdefault(table, {})[key] = value
    lines = [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in tables.pop("").items()]
    for table, body in tables.items():
        lines.append(f"[[{table}]]" if table == "cases" else f"[{table}]")
        lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in body.items()]
    folder = tmp_path / "s"
    folder.mkdir(exist_ok=True)
    (folder / "fix.jsonl").write_text(GOOD)
    (folder / "warp.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _only_suite_errors(folder)


@FUZZ
@given(
    records=st.lists(
        st.dictionaries(
            st.sampled_from(["id", "text", "text_pair", "label", "kind", "source", "original", "extra"]),
            json_values,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_case_lines_with_arbitrary_json_values_only_raise_suite_errors(tmp_path, fuzz_model, records):
    folder = tmp_path / "s"
    folder.mkdir(exist_ok=True)
    toml = DEFAULT_TOML.replace("{model}", str(fuzz_model)).replace('kind = "must_fix"\n', "")
    (folder / "warp.toml").write_text(toml)
    (folder / "fix.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    _only_suite_errors(folder)
