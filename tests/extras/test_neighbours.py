"""``warp-check neighbours``: a suite's neighbourhood written into its must_fix file, once."""

from __future__ import annotations

import sys
from pathlib import Path

from testkit.suite_builder import split_cases

from warp_check.cases import NEIGHBOUR, Kind


def test_the_neighbours_command_appends_them_to_the_must_fix_file_once(distilbert_dir: Path, tmp_path: Path, capsys):
    import json

    from testkit.suite_builder import exit_code, write_suite

    from warp_check.suite.loader import load_suite

    wrong, right = split_cases(distilbert_dir, 40, seed=2)
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:4], keep=right[:10])
    command = ["neighbours", str(folder), "--per-case", "6", "--cache", "none"]
    argv = [*command, "--per-keep-case", "0"]
    assert exit_code([*command, "--per-keep-case", "-1"]) == 2
    assert exit_code([*command, "--keep-cases", "some"]) == 2
    assert exit_code(argv) == 0
    lines = [json.loads(line) for line in (folder / "fix.jsonl").read_text(encoding="utf-8").splitlines()]
    added = [line for line in lines if line.get("source") == NEIGHBOUR]
    assert added and len(lines) == 4 + len(added)
    originals = {c.id for c in load_suite(folder).cases if c.kind is Kind.MUST_FIX and c.source != NEIGHBOUR}
    assert all(line["original"] in originals and line["id"].startswith(line["original"] + "~") for line in added)
    capsys.readouterr()
    assert exit_code(argv) == 0  # the same draws again: nothing new
    said = capsys.readouterr().out
    assert f"0 neighbour cases the model gets wrong appended to {folder / 'fix.jsonl'}\n" in said
    keep_ids = {c.id for c in load_suite(folder).cases if c.kind is Kind.MUST_KEEP}
    assert exit_code(command) == 0  # by default must_keep cases are perturbed too
    lines = [json.loads(line) for line in (folder / "fix.jsonl").read_text(encoding="utf-8").splitlines()]
    from_keep = [line for line in lines if line.get("original") in keep_ids]
    assert from_keep and all(line["source"] == NEIGHBOUR for line in from_keep)


def test_the_command_draws_what_the_suites_repair_would(distilbert_dir: Path, tmp_path: Path):
    import json

    from testkit.suite_builder import exit_code, write_suite

    wrong, right = split_cases(distilbert_dir, 40, seed=2)
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:4], keep=right[:10])
    toml = folder / "warp.toml"
    toml.write_text(toml.read_text() + "\n[repair.neighbours]\nper_case = 3\nkeep_per_case = 0\n")
    fix = folder / "fix.jsonl"

    def drawn_from() -> set[str]:
        return {json.loads(line).get("original") for line in fix.read_text(encoding="utf-8").splitlines()} - {None}

    assert exit_code(["neighbours", str(folder), "--cache", "none"]) == 0
    fix_ids = {c["id"] for c in wrong[:4]}
    assert drawn_from() and drawn_from() <= fix_ids  # the suite's: 3 copies a must_fix case, none of must_keep
    assert exit_code(["neighbours", str(folder), "--cache", "none", "--per-keep-case", "4"]) == 0
    assert drawn_from() - fix_ids  # a flag overrides them
    # A suite whose neighbourhood is off (the default) draws the measured counts: the command asks to draw.
    toml.write_text(toml.read_text().replace("per_case = 3", "per_case = 0"))
    fix.write_text("".join(line + "\n" for line in fix.read_text(encoding="utf-8").splitlines()[:4]))
    assert exit_code(["neighbours", str(folder), "--cache", "none"]) == 0
    assert drawn_from() & fix_ids and drawn_from() - fix_ids


def test_synonyms_are_the_suites_unless_a_flag_asks_for_them_or_forbids_them():
    from warp_check.cli import build_parser

    parse = build_parser().parse_args
    assert parse(["neighbours", "suite"]).synonyms is None  # the suite's setting ("auto" by default)
    assert parse(["neighbours", "suite", "--synonyms"]).synonyms is True
    assert parse(["neighbours", "suite", "--no-synonyms"]).synonyms is False


def test_the_command_says_when_auto_found_no_wordnet(distilbert_dir: Path, tmp_path: Path, capsys, monkeypatch):
    from testkit.suite_builder import exit_code, write_suite

    from warp_check.runs.details import WITHOUT_SYNONYMS

    monkeypatch.setitem(sys.modules, "nltk", None)  # `import nltk` fails, as where the WordNet extra is not installed
    wrong, right = split_cases(distilbert_dir, 40, seed=2)
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:2], keep=right[:4])
    command = ["neighbours", str(folder), "--per-case", "2", "--per-keep-case", "0", "--cache", "none"]
    capsys.readouterr()
    assert exit_code(command) == 0
    assert f"note: {WITHOUT_SYNONYMS}" in capsys.readouterr().out
    assert exit_code([*command, "--no-synonyms"]) == 0  # asked for none: nothing to say
    assert WITHOUT_SYNONYMS not in capsys.readouterr().out
