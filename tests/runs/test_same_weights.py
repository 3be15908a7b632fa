"""The same suite gives the same repaired weights, bit for bit, however it is run: serially or under
pytest-xdist, from a cold cache or one filled by a run of a subset (issue 39), where MKL runs its
strict reproducibility mode; and v within float32 rounding everywhere.

The causes: the encoder's thread count (MKL splits a small product's sums among its threads; the
encoder now runs at one), and on some CPUs (Ice Lake) MKL's kernels for a short product depend on
its row count, so a case's v moves in its last bits with the batch it is in. Measured on the
example's MiniLM model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from testkit import REPO

EXAMPLE = REPO / "example_suites"


# Where MKL's kernels for a short product depend on its row count (seen on Ice Lake, not on Skylake-X
# or AMD), a case's v alone and in a batch part by float32 ulps; MKL's strict reproducibility mode
# (MKL_CBWR=AUTO,STRICT, read when MKL loads: a fresh process) removes that, at ~1.5x the encoder's time.
STRICT = {"MKL_CBWR": "AUTO,STRICT"}
V_TOLERANCE = 1e-5  # relative to max(1, |v|): ulps of float32 summed in another order, with room


def _alone_and_together() -> dict[str, float]:
    """Each short case of the example encoded alone and in its suite's batches, torch at two threads:
    how many differ in any bit, and by how much at most (relative)."""
    import torch

    from warp_check.model.encode import encode_cases
    from warp_check.releases.load import load_adapter
    from warp_check.suite.loader import load_suite

    suite = load_suite(EXAMPLE / "reviews-distilbert")
    adapter = load_adapter(suite)
    cases = list(suite.cases)
    lengths = [len(f["input_ids"]) for f in adapter.tokenize([c.text for c in cases], [None] * len(cases))]
    short = [i for i, n in enumerate(lengths) if n <= 12]  # MKL's split of 7- and 9-row products moved v
    assert len(short) >= 10
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        together = encode_cases(adapter, cases, progress=False).V[short]
        alone = np.stack([encode_cases(adapter, [cases[i]], progress=False).V[0] for i in short])
    finally:
        torch.set_num_threads(before)
    differing = int(np.sum(np.any(alone != together, axis=1)))
    relative = float(np.max(np.abs(alone - together) / np.maximum(1.0, np.abs(together))))
    return {"short": len(short), "differing": differing, "relative": relative}


def test_a_cases_v_alone_and_in_a_batch_agree_within_float32_rounding_whatever_torchs_threads():
    """A serial run on two cores had torch at two threads: the encoder runs at one (threads = 1), so
    that moves nothing; what batch a case is in may move its v by ulps on some CPUs, never more."""
    got = _alone_and_together()
    assert got["relative"] <= V_TOLERANCE, got


def test_under_mkl_strict_mode_a_cases_v_is_the_same_bits_alone_and_in_a_batch():
    code = "import json, test_same_weights as t; print(json.dumps(t._alone_and_together()))"
    path = os.pathsep.join([str(Path(__file__).parent), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).parent,
        env=os.environ | STRICT | {"PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["differing"] == 0, got


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args]
    # The same bytes however the cases were batched is MKL's strict mode's promise (see STRICT).
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=900, env=os.environ | STRICT)


def _weights(folder: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.mark.slow
def test_the_example_repaired_under_xdist_serially_and_from_a_subsets_cache_has_the_same_weights(tmp_path):
    pytest.importorskip("xdist")
    outs = {}
    for how, before, extra in (
        ("serial", None, ()),
        ("xdist", None, ("-n", "2")),
        ("after-a-subset", ("-m", "must_keep"), ()),  # the cache filled by a run of some of the cases
    ):
        copy = tmp_path / how
        shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns(".warp"))
        if before is not None:
            done = _run(copy, "reviews-distilbert", *before)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        outs[how] = tmp_path / f"out-{how}"
        done = _run(copy, "reviews-distilbert", "--warp-repair", "--warp-out", str(outs[how]), *extra)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    serial = _weights(outs["serial"])
    for how in ("xdist", "after-a-subset"):
        other = _weights(outs[how])
        assert other.keys() == serial.keys()
        differing = [name for name in serial if not np.array_equal(serial[name], other[name])]
        assert differing == [], f"{how}: {differing} differ from the serial run's"
