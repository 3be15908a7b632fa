"""Bad models and numbers, and faults while writing: each ends clearly, and nothing half-written.

After every fault: the input model folder is byte-identical, and the output folder is either
absent or complete (``verify`` accepts it). Kills are real SIGKILLs of a child process, at
named steps of the save (the child signals, then waits to be killed) and at random moments;
a full disk is a writer that raises ENOSPC part-way.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from testkit import disks
from testkit.suite_builder import tree_digest, write_suite

from warp_check import verify
from warp_check.certify import artefact
from warp_check.certify import certificate as certificate_module
from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.cli import main

pytest_plugins = ["pytester"]
TESTS = Path(__file__).parent


@pytest.fixture
def cases(tiny_split: tuple[list[dict], list[dict]]) -> tuple[list[dict], list[dict]]:
    return tiny_split


@pytest.fixture
def suite(tiny_suite: Path) -> Path:
    return tiny_suite


def repair(suite: Path, out: Path, *extra: str) -> int:
    return main(["repair", str(suite), "--out", str(out), "--cache", "none", "-q", *extra])


# Progress to stderr however short the step: a refusal "before any encoding" is the one line it prints
# (encoding says "warp: encoding cases: ..." there).
ENCODING_SHOWN = ("--progress", "lines", "--progress-after", "0")


def leftovers(out: Path) -> list[str]:
    """What a writer left beside ``out``: temp or trash folders."""
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def assert_absent_or_valid(out: Path) -> str:
    if not out.exists():
        return "absent"
    assert (out / CERTIFICATE_NAME).is_file(), sorted(p.name for p in out.iterdir())
    verification = verify(out)
    assert verification.ok, [c.detail for c in verification.failures()]
    return "complete"


# -- bad models and numbers -------------------------------------------------------------------------


def _nan_model(distilbert_dir: Path, folder: Path, value: float) -> Path:
    import shutil

    from safetensors.torch import load_file, save_file

    shutil.copytree(distilbert_dir, folder)
    state = load_file(str(folder / "model.safetensors"))
    state["distilbert.transformer.layer.1.ffn.lin1.weight"][0, 0] = value
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nan_or_inf_in_the_weights_is_a_model_error_and_nothing_is_written(
    suite, distilbert_dir, tmp_path, capsys, value
):
    model = _nan_model(distilbert_dir, tmp_path / "broken", value)
    before = tree_digest(model)
    out = tmp_path / "out"
    assert repair(suite, out, "--model", str(model)) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "parameter 'distilbert.transformer.layer.1.ffn.lin1.weight' holds 1 NaN/Inf value(s)" in line
    assert not out.exists() and tree_digest(model) == before


def test_inf_representations_stop_before_the_repair(suite, distilbert_dir, tmp_path, capsys, monkeypatch):
    from warp_check.model.adapter import ClassifierAdapter

    real = ClassifierAdapter.forward_batch

    def overflowing(self, features):
        v, logits = real(self, features)
        v[0, 3] = float("inf")  # as an overflowing encoder would give
        return v, logits

    # internal: an encoder that overflows is refused at load (check_logits); this guard is reached only past it
    monkeypatch.setattr(ClassifierAdapter, "forward_batch", overflowing)
    # internal: an encoder that overflows is refused at load (check_logits); this guard is reached only past it
    monkeypatch.setattr(ClassifierAdapter, "check_logits", lambda self, v, logits, head=None: 0.0)
    before = tree_digest(distilbert_dir)
    out = tmp_path / "out"
    assert repair(suite, out) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "the encoder gives NaN/Inf representations at 'pre_classifier'" in line
    assert not out.exists() and tree_digest(distilbert_dir) == before


def test_a_cache_shard_poisoned_with_nan_is_a_miss_not_an_answer(suite, tmp_path, capsys):
    import numpy as np
    from safetensors.numpy import load_file, save_file

    cache = tmp_path / "cache"
    assert main(["check", str(suite), "--cache", str(cache), "--json"]) == 1
    clean = json.loads(capsys.readouterr().out)
    (shard,) = cache.rglob("*.safetensors")
    v = load_file(str(shard))["v"]
    v[::2] = np.nan
    from safetensors import safe_open

    with safe_open(str(shard), framework="numpy") as f:
        metadata = f.metadata()
    save_file({"v": v}, str(shard), metadata=metadata)
    shutil.rmtree(cache / "warm")  # the warm entry would answer without reading a shard
    assert main(["check", str(suite), "--cache", str(cache), "--json"]) == 1
    again = json.loads(capsys.readouterr().out)
    assert again["details"]["encoded"] == (len(v) + 1) // 2  # the poisoned rows were encoded afresh
    # Encoded afresh in other batches than the clean run's: the same gaps within float32 rounding of v
    # (some CPUs' MKL kernels sum a product of another row count in another order).
    assert [c["properties"]["gap"] for c in again["cases"]] == pytest.approx(
        [c["properties"]["gap"] for c in clean["cases"]], rel=1e-5, abs=1e-5
    )


def test_a_rank_larger_than_the_layer_is_refused_before_any_encoding(suite, tmp_path, capsys):
    out = tmp_path / "out"
    assert repair(suite, out, "--rank", "33", *ENCODING_SHOWN) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "warp-check repair: error: --rank=33: exceeds the repair layer 'pre_classifier' (32×32): the rank can be "
        "at most 32"
    )
    assert not out.exists()
    # Given in warp.toml, the error names its line and field.
    toml = suite / "warp.toml"
    toml.write_text(toml.read_text() + "\n[repair]\nrank = 40\n")
    line_of_rank = toml.read_text().splitlines().index("rank = 40") + 1
    assert repair(suite, out) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith(
        f"warp.toml:{line_of_rank}: field 'repair.rank': 40: exceeds the repair layer 'pre_classifier' (32×32): "
        "the rank can be at most 32"
    )
    assert not out.exists()
    # The default, given nowhere: said to be the default, and where to set it.
    from warp_check.errors import SettingsError
    from warp_check.runs.repair import SuiteFacts, _where_given
    from warp_check.suite.loader import load_suite

    toml.write_text(toml.read_text().replace("\n[repair]\nrank = 40\n", ""))
    facts = SuiteFacts.of(load_suite(suite))
    error = _where_given(facts, SettingsError("rank", 2, "exceeds a 1-wide layer"), {"rank": "--rank"})
    assert str(error) == "rank=2: exceeds a 1-wide layer (the default: set [repair] rank in warp.toml)"


def test_must_keep_cases_that_forbid_every_fix_fail_clearly_and_write_nothing(distilbert_dir, cases, tmp_path, capsys):
    # The same tokens twice ("  x" and "x" tokenise alike), kept with the model's label and
    # to be fixed to the other: the same v, so no weights give both margins.
    _, right = cases
    keep = right[:3]
    flipped = {"negative": "positive", "positive": "negative"}
    fix = [{"id": f"fix-{c['id']}", "text": "  " + c["text"], "label": flipped[c["label"]]} for c in keep]
    suite = write_suite(tmp_path / "suite", model=distilbert_dir, fix=fix, keep=keep, extra="[repair]\nmax_iter = 60\n")
    before = tree_digest(distilbert_dir)
    out = tmp_path / "out"
    assert repair(suite, out) == 2  # found before the QP: the same input with both labels
    said = capsys.readouterr().err
    assert "field 'label'" in said and "are the same input to the model" in said and "fix-" in said, said
    assert not out.exists() and leftovers(out) == [] and tree_digest(distilbert_dir) == before


@pytest.mark.parametrize(
    ("settings", "status", "advice"),
    [
        # OSQP named stops at its iteration limit ("auto" would hand the QP to the interior point)
        ('[repair.solver]\nbackend = "osqp"\nmax_iter = 1\n', "solver_failed", "max_iter"),
        # the interior-point and augmented Lagrangian methods hand an undecided QP over to OSQP
        ('[repair.solver]\nbackend = "alm"\nalm_max_iter = 1\nmax_iter = 1\n', "solver_failed", "alm_max_iter (now 1)"),
        ('[repair.solver]\nbackend = "ipm"\nipm_max_iter = 1\nmax_iter = 1\n', "solver_failed", "ipm_max_iter (now 1)"),
        ("[repair]\nmax_iter = 1\ngamma_s = 3.0\ngamma_h = 0.3\n", "not_converged", "max_iter"),  # the loop's T
    ],
)
def test_iteration_limits_end_in_a_clear_failure_and_nothing_written(
    distilbert_dir, cases, tmp_path, capsys, settings, status, advice
):
    wrong, right = cases
    named = 'layer = ["pre_classifier", "relu", "classifier"]\n'  # "auto" would fall back to the final layer
    suite = write_suite(
        tmp_path / "suite", model=distilbert_dir, fix=wrong, keep=right, model_lines=named, extra=settings
    )
    before = tree_digest(distilbert_dir)
    out = tmp_path / "out"
    assert repair(suite, out) == 1
    printed = capsys.readouterr().out
    assert f"repair failed ({status})" in printed and advice in printed, printed
    assert "nothing was written" in printed
    assert not out.exists() and leftovers(out) == [] and tree_digest(distilbert_dir) == before


# -- a full disk --------------------------------------------------------------------------------------


def _no_space(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _full_disk_at(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make one step of the save fail with ENOSPC, after it has written part of its file."""
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    if where == "weights":

        def half_weights(self, folder, **_kwargs):
            (Path(folder) / "model.safetensors").write_bytes(b"\x00" * 64)
            _no_space()

        monkeypatch.setattr(PreTrainedModel, "save_pretrained", half_weights)
    elif where == "safetensors":  # the real writer's own error, not an OSError

        def safetensors_full(tensors, filename, *_args, **_kwargs):
            from safetensors import SafetensorError

            Path(filename).write_bytes(b"\x00" * 64)
            raise SafetensorError(
                "Error while serializing: "
                'IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'
            )

        monkeypatch.setattr("transformers.modeling_utils.safe_save_file", safetensors_full)
    elif where == "tokenizer":
        monkeypatch.setattr(PreTrainedTokenizerBase, "save_pretrained", _no_space)
    elif where == "certificate":
        real = certificate_module.write_text_atomically

        def write_text(path, text):
            if Path(path).name == CERTIFICATE_NAME:
                Path(path).write_text(text[:10])
                _no_space()
            return real(path, text)

        # internal: the disk fills at the certificate's write alone; no outside hook tells that write from the others
        monkeypatch.setattr(certificate_module, "write_text_atomically", write_text)
    elif where == "fsync":  # delayed allocation: the disk is found full only when flushed
        monkeypatch.setattr(os, "fsync", _no_space)
    else:
        raise AssertionError(where)


FULL_DISK_STEPS = ["weights", "safetensors", "tokenizer", "certificate", "fsync"]


@pytest.mark.parametrize("where", FULL_DISK_STEPS)
def test_a_full_disk_while_saving_is_one_clear_error_and_leaves_nothing(
    suite, distilbert_dir, tmp_path, capsys, monkeypatch, where
):
    before = tree_digest(distilbert_dir)
    out = tmp_path / "out"
    _full_disk_at(where, monkeypatch)
    assert repair(suite, out) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("warp-check repair: error: No space left on device")
    assert not out.exists() and leftovers(out) == [] and tree_digest(distilbert_dir) == before


def test_a_failed_rename_over_an_older_artefact_puts_the_older_one_back(suite, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    assert repair(suite, out) == 0
    older = tree_digest(out)
    real = os.rename

    def rename(src, dst):
        if Path(dst) == out and ".tmp-" in Path(src).name:  # the new folder cannot take the old one's place
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(dst))
        return real(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    # internal: a system without renameat2(RENAME_EXCHANGE) (macOS, older kernels): the check is a ctypes call
    monkeypatch.setattr(artefact, "_exchange", lambda a, b: False)  # the two-rename path
    assert repair(suite, out, "--rank", "3") == 2
    assert "Input/output error" in capsys.readouterr().err
    assert tree_digest(out) == older and leftovers(out) == []


def test_an_out_folder_without_room_is_refused_before_the_encode(suite, small_disk, capsys):
    out = small_disk / "out"
    disks.fill(small_disk, leave=64 * 1024)
    assert repair(suite, out, *ENCODING_SHOWN) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "MiB free there, the repaired model needs about" in line and "choose another output folder" in line
    assert not out.exists()


def test_a_read_only_out_folder_is_refused_before_the_encode(suite, small_disk, capsys):
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    assert repair(suite, small_disk / "out", *ENCODING_SHOWN) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "cannot be written (Read-only file system" in line


def test_a_disk_that_fills_during_the_save_is_one_clear_error(suite, small_disk, capsys, monkeypatch):
    # Room when the run starts, none when it saves (another job took it): the real SafetensorError.
    out = small_disk / "out"
    disks.fill(small_disk, leave=16 * 1024)
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda path: real(path)._replace(free=1 << 40))  # room, it says
    assert repair(suite, out) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("warp-check repair: error: No space left on device")
    assert not out.exists() and leftovers(out) == []


def test_a_full_cache_is_one_warning_and_the_same_answers(suite, small_disk, capsys):
    disks.fill(small_disk, leave=0)
    assert main(["check", str(suite), "--cache", "none", "--json"]) == 1
    without = json.loads(capsys.readouterr().out)
    assert main(["check", str(suite), "--cache", str(small_disk / "cache"), "--json"]) == 1
    captured = capsys.readouterr()
    (warning,) = captured.err.splitlines()
    assert warning.startswith("warp-check: warning: the representation cache") and "No space left" in warning
    assert json.loads(captured.out)["cases"] == without["cases"]


def test_a_cache_path_that_is_a_file_is_one_warning_too(suite, capsys):
    assert main(["check", str(suite), "--cache", str(suite / "warp.toml"), "-q"]) == 1  # the gate's own verdict
    (warning,) = capsys.readouterr().err.splitlines()
    assert warning.startswith("warp-check: warning: the representation cache") and "going on without it" in warning


def test_a_full_cache_under_pytest_is_one_warning_not_failures(pytester, suite, small_disk):
    disks.fill(small_disk, leave=0)
    args = ("-p", "no:randomly", "-p", "no:cacheprovider", str(suite))
    without = pytester.runpytest(*args, "--warp-cache", "none").parseoutcomes()
    # With warnings as errors too (as this project runs its own tests): a cache is not the gate.
    result = pytester.runpytest(*args, "-W", "error", "--warp-cache", str(small_disk / "cache"))
    assert result.parseoutcomes() == without
    result.stdout.fnmatch_lines(["  warning: the representation cache*No space left on device*"])
    assert result.stdout.str().count("the representation cache") == 1


def test_folders_are_exchanged_in_one_step_where_the_system_can(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        folder.mkdir()
        (folder / "name").write_text(folder.name)
    if not artefact._exchange(a, b):
        pytest.skip("no renameat2(RENAME_EXCHANGE) here: the two-rename path is tested on its own")
    assert ((a / "name").read_text(), (b / "name").read_text()) == ("b", "a")


def test_a_failed_exchange_over_an_older_artefact_leaves_the_older_one(suite, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    assert repair(suite, out) == 0
    older = tree_digest(out)

    def exchange(a, b):
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(b))

    # internal: an I/O error from renameat2 itself, a ctypes call no outside patch reaches
    monkeypatch.setattr(artefact, "_exchange", exchange)
    assert repair(suite, out, "--rank", "3") == 2
    assert "Input/output error" in capsys.readouterr().err
    assert tree_digest(out) == older and leftovers(out) == []


def test_a_full_disk_is_one_usage_error_under_pytest_without_a_traceback(pytester, suite, cases, monkeypatch):
    _full_disk_at("weights", monkeypatch)
    out = pytester.path / "out"
    result = pytester.runpytest(
        "-p", "no:randomly", "-p", "no:cacheprovider", str(suite), "--warp-repair", "--warp-out", str(out)
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # the environment refused, as the command's exit 2
    result.stdout.fnmatch_lines(["*OSError: [[]Errno 28[]] No space left on device*"])
    assert "Traceback" not in result.stdout.str()
    result.assert_outcomes(errors=1, skipped=len(cases[0]) + len(cases[1]) - 1)
    assert not out.exists()


# -- SIGKILL while saving ----------------------------------------------------------------------------

# A child process imports everything and repairs once, then forks one writer per job, so each
# kill costs a save (or, for "random", a whole CLI repair), not a Python start. A writer writes
# its pid to <job>.pid; at the step its job names it writes <job>.marker and sleeps, and the test
# SIGKILLs it. "random": no pause; the test kills it after a random delay.
SERVER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    import torch
    torch.set_num_threads(1)
    import transformers
    import warp_check.certify.artefact as artefact
    from warp_check.cli import main

    def patch(step, marker, out):
        def pause():
            Path(marker).write_text("here")
            time.sleep(120)

        if step == "weights-written":
            save = transformers.PreTrainedModel.save_pretrained
            def save_then_pause(self, *a, **k):
                save(self, *a, **k)
                pause()
            transformers.PreTrainedModel.save_pretrained = save_then_pause
        elif step == "tokenizer":
            transformers.PreTrainedTokenizerBase.save_pretrained = lambda self, *a, **k: pause()
        elif step == "fsync":
            fsync_tree = artefact._fsync_tree
            def fsync_then_pause(folder):
                fsync_tree(folder)
                pause()
            artefact._fsync_tree = fsync_then_pause
        elif step in ("rename", "renamed"):
            put_in_place = artefact._put_in_place
            def paused_put_in_place(tmp, dst):
                if step == "rename":
                    pause()
                put_in_place(tmp, dst)
                if step == "renamed":
                    pause()
            artefact._put_in_place = paused_put_in_place
        elif step == "old-moved-away":  # a system without an atomic exchange: two renames
            artefact._exchange = lambda a, b: False
            rename = os.rename
            def paused_rename(src, dst):
                rename(src, dst)
                if Path(src) == Path(out):
                    pause()
            os.rename = paused_rename

    suite, work = sys.argv[1:3]
    # The repair itself, once: a named-step writer only saves it (what the kill points are about).
    from warp_check.releases.load import load_adapter
    from warp_check.runs.repair_cases import repair_cases
    from warp_check.suite.loader import load_suite
    loaded = load_suite(suite)
    adapter = load_adapter(loaded)
    outcome = repair_cases(adapter, loaded.cases, loaded.repair, progress=False)
    assert outcome.result.repaired, outcome.result.message

    def save(out):
        repaired = adapter.with_head(outcome.result.head_after)
        artefact.write_artefact(
            repaired.model, adapter.tokenizer, outcome.certificate, out, source=adapter.source,
            repair_layer=adapter.spec.repair_layer, expect=artefact.claim_destination(out, adapter.source),
        )
        return 0

    # The writers lock the folder their outs share: they start when the test's own repairs are done.
    while not (Path(work) / "go").exists():
        time.sleep(0.01)
    for job in sys.argv[3:]:
        step, out = job.split("=", 1)
        base = Path(work) / Path(out).name
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            Path(f"{base}.pid").write_text(str(os.getpid()))
            patch(step, f"{base}.marker", out)
            sys.stdout = open(os.devnull, "w")
            if step == "random":  # the whole command: load, encode, repair, save
                os._exit(main(["repair", suite, "--out", out, "--cache", "none", "-q"]))
            os._exit(save(out))
        _, status = os.waitpid(pid, 0)
        Path(f"{base}.status").write_text(f"{status} {time.monotonic() - start}")
    """
)


class Server:
    """The forking child; ``jobs`` are (step, out folder) pairs, handled in order."""

    def __init__(self, suite: Path, work: Path, jobs: list[tuple[str, Path]]) -> None:
        self.work = work
        env = os.environ | {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
        args = [f"{step}={out}" for step, out in jobs]
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(suite), str(work), *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def wait_for(self, path: Path, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not path.exists():
            if self.process.poll() is not None:
                pytest.fail(f"the child ended (rc {self.process.returncode}): {self.process.stderr.read().decode()}")
            assert time.monotonic() < deadline, f"the child never wrote {path.name}"
            time.sleep(0.01)

    def writer_pid(self, out: Path) -> int:
        path = self.work / f"{out.name}.pid"
        self.wait_for(path)
        while not path.read_text():
            time.sleep(0.01)
        return int(path.read_text())

    def status(self, out: Path) -> tuple[int, float]:
        path = self.work / f"{out.name}.status"
        self.wait_for(path)
        while len(path.read_text().split()) < 2:
            time.sleep(0.01)
        status, seconds = path.read_text().split()
        return int(status), float(seconds)

    def close(self) -> None:
        assert self.process.wait(timeout=60) == 0, self.process.stderr.read().decode()
        self.process.stderr.close()


def sigkill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


KILL_STEPS = ["weights-written", "tokenizer", "fsync", "rename", "old-moved-away", "renamed"]
RANDOM_KILLS = 2


def test_sigkill_at_each_step_of_the_save_and_at_random_moments_never_leaves_half_a_folder(
    suite, distilbert_dir, tmp_path
):
    before = tree_digest(distilbert_dir)
    outs = {step: tmp_path / f"out-{step}" for step in KILL_STEPS}
    randoms = [tmp_path / f"out-random-{i}" for i in range(RANDOM_KILLS)]
    server = Server(suite, tmp_path, [*outs.items()] + [("random", out) for out in randoms])
    start = time.monotonic()
    older = {}
    for step in ("rename", "old-moved-away", "renamed"):  # a repair over an older artefact (while the child imports)
        assert repair(suite, outs[step]) == 0
        older[step] = tree_digest(outs[step])
    duration = (time.monotonic() - start) / 2  # of one whole repair, to spread the random kills over
    (tmp_path / "go").touch()

    outcomes = {}
    for step, out in outs.items():
        pid = server.writer_pid(out)
        server.wait_for(tmp_path / f"{out.name}.marker")
        sigkill(pid)
        status, _ = server.status(out)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        outcomes[step] = assert_absent_or_valid(out)
        assert tree_digest(distilbert_dir) == before
    # Killed before the new folder took its place: nothing new, and an older artefact still there
    # whole; renamed: the new one, whole. Without an atomic exchange (two renames), a kill between
    # them leaves the older artefact beside its place, and the next writer puts it back.
    assert outcomes == {
        "weights-written": "absent",
        "tokenizer": "absent",
        "fsync": "absent",
        "rename": "complete",
        "old-moved-away": "absent",
        "renamed": "complete",
    }
    assert tree_digest(outs["rename"]) == older["rename"]
    artefact._remove_stale(outs["old-moved-away"])
    assert tree_digest(outs["old-moved-away"]) == older["old-moved-away"]
    assert leftovers(outs["old-moved-away"]) == []

    # Random moments: spread over how long a whole repair takes here.
    rng = random.Random(7)
    for out in randoms:
        pid = server.writer_pid(out)
        time.sleep(rng.uniform(0.3, 1.1) * duration)  # the repair, the save, or just after it
        try:
            sigkill(pid)
        except ProcessLookupError:  # it had already finished
            pass
        server.status(out)
        assert_absent_or_valid(out)
        assert tree_digest(distilbert_dir) == before
    server.close()

    # The next write clears what the killed writers left beside their folders.
    out = outs["fsync"]
    assert leftovers(out)
    assert repair(suite, out) == 0
    assert leftovers(out) == [] and assert_absent_or_valid(out) == "complete"


def test_a_text_longer_than_the_model_takes_is_truncated_not_a_crash(distilbert_dir, cases, tmp_path, capsys):
    # The tiny model has 64 positions; the suite asks for max_length 128 (the default).
    wrong, right = cases
    long = {"id": "long", "text": " ".join([right[0]["text"]] * 40), "label": right[0]["label"]}
    suite = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong, keep=[*right, long])
    assert main(["check", str(suite), "--cache", "none", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert {c["id"] for c in data["cases"]} >= {"long"}


# -- a report that cannot be written ------------------------------------------------------------------


def test_a_report_folder_that_is_a_file_is_a_usage_error_before_the_work(cases, distilbert_dir, tmp_path, capsys):
    # The suite's model has damaged weights: loading it first would be the error said instead.
    model = tmp_path / "model"
    shutil.copytree(distilbert_dir, model)
    (model / "model.safetensors").write_bytes(b"\x00" * 64)
    suite = write_suite(tmp_path / "suite", model=model, fix=cases[0], keep=cases[1])
    taken = tmp_path / "report"
    taken.write_text("a file")
    assert main(["check", str(suite), "--cache", "none", "--report", str(taken)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "exists and is not a folder" in line
    assert main(["check", str(suite), "--cache", "none", "--report", str(tmp_path / "free")]) == 2
    assert "exists and is not a folder" not in capsys.readouterr().err  # the model's own error, once it loads


def test_a_report_pytest_cannot_write_fails_the_run(pytester, suite, tmp_path, monkeypatch):
    taken = tmp_path / "taken"
    taken.write_text("a file")
    args = ("-p", "no:randomly", "-p", "no:cacheprovider", str(suite))
    result = pytester.runpytest(*args, "--warp-report", str(taken))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--warp-report: report folder*exists and is not a folder*"])

    def disk_full(out_dir, runs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(out_dir))

    # internal: the disk fills after the run, at the report's write; a real full disk (small_disk) needs root
    monkeypatch.setattr("pytest_warp.plugin.write_report", disk_full)
    result = pytester.runpytest(*args, "--warp-report", str(tmp_path / "report"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["report NOT written: *No space left on device*"])


# -- Ctrl-C ---------------------------------------------------------------------------------------------


def test_ctrl_c_at_any_moment_is_one_line_and_leaves_nothing_half_written(suite, tmp_path):
    # SIGINT to a whole CLI repair at moments spread over it: loading, encoding, the loop, the save.
    # Either it finished (exit 0, a complete artefact) or it says it was interrupted, exit 130,
    # no traceback, and the out folder is absent or complete, with nothing left beside it.
    # The installed command, as users run it (`python -m warp_check.cli` ends by the signal now and
    # then under load although it printed its line: runpy's, not ours).
    command = [str(Path(sys.executable).with_name("warp-check")), "repair", str(suite), "--cache", "none", "-q"]
    env = os.environ | {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    start = time.monotonic()
    full = subprocess.run([*command, "--out", str(tmp_path / "full")], env=env, capture_output=True, text=True)
    assert full.returncode == 0, full.stderr
    duration = time.monotonic() - start
    for i, fraction in enumerate((0.35, 0.6, 0.8, 0.95)):
        out = tmp_path / f"out-{i}"
        process = subprocess.Popen([*command, "--out", str(out)], env=env, stderr=subprocess.PIPE, text=True)
        time.sleep(fraction * duration)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
        assert "Traceback" not in err, err
        if process.returncode == 0:
            assert assert_absent_or_valid(out) == "complete"
        else:
            assert process.returncode == 130, err
            assert err.strip().splitlines()[-1] == "warp-check: interrupted"
            assert_absent_or_valid(out)
        assert leftovers(out) == []


def _interrupted_extension_import(*args, **kwargs):
    # What pybind11 does with a Ctrl-C that lands while its module initialises (osqp, matplotlib and
    # scipy ship such modules, imported lazily while a model loads): ImportError, raised from the interrupt.
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as interrupt:
        raise ImportError("initialization failed") from interrupt


def test_ctrl_c_that_an_extension_reraises_as_import_error_is_still_ctrl_c(suite, tmp_path, monkeypatch, capsys):
    from transformers import AutoModelForSequenceClassification

    monkeypatch.setattr(AutoModelForSequenceClassification, "from_pretrained", _interrupted_extension_import)
    assert repair(suite, tmp_path / "out") == 130  # not 2, "cannot load the model: ImportError"
    assert capsys.readouterr().err.strip().splitlines() == ["warp-check: interrupted"]
    assert not (tmp_path / "out").exists()
    # The same from a suite's factory, which is user code reported as a suite error otherwise.
    (suite / "models.py").write_text("def build():\n    import interrupted_extension\n")
    (suite / "interrupted_extension.py").write_text(
        "try:\n    raise KeyboardInterrupt\nexcept KeyboardInterrupt as interrupt:\n"
        "    raise ImportError('initialization failed') from interrupt\n"
    )
    toml = (suite / "warp.toml").read_text()
    path_line = next(line for line in toml.splitlines() if line.startswith("path = "))
    (suite / "warp.toml").write_text(toml.replace(path_line, 'factory = "models.py:build"', 1))
    assert main(["check", str(suite), "-q"]) == 130
    assert capsys.readouterr().err.strip().splitlines() == ["warp-check: interrupted"]
    # Anywhere else (a lazy import of scipy while the head is built, say): the command still says so.
    # internal: a Ctrl-C re-raised as ImportError anywhere in the command; no input puts one there
    monkeypatch.setattr("warp_check.cli.load_suite", _interrupted_extension_import)
    assert main(["check", str(suite), "-q"]) == 130
    assert capsys.readouterr().err.strip().splitlines() == ["warp-check: interrupted"]
