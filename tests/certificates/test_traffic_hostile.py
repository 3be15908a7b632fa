"""Hostile traffic and budgets (Cert 4): every input is one verdict, the same in pytest and in the
command (pytest exit 4 / the command's exit 2 for a refused run or flag, pytest's collection error
exit 2 for a bad warp.toml key), one message naming the file (and line and key), never a traceback,
and a refused repair leaves the earlier repaired model byte for byte as it was."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from testkit.inner_runs import warm_inner_runs
from testkit.suite_builder import exit_code, tree_digest, write_suite
from testkit.tiny_models import synthetic_cases

from warp_check import TrafficSettings, read_traffic

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest", "-p", "no:cacheprovider")
TEXTS = sorted({c["text"] for c in synthetic_cases("binary", 600, seed=7, unseen_rate=0.5)})
TABLE = '[traffic]\npath = "traffic.jsonl"\n'
MAX_CHANGE_RULE = 'must be a share of predictions: a number in (0, 1) such as 0.01, or a percentage such as "1%"'
PERCENT_RULE = "a percentage must be in (0 %, 100 %); " + MAX_CHANGE_RULE.removeprefix("must be ")


def meant(number: str) -> str:
    """What a bare number of at least 1 is answered: the percentage it likely meant."""
    return f'did you mean {number} %? write {float(number) / 100:g} or "{number}%" ({MAX_CHANGE_RULE})'


CONFIDENCE_RULE = "must be a number strictly between 0 and 1, e.g. 0.95"


@pytest.fixture(scope="module", autouse=True)
def _warm_imports(distilbert_dir: Path) -> None:
    warm_inner_runs()


def rows(values: list, column: str = "text") -> str:
    return "".join(json.dumps({column: value}, ensure_ascii=False) + "\n" for value in values)


def traffic_suite(folder: Path, model: Path, split, traffic: str | bytes, *, table: str = TABLE) -> Path:
    """A suite of ``split``'s cases whose [traffic] (``table``) names traffic.jsonl, holding ``traffic``."""
    wrong, right = split
    folder.mkdir(parents=True)
    path = folder / "traffic.jsonl"
    path.write_bytes(traffic if isinstance(traffic, bytes) else traffic.encode("utf-8"))
    return write_suite(folder, model=model, fix=wrong, keep=right, extra=table)


def earlier_model(folder: Path) -> Path:
    """An output folder an earlier repair wrote (as warp-check would replace it): its bytes must survive."""
    folder.mkdir(parents=True)
    (folder / "warp_certificate.json").write_text('{"earlier": true}\n', encoding="utf-8")
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 4)
    return folder


def cli(argv: list[str], capsys) -> tuple[int, str]:
    """The command's exit code and its one error line (after 'warp-check COMMAND: error: ')."""
    code = exit_code(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    lines = [line for line in captured.err.splitlines() if ": error: " in line]
    assert len(lines) == 1, captured.err
    return code, lines[0].split(": error: ", 1)[1]


def inner(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, str]:
    result = pytester.runpytest(*INNER, *args)
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output
    return result, output


def refused_alike(pytester, capsys, suite: Path, out: Path, extra: tuple[str, ...] = ()) -> str:
    """Repair ``suite`` into ``out`` in pytest and with the command: the same refusal in both (pytest:
    one error, usage exit; the command: exit 2), ``out`` untouched. Returns the message."""
    before = tree_digest(out)
    result, output = inner(pytester, "--warp-repair", "--warp-cache", "none", "--warp-out", str(out), *extra)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    outcomes = result.parseoutcomes()
    assert outcomes.get("error", outcomes.get("errors")) == 1 and "failed" not in outcomes and "passed" not in outcomes
    code, message = cli(["repair", str(suite), "--cache", "none", "--out", str(out), "-q", *cli_flags(extra)], capsys)
    assert code == 2
    assert f"warp-check refused the run: SuiteError: {message}" in output
    assert tree_digest(out) == before
    return message


def cli_flags(pytest_flags: tuple[str, ...]) -> list[str]:
    return [flag.replace("--warp-", "--") for flag in pytest_flags]


# -- the traffic file's content ----------------------------------------------------------------------


def _suite_cases(split) -> str:
    wrong, right = split
    return rows([c["text"] for c in wrong + right] * 2)


CONTENT = {
    # name: (the file, a factory given the suite's split, the words the refusal says)
    "empty": (lambda split: "", ":", "no rows in this file: Cert 4 needs unlabelled texts like the model's traffic"),
    "only suite cases": (
        _suite_cases,
        ":",
        "every text of this file is a must_fix or must_keep case of the suite",
    ),
    "blank texts": (lambda split: rows(["", "   ", "\t"] * 4), ":1: field 'text':", "no text in column 'text'"),
    "emoji texts": (
        lambda split: rows(["😀 🎉", "🎉", "😀", "🙂 🙂", "👍", "🔥🔥", "✨"] * 3),
        ":",
        "the model sees no text in any of the",
    ),
    "binary": (lambda split: bytes(range(256)) * 40, ":2:", "not valid UTF-8 (byte 0x80): save the file as UTF-8"),
    "latin-1": (
        lambda split: (rows(TEXTS[:40]) + rows(["un café crème"])).encode("latin-1"),
        ":41:",
        "not valid UTF-8 (byte 0xe9): save the file as UTF-8",
    ),
    "text column missing": (
        lambda split: rows(TEXTS[:40], column="sentence"),
        ":1: field 'text':",
        "no text in column 'text' (got None); columns here: sentence",
    ),
    "text a number": (lambda split: rows(list(range(40))), ":1: field 'text':", "no text in column 'text' (got 0)"),
    "text null": (lambda split: rows([None] * 40), ":1: field 'text':", "no text in column 'text' (got None)"),
    "text a list": (
        lambda split: rows([["a", "b"]] * 40),
        ":1: field 'text':",
        "no text in column 'text' (got ['a', 'b'])",
    ),
}


@pytest.mark.parametrize("name", list(CONTENT))
def test_a_hostile_traffic_file_is_one_refusal_in_both_front_ends(pytester, capsys, distilbert_dir, tiny_split, name):
    content, where, words = CONTENT[name]
    suite = traffic_suite(pytester.path / "suite", distilbert_dir, tiny_split, content(tiny_split))
    out = earlier_model(pytester.path / "earlier")
    message = refused_alike(pytester, capsys, suite, out)
    assert message.startswith(f"{suite / 'traffic.jsonl'}{where}") and words in message


def test_a_byte_order_mark_is_read_past_in_jsonl_and_csv(tmp_path):
    plain = tmp_path / "plain.jsonl"
    plain.write_text(rows(TEXTS), encoding="utf-8")
    marked = tmp_path / "marked.jsonl"
    marked.write_text("\ufeff" + rows(TEXTS), encoding="utf-8")
    table = tmp_path / "marked.csv"
    table.write_text("\ufefftext\n" + "".join(f'"{t}"\n' for t in TEXTS), encoding="utf-8")
    digest = read_traffic(TrafficSettings(path=plain)).digest
    assert read_traffic(TrafficSettings(path=marked)).digest == digest
    assert read_traffic(TrafficSettings(path=table)).digest == digest


# -- a file over the row limit ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def million_and_one(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "traffic.jsonl"
    with path.open("w", encoding="utf-8") as f:
        f.writelines(f'{{"text": "t {i}"}}\n' for i in range(1_000_001))
    return path


def test_a_million_and_one_rows_are_refused_at_once_with_the_cap_and_a_sample_size(
    pytester, capsys, distilbert_dir, tiny_split, million_and_one
):
    suite = traffic_suite(pytester.path / "suite", distilbert_dir, tiny_split, rows(TEXTS), table="")
    out = earlier_model(pytester.path / "earlier")
    started = time.perf_counter()
    message = refused_alike(pytester, capsys, suite, out, ("--warp-traffic", str(million_and_one)))
    # Counted, not parsed: both refusals together in seconds (parsing a million rows twice took ~50 s).
    assert time.perf_counter() - started < 20
    assert message.startswith(f"{million_and_one}: 1,000,001 rows is over the 1,000,000 a traffic file may have")
    assert "give a random sample of it" in message and "100,000 rows" in message


# -- a traffic file edited between the repair and the audit ----------------------------------------


def test_an_audit_of_a_traffic_file_edited_since_the_repair_says_it_changed(
    pytester, capsys, distilbert_dir, tiny_split
):
    suite = traffic_suite(pytester.path / "suite", distilbert_dir, tiny_split, rows(TEXTS))
    out = pytester.path / "repaired"
    code, _ = exit_code(["repair", str(suite), "--out", str(out), "--cache", "none", "-q"]), capsys.readouterr()
    assert code == 0
    traffic = suite / "traffic.jsonl"
    with traffic.open("a", encoding="utf-8") as f:
        f.write(rows([f"a new review number {i}" for i in range(20)]))  # some land in Cert 4's part
    before = tree_digest(out)
    said = f"{traffic}: this traffic is not the sample the certificate's Cert 4 was measured on (it has changed since"
    for argv in (
        ["verify", str(out), "--traffic", str(traffic), "--cache", "none"],
        ["verify", str(out), "--suite", str(suite), "--cache", "none"],
    ):
        code, message = cli(argv, capsys)
        assert code == 2 and message.startswith(said) and "give the traffic file as the repair read it" in message
    result, output = inner(pytester, "suite", "--warp-certificate", str(out), "--warp-cache", "none")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"warp-check refused the run: SuiteError: {message}" in output
    assert tree_digest(out) == before


# -- the budget on the command lines ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("0", MAX_CHANGE_RULE),
        ("-0.1", MAX_CHANGE_RULE),
        ("nan", MAX_CHANGE_RULE),
        ("five", MAX_CHANGE_RULE),
        ("1", meant("1")),  # "1" read as all predictions would be no gate at all
        ("1.5", meant("1.5")),
        ("0%", PERCENT_RULE),
        ("100%", PERCENT_RULE),  # no gate at all: leave the budget out to measure without one
    ],
)
def test_a_bad_max_change_flag_is_the_same_usage_error_in_every_front_end(
    pytester, capsys, distilbert_dir, tiny_split, value, rule
):
    suite = traffic_suite(pytester.path / "suite", distilbert_dir, tiny_split, rows(TEXTS))
    out = earlier_model(pytester.path / "earlier")
    before = tree_digest(out)
    said = f"{value!r}: {rule}"
    result, output = inner(pytester, "--warp-repair", "--warp-out", str(out), f"--warp-max-change={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--warp-max-change={said}" in output
    for argv in (
        ["repair", str(suite), "--out", str(out), f"--max-change={value}"],
        ["verify", str(out), "--traffic", str(suite / "traffic.jsonl"), f"--max-change={value}"],
        ["tune", str(suite), f"--max-change={value}"],
    ):
        code, message = cli(argv, capsys)
        assert code == 2 and message == f"argument --max-change: {said}"
    assert tree_digest(out) == before


# -- the budget and its confidence in warp.toml ----------------------------------------------------


TOML = {
    # (key = value, the words after "field 'traffic.KEY': ")
    "max_change 0": ("max_change = 0", f"0: {MAX_CHANGE_RULE}"),
    "max_change negative": ("max_change = -0.1", f"-0.1: {MAX_CHANGE_RULE}"),
    "max_change 1": ("max_change = 1", f"1: {meant('1')}"),
    "max_change over 1": ("max_change = 1.5", f"1.5: {meant('1.5')}"),
    "max_change nan": ("max_change = nan", f"nan: {MAX_CHANGE_RULE}"),
    "max_change 0%": ('max_change = "0%"', f"'0%': {PERCENT_RULE}"),
    "max_change words": ('max_change = "five percent"', f"'five percent': {MAX_CHANGE_RULE}"),
    "confidence 0": ("confidence = 0", f"0: {CONFIDENCE_RULE}"),
    "confidence 1": ("confidence = 1", f"1: {CONFIDENCE_RULE}"),
    "confidence negative": ("confidence = -0.5", f"-0.5: {CONFIDENCE_RULE}"),
    "confidence over 1": ("confidence = 1.5", f"1.5: {CONFIDENCE_RULE}"),
    "confidence nan": ("confidence = nan", f"nan: {CONFIDENCE_RULE}"),
}


@pytest.mark.parametrize("name", list(TOML))
def test_a_bad_budget_in_warp_toml_names_its_line_and_key_in_both_front_ends(
    pytester, capsys, distilbert_dir, tiny_split, name
):
    line, words = TOML[name]
    suite = traffic_suite(pytester.path / "suite", distilbert_dir, tiny_split, rows(TEXTS), table=f"{TABLE}{line}\n")
    out = earlier_model(pytester.path / "earlier")
    before = tree_digest(out)
    number = (suite / "warp.toml").read_text(encoding="utf-8").splitlines().index(line) + 1
    key = line.split(" =")[0]
    said = f"warp.toml:{number}: field 'traffic.{key}': {words}"
    result, output = inner(pytester, "--warp-repair", "--warp-out", str(out))
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a suite that cannot be collected, as any bad warp.toml key
    assert f"suite/{said}" in output
    code, message = cli(["repair", str(suite), "--out", str(out)], capsys)
    assert code == 2 and message == f"{suite}/{said}"
    assert tree_digest(out) == before


def test_a_budget_written_as_a_percentage_is_shown_as_one(pytester, capsys, distilbert_dir, tiny_split):
    suite = traffic_suite(pytester.path / "suite", distilbert_dir, tiny_split, rows(TEXTS))
    code = exit_code(["repair", str(suite), "--out", str(pytester.path / "out"), "--cache", "none", "--max-change=50%"])
    printed = capsys.readouterr().out
    assert code == 0 and "within the budget max_change = 50 %" in printed and "e+" not in printed


def test_traffic_the_model_sees_no_text_in_leaves_no_folder_behind(pytester, capsys, distilbert_dir, tiny_split):
    # Refused after the repair ran (the tokenizer tells), before anything is written.
    emoji = rows(["😀 🎉", "🎉", "😀", "🙂 🙂", "👍", "🔥🔥", "✨"] * 3)
    suite = traffic_suite(pytester.path / "suite", distilbert_dir, tiny_split, emoji)
    out = pytester.path / "new"
    result, output = inner(pytester, "--warp-repair", "--warp-cache", "none", "--warp-out", str(out))
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "the model sees no text in any of the" in output
    code, message = cli(["repair", str(suite), "--cache", "none", "--out", str(out)], capsys)
    assert code == 2 and message in output
    assert not out.exists() and not (suite / ".warp" / "repaired").exists()
