"""Safe loading: model folders are data, never code; suites run only their own factory.

Trust model. A suite is code the user chose to run, like a conftest.py: the file its
``[model] factory = "file.py:fn"`` names is imported and called (suites may share one, so
it may lie outside the suite's folder), and ``--warp-model``/``--model`` skip it. Everything
else is data: case files and warp.toml are parsed, never
evaluated; model folders are read with safetensors (or transformers' ``weights_only``
torch.load) and never with remote code; certificates and caches are JSON and safetensors.
Each test below plants code that would leave a marker file if it ever ran.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from testkit import REPO

from warp_check.cli import main
from warp_check.errors import CertificateError, ModelError, SuiteError
from warp_check.model.adapter import ClassifierAdapter
from warp_check.suite.loader import load_suite

pytest_plugins = ["pytester"]
SOURCES = sorted((REPO / "warp_check").rglob("*.py")) + sorted((REPO / "pytest_warp").glob("*.py"))
GOOD = '{"id": "a", "text": "the movie was good", "label": "positive"}\n'


class Planted:
    """Unpickling this runs ``code`` (what a malicious pytorch_model.bin does)."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self):
        return (exec, (self.code,))


def marker_code(marker: Path) -> str:
    return f"__import__('pathlib').Path({str(marker)!r}).write_text('code ran')"


def pickle_model(distilbert_dir: Path, folder: Path, marker: Path, *, keep_safetensors: bool = False) -> Path:
    """A model folder whose pytorch_model.bin runs code when unpickled."""
    shutil.copytree(distilbert_dir, folder)
    if not keep_safetensors:
        (folder / "model.safetensors").unlink()
    planted = {"distilbert.embeddings.word_embeddings.weight": Planted(marker_code(marker))}
    torch.save(planted, folder / "pytorch_model.bin")
    return folder


def suite_on(folder: Path, model: Path, **extra: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    toml = f'[model]\npath = "{model}"\n\n[[cases]]\npath = "fix.jsonl"\nkind = "must_fix"\n'
    (folder / "warp.toml").write_text(toml, encoding="utf-8")
    (folder / "fix.jsonl").write_text(GOOD, encoding="utf-8")
    for name, text in extra.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


# -- the source never unpickles or trusts remote code --------------------------------------------


def _calls(pattern: str) -> list[str]:
    found = []
    for path in SOURCES:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if re.search(pattern, line.split("#")[0]):
                found.append(f"{path.name}:{number}: {line.strip()}")
    return found


def test_the_source_has_no_pickle_no_remote_code_and_no_eval():
    assert _calls(r"\b(import|from)\s+(pickle|cPickle|dill|cloudpickle|joblib|marshal|shelve)\b") == []
    assert _calls(r"allow_pickle\s*=\s*True|yaml\.load\(|\bpickle\.loads?\(") == []
    assert _calls(r"trust_remote_code\s*=\s*(?!False\b)") == []
    assert _calls(r"(?<![.\w])(eval|exec)\(") == []
    # torch.load only with weights_only=True (on the same line: the call is short).
    assert [c for c in _calls(r"torch\.load\(") if "weights_only=True" not in c] == []
    # Every transformers loader call says trust_remote_code=False (next line allowed).
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"Auto\w+\.from_pretrained\(", text):
            call = text[m.start() : text.index(")", m.end()) + 1]
            assert "trust_remote_code=False" in call, f"{path.name}: {call}"
    # The one place that imports user code: the suite's own factory.
    assert [c.split(":")[0] for c in _calls(r"exec_module\(")] == ["model_source.py"]


# -- model folders are data ------------------------------------------------------------------------


def test_the_planted_pickle_really_runs_code_when_unpickled(distilbert_dir, tmp_path):
    """The control: without weights_only the file below is an exploit, so the tests can fail."""
    marker = tmp_path / "ran"
    folder = pickle_model(distilbert_dir, tmp_path / "model", marker)
    torch.load(folder / "pytorch_model.bin", weights_only=False)
    assert marker.read_text() == "code ran"


def test_a_pickle_that_runs_code_is_refused_by_loader_cli_and_plugin(distilbert_dir, tmp_path, pytester, capsys):
    marker = tmp_path / "ran"
    folder = pickle_model(distilbert_dir, tmp_path / "model", marker)
    with pytest.raises(ModelError, match="cannot load the model"):
        ClassifierAdapter.from_pretrained(folder)
    suite = suite_on(pytester.path / "suite", folder)
    assert main(["check", str(suite), "--cache", "none"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "field 'model.path': cannot load the model in" in line
    assert "its pickled weights hold Python objects, not only tensors (GLOBAL exec" in line
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "--collect-only")
    result.stdout.fnmatch_lines(["*suite/warp.toml:2: field 'model.path': cannot load the model in *"])
    assert "Traceback" not in result.stdout.str()
    assert not marker.exists()


def test_safetensors_win_over_a_pickle_beside_them(distilbert_dir, tmp_path):
    marker = tmp_path / "ran"
    folder = pickle_model(distilbert_dir, tmp_path / "model", marker, keep_safetensors=True)
    adapter = ClassifierAdapter.from_pretrained(folder)
    reference = ClassifierAdapter.from_pretrained(distilbert_dir)
    assert torch.equal(adapter.repair_layer.weight, reference.repair_layer.weight)
    assert not marker.exists()


def test_auto_map_to_custom_code_is_never_imported(distilbert_dir, tmp_path, capsys):
    marker = tmp_path / "ran"
    folder = Path(shutil.copytree(distilbert_dir, tmp_path / "model"))
    (folder / "evil.py").write_text(marker_code(marker) + "\n", encoding="utf-8")
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {
        "AutoConfig": "evil.EvilConfig",
        "AutoModelForSequenceClassification": "evil.EvilModel",
    }
    (folder / "config.json").write_text(json.dumps(config))
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer_config["auto_map"] = {"AutoTokenizer": ["evil.EvilTokenizer", None]}
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    try:
        adapter = ClassifierAdapter.from_pretrained(folder)
    except ModelError as exc:  # refusing is fine too; running the code is not
        assert "evil" in str(exc) or "trust_remote_code" in str(exc)
    else:
        assert type(adapter.model).__name__ == "DistilBertForSequenceClassification"
    suite = suite_on(tmp_path / "suite", folder)
    assert main(["check", str(suite), "--cache", "none"]) in (0, 1, 2)
    capsys.readouterr()
    assert not marker.exists()


def test_verify_reads_only_safetensors(distilbert_dir, tmp_path):
    marker = tmp_path / "ran"
    folder = pickle_model(distilbert_dir, tmp_path / "model", marker)
    certificate = {
        "format": "warp-certificate/1",
        "model": {
            "repair_layer": "pre_classifier",
            "activation": "relu",
            "classifier": "classifier",
            "sha256_repair_layer": "0" * 64,
            "sha256_frozen": "0" * 64,
        },
        "settings": {},
        "repair": {},
        "lipschitz": {"L": 1.0},
        "cases": [],
        "summary": {},
    }
    (folder / "warp_certificate.json").write_text(json.dumps(certificate))
    from warp_check import verify

    with pytest.raises(CertificateError, match="holds no \\*.safetensors weights"):
        verify(folder)
    assert not marker.exists()


# -- suites: only their own factory runs ----------------------------------------------------------


def test_a_model_override_never_runs_the_suite_factory(distilbert_dir, tmp_path):
    marker = tmp_path / "ran"
    folder = tmp_path / "suite"
    suite_on(folder, distilbert_dir, **{"models.py": marker_code(marker) + "\ndef build():\n    return 'x'\n"})
    toml = (folder / "warp.toml").read_text().replace(f'path = "{distilbert_dir}"', 'factory = "models.py:build"')
    (folder / "warp.toml").write_text(toml)
    assert load_suite(folder, model=distilbert_dir).model_dir == distilbert_dir.resolve()
    assert not marker.exists()
    with pytest.raises(SuiteError, match="model folder '.*/x' does not exist"):  # without it, it does run
        load_suite(folder)
    assert marker.exists()


def test_python_files_that_the_suite_does_not_name_never_run(distilbert_dir, tmp_path, capsys):
    marker = tmp_path / "ran"
    model = Path(shutil.copytree(distilbert_dir, tmp_path / "model"))
    planted = marker_code(marker) + "\n"
    for name in ("modeling_distilbert.py", "configuration_distilbert.py", "__init__.py", "evil.py"):
        (model / name).write_text(planted)
    folder = suite_on(
        tmp_path / "suite", model, **{"models.py": planted, "conftest.py": planted, "__init__.py": planted}
    )
    assert load_suite(folder).model_dir == model.resolve()
    assert main(["check", str(folder), "--cache", "none", "-q"]) in (0, 1)
    capsys.readouterr()
    assert not marker.exists()


def test_case_files_and_warp_toml_are_parsed_never_evaluated(distilbert_dir, tmp_path):
    marker = tmp_path / "ran"
    code = marker_code(marker)
    folder = suite_on(tmp_path / "suite", distilbert_dir)
    lines = [
        {"id": "py", "text": f"__import__('builtins').exec({code!r})", "label": "positive"},
        {"id": "yaml", "text": "!!python/object/apply:os.system ['touch ran']", "label": "negative"},
        {"id": "fmt", "text": "{0.__class__.__mro__}", "label": "positive", "source": "{__import__('os')}"},
    ]
    (folder / "fix.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    (folder / "warp.toml").write_text(f'name = "{code}"\n' + (folder / "warp.toml").read_text())
    suite = load_suite(folder)
    assert [c.text for c in suite.cases] == [x["text"] for x in lines] and suite.name == code
    # These texts are only unknown tokens to the tiny vocabulary: refused as no text (2), never run.
    assert main(["check", str(folder), "--cache", "none", "-q"]) == 2
    assert not marker.exists()
