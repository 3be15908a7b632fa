"""Two processes at once: one --warp-out, one representation cache.

Each child waits at a barrier (a file per process) placed where the race matters, so the two
really overlap there instead of merely starting together.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from testkit.suite_builder import split_cases, write_suite

from warp_check import Case, ClassifierAdapter, evaluate, verify
from warp_check.cases import Kind

BARRIER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path

    def barrier(folder, parties=2, timeout=120):
        folder = Path(folder)
        folder.mkdir(exist_ok=True)
        (folder / str(os.getpid())).write_text("here")
        deadline = time.monotonic() + timeout
        while len(list(folder.iterdir())) < parties:
            if time.monotonic() > deadline:
                raise SystemExit("the other process never reached the barrier")
            time.sleep(0.01)
    """
)

# A pytest run that repairs into --warp-out, after both runs have looked at the folder.
PYTEST_CHILD = BARRIER + textwrap.dedent(
    """
    import torch
    torch.set_num_threads(1)
    import pytest
    import warp_check.certify.artefact as artefact

    claim = artefact.claim_destination
    def claim_then_wait(*args, **kwargs):
        destination = claim(*args, **kwargs)
        barrier(sys.argv[1])
        return destination
    artefact.claim_destination = claim_then_wait
    sys.exit(pytest.main(["-p", "no:randomly", "-p", "no:cacheprovider", "-q", *sys.argv[2:]]))
    """
)

# Encode cases into a shared cache; both processes write their shards at the same moment.
CACHE_CHILD = BARRIER + textwrap.dedent(
    """
    import json
    import torch
    torch.set_num_threads(1)
    import warp_check.cache.shards as shards
    from warp_check import Case, ClassifierAdapter, evaluate
    from warp_check.cases import Kind

    barrier_dir, model, cache, cases_file, out_file = sys.argv[1:6]
    save = shards.ShardStore.save
    def wait_then_save(self, keys, V):
        barrier(barrier_dir)
        save(self, keys, V)
    shards.ShardStore.save = wait_then_save
    records = json.loads(Path(cases_file).read_text())
    cases = [Case(id=c["id"], text=c["text"], label=c["label"], kind=Kind.MUST_KEEP) for c in records]
    adapter = ClassifierAdapter.from_pretrained(model)
    evaluation = evaluate(adapter, cases, cache_dir=cache, progress=False)
    Path(out_file).write_text(json.dumps({"gaps": evaluation.gaps.tolist(), "encoded": evaluation.encoded.encoded}))
    """
)


def _env() -> dict[str, str]:
    return os.environ | {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def _run_both(script: str, argvs: list[list[str]]) -> list[subprocess.CompletedProcess]:
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script, *argv],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for argv in argvs
    ]
    done = []
    for child in children:
        out, _ = child.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(child.args, child.returncode, out, ""))
    return done


def test_two_pytest_runs_repairing_into_one_folder_one_wins_the_other_fails_cleanly(distilbert_dir, tmp_path):
    wrong, right = split_cases(distilbert_dir, 24, seed=2)
    suite = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong, keep=right)
    out = tmp_path / "repaired"
    argv = [str(tmp_path / "barrier"), str(suite), "--warp-repair", "--warp-out", str(out)]
    runs = _run_both(PYTEST_CHILD, [argv, argv])
    codes = sorted(run.returncode for run in runs)
    # The loser's output folder was taken: the core refuses its run (the CLI's exit 2), which pytest
    # reports as one error and exit 4, never as a model that failed its cases.
    assert codes == [0, pytest.ExitCode.USAGE_ERROR], "\n\n".join(run.stdout for run in runs)
    winner, loser = sorted(runs, key=lambda run: run.returncode)
    assert f"{len(wrong) + len(right)} passed" in winner.stdout
    assert f"{len(wrong) + len(right) - 1} skipped" in loser.stdout and " 1 error in " in loser.stdout
    assert "was written by another process while this repair ran" in loser.stdout
    assert "nothing was written" in loser.stdout
    assert "Traceback" not in loser.stdout and "Traceback" not in winner.stdout
    verification = verify(out)
    assert verification.ok, [c.detail for c in verification.failures()]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".repaired")) == []


def test_two_processes_filling_one_cache_at_once_leave_whole_shards_and_right_answers(distilbert_dir, tmp_path):
    wrong, right = split_cases(distilbert_dir, 40, seed=4)
    records = [{"id": c["id"], "text": c["text"], "label": 0 if c["label"] == "negative" else 1} for c in wrong + right]
    halves = [records[:28], records[12:]]  # overlapping: the shared rows are written by both
    cache = tmp_path / "cache"
    argvs = []
    for i, half in enumerate(halves):
        (tmp_path / f"cases-{i}.json").write_text(json.dumps(half))
        argvs.append(
            [str(tmp_path / "barrier"), str(distilbert_dir), str(cache), str(tmp_path / f"cases-{i}.json")]
            + [str(tmp_path / f"result-{i}.json")]
        )
    runs = _run_both(CACHE_CHILD, argvs)
    assert [run.returncode for run in runs] == [0, 0], "\n\n".join(run.stdout for run in runs)

    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    cases = [Case(id=r["id"], text=r["text"], label=r["label"], kind=Kind.MUST_KEEP) for r in records]
    fresh = evaluate(adapter, cases, progress=False)  # no cache: the reference
    index = {c.id: i for i, c in enumerate(cases)}
    for i, half in enumerate(halves):
        result = json.loads((tmp_path / f"result-{i}.json").read_text())
        assert result["encoded"] == len(half)  # both encoded everything: they met before saving
        # Other batches pad differently: float32 v agrees to rounding, not bit for bit.
        assert np.allclose(result["gaps"], fresh.gaps[[index[r["id"]] for r in half]], rtol=0, atol=1e-5)

    from safetensors import safe_open

    shards = sorted(cache.rglob("*.safetensors"))
    assert len(shards) == 2 and not any(p.name.startswith(".") for p in shards)
    for shard in shards:
        with safe_open(str(shard), framework="numpy") as f:
            assert f.get_tensor("v").shape[0] == len(json.loads(f.metadata()["keys"]))
    cached = evaluate(adapter, cases, cache_dir=cache, progress=False)
    assert cached.encoded.encoded == 0 and np.allclose(cached.gaps, fresh.gaps, rtol=0, atol=1e-5)
