"""Every suite mistake is a collection error naming file, line and field: the exact words.

Each case writes one broken suite into pytester's folder and collects it in-process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit.hub import hub_suite, lay_out_hub_cache
from testkit.inner_runs import warm_inner_runs

import pytest_warp.state

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest")
GOOD = '{"id": "a", "text": "the movie was good", "label": "positive"}\n'
TWO = GOOD + '{"id": "b", "text": "the movie was bad", "label": "negative"}\n'


def literal(pattern: str) -> str:
    """An fnmatch pattern where only ``*`` is special."""
    return pattern.replace("[", "[[]").replace("?", "[?]")


def toml(
    model: str, *, model_lines: str = "", cases: str = '[[cases]]\npath = "fix.jsonl"\nkind = "must_fix"\n'
) -> str:
    return f"[model]\npath = {json.dumps(model)}\n{model_lines}\n{cases}"


# (warp.toml, {file: content}, expected line). "{model}" is the tiny model's folder.
MISTAKES = {
    "bad toml": ("[model\npath = 1\n", {}, "suite/warp.toml:1: invalid TOML: *"),
    "byte order mark": (
        "\ufeff" + toml("{model}"),
        {"fix.jsonl": GOOD},
        "suite/warp.toml:1: starts with a byte order mark (U+FEFF): save the file as UTF-8 without a BOM",
    ),
    "unknown top-level table": (
        '[modle]\npath = "x"\n',
        {},
        "suite/warp.toml:1: field 'modle': unknown key 'modle' in the top level of warp.toml (did you mean 'model'?); "
        "known keys: name, description, model, labels, cases, repair, traffic, deferred",
    ),
    "hub id": (
        toml("distilbert-base-uncased"),
        {"fix.jsonl": GOOD},
        "suite/warp.toml:2: field 'model.path': model folder 'distilbert-base-uncased' does not exist; relative "
        "paths are read from the folder of warp.toml; a Hub model is model.id = 'org/name' with model.revision, "
        "read from the local Hugging Face cache (never downloaded: hf download org/name)",
    ),
    "model without weights": (
        toml("empty-model"),
        {"fix.jsonl": GOOD, "empty-model/config.json": "{}"},
        "suite/warp.toml:2: field 'model.path': model folder 'empty-model' has no weights (*.safetensors)",
    ),
    "unknown model key": (
        toml("{model}", model_lines="layers = 'auto'"),
        {"fix.jsonl": GOOD},
        "suite/warp.toml:3: field 'model.layers': unknown key 'layers' in [model] (did you mean 'layer'?); "
        "known keys: path, factory, id, revision, allow_moving_revision, layer, max_length, batch_size, device, "
        "threads, engine, ray, decision, thresholds",
    ),
    "unknown repair key": (
        toml("{model}") + "\n[repair]\nrank = 2\nrnak = 4\n",
        {"fix.jsonl": GOOD},
        "suite/warp.toml:10: field 'repair.rnak': unknown key 'rnak' in [repair] (did you mean 'rank'?); known keys: *",
    ),
    "nan in repair settings": (
        toml("{model}") + "\n[repair]\nlam = nan\n",
        {"fix.jsonl": GOOD},
        "suite/warp.toml:9: field 'repair.lam': nan: must be a finite number > 0",
    ),
    "negative rank": (
        toml("{model}") + "\n[repair]\nrank = -1\n",
        {"fix.jsonl": GOOD},
        "suite/warp.toml:9: field 'repair.rank': -1: must be an integer >= 1",
    ),
    "missing case file": (
        toml("{model}", cases='[[cases]]\npath = "missing.jsonl"\nkind = "must_fix"\n'),
        {},
        "suite/warp.toml:5: field 'cases[0].path': case file 'missing.jsonl' does not exist (relative to warp.toml)",
    ),
    "no cases table": (
        toml("{model}", cases=""),
        {},
        "suite/warp.toml: field 'cases': no [[cases]] table: list at least one JSONL case file ([[cases]] path, kind)",
    ),
    "bad kind of a case file": (
        toml("{model}", cases='[[cases]]\npath = "fix.jsonl"\nkind = "must-fix"\n'),
        {"fix.jsonl": GOOD},
        "suite/warp.toml:6: field 'cases[0].kind': unknown kind 'must-fix'; use one of must_fix, must_keep, aux",
    ),
    "bad json": (
        toml("{model}"),
        {"fix.jsonl": GOOD + '{"text": "so good", "label": "positive"\n'},
        "suite/fix.jsonl:2: not valid JSON: Expecting ',' delimiter (column 40); one JSON object a line",
    ),
    "not an object": (
        toml("{model}"),
        {"fix.jsonl": '["the movie was good", "positive"]\n'},
        'suite/fix.jsonl:1: a case is a JSON object ({"text": ..., "label": ...}), got list',
    ),
    "missing text": (
        toml("{model}"),
        {"fix.jsonl": '{"id": "a", "label": "positive"}\n'},
        "suite/fix.jsonl:1: field 'text': missing field 'text'",
    ),
    "missing label": (
        toml("{model}"),
        {"fix.jsonl": TWO + '{"text": "fine"}\n'},
        "suite/fix.jsonl:3: field 'label': missing field 'label'",
    ),
    "unknown field": (
        toml("{model}"),
        {"fix.jsonl": '{"text": "good", "lable": "positive"}\n'},
        "suite/fix.jsonl:1: field 'lable': unknown field (did you mean 'label'?); known fields: id, text, "
        "text_pair, label, kind, source, original, fixed_by",
    ),
    "unknown label": (
        toml("{model}"),
        {"fix.jsonl": '{"text": "good", "label": "positve"}\n'},
        "suite/fix.jsonl:1: field 'label': unknown label 'positve' (did you mean 'positive'?); use one of "
        "'negative', 'positive' or a class id 0..1",
    ),
    "label id out of range": (
        toml("{model}"),
        {"fix.jsonl": '{"text": "good", "label": 7}\n'},
        "suite/fix.jsonl:1: field 'label': class id 7 is not a class of the model; use one of 'negative', "
        "'positive' or a class id 0..1",
    ),
    "duplicate id": (
        toml("{model}"),
        {"fix.jsonl": GOOD + GOOD},
        "suite/fix.jsonl:2: field 'id': duplicate id 'a': already used at fix.jsonl:1",
    ),
    "field given twice": (
        toml("{model}"),
        {"fix.jsonl": '{"text": "good", "text": "bad", "label": 1}\n'},
        "suite/fix.jsonl:1: field 'text': field 'text' is given twice",
    ),
    "empty text": (
        toml("{model}"),
        {"fix.jsonl": '{"text": "   ", "label": "positive"}\n'},
        "suite/fix.jsonl:1: field 'text': is empty: a case needs some text",
    ),
    "bad kind on a line": (
        toml("{model}"),
        {"fix.jsonl": '{"text": "good", "label": 1, "kind": "fix"}\n'},
        "suite/fix.jsonl:1: field 'kind': unknown kind 'fix'; use one of must_fix, must_keep, aux",
    ),
    "no testable case": (
        toml("{model}", cases='[[cases]]\npath = "fix.jsonl"\nkind = "aux"\n'),
        {"fix.jsonl": GOOD},
        "suite/warp.toml:4: field 'cases': the suite has no must_fix or must_keep cases: there is nothing to test; "
        "add some with warp-check import SUITE FILE (or write JSONL lines into its case files)",
    ),
    "layer that is not dense": (
        toml("{model}", model_lines='layer = ["distilbert.embeddings.LayerNorm", "relu", "classifier"]'),
        {"fix.jsonl": GOOD},
        "suite/warp.toml:3: field 'model.layer': repair layer 'distilbert.embeddings.LayerNorm' is a LayerNorm, "
        "not a dense (nn.Linear) layer: WARP repairs a dense → activation → linear head, or the final linear layer",
    ),
    "head that does not reproduce the logits": (
        toml("{model}", model_lines='layer = ["pre_classifier", "tanh", "classifier"]'),
        {"fix.jsonl": GOOD},
        "suite/warp.toml:3: field 'model.layer': the head at 'pre_classifier' → tanh → 'classifier' does not "
        "reproduce the model's logits (max error *)*WARP cannot repair this layer; layer = 'auto' finds the head *",
    ),
    "unknown activation": (
        toml("{model}", model_lines='layer = ["pre_classifier", "softplus", "classifier"]'),
        {"fix.jsonl": GOOD},
        "suite/warp.toml:3: field 'model.layer': activation 'softplus' is not supported by WARP (known: *)",
    ),
    "factory that raises": (
        '[model]\nfactory = "models.py:build"\n\n[[cases]]\npath = "fix.jsonl"\nkind = "must_fix"\n',
        {"fix.jsonl": GOOD, "models.py": "def build():\n    raise RuntimeError('no model today')\n"},
        "suite/warp.toml:2: field 'model.factory': factory 'models.py:build' raised RuntimeError: no model today "
        "(at models.py line 2)",
    ),
}


@pytest.fixture(scope="module", autouse=True)
def _warm_imports(distilbert_dir: Path) -> None:
    warm_inner_runs(distilbert_dir)


def test_every_suite_mistake_is_a_collection_error_with_file_line_and_field(pytester, distilbert_dir):
    # One broken suite per folder, all collected in one run (a run costs ~0.5 s; 27 would cost 15).
    expected = []
    for i, (text, files, line) in enumerate(MISTAKES.values()):
        folder = pytester.path / f"m{i:02d}"
        folder.mkdir()
        (folder / "warp.toml").write_text(text.replace("{model}", str(distilbert_dir)), encoding="utf-8")
        for name, content in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(content, encoding="utf-8")
        expected += [f"*ERROR collecting {folder.name}/warp.toml*", literal(line.replace("suite/", f"{folder.name}/"))]
    result = pytester.runpytest(*INNER, "--collect-only")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(expected)
    result.stdout.fnmatch_lines([f"*no tests collected, {len(MISTAKES)} errors*"])
    output = result.stdout.str()
    assert "Traceback" not in output and "raise " not in output


def test_non_utf8_case_file_names_the_line_and_byte(pytester, distilbert_dir):
    folder = pytester.path / "suite"
    folder.mkdir()
    (folder / "warp.toml").write_text(toml(str(distilbert_dir)))
    (folder / "fix.jsonl").write_bytes(GOOD.encode() + b'{"text": "caf\xe9", "label": 1}\n')
    result = pytester.runpytest(*INNER, "--collect-only")
    result.stdout.fnmatch_lines(["suite/fix.jsonl:2: not valid UTF-8 (byte 0xe9 at column 14)"])


def test_one_broken_suite_does_not_hide_the_others(pytester, distilbert_dir):
    good, bad = pytester.path / "good", pytester.path / "bad"
    for folder, cases in ((good, GOOD), (bad, '{"text": "x"}\n')):
        folder.mkdir()
        (folder / "warp.toml").write_text(toml(str(distilbert_dir)))
        (folder / "fix.jsonl").write_text(cases)
    result = pytester.runpytest(*INNER, "--continue-on-collection-errors")
    outcomes = result.parseoutcomes()
    assert outcomes["errors"] == 1 and outcomes.get("passed", 0) + outcomes.get("failed", 0) == 1
    result.stdout.fnmatch_lines(["bad/fix.jsonl:1: field 'label': missing field 'label'"])


# ---- whatever loading a suite raises is one collection error naming warp.toml, never a traceback


def one_collection_error(pytester: pytest.Pytester, *lines: str) -> None:
    result = pytester.runpytest(*INNER, "--collect-only")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting suite/warp.toml*", *lines, "*1 error*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_damaged_hub_cache_is_one_collection_error(pytester, distilbert_dir, monkeypatch):
    repo = lay_out_hub_cache(pytester.path / "hub", distilbert_dir, monkeypatch)
    (repo / "refs" / "main").unlink()
    (repo / "refs" / "main").mkdir()
    hub_suite(pytester.path / "suite", 'revision = "main"\nallow_moving_revision = true')
    one_collection_error(pytester, "suite/warp.toml:2: field 'model.id': */refs/main: a folder where *hf download*")


@pytest.mark.parametrize(
    ("raised", "line"),
    [
        (
            IsADirectoryError(21, "Is a directory", "/cache/refs/main"),
            "suite/warp.toml: cannot load the suite: Is a directory (/cache/refs/main)",
        ),
        (RuntimeError("boom\nsecond line"), "suite/warp.toml: internal error: RuntimeError: boom"),
    ],
    ids=["os-error", "internal-bug"],
)
def test_an_error_of_any_type_while_loading_is_one_collection_error(pytester, monkeypatch, raised, line):
    def load_suite(*args, **kwargs):
        raise raised

    # internal: an error of any type while loading (a bug among them): no input raises an arbitrary one
    monkeypatch.setattr(pytest_warp.state, "load_suite", load_suite)
    hub_suite(pytester.path / "suite", "")
    one_collection_error(pytester, literal(line))


def test_an_audit_of_a_certificate_nested_200k_deep_names_it_without_a_traceback(pytester, distilbert_dir):
    folder = pytester.path / "suite"
    folder.mkdir()
    (folder / "warp.toml").write_text(toml(str(distilbert_dir)))
    (folder / "fix.jsonl").write_text(GOOD)
    certificate = pytester.path / "repaired" / "warp_certificate.json"
    certificate.parent.mkdir()
    certificate.write_text("[" * 200_000 + "]" * 200_000)
    result = pytester.runpytest(*INNER, "--warp-certificate", str(certificate), "--warp-model", str(distilbert_dir))
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # a certificate the core refuses: one refusal, as the CLI's exit 2
    output = result.stdout.str() + result.stderr.str()
    assert f"{certificate}: nested more than 64 levels deep" in output
    assert "Traceback" not in output and "RecursionError" not in output
