"""Options and run modes are declared once, in the core (warp_check.options.OPTIONS, warp_check.modes.MODES,
read by the front ends through warp_check.frontend); the plugin's options and ini keys, the command's
arguments and commands, and the warp.toml overrides are made from those declarations. A toy mode added
to the one table shows in pytest and in the command; a toy option added to the declarations shows in
pytest's help and ini, the commands, the plugin's options and the suite's settings."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

import pytest

import warp_check
import warp_check.modes
import warp_check.options
from pytest_warp.state import STATE
from warp_check import Mode, RunResult, RunStatus, frontend, load_suite
from warp_check.cli import build_parser, commands, main
from warp_check.frontend import OPTIONS, BadValue, Option, Problem, RunJob, RunMode, ValueKind
from warp_check.runs.details import CheckDetails

pytest_plugins = ["pytester"]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    return next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices


def _cli_arguments(command: str) -> dict[str, argparse.Action]:
    return {flag: action for action in _subparsers()[command]._actions for flag in action.option_strings}


# The flags a command declares itself: its own verbs, not run options (each means something only there).
# Every other flag of every command is a declared option's (warp_check.options), made from its declaration.
LOCAL = {
    "*": ("-h", "--help"),  # argparse's own
    "import": ("--format", "--kind", "--text", "--text-pair", "--label", "--id", "--source", "--task",
               "--predicted", "--split-by-model", "--drop-wrong", "--fix-out"),  # the file's columns, the cases' kind
    "neighbours": ("--per-case", "--per-keep-case", "--keep-cases", "--keep-choice", "--synonyms",
                   "--no-synonyms"),  # what this run draws, over [repair.neighbours]
    "promote": ("--from",),  # the repaired model
    "defer": ("--from", "--restore", "--all"),  # the report naming the cases, or putting deferred ones back
    "attack": ("--recipe", "--from", "--max", "--query-budget"),  # the recipe, and the clean cases it attacks
    "verify": ("--suite", "--chain", "--from", "--accept-drawdown"),  # the chain of models and its drawdown
    "compare": ("--heldout", "--general", "--ranks", "--fix-size", "--keep-size", "--methods", "--epochs",
                "--restore-best"),  # the comparison's data and its baselines' training
    "tune": ("--folds", "--write"),  # the tuning's folds, and whether it writes its choice
    "history": ("--from",),  # where a chain's model without a certificate came from
}  # fmt: skip


def _by_hand(command: str, parser: argparse.ArgumentParser) -> list[str]:
    """The flags of ``command`` that are neither made from a declaration nor the command's own."""
    declared_flags = {flag for option in OPTIONS for flag in option.cli}
    own = set(LOCAL["*"]) | set(LOCAL.get(command, ()))
    wrong = sorted(own & declared_flags)  # an own flag may not be an Option's
    for action in parser._actions:
        option = parser.declared.get(action.dest)
        if option is not None:
            wrong += [] if tuple(action.option_strings) == option.cli else action.option_strings
        else:
            wrong += [flag for flag in action.option_strings if flag not in own]
    return wrong


def test_every_flag_of_every_command_is_a_declared_option_or_the_commands_own():
    assert {command: _by_hand(command, parser) for command, parser in _subparsers().items()} == dict.fromkeys(
        _subparsers(), []
    )


def test_a_flag_declared_by_hand_is_caught():
    # The check above, on a command given by hand an argument under an Option's flag, and one under a new flag.
    parser = _subparsers()["compare"]
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--epochs-max", type=int)
    assert _by_hand("compare", parser) == ["--batch-size", "--epochs-max"]


def test_every_declared_option_is_a_pytest_option_an_ini_key_a_flag_and_an_override(pytestconfig, tiny_suite):
    declared = {option.ini for option in OPTIONS if option.in_pytest}
    group = next(g for g in pytestconfig._parser._groups if g.name == "warp")
    assert {o.dest for o in group.options} == declared
    assert declared <= set(pytestconfig._parser._inidict)
    assert all(pytestconfig._parser._inidict[o.ini][0] == o.help for o in OPTIONS if o.in_pytest)
    for option in OPTIONS:
        # A command-line flag where one is declared: taken by some command, as the declaration says.
        taking = [command for command, parser in _subparsers().items() if option.name in parser.declared]
        assert taking or not option.cli, option.name
        for command in taking:
            assert _cli_arguments(command)[option.cli[0]].dest == option.name, (command, option.name)
    suite = load_suite(tiny_suite)
    values = {"device": "cpu", "batch_size": 3, "threads": 2, "rank": 5, "gamma_s": 2.0, "gamma_h": 0.5}
    values["neighbours"] = "on"
    values["keep_margin"] = "own"
    traffic = tiny_suite / "traffic.jsonl"
    traffic.write_text('{"text": "a fine day"}\n', encoding="utf-8")
    values |= {"traffic": traffic, "max_change": 0.05}
    values["engine"] = "local"
    overriding = {option.name for option in OPTIONS if option.toml is not None}
    assert overriding == set(values)
    for option in frontend.overriding("model"):
        got = getattr(suite.with_compute(**{option.key: values[option.name]}).model, option.key)
        assert (got.kind.value if option.key == "engine" else got) == values[option.name]
    settings = suite.settings(**{o.key: values[o.name] for o in frontend.overriding("repair")})
    assert (settings.rank, settings.gamma_s, settings.gamma_h) == (5, 2.0, 0.5) and settings.neighbours.per_case
    assert settings.keep_margin.value == "own"
    given = {o.key: values[o.name] for o in frontend.overriding("traffic")}
    measured = suite.traffic_settings(**given)
    assert (measured.path, measured.max_change) == (traffic, 0.05)


def test_a_declaration_checks_its_values_and_names_a_bad_field():
    count = frontend.OPTION["threads"]
    assert count.parse("4") == 4
    for text, problem in (("0", Problem.TOO_SMALL), ("x", Problem.NOT_INTEGER)):
        with pytest.raises(BadValue) as caught:
            count.parse(text)
        assert caught.value.problem is problem
    with pytest.raises(BadValue, match="not_finite"):
        frontend.OPTION["gamma_s"].parse("inf")
    with pytest.raises(BadValue, match="not_device"):
        frontend.OPTION["device"].parse("gpu")
    assert frontend.OPTION["engine"].parse("local") == "local"
    with pytest.raises(BadValue, match="not_engine"):
        frontend.OPTION["engine"].parse("Ray")
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
    # internal: the table's one line, for this test alone
    monkeypatch.setattr(warp_check.modes, "MODES", (*warp_check.modes.MODES, ToyMode()))


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
    ValueKind.SHARE: "5",  # 5 %? refused: a share is below 1
    ValueKind.DEVICE: "tpu",
    ValueKind.ENGINE: "spark",
}


def _in_both() -> list[Option]:
    return [o for o in OPTIONS if o.in_pytest and o.cli and o.kind in _BAD]


@pytest.mark.parametrize("option", _in_both(), ids=lambda o: o.name)
def test_a_bad_value_gets_the_same_words_from_pytest_and_the_command(option, pytester, tiny_suite, capsys):
    """One input, one verdict: a usage error in both (exit 4 / exit 2), and after the flag the same words."""
    bad = _BAD[option.kind]
    command = next(
        name for name in ("repair", "check", "verify", "tune", "diff") if option.cli[0] in _cli_arguments(name)
    )
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


# A toy option: the encoder's max_length, a [model] key no option overrides. Declaring it is the one change
# (warp_check/options.py: its line in OPTIONS); pytest, the commands, the plugin's options and the suite's
# settings take it from there.
TOY_OPTION = Option(
    name="max_length",
    kind=ValueKind.COUNT,
    metavar="N",
    help="tokens per text (overrides [model] max_length)",
    cli=("--max-length",),
    toml="model.max_length",
)
# A toy repair setting: the step's price mu, a [repair] key. The repair command takes it once the repair
# mode lists it among its command's options (warp_check/modes/repair.py): a second file.
TOY_SETTING = Option(
    name="mu",
    kind=ValueKind.NUMBER,
    metavar="MU",
    help="the step's price (overrides [repair] mu)",
    cli=("--mu",),
    toml="repair.mu",
)


@pytest.fixture
def toy_options(monkeypatch: pytest.MonkeyPatch) -> None:
    options = (*warp_check.options.OPTIONS, TOY_OPTION, TOY_SETTING)
    # internal: the declarations' new lines, for this test alone
    monkeypatch.setattr(warp_check.options, "OPTIONS", options)
    # internal: the index by name the declarations keep beside the table
    monkeypatch.setattr(warp_check.options, "OPTION", {option.name: option for option in options})
    repair = warp_check.modes.mode_named("repair")
    listed = dataclasses.replace(repair, cli_options=(*repair.cli_options, "mu"))  # the repair mode's list
    modes = tuple(listed if mode is repair else mode for mode in warp_check.modes.MODES)
    monkeypatch.setattr(warp_check.modes, "MODES", modes)  # internal: the repair mode's list, for this test alone


def test_an_option_added_to_the_declarations_reaches_pytest_the_commands_and_the_suite(
    toy_options, pytester, tiny_suite, capsys
):
    helped = pytester.runpytest("--help")
    helped.stdout.fnmatch_lines(["*--warp-max-length=N*", "*--warp-mu=MU*"])
    helped.stdout.fnmatch_lines(["  warp_max_length (string):", "*tokens per text (overrides ?model? max_length)"])

    # Every command that loads a suite with its encoder takes a [model] override; the repair its setting.
    suite_commands = {"check", "repair", "neighbours", "tune"}
    taking = {command for command in _subparsers() if "--max-length" in _cli_arguments(command)}
    assert taking == suite_commands
    assert _cli_arguments("repair")["--mu"].dest == "mu" and "--mu" not in _cli_arguments("check")
    with pytest.raises(SystemExit) as stopped:
        main(["check", str(tiny_suite), "--max-length", "0"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip().endswith("argument --max-length: '0': must be an integer >= 1")

    # The ini, then the command line over it: the plugin's options, and the suite's settings from them.
    pytester.makeini("[pytest]\nwarp_max_length = 64\nwarp_mu = 7.5\n")
    for args, length in (((), 64), (("--warp-max-length=32",), 32)):
        config = pytester.parseconfigure(*args)
        options = config.stash[STATE].options
        assert options["max_length"] == length and options["mu"] == 7.5
        assert options.overrides("model") == {"max_length": length} and options.overrides("repair") == {"mu": 7.5}
        suite = load_suite(tiny_suite).with_compute(**options.overrides("model"))
        assert suite.model.max_length == length and suite.settings(**options.overrides("repair")).mu == 7.5
        config._ensure_unconfigure()
    refused = pytester.runpytest("--warp-max-length=0", str(tiny_suite))
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["ERROR: --warp-max-length='0': must be an integer >= 1"])
