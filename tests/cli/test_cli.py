"""``warp-check``: check / repair / verify / report outside pytest, with exit codes 0/1/2."""

from __future__ import annotations

import html
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from testkit.suite_builder import exit_code, record_encoder_batches, tree_digest, write_suite

from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.cli import main


@pytest.fixture
def cases(tiny_split: tuple[list[dict], list[dict]]) -> tuple[list[dict], list[dict]]:
    return tiny_split


@pytest.fixture
def suite(tiny_suite: Path) -> Path:
    return tiny_suite


def test_check_is_the_gate_and_prints_each_failing_case(suite, cases, capsys):
    wrong, right = cases
    assert main(["check", str(suite)]) == 1
    out = capsys.readouterr().out
    assert f"  must_fix   0 passed, {len(wrong)} failed" in out and f"  must_keep  {len(right)} passed" in out
    for case in wrong:
        assert f"  {case['id']} (must_fix): must_fix case not fixed yet: predicted" in out
    assert out.rstrip().endswith("FAILED")
    assert main(["check", str(suite), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert {c["id"] for c in data["cases"] if not c["passed"]} == {c["id"] for c in wrong}


def test_repair_then_verify_then_tamper(suite, cases, distilbert_dir, tmp_path, capsys):
    wrong, right = cases
    before = tree_digest(distilbert_dir)
    out_dir = tmp_path / "repaired"
    assert main(["repair", str(suite), "--out", str(out_dir), "--rank", "3", "--neighbours", "on", "-q"]) == 0
    out = capsys.readouterr().out
    certified = json.loads((out_dir / CERTIFICATE_NAME).read_text())["cases"]
    hood = sum(c["source"] == "neighbour" for c in certified)  # perturbed copies it got wrong, repaired too
    assert hood and f"  neighbourhood: {hood} of " in out
    fixed = len(wrong) + hood
    assert f"certificates: Cert 1 {fixed}/{fixed}, Cert 2 {len(right)}/{len(right)}" in out
    assert f"repaired model: {out_dir}" in out and out.rstrip().endswith("PASSED")
    assert tree_digest(distilbert_dir) == before
    assert json.loads((out_dir / CERTIFICATE_NAME).read_text())["settings"]["rank"] == 3
    # By default the suite's own cases alone, as the paper repairs (the neighbourhood is off).
    assert main(["repair", str(suite), "--out", str(out_dir), "-q"]) == 0
    certified = json.loads((out_dir / CERTIFICATE_NAME).read_text())["cases"]
    assert "neighbourhood:" not in capsys.readouterr().out and len(certified) == len(wrong) + len(right)

    assert main(["verify", str(out_dir)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("certificate holds")
    assert main(["verify", str(out_dir), "--suite", str(suite)]) == 0
    assert "certificate checked on" in capsys.readouterr().out

    from safetensors.torch import load_file, save_file

    tampered = tmp_path / "tampered"
    shutil.copytree(out_dir, tampered)
    weights = load_file(str(tampered / "model.safetensors"))
    weights["distilbert.embeddings.word_embeddings.weight"][5] *= 1.5  # upstream of the repair layer
    save_file(weights, str(tampered / "model.safetensors"), metadata={"format": "pt"})
    assert main(["verify", str(tampered), "--json"]) == 1
    checks = json.loads(capsys.readouterr().out)["checks"]
    assert [c["name"] for c in checks if not c["ok"]][0] == "sha256_frozen"


def test_repair_that_does_not_converge_exits_1_and_writes_nothing(tmp_path, distilbert_dir, cases, capsys):
    wrong, right = cases
    # The head named: a dense head layer = "auto" found would fall back to the final linear layer.
    named = 'layer = ["pre_classifier", "relu", "classifier"]\n'
    folder = write_suite(
        tmp_path / "s", model=distilbert_dir, fix=wrong, keep=right, model_lines=named, extra="[repair]\nmax_iter = 1\n"
    )
    assert main(["repair", str(folder), "--out", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    assert "repaired model: none written" in out and "raise max_rank (now 64; [repair] max_rank in warp.toml)" in out
    assert "layer = 'final' repairs the final linear layer 'classifier' instead" in out
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["repair", "{missing}"], "warp-check repair: error: {missing}: no suite here: warp.toml not found"),
        (
            ["check", "{suite}/fix.jsonl"],
            "warp-check check: error: {suite}/fix.jsonl: not a suite: give the suite's folder or its warp.toml",
        ),
        (["repair", "{bad}"], "warp-check repair: error: {bad}/warp.toml:2: field 'model.path': model folder 'nope'"),
        (["repair", "{suite}", "--rank", "0"], "warp-check repair: error: --rank: rank=0: must be an integer >= 1"),
        (["verify", "{suite}"], "warp-check verify: error: {suite}/warp_certificate.json: no certificate file here"),
        (["repair", "{suite}", "--gamma-s", "inf"], "argument --gamma-s: 'inf': must be a finite number"),
        (["check", "{suite}", "--device", "gpu"], "argument --device: 'gpu': must be a device: auto, cpu, cuda"),
        (["check", "{suite}", "--threads", "0"], "argument --threads: '0': must be an integer >= 1"),
        (["check", "{suite}", "--engine", "spark"], "argument --engine: 'spark': must be an engine: local or ray"),
        (["repair", "{suite}", "--batch-size", "x"], "argument --batch-size: 'x': must be an integer"),
        (
            ["repair", "{suite}", "--neighbours", "most"],
            "warp-check repair: error: --neighbours: neighbours='most': must be off, on, all, or how many",
        ),
    ],
)
def test_usage_and_input_mistakes_exit_2_with_one_line(tmp_path, suite, distilbert_dir, argv, message, capsys):
    bad = write_suite(tmp_path / "bad", model="nope", fix=[{"text": "x", "label": 0}])
    names = {"missing": str(tmp_path / "missing"), "bad": str(bad), "suite": str(suite)}
    assert exit_code([a.format(**names) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message.format(**names) in err and "Traceback" not in err


def test_device_threads_and_batch_size_reach_the_encoder_and_the_certificate(suite, tmp_path, monkeypatch):
    import torch

    seen = record_encoder_batches(monkeypatch)
    before = torch.get_num_threads()
    argv = ["repair", str(suite), "--out", str(tmp_path / "out"), "--cache", "none", "-q"]
    assert main([*argv, "--device", "cpu", "--threads", "1", "--batch-size", "5"]) == 0
    encoded = [s for s in seen if s[0] > 1]  # the load-time probe is its own batch
    assert encoded and max(n for n, _, _ in encoded) == 5 and {(t, d) for _, t, d in encoded} == {(1, "cpu")}
    assert torch.get_num_threads() == before  # given back
    certificate = json.loads((tmp_path / "out" / CERTIFICATE_NAME).read_text())
    assert certificate["model"]["device"] == "cpu"


def test_report_from_suite_certificate_and_report_json(suite, tmp_path, capsys):
    assert main(["report", str(suite), "--out", str(tmp_path / "a")]) == 0
    assert (tmp_path / "a" / "report.md").is_file() and (tmp_path / "a" / "suite-gaps.png").is_file()
    assert main(["repair", str(suite), "--out", str(tmp_path / "model"), "-q"]) == 0
    assert main(["report", str(tmp_path / "model"), "--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "model-convergence.png").is_file()
    assert main(["report", str(tmp_path / "b" / "report.json"), "--out", str(tmp_path / "c")]) == 0
    first = json.loads((tmp_path / "b" / "report.json").read_text())["runs"]
    assert json.loads((tmp_path / "c" / "report.json").read_text())["runs"] == first
    out = capsys.readouterr().out
    assert "report: " in out and f"report page: {tmp_path / 'c' / 'index.html'}" in out
    for folder in "abc":  # the page beside each report.md, the certified texts on it
        page = (tmp_path / folder / "index.html").read_text(encoding="utf-8")
        assert page.startswith("<!DOCTYPE html>")
        assert all(html.escape(case["text"], quote=False) in page for case in first[0]["cases"])


@pytest.mark.parametrize("argv", [["--version"], ["verify", "--help"]])
def test_the_console_script_is_installed(argv):
    script = Path(sys.executable).with_name("warp-check")
    done = subprocess.run([str(script), *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "warp-check" in done.stdout


def test_diff_is_baseline_mode_and_names_the_baseline(suite, distilbert_dir, capsys):
    # Results stay checks (JSON mode "check"); the header says which mode ran, against which model.
    assert main(["diff", str(distilbert_dir), str(distilbert_dir), str(suite), "--cache", "none", "-q"]) == 0
    out = capsys.readouterr().out
    assert f"): baseline mode (regressions against {distilbert_dir})" in out.splitlines()[0]
    assert main(["diff", str(distilbert_dir), str(distilbert_dir), str(suite), "--cache", "none", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "check"


CALLBACK_CTRL_C = """
import signal, time, weakref
from warp_check.interrupts import ctrl_c_never_lost

# As in a terminal: a process started in the background (nohup, CI runners) inherits SIGINT ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)

class Held:
    pass

def interrupted(_):
    raise KeyboardInterrupt

held = Held()
reference = weakref.ref(held, interrupted)
try:
    with ctrl_c_never_lost():
        del held
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            time.sleep(0.001)
    print("lost")
except KeyboardInterrupt:
    print("delivered", reference() is None)
"""


def test_a_ctrl_c_python_would_drop_in_a_callback_is_delivered_again():
    # Ctrl-C inside a weakref callback (as in importlib's module locks) is "ignored" by Python: printed
    # with a traceback and lost. Inside the command's block it arrives again as KeyboardInterrupt. In a
    # process of its own: SIGINT's handler runs in the main thread, and an xdist worker's tests do not.
    done = subprocess.run([sys.executable, "-c", CALLBACK_CTRL_C], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "delivered True", done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
