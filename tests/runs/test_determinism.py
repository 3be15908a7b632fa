"""Two repairs of the same suite and model give bit-identical weights and the same certificate.

Only timing fields may differ (``created``, ``seconds``). Checked in one process (one run
encoding afresh, one reading a warm representation cache) and against a second process with
another PYTHONHASHSEED, so neither set/dict order nor the cache can change an answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from testkit.suite_builder import split_cases, write_suite

from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.cli import main

TIMING_KEYS = frozenset({"created", "seconds"})


@pytest.fixture(scope="module")
def suite(distilbert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    wrong, right = split_cases(distilbert_dir, 30, seed=5)
    assert wrong and right
    folder = tmp_path_factory.mktemp("determinism") / "suite"
    return write_suite(folder, model=distilbert_dir, fix=wrong, keep=right, extra="[repair]\nrank = 3\n")


@pytest.fixture(scope="module")
def repaired(suite: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The suite repaired once in this process, without a cache: what the other runs are compared with."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the autouse fixture is per test; this one runs first
    try:
        out = tmp_path_factory.mktemp("determinism") / "repaired"
        assert main(["repair", str(suite), "--out", str(out), "--cache", "none", "-q"]) == 0
    finally:
        torch.set_num_threads(threads)
    return out


def without_timing(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def certificate(folder: Path) -> dict[str, Any]:
    return json.loads((folder / CERTIFICATE_NAME).read_text(encoding="utf-8"))


def assert_same_artefact(a: Path, b: Path) -> None:
    first, second = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert first.keys() == second.keys()
    for name in first:
        assert first[name].dtype == second[name].dtype
        assert torch.equal(first[name].view(torch.uint8), second[name].view(torch.uint8)), name
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    cert_a, cert_b = certificate(a), certificate(b)
    assert cert_a["repair"]["converged"] and cert_a["summary"]
    assert without_timing(cert_a) == without_timing(cert_b)
    assert {p.name for p in a.iterdir()} == {p.name for p in b.iterdir()}


def test_two_repairs_in_one_process_are_bit_identical_with_and_without_the_cache(suite, repaired, tmp_path, capsys):
    cache = tmp_path / "cache"
    assert main(["check", str(suite), "--cache", str(cache), "-q"]) == 1  # fills the cache
    assert main(["repair", str(suite), "--out", str(tmp_path / "b"), "--cache", str(cache), "--json"]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed[printed.index("{") :])["details"]["from_cache"] > 0  # the second run read v
    assert_same_artefact(repaired, tmp_path / "b")
    # The hashes in the certificate really are those of the written weights (not a constant).
    assert (
        certificate(repaired)["model"]["sha256_repair_layer"] != certificate(repaired)["model"]["sha256_source_frozen"]
    )


def test_a_repair_in_another_process_with_another_hash_seed_is_bit_identical(suite, repaired, tmp_path):
    env = os.environ | {"PYTHONHASHSEED": "12345", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "warp_check.cli", "repair", str(suite), "--out", str(tmp_path / "there")]
        + ["--cache", "none", "-q"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert_same_artefact(repaired, tmp_path / "there")


def test_an_artefact_made_from_another_devices_representations_passes_the_cpu_audit(suite, tmp_path, monkeypatch):
    # A GPU's v differs from the CPU's by ~1e-6 relative. The repair's v is perturbed here by 1e-5
    # relative (10× that, a fixed pattern per case), as if encoded elsewhere; the audit then
    # recomputes every gap from the CPU's own v. The QP aims 1e-3 above each margin: it holds.
    import numpy as np

    from warp_check.model.adapter import ClassifierAdapter

    real = ClassifierAdapter.forward_batch

    def elsewhere(self, features):
        v, logits = real(self, features)
        rng = np.random.default_rng(len(features))
        return v * (1 + 1e-5 * rng.choice([-1.0, 1.0], size=v.shape)), logits

    # internal: another machine's encoder (v off by 1e-5) cannot be had on this one
    monkeypatch.setattr(ClassifierAdapter, "forward_batch", elsewhere)
    out = tmp_path / "out"
    assert main(["repair", str(suite), "--out", str(out), "--cache", "none", "-q"]) == 0
    monkeypatch.undo()
    assert main(["verify", str(out), "--suite", str(suite)]) == 0
    audit = ["check", str(suite), "--model", str(out), "--cache", "none", "-q"]
    assert main(audit) == 0  # the gate on the CPU: every must_fix and must_keep case right


def _other_kernels() -> tuple[str, str]:
    """torch's CPU kernel set here, and another one this CPU can run (ATEN_CPU_CAPABILITY)."""
    here = torch.backends.cpu.get_cpu_capability()
    return here, "avx2" if here.lower() not in ("avx2", "default") else "default"


def test_an_artefact_repaired_under_one_kernel_set_passes_the_audit_under_another(suite, repaired):
    # What holds on every machine (README, "What is reproducible where"): not the bits of the
    # weights, but the certificates' verdicts. Another kernel set sums in another order, so v and
    # every gap move by ulps; the audit encodes v again under it and must still accept every claim.
    here, other = _other_kernels()
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    env |= {"ATEN_CPU_CAPABILITY": other, "OMP_NUM_THREADS": "1"}
    probe = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    ran = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert ran.stdout.strip() != here, (here, ran.stdout, ran.stderr)  # the audit really runs other kernels
    audit = ["verify", str(repaired), "--suite", str(suite)]  # verify reads no cache unless told
    gate = ["check", str(suite), "--model", str(repaired), "--cache", "none", "-q"]
    for command in (audit, gate):
        done = subprocess.run(
            [sys.executable, "-m", "warp_check.cli", *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
