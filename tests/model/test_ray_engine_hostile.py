"""engine 'ray' given what it cannot use: Ray not installed, or a cluster address where nothing
listens. Each is one message, the same under pytest and the command, at once (no retry for minutes),
and an earlier repaired model in the out folder stays byte-identical."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from testkit.inner_runs import warm_inner_runs
from testkit.suite_builder import exit_code, tree_digest, write_suite

from warp_check.model.engines.ray import CONNECT_TIMEOUT_S
from warp_check.model.engines.settings import ray_installed

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
TESTS = Path(__file__).parents[1]
needs_ray = pytest.mark.skipif(
    not ray_installed(), reason="the ray extra is not installed (pip install 'warp-check[ray]')"
)


@pytest.fixture(scope="module", autouse=True)
def _warm_imports() -> None:
    warm_inner_runs()


def _free_port() -> int:
    """A loopback port nothing listens on: one the system just gave out and took back."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _suite(folder: Path, model: Path, split, model_lines: str) -> Path:
    wrong, right = split
    return write_suite(folder, model=model, fix=wrong, keep=right, model_lines=model_lines)


def test_without_ray_the_command_and_pytest_refuse_with_the_same_message(distilbert_dir, tiny_split, tmp_path):
    in_toml = _suite(tmp_path / "in-toml", distilbert_dir, tiny_split, 'engine = "ray"\n')
    plain = _suite(tmp_path / "plain", distilbert_dir, tiny_split, "")
    # Ray is installed here: a fresh interpreter where `import ray` fails stands for one without it
    # (sys.modules[name] = None makes every import of it an ImportError and find_spec None).
    script = textwrap.dedent(f"""
        import contextlib, io, json, sys
        sys.modules["ray"] = None
        import pytest
        from warp_check.cli import main
        said = {{}}
        commands = (("toml", ["check", {str(in_toml)!r}]), ("flag", ["check", {str(plain)!r}, "--engine", "ray"]))
        for name, argv in commands:
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                try:
                    code = main([*argv, "--cache", "none", "-q"])
                except SystemExit as exc:  # argparse's own usage errors
                    code = exc.code
            said["cli-" + name] = [code, err.getvalue()]
        for name, argv in (("toml", [{str(in_toml)!r}]), ("flag", [{str(plain)!r}, "--warp-engine", "ray"])):
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                code = pytest.main([*{list(INNER)!r}, "-p", "no:xdist", *argv, "--warp-cache", "none"])
            said["pytest-" + name] = [int(code), out.getvalue()]
        print(json.dumps(said))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    needs = "needs Ray, which is not installed: pip install 'warp-check[ray]'"
    code, err = said["cli-toml"]
    (line,) = err.splitlines()
    assert (
        code == 2
        and line == f"warp-check check: error: {in_toml / 'warp.toml'}:3: field 'model.engine': 'ray': {needs}"
    )
    code, out = said["pytest-toml"]  # a suite pytest cannot collect: its collection error, the same line
    where = f"{in_toml.name}/warp.toml"  # pytest shows the file from its rootdir
    assert code == pytest.ExitCode.INTERRUPTED and f"\n{where}{line.split('/warp.toml', 1)[1]}\n" in out
    code, err = said["cli-flag"]
    assert code == 2 and err.splitlines()[-1] == f"warp-check check: error: argument --engine: 'ray': {needs}"
    code, out = said["pytest-flag"]
    assert code == pytest.ExitCode.USAGE_ERROR and needs in out
    assert not any("Traceback" in text for _, text in said.values())


def _refused_line(address: str) -> str:
    return f"cannot connect to the Ray cluster at {address!r}: nothing answers at"


@needs_ray
@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["ray://", ""], ids=["client", "gcs"])
def test_a_cluster_address_that_refuses_is_one_message_at_once_in_both_front_ends(
    distilbert_dir, tiny_split, pytester, capsys, scheme
):
    address = f"{scheme}127.0.0.1:{_free_port()}"
    suite = _suite(
        pytester.path / "suite", distilbert_dir, tiny_split, f'engine = "ray"\n[model.ray]\naddress = "{address}"\n'
    )
    capsys.readouterr()
    started = time.monotonic()
    assert exit_code(["check", str(suite), "--cache", "none", "-q"]) == 2
    took = time.monotonic() - started
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"warp-check check: error: {_refused_line(address)}") and "use engine 'local'" in line
    assert took < 60  # Ray's import, then a refused connect: no minutes of retries
    result = pytester.runpytest(*INNER, str(suite), "--warp-cache", "none")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = line.removeprefix("warp-check check: error: ")
    assert f"warp-check refused the run: EngineError: {said}\n" in result.stdout.str()
    assert "Traceback" not in result.stdout.str()


@needs_ray
@pytest.mark.slow
def test_a_repair_on_a_refusing_cluster_leaves_the_earlier_repair_as_it_was(
    distilbert_dir, tiny_split, tmp_path, capsys
):
    out = tmp_path / "repaired"
    plain = _suite(tmp_path / "plain", distilbert_dir, tiny_split, "")
    assert exit_code(["repair", str(plain), "--out", str(out), "--cache", "none", "-q"]) == 0
    before = tree_digest(out)
    address = f"127.0.0.1:{_free_port()}"
    suite = _suite(
        tmp_path / "ray", distilbert_dir, tiny_split, f'engine = "ray"\n[model.ray]\naddress = "{address}"\n'
    )
    capsys.readouterr()
    assert exit_code(["repair", str(suite), "--out", str(out), "--rank", "3", "--cache", str(tmp_path / "c")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert _refused_line(address) in line and f"within {CONNECT_TIMEOUT_S:g} s" in line
    assert tree_digest(out) == before and not list((tmp_path / "c").rglob("*.safetensors"))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".repaired.")]
