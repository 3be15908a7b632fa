"""``layer = "auto"`` repairs the final linear layer where the dense form it found cannot converge, and
says so (summary, certificate); a head the user named is repaired as named, never replaced."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from testkit.suite_builder import exit_code, split_cases, write_suite

from warp_check.cases import Case, Kind
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.specs import HeadForm, HeadSpec
from warp_check.runs.repair_cases import repair_cases

# The most any gap can be when only the pooler's weight changes (tanh is bounded by 1): below γ_s = 1.
CEILING = 0.8
FALLBACK = (
    "layer = 'auto' fell back to the final linear layer: the dense form 'bert.pooler.dense' → tanh → 'classifier'"
)


@pytest.fixture(scope="module")
def capped(bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict], list[dict]]:
    """The tiny BERT with its classifier scaled down so that no pooler weight gives any case a gap
    of γ_s (the same predictions, smaller gaps), and its (wrong, right) cases: the classifier itself can."""
    folder = tmp_path_factory.mktemp("capped") / "model"
    shutil.copytree(bert_dir, folder)
    weights = load_file(folder / "model.safetensors")
    w, b = weights["classifier.weight"].double(), weights["classifier.bias"].double()
    reach = float((w[1] - w[0]).abs().sum() + (b[1] - b[0]).abs())
    for name in ("classifier.weight", "classifier.bias"):
        weights[name] = weights[name] * (CEILING / reach)
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the autouse fixture is per test; this one runs first
    try:
        wrong, right = split_cases(folder, 24, seed=2)
    finally:
        torch.set_num_threads(threads)
    assert len(wrong) >= 2 and len(right) >= 8
    return folder, wrong, right


def test_auto_repairs_the_final_linear_layer_where_the_dense_form_cannot_converge(capped, tmp_path, capsys):
    model, wrong, right = capped
    adapter = ClassifierAdapter.from_pretrained(model)
    assert adapter.spec.form is HeadForm.DENSE and adapter.spec.fallback == HeadSpec.final_linear("classifier")
    head = adapter.head()
    assert np.abs(head.Wc[1] - head.Wc[0]).sum() + abs(head.bc[1] - head.bc[0]) == pytest.approx(CEILING)
    suite = write_suite(tmp_path / "suite", model=model, fix=wrong, keep=right)
    assert exit_code(["check", str(suite), "-q"]) == 1
    capsys.readouterr()
    out = tmp_path / "repaired"
    assert exit_code(["repair", str(suite), "--out", str(out), "-q"]) == 0
    said = capsys.readouterr().out
    assert f"  model: {model} (classifier (final linear layer))" in said
    assert f"  head: {FALLBACK} did not converge (not_converged after " in said, said
    assert "on the final linear layer 'classifier' after the dense form 'bert.pooler.dense'" in said
    certificate = json.loads((out / "warp_certificate.json").read_text())
    record = certificate["model"]
    assert (record["form"], record["repair_layer"], record["activation"], record["classifier"]) == (
        "final_linear",
        "classifier",
        "identity",
        None,
    )
    assert record["found_by"].startswith(FALLBACK)
    assert record["sha256_frozen"] == record["sha256_source_frozen"]  # the classifier alone changed
    assert certificate["summary"]["cert1"] == f"{len(wrong)}/{len(wrong)}"
    assert exit_code(["verify", str(out), "--suite", str(suite)]) == 0
    # Comparisons of one layer keep to it: the dense form alone, which cannot converge.
    cases = [
        Case(id=r["id"], text=r["text"], label=["negative", "positive"].index(r["label"]), kind=kind)
        for records, kind in ((wrong, Kind.MUST_FIX), (right, Kind.MUST_KEEP))
        for r in records
    ]
    kept = repair_cases(adapter, cases, progress=False, fallback=False)
    assert not kept.result.repaired and kept.spec is adapter.spec and kept.artefact is None


@pytest.mark.parametrize(
    ("layer", "code", "said"),
    [
        (
            '["bert.pooler.dense", "tanh", "classifier"]',
            1,
            "a named head does not fall back by itself: layer = 'final' repairs the final linear layer "
            "'classifier' instead",
        ),
        ('"final"', 0, "  head: layer = 'final': the final linear layer"),
    ],
    ids=["dense", "final"],
)
def test_a_named_head_is_repaired_as_named(capped, tmp_path, capsys, layer, code, said):
    model, wrong, right = capped
    suite = write_suite(tmp_path / "suite", model=model, fix=wrong, keep=right, model_lines=f"layer = {layer}\n")
    out = tmp_path / "repaired"
    assert exit_code(["repair", str(suite), "--out", str(out), "-q"]) == code
    printed = capsys.readouterr().out
    assert said in printed and "fell back" not in printed, printed
    assert out.exists() is (code == 0)


def test_where_the_final_layer_fails_too_the_pair_it_must_grow_most_to_separate_is_named(capped, tmp_path, capsys):
    # OSQP named and starved: neither form gets a QP answered, and the message says which pair of
    # cases asks the final layer to grow most (what a user can relabel or drop).
    model, wrong, right = capped
    starved = '[repair.solver]\nbackend = "osqp"\nmax_iter = 1\n'
    suite = write_suite(tmp_path / "suite", model=model, fix=wrong, keep=right, extra=starved)
    out = tmp_path / "repaired"
    assert exit_code(["repair", str(suite), "--out", str(out), "-q"]) == 1
    said = capsys.readouterr().out
    assert "the final linear layer 'classifier' was repaired instead and did not converge either (solver_failed" in said
    pair = r"'[^']+' \((positive|negative)\) and '[^']+' \((positive|negative)\) are [0-9.]+ apart"
    assert re.search(pair, said), said
    assert "at the input of 'classifier'" in said and not out.exists()
