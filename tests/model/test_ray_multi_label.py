"""engine 'ray' on a multi-label model (several labels per text): the repair's certificate (every
case's answer, its gap before the repair as Ray's workers encoded it, Cert 1-3) is the in-process
encoder's. The workers are other processes, so the gaps are compared to float tolerance; every
verdict and count exactly.

Slow (every Ray worker imports torch and loads the model), as the other Ray tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from testkit.multi_label import NAMES, build_multi_label, logits_of, texts, truth
from testkit.suite_builder import write_kind_suite as write_suite

from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.cli import main

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'warp-check[ray]')")
# Ray Data imported at collection, before any test runs: an in-process pytester run (test_ray_engine_hostile.py)
# drops the modules it imported first, and pyarrow refuses a second copy of Ray Data's tensor type.
pytest.importorskip("ray.data")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A four-label suite: texts the model gets wrong on some label (must_fix, full and partial
    answers) and texts it gets right on every label (must_keep), a threshold moved on one label."""
    folder = tmp_path_factory.mktemp("ray_multi_label")
    model = build_multi_label(folder / "model")
    batch = texts(160, seed=3)
    logits = logits_of(model, batch)
    wrong, right = [], []
    for i, (text, z) in enumerate(zip(batch, logits, strict=True)):
        on = truth(text)
        gap = np.where(np.isin(np.arange(len(NAMES)), on), z, -z)
        record = {"id": f"c{i}", "text": text}
        if gap.min() < 0 and len(wrong) < 6:
            j = int(np.argmin(gap))  # every other case states only its wrong label
            wrong.append(
                record | ({"labels": [NAMES[k] for k in on]} if i % 2 else {"on" if j in on else "off": [NAMES[j]]})
            )
        elif gap.min() > 0.5 and len(right) < 30:
            right.append(record | {"labels": [NAMES[k] for k in on]})
    assert len(wrong) >= 4 and len(right) >= 20, "the tiny model's margins moved: pick another seed"
    return write_suite(folder, model, wrong, right, model_table="thresholds = { intense = 0.6 }\n")


def same_within_tolerance(got: object, expected: object, where: str = "") -> None:
    """Equal records, their floats to 1e-4 relative (another process's float32 sums, through a solve)."""
    if isinstance(expected, float) and isinstance(got, (int, float)):
        assert got == pytest.approx(expected, rel=1e-4, abs=1e-6), where
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and set(got) == set(expected), where
        for key in expected:
            same_within_tolerance(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), where
        for i, (a, b) in enumerate(zip(got, expected, strict=True)):
            same_within_tolerance(a, b, f"{where}[{i}]")
    else:
        assert got == expected, where


def test_ray_repairs_a_multi_label_suite_with_the_local_certificates(local_ray, suite, tmp_path):
    outs = {}
    for engine in ("local", "ray"):
        outs[engine] = tmp_path / engine
        command = ["repair", str(suite), "--out", str(outs[engine]), "--cache", str(tmp_path / f"cache-{engine}")]
        assert main([*command, "--engine", engine]) == 0
    expected, got = (json.loads((outs[e] / CERTIFICATE_NAME).read_text()) for e in ("local", "ray"))
    assert got["summary"] == expected["summary"]
    stated = sum(len((suite / f"{kind}.jsonl").read_text().splitlines()) for kind in ("must_fix", "must_keep"))
    assert len(got["cases"]) == len(expected["cases"]) == stated
    # Per case: its answer, Cert 1-3's verdicts exactly, its gaps, ε* and radii to float tolerance.
    assert all(case["cert1"] and case["cert3"] for case in got["cases"] if case["kind"] == "must_fix")
    assert all(case["cert2"] for case in got["cases"] if case["kind"] == "must_keep")
    same_within_tolerance(got["cases"], expected["cases"], "cases")
    for engine in ("local", "ray"):
        assert main(["verify", str(outs[engine])]) == 0  # recomputed in float64 from the saved weights
