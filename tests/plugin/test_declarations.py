"""Options and run modes are declared once, in the core (warp_check.OPTIONS, warp_check.MODES); the
plugin's options and ini keys, the command's arguments and commands, and the warp.toml overrides are
made from those declarations. A toy mode added to the one table shows in pytest and in the command."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

import pytest

import warp_check
from warp_check import (
    OPTIONS,
    BadValue,
    Mode,
    Option,
    Problem,
    RunJob,
    RunMode,
    RunResult,
    RunStatus,
    ValueKind,
    load_suite,
)
from warp_check.cli import build_parser, commands, main
from warp_check.runs.details import CheckDetails

pytest_plugins = ["pytester"]


def _cli_arguments(command: str) -> dict[str, argparse.Action]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {flag: action for action in sub.choices[command]._actions for flag in action.option_strings}


def test_every_declared_option_is_a_pytest_option_an_ini_key_a_flag_and_an_override(pytestconfig, tiny_suite):
    declared = {option.ini for option in OPTIONS if option.in_pytest}
    group = next(g for g in pytestconfig._parser._groups if g.name == "warp")
    assert {o.dest for o in group.options} == declared
    assert declared <= set(pytestconfig._parser._inidict)
    assert all(pytestconfig._parser._inidict[o.ini][0] == o.help for o in OPTIONS if o.in_pytest)
    for option in OPTIONS:
        for flag in option.cli:  # a command-line flag where one is declared: on check or repair
            taken = _cli_arguments("check") | _cli_arguments("repair")
            assert taken[flag].dest == option.name, flag
            assert taken[flag].help == (option.cli_help or option.help), flag
    suite = load_suite(tiny_suite)
    values = {"device": "cpu", "batch_size": 3, "threads": 2, "rank": 5, "gamma_s": 2.0, "gamma_h": 0.5}
    values["neighbours"] = "on"
    traffic = tiny_suite / "traffic.jsonl"
    traffic.write_text('{"text": "a fine day"}\n', encoding="utf-8")
    values |= {"traffic": traffic, "max_change": 0.05}
    values["engine"] = "local"
    overriding = {option.name for option in OPTIONS if option.toml is not None}
    assert overriding == set(values)
    for name in overriding & {o.name for o in warp_check.overriding("model")}:
        got = getattr(suite.with_compute(**{name: values[name]}).model, name)
        assert (got.kind.value if name == "engine" else got) == values[name]
    settings = suite.settings(**{o.name: values[o.name] for o in warp_check.overriding("repair")})
    assert (settings.rank, settings.gamma_s, settings.gamma_h) == (5, 2.0, 0.5) and settings.neighbours.per_case
    given = {o.name: values[o.name] for o in warp_check.overriding("traffic")}
    measured = suite.traffic_settings(path=given["traffic"], max_change=given["max_change"])
    assert (measured.path, measured.max_change) == (traffic, 0.05)


def test_a_declaration_checks_its_values_and_names_a_bad_field():
    count = warp_check.OPTION["threads"]
    assert count.parse("4") == 4
    for text, problem in (("0", Problem.TOO_SMALL), ("x", Problem.NOT_INTEGER)):
        with pytest.raises(BadValue) as caught:
            count.parse(text)
        assert caught.value.problem is problem
    with pytest.raises(BadValue, match="not_finite"):
        warp_check.OPTION["gamma_s"].parse("inf")
    with pytest.raises(BadValue, match="not_device"):
        warp_check.OPTION["device"].parse("gpu")
    assert warp_check.OPTION["engine"].parse("local") == "local"
    with pytest.raises(BadValue, match="not_engine"):
        warp_check.OPTION["engine"].parse("Ray")
    with pytest.raises(warp_check.SettingsError, match="toml='model': must be section.key"):
        Option(name="x", kind=ValueKind.TEXT, help="x", toml="model")
    with pytest.raises(warp_check.SettingsError, match="cli=\\('x',\\): flags start with '-'"):
        Option(name="x", kind=ValueKind.TEXT, help="x", cli=("x",))


TOY = Option(name="toy", kind=ValueKind.FLAG, help="the toy mode: every case passes")


@dataclass(frozen=True, kw_only=True)
class ToyMode(RunMode):
    """Every case passes, with the word 'toy' for a property."""

    name: str = "toy"
    records: Mode = Mode.CHECK
    selected_by: Option | None = TOY
    command: str | None = "toy"
    command_help: str = "pass every case"
    junit_properties: tuple[str, ...] = ("kind", "toy")

    def run(self, job: RunJob) -> RunResult:
        failed = RunResult.failed(job.suite, self.records, "toyed")
        verdicts = tuple(
            dataclasses.replace(v, passed=True, message="toy", properties={"toy": "yes"}) for v in failed.verdicts
        )
        details = CheckDetails.of(
            job.suite,
            selected=len(verdicts),
            head="toy",
            encoded=0,
            from_cache=0,
            encode_seconds=0.0,
            model_loaded=False,
        )
        return dataclasses.replace(failed, ok=True, status=RunStatus.CHECKED, verdicts=verdicts, details=details)

    def summary_lines(self, run: RunResult) -> list[str]:
        return ["  toy: every case passed"]

    def result_lines(self, run: RunResult) -> list[str]:
        return ["  toy: every case passed"]


@pytest.fixture
def toy_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warp_check, "MODES", (*warp_check.MODES, ToyMode()))  # the table's one line


def test_a_mode_added_to_the_table_is_a_pytest_option_and_a_command(toy_table, pytester, tiny_suite, capsys):
    assert "toy" in {command.name for command in commands()}
    assert main(["toy", str(tiny_suite), "--cache", "none"]) == 0
    out = capsys.readouterr().out
    assert f"suite 'suite' ({tiny_suite / 'warp.toml'}): toy mode" in out
    assert "  toy: every case passed" in out and out.rstrip().endswith("PASSED")

    args = ["-p", "no:randomly", "-p", "no:cacheprovider", str(tiny_suite), "--warp-cache", "none"]
    result = pytester.runpytest(*args, "--warp-toy", "--junitxml=toy.xml")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["warp-check: toy mode", "suite 'suite' (*): toy mode", "  toy: every case passed"])
    assert 'name="toy" value="yes"' in (pytester.path / "toy.xml").read_text(encoding="utf-8")
    refused = pytester.runpytest(*args, "--warp-toy", "--warp-repair")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*--warp-repair and --warp-toy choose different run modes: give one"])


# A value of each parsed kind that no option of that kind takes.
_BAD = {
    ValueKind.INTEGER: "x",
    ValueKind.COUNT: "0",
    ValueKind.NUMBER: "nan",
    ValueKind.SHARE: "5%",
    ValueKind.DEVICE: "tpu",
    ValueKind.ENGINE: "spark",
}


def _in_both() -> list[Option]:
    return [o for o in OPTIONS if o.in_pytest and o.cli and o.kind in _BAD]


@pytest.mark.parametrize("option", _in_both(), ids=lambda o: o.name)
def test_a_bad_value_gets_the_same_words_from_pytest_and_the_command(option, pytester, tiny_suite, capsys):
    """One input, one verdict: a usage error in both (exit 4 / exit 2), and after the flag the same words."""
    bad = _BAD[option.kind]
    command = next(name for name in ("repair", "check", "verify", "tune") if option.cli[0] in _cli_arguments(name))
    with pytest.raises(SystemExit) as stopped:
        main([command, str(tiny_suite), option.cli[0], bad])
    cli_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert stopped.value.code == 2 and "Traceback" not in cli_line
    cli_words = cli_line.split(f"argument {'/'.join(option.cli)}: ", 1)[1]

    result = pytester.runpytest_inprocess(f"{option.flag}={bad}", str(tiny_suite))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    line = next(line for line in result.stderr.lines if line.startswith(f"ERROR: {option.flag}="))
    assert line.removeprefix(f"ERROR: {option.flag}=") == cli_words
    assert cli_words.startswith(f"{bad!r}: ")
