"""``warp-check defer``: must_fix cases a traffic budget cannot buy moved into the suite's deferred file and
back (every file or none, byte for byte), and what every check then shows of them: known failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit.suite_builder import exit_code, tree_digest

from warp_check import Kind, SuiteError, defer_cases, load_suite, restore_deferred

pytest_plugins = ["pytester"]


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _check_json(capsys, suite: Path) -> tuple[int, dict]:
    capsys.readouterr()
    code = exit_code(["check", str(suite), "--json", "--cache", "none"])
    return code, json.loads(capsys.readouterr().out)


def test_defer_then_restore_gives_the_files_back_byte_for_byte(tiny_suite: Path, capsys) -> None:
    fix = tiny_suite / "fix.jsonl"
    toml_before, fix_before = (tiny_suite / "warp.toml").read_bytes(), fix.read_bytes()
    ids = _ids(fix)
    assert exit_code(["defer", str(tiny_suite), ids[1], ids[0]]) == 0
    out = capsys.readouterr().out
    assert f"deferred 2 must_fix case(s) into {tiny_suite / 'deferred.jsonl'}" in out
    assert "warp.toml now names it" in out
    assert _ids(fix) == ids[2:]
    lines = [json.loads(line) for line in (tiny_suite / "deferred.jsonl").read_text().splitlines()]
    assert [(r["id"], r["from"], r["line"]) for r in lines] == [(ids[0], "fix.jsonl", 1), (ids[1], "fix.jsonl", 2)]
    assert all("deferred by hand" in r["deferred"] for r in lines)
    suite = load_suite(tiny_suite)
    assert [d.case.id for d in suite.deferred] == ids[:2] and suite.count(Kind.DEFERRED) == 2
    assert all(d.case.kind is Kind.DEFERRED for d in suite.deferred)
    assert exit_code(["defer", str(tiny_suite), "--restore", "--all"]) == 0
    assert fix.read_bytes() == fix_before
    assert (tiny_suite / "deferred.jsonl").read_bytes() == b""
    # warp.toml keeps naming its deferred file: a second round trip leaves every file as it was
    toml_named = (tiny_suite / "warp.toml").read_bytes()
    assert tomllib_loads(toml_named) == tomllib_loads(toml_before) | {"deferred": "deferred.jsonl"}
    digest = tree_digest(tiny_suite, skip=".warp")
    assert exit_code(["defer", str(tiny_suite), ids[3], ids[2]]) == 0
    assert exit_code(["defer", str(tiny_suite), "--restore", ids[3]]) == 0
    assert _ids(tiny_suite / "deferred.jsonl") == [ids[2]]
    assert exit_code(["defer", str(tiny_suite), "--restore", ids[2]]) == 0
    assert tree_digest(tiny_suite, skip=".warp") == digest


def tomllib_loads(raw: bytes) -> dict:
    import tomllib

    return tomllib.loads(raw.decode())


def test_a_line_not_as_warp_check_writes_it_goes_back_as_it_was(tiny_suite: Path) -> None:
    fix = tiny_suite / "fix.jsonl"
    lines = fix.read_bytes().split(b"\n")
    record = json.loads(lines[1])
    lines[1] = json.dumps(record, indent=None, separators=(",", ":")).encode() + b"\r"  # compact, CRLF
    fix.write_bytes(b"\n".join(lines)[:-1])  # and no newline at the end
    before = fix.read_bytes()
    suite = load_suite(tiny_suite)
    ids = [c.id for c in suite.cases if c.kind is Kind.MUST_FIX]
    defer_cases(suite, [ids[1], ids[-1]], reason="test")
    assert exit_code(["defer", str(tiny_suite), "--restore", "--all"]) == 0
    assert fix.read_bytes() == before


def test_deferred_cases_are_checked_as_known_failures(tiny_suite: Path, capsys) -> None:
    ids = _ids(tiny_suite / "fix.jsonl")
    code, before = _check_json(capsys, tiny_suite)
    assert code == 1  # the model gets its must_fix cases wrong
    assert exit_code(["defer", str(tiny_suite), *ids]) == 0
    code, after = _check_json(capsys, tiny_suite)
    assert code == 0  # known failures do not fail the gate
    deferred = [c for c in after["cases"] if c["kind"] == "deferred"]
    assert sorted(c["id"] for c in deferred) == sorted(ids)
    assert all(c["expected_failure"].startswith("deferred: it was deferred by hand on ") for c in deferred)
    assert all(not c["passed"] for c in deferred)
    capsys.readouterr()
    assert exit_code(["check", str(tiny_suite), "--cache", "none"]) == 0
    out = capsys.readouterr().out
    assert f"deferred: {len(ids)} deferred case(s), run as known failures" in out
    assert "wrong on the baseline" not in out


def test_a_deferred_case_the_model_gets_right_says_it_can_go_back(tiny_suite: Path, capsys) -> None:
    keep = tiny_suite / "keep.jsonl"
    fix = tiny_suite / "fix.jsonl"
    right = keep.read_text().splitlines()[0]
    fix.write_text(fix.read_text() + right + "\n")  # a "must_fix" case the model already gets right
    keep.write_text("\n".join(keep.read_text().splitlines()[1:]) + "\n")
    case_id = json.loads(right)["id"]
    assert exit_code(["defer", str(tiny_suite), case_id]) == 0
    _, result = _check_json(capsys, tiny_suite)
    [verdict] = [c for c in result["cases"] if c["id"] == case_id]
    assert verdict["passed"] and "expected_failure" not in verdict
    assert (
        f"it can be put back into its must_fix file (warp-check defer {tiny_suite.as_posix()} --restore {case_id})"
        in (verdict["message"])
    )


def _names(suite: Path) -> str:
    return tree_digest(suite, skip=".warp")


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["no-such-case"], "no case 'no-such-case' is a case of the suite"),
        (["KEEP"], "is a must_keep case: only must_fix cases are deferred"),
        (["--restore", "FIX"], "the suite names no deferred file (deferred = ... in warp.toml): nothing is deferred"),
        (["--restore"], "--restore takes the deferred case ids to put back, or --all"),
        (["FIX", "--restore", "--all"], "--restore takes the deferred case ids to put back, or --all"),
        ([], "give the must_fix case ids to defer, or --from REPORT"),
    ],
)
def test_bad_input_is_named_and_nothing_is_written(tiny_suite: Path, capsys, argv: list[str], words: str) -> None:
    fix_id, keep_id = _ids(tiny_suite / "fix.jsonl")[0], _ids(tiny_suite / "keep.jsonl")[0]
    argv = [{"KEEP": keep_id, "FIX": fix_id}.get(a, a) for a in argv]
    digest = _names(tiny_suite)
    capsys.readouterr()
    assert exit_code(["defer", str(tiny_suite), *argv]) == 2
    err = capsys.readouterr().err
    assert words in err, err
    assert _names(tiny_suite) == digest


def test_a_case_deferred_twice_or_a_missing_deferred_file_is_named(tiny_suite: Path, capsys) -> None:
    fix_id = _ids(tiny_suite / "fix.jsonl")[0]
    assert exit_code(["defer", str(tiny_suite), fix_id]) == 0
    suite = load_suite(tiny_suite)
    with pytest.raises(SuiteError, match="is already deferred") as caught:
        defer_cases(suite, [fix_id], reason="again")
    assert caught.value.path == str(tiny_suite / "deferred.jsonl") and caught.value.line == 1
    other = _ids(tiny_suite / "fix.jsonl")[0]
    with pytest.raises(SuiteError, match=f"case '{other}' is not deferred: it is a must_fix case here") as caught:
        restore_deferred(suite, [other])
    assert (caught.value.path, caught.value.line) == (str(tiny_suite / "fix.jsonl"), 1)
    (tiny_suite / "deferred.jsonl").unlink()
    with pytest.raises(SuiteError, match="deferred file 'deferred.jsonl' does not exist") as caught:
        load_suite(tiny_suite)
    assert caught.value.field == "deferred" and caught.value.line == 1


def test_deferred_lines_are_read_by_the_case_files_rules(tiny_suite: Path) -> None:
    fix_id = _ids(tiny_suite / "fix.jsonl")[0]
    assert exit_code(["defer", str(tiny_suite), fix_id]) == 0
    deferred = tiny_suite / "deferred.jsonl"
    record = json.loads(deferred.read_text())
    for change, field in (({"label": "nope"}, "label"), ({"line": 0}, "line"), ({"from": 3}, "from")):
        deferred.write_text(json.dumps(record | change) + "\n")
        with pytest.raises(SuiteError) as caught:
            load_suite(tiny_suite)
        assert (caught.value.path, caught.value.line, caught.value.field) == (str(deferred), 1, field)
    del record["from"]
    deferred.write_text(json.dumps(record) + "\n")
    with pytest.raises(SuiteError, match="missing field 'from'"):
        load_suite(tiny_suite)
    # the same id deferred and still in its case file: a case is deferred or not
    deferred.write_text(json.dumps(record | {"from": "fix.jsonl", "id": _ids(tiny_suite / "fix.jsonl")[0]}) + "\n")
    with pytest.raises(SuiteError, match="is deferred here and still a case at fix.jsonl:1"):
        load_suite(tiny_suite)


def test_defer_from_a_report_over_its_budget(tiny_suite: Path, capsys) -> None:
    ids = _ids(tiny_suite / "fix.jsonl")
    _, run = _check_json(capsys, tiny_suite)
    run["traffic"] = {
        "passed": False,
        "message": "over the budget",
        "properties": {"cannot buy": " ".join(ids[:2]), "max_change": 0.01},
    }
    report = tiny_suite.parent / "report.json"
    report.write_text(json.dumps({"runs": [run]}))
    assert exit_code(["defer", str(tiny_suite), "--from", str(report)]) == 0
    reasons = [json.loads(line)["deferred"] for line in (tiny_suite / "deferred.jsonl").read_text().splitlines()]
    assert len(reasons) == 2 and all(r.startswith("the budget max_change = 1") for r in reasons)
    run.pop("traffic")
    report.write_text(json.dumps(run))
    capsys.readouterr()
    assert exit_code(["defer", str(tiny_suite), "--from", str(report)]) == 2
    assert "names no must_fix case its budget cannot buy" in capsys.readouterr().err


def test_ctrl_c_while_the_files_are_renamed_lands_after_the_last(tiny_suite: Path, monkeypatch) -> None:
    import os
    import signal

    import warp_check.suite.deferred as deferred

    fix_id = _ids(tiny_suite / "fix.jsonl")[0]
    real, calls = os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 1:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C between the first rename and the others
        real(src, dst)

    # internal: nothing outside lands a Ctrl-C between two of the renames; os.replace is where they happen
    monkeypatch.setattr(deferred.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        defer_cases(load_suite(tiny_suite), [fix_id], reason="test")
    assert len(calls) == 3  # the case file, the deferred file and warp.toml: every one renamed
    suite = load_suite(tiny_suite)
    assert [d.case.id for d in suite.deferred] == [fix_id] and fix_id not in suite.locations


def test_a_move_the_loader_would_refuse_writes_nothing(tiny_suite: Path) -> None:
    fix = tiny_suite / "fix.jsonl"
    first = json.loads(fix.read_text().splitlines()[0])
    assert exit_code(["defer", str(tiny_suite), first["id"]]) == 0
    # Meanwhile the same text went into must_keep with the other label: putting it back would make the
    # suite ask both answers of one text.
    other = "positive" if first["label"] == "negative" else "negative"
    keep = tiny_suite / "keep.jsonl"
    keep.write_text(keep.read_text() + json.dumps({"id": "same-text", "text": first["text"], "label": other}) + "\n")
    digest = _names(tiny_suite)
    with pytest.raises(SuiteError, match="nothing is moved") as caught:
        restore_deferred(load_suite(tiny_suite))
    assert caught.value.path == str(fix) and caught.value.field == "label"
    assert _names(tiny_suite) == digest
    assert not list(tiny_suite.glob(".tmp-*"))


def test_deferring_every_tested_case_is_refused(tmp_path: Path, distilbert_dir: Path, tiny_split) -> None:
    from testkit.suite_builder import write_suite

    wrong, _ = tiny_split
    suite = write_suite(tmp_path / "only-fix", model=distilbert_dir, fix=wrong)
    with pytest.raises(SuiteError, match="leaves the suite no must_fix or must_keep case to test"):
        defer_cases(load_suite(suite), [c["id"] for c in wrong], reason="test")
    assert not (suite / "deferred.jsonl").exists()


def test_a_case_without_an_id_keeps_the_id_of_its_place_and_goes_back_as_it_was(tiny_suite: Path) -> None:
    fix = tiny_suite / "fix.jsonl"
    lines = fix.read_text().splitlines()
    record = json.loads(lines[2])
    del record["id"]
    lines[2] = json.dumps(record)
    fix.write_text("\n".join(lines) + "\n")
    before = fix.read_bytes()
    assert exit_code(["defer", str(tiny_suite), "fix.jsonl:3"]) == 0
    [deferred] = load_suite(tiny_suite).deferred
    assert deferred.case.id == "fix.jsonl:3" and deferred.line == 3
    assert exit_code(["defer", str(tiny_suite), "--restore", "fix.jsonl:3"]) == 0
    assert fix.read_bytes() == before
