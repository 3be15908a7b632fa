"""The documentation: the README a front page (at most 200 lines, its set-up command the site's and
CI's), every code block of the README and the site run by a test or marked with why not, and the
site built with ``mkdocs build --strict``, its reference rendered from the code (every pytest flag,
every command), the report page's screenshot taken by headless Chromium, the help texts pointing
into it.

The build needs the ``docs`` extra; where it is not installed that test skips, saying so, and with
WARP_REQUIRE_DOCS=1 (CI sets it, having installed the extra) a missing extra fails it instead.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from testkit import REPO
from testkit.report_runs import check_run, repair_run

from pytest_warp.options import declared
from warp_check.cli import build_parser, commands
from warp_check.model.hub_cache import ModelSource
from warp_check.reports.folder import REPORT_HTML, write_report
from warp_check.suite.init import suite_toml
from warp_check.version import DOCS_URL

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib

# What `warp-check init reviews --model models/sentiment` writes (from /work): a "toml init" block is part of it.
INIT_WRITES = suite_toml(
    Path("/work/reviews"), ModelSource(folder=Path("/work/models/sentiment")), {0: "negative", 1: "positive"}
)
DOCS = REPO / "docs"
README = REPO / "README.md"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FENCE = re.compile(r"^ *```(\w*)\n(.*?)^ *```$", re.MULTILINE | re.DOTALL)
MARK = re.compile(r"<!-- block: (.+?) -->\n*$", re.DOTALL)
# Lines a block of commands may hold beside warp-check's and pytest's (which are checked): set-up steps.
SHELL_STEPS = {"pip", "bash", "export", "python", "python3", ".", "cp", "ray", "hf", "mkdocs"}
ENV = re.compile(r"^[A-Z_]+=\S*$")  # an environment variable set for one command


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)


def blocks(path: Path) -> list[tuple[str, str, str]]:
    """Each fenced block of ``path``: its language, its text, and the marker just above it ('' if none)."""
    text = path.read_text(encoding="utf-8")
    found = []
    for block in FENCE.finditer(text):
        before = text[: block.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.search(before + "\n")
        found.append((block[1], block[2], mark[1].strip() if mark else ""))
    return found


def command_lines(code: str) -> list[str]:
    """The commands of a shell block: continuations joined, comments and blank lines dropped."""
    joined = code.replace("\\\n", " ")
    lines = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            lines.append(line)
    return lines


def check_commands(code: str) -> list[str]:
    """What is wrong with a block of commands: a warp-check line its parser refuses, a pytest flag
    the plugin does not declare, a line that is neither nor a set-up step."""
    flags = {option.flag for option in declared()}
    parser = build_parser()
    wrong = []
    for line in command_lines(code):
        for command in re.split(r"\s*&&\s*", line):
            words = shlex.split(command, comments=True)
            while words and ENV.match(words[0]):
                words = words[1:]
            if not words:
                continue
            if words[0] == "warp-check":
                try:
                    with contextlib.redirect_stderr(io.StringIO()):  # argparse's own words: the line says it
                        parser.parse_args(words[1:])
                except SystemExit:
                    wrong.append(f"warp-check refuses: {command}")
            elif words[0] == "pytest":
                unknown = [w for w in words if w.startswith("--warp") and w.split("=")[0] not in flags]
                wrong += [f"pytest has no {flag}: {command}" for flag in unknown]
            elif words[0] not in SHELL_STEPS:
                wrong.append(f"neither warp-check, pytest nor a set-up step: {command}")
    return wrong


def check_block(page: Path, language: str, code: str, mark: str) -> list[str]:
    where = f"{page.relative_to(REPO)} ({language} block starting {code[:50]!r})"
    if not mark:
        return [f"{where}: no <!-- block: ... --> marker saying how it is run or why not"]
    kind, _, rest = mark.partition(" ")
    if kind == "commands":
        return [f"{where}: {problem}" for problem in check_commands(code)]
    if kind == "toml":
        try:
            tomllib.loads(code)
        except tomllib.TOMLDecodeError as exc:
            return [f"{where}: not TOML: {exc}"]
        if rest == "init":  # a part of the file init writes: each of its lines is one of that file's
            written = set(INIT_WRITES.splitlines())
            return [
                f"{where}: init writes no line {line!r}" for line in code.splitlines() if line and line not in written
            ]
        return []
    if kind == "json-lines":
        problems = []
        for line in code.splitlines():
            try:
                case = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"{where}: {line!r} is not JSON: {exc}")
                continue
            if not isinstance(case, dict) or "id" not in case:
                problems.append(f"{where}: {line!r} is not a case (an object with an id)")
        return problems
    if kind == "run":
        runner = REPO / rest.split()[0]
        if not runner.is_file():
            return [f"{where}: {rest.split()[0]} does not exist"]
        if runner.suffix == ".py" and page.name not in runner.read_text(encoding="utf-8"):
            return [f"{where}: {rest.split()[0]} does not read {page.name}"]
        return []
    if kind in ("output", "not") and rest.strip(" :run"):
        return []  # captured output, or a block not run, each saying why
    return [f"{where}: unknown marker {mark!r}"]


def test_every_code_block_is_run_or_says_why_not():
    problems = []
    for page in [README, *pages()]:
        for language, code, mark in blocks(page):
            problems += check_block(page, language, code, mark)
    assert problems == []


def test_a_command_the_parsers_refuse_is_found():
    # The check above can fail: a flag no parser has, a command no CLI has, a stray line.
    assert check_commands("warp-check repair reviews/ --rank 2\npytest reviews/ --warp-repair\n") == []
    wrong = check_commands("warp-check repair reviews/ --no-such-flag\npytest r/ --warp-nope\nrm -rf /\n")
    assert len(wrong) == 3, wrong


def test_the_readme_is_a_front_page_whose_setup_is_the_sites_and_ci_runs():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    setup = next(code for language, code, _ in blocks(README) if language == "bash" and "pip install" in code)
    install = next(code for language, code, _ in blocks(DOCS / "index.md") if "pip install" in code)
    assert setup.strip() == install.strip() + " && pytest -q -n auto tests"
    assert 'pytest -q -n auto -rs "${@:-tests}"' in (REPO / ".ci" / "run").read_text(encoding="utf-8")
    for section in ("## Set-up: two commands", "## The Python API", "## Benchmarks"):
        assert section in text


def test_the_readmes_links_into_the_site_name_its_pages():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"https://[^\s)>]+", text)
    into = [link for link in links if link.startswith(DOCS_URL)]
    assert into and len(into) == len([link for link in links if "warp-check.readthedocs" in link])
    for link in into:
        page = link.removeprefix(DOCS_URL).split("#")[0].strip("/")
        assert page == "" or (DOCS / f"{page}.md").is_file(), f"{link}: no page docs/{page}.md"


def test_the_help_texts_point_into_the_site(tmp_path: Path):
    parser = build_parser()
    assert f"{DOCS_URL}reference/commands/" in parser.format_help()
    reference = (DOCS / "reference" / "commands.md").read_text(encoding="utf-8")
    assert "<!-- warp:reference commands -->" in reference
    for name, sub in parser.commands.items():
        assert sub.format_help().rstrip().endswith(f"{DOCS_URL}reference/commands/#warp-check-{name}")
    # From a folder of no conftest (the repository's tests' would load their imports: 8 CPU seconds),
    # with this checkout's plugin first on the path.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    assert f"every option: {DOCS_URL}reference/options/" in done.stdout
    assert (DOCS / "reference" / "options.md").is_file()


# -- the site, built ------------------------------------------------------------------------------


def docs_extra() -> None:
    """Skip where the docs extra is missing (fail under WARP_REQUIRE_DOCS=1, as in CI)."""
    missing = [name for name in ("mkdocs", "material", "mkdocstrings") if importlib.util.find_spec(name) is None]
    if missing:
        reason = f"the docs extra is not installed ({', '.join(missing)}): pip install -e '.[docs]'"
        if os.environ.get("WARP_REQUIRE_DOCS") == "1":
            pytest.fail(f"WARP_REQUIRE_DOCS=1 but {reason}")
        pytest.skip(reason)


def screenshot(folder: Path) -> Path | None:
    """The report page a repair writes, as headless Chromium renders it (None: no browser here)."""
    browser = next((path for path in map(shutil.which, BROWSERS) if path), None)
    if browser is None:
        if os.environ.get("WARP_REQUIRE_BROWSER") == "1":
            pytest.fail("WARP_REQUIRE_BROWSER=1 but no headless browser (chromium) is installed")
        return None
    report = folder / "report"
    write_report(report, [repair_run(12, 30, failed=0), check_run(40, wrong=3, baseline=True)])
    shot = folder / "report.png"
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        f"--user-data-dir={folder / 'profile'}", "--hide-scrollbars", "--window-size=1200,1400",
        f"--screenshot={shot}", (report / REPORT_HTML).as_uri(),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    return shot


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    docs_extra()
    folder = tmp_path_factory.mktemp("site")
    env = dict(os.environ)
    shot = screenshot(folder)
    if shot is not None:
        env["WARP_DOCS_SCREENSHOT"] = str(shot)
    built = folder / "html"
    done = subprocess.run(
        # not -q: quiet drops the warnings --strict counts, and the build would pass over them
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"), "-d", str(built)],
        capture_output=True, text=True, timeout=300, cwd=REPO, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return built


def test_the_built_site_holds_every_pytest_flag_and_command_and_the_screenshot(site: Path):
    # One test of the built site: under xdist two would build it twice, once on each worker.
    options = (site / "reference" / "options" / "index.html").read_text(encoding="utf-8")
    missing = [option.flag for option in declared() if f"<code>{option.flag}</code>" not in options]
    assert missing == [], "pytest flags missing from the built reference"
    assert all(f"<code>{option.ini}</code>" in options for option in declared())
    built = (site / "reference" / "commands" / "index.html").read_text(encoding="utf-8")
    assert [c.name for c in commands() if f'id="warp-check-{c.name}"' not in built] == []
    api = (site / "reference" / "python-api" / "index.html").read_text(encoding="utf-8")
    assert "load_suite" in api and "repair_suite" in api
    tutorial = (site / "tutorial" / "index.html").read_text(encoding="utf-8")
    if any(shutil.which(b) for b in BROWSERS):
        assert 'src="../assets/report.png"' in tutorial  # the page's URL is tutorial/
        assert (site / "assets" / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert "This build has no screenshot" in tutorial
