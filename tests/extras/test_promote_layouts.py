"""promote on every case-file layout the README documents: nothing lost, no claim taken on trust."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from testkit.suite_builder import exit_code, margins, split_cases, tree_digest, write_suite

from warp_check.errors import CertificateError, SuiteError
from warp_check.sources.promote import promote
from warp_check.suite.casefile import NewCase, append_cases, loader_check, rewrite_lines
from warp_check.suite.loader import load_suite


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def plain(record: dict, **extra: str) -> str:
    return json.dumps({**{k: v for k, v in record.items() if k != "margin"}, **extra}) + "\n"


@pytest.fixture(scope="module")
def pool(distilbert_dir: Path) -> tuple[list[dict], list[dict]]:
    return split_cases(distilbert_dir, 160, seed=5)


def one_file_suite(folder: Path, model: Path, fix: list[dict], keep: list[dict], *, table_kind: str | None) -> Path:
    """One [[cases]] file; the must_fix lines (and, without a table kind, every line) set their own kind."""
    folder.mkdir(parents=True)
    lines = []
    for i, record in enumerate(keep):
        lines.append(plain(record) if table_kind == "must_keep" else plain(record, kind="must_keep"))
        if i < len(fix):  # interleaved: the must_fix lines sit between the must_keep ones
            lines.append(plain(fix[i], kind="must_fix"))
    (folder / "cases.jsonl").write_text("".join(lines), encoding="utf-8")
    kind = f'kind = "{table_kind}"\n' if table_kind else ""
    (folder / "warp.toml").write_text(
        f'[model]\npath = {json.dumps(str(model))}\n\n[[cases]]\npath = "cases.jsonl"\n{kind}', encoding="utf-8"
    )
    return folder


def repaired(folder: Path, out: Path) -> Path:
    assert exit_code(["repair", str(folder), "--out", str(out), "-q"]) == 0
    return out


@pytest.mark.parametrize("table_kind", ["must_keep", None])
def test_the_one_file_layout_keeps_every_case_its_must_fix_lines_rewritten_in_place(
    distilbert_dir, pool, tmp_path, table_kind, capsys
):
    wrong, right = pool
    folder = one_file_suite(tmp_path / "suite", distilbert_dir, wrong[:4], right[:12], table_kind=table_kind)
    out = repaired(folder, tmp_path / "r1")
    before = (folder / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    fix_ids = [r["id"] for r in wrong[:4]]
    capsys.readouterr()
    assert exit_code(["promote", str(folder), "--from", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"rewrote 4 fixed must_fix case(s) in place as must_keep in {folder / 'cases.jsonl'}" in said
    assert "moved" not in said
    after = (folder / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(after) == len(before) == 16  # not one line lost
    assert [json.loads(line)["id"] for line in after] == [json.loads(line)["id"] for line in before]
    sha = promote(load_suite(folder), out, dry_run=True).certificate_sha256
    for old, new in zip(before, after, strict=True):
        old_record, new_record = json.loads(old), json.loads(new)
        if old_record["id"] in fix_ids:  # kind must_fix -> must_keep, fixed_by added, the rest as it was
            assert new_record == {**old_record, "kind": "must_keep", "fixed_by": sha}
        else:
            assert new == old  # byte for byte
    suite = load_suite(folder)
    assert {c.id for c in suite.cases if c.kind.value == "must_keep"} == {r["id"] for r in wrong[:4] + right[:12]}
    assert exit_code(["check", str(folder), "--model", str(out), "-q"]) == 0  # the repaired model keeps them


def test_the_two_file_layout_still_moves_to_the_must_keep_file(distilbert_dir, pool, tmp_path, capsys):
    wrong, right = pool
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:3], keep=right[:10])
    out = repaired(folder, tmp_path / "r1")
    keep_before = (folder / "keep.jsonl").read_text(encoding="utf-8")
    capsys.readouterr()
    assert exit_code(["promote", str(folder), "--from", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"moved 3 fixed must_fix case(s) to {folder / 'keep.jsonl'} (fixed_by ")
    assert first.endswith("; 0 not certified fixed, left as must_fix")
    assert records(folder / "fix.jsonl") == []
    keep_after = (folder / "keep.jsonl").read_text(encoding="utf-8")
    assert keep_after.startswith(keep_before)  # the lines there kept byte for byte, the moved ones appended
    assert [r["id"] for r in records(folder / "keep.jsonl")[10:]] == [r["id"] for r in wrong[:3]]
    assert len(load_suite(folder).cases) == 13


def forge(out: Path, folder: Path, into: Path, text: str, label: int) -> str:
    """A copy of ``out`` whose certificate claims Cert 1 for a must_fix case ``text`` the suite gains."""
    shutil.copytree(out, into)
    data = json.loads((into / "warp_certificate.json").read_text(encoding="utf-8"))
    claim = next(c for c in data["cases"] if c["kind"] == "must_fix" and c["cert1"])
    data["cases"].append({**claim, "id": "forged", "text": text, "label": label})
    (into / "warp_certificate.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    names = {0: "negative", 1: "positive"}
    with (folder / "fix.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": "forged", "text": text, "label": names[label]}) + "\n")
    return "forged"


@pytest.fixture
def forged(distilbert_dir, pool, tmp_path) -> tuple[Path, Path]:
    """(suite, folder): the folder's certificate claims Cert 1 for a case its model gets wrong."""
    wrong, right = pool
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:2], keep=right[:10])
    out = repaired(folder, tmp_path / "r1")
    names = {"negative": 0, "positive": 1}
    rest = wrong[2:30]
    gaps = margins(out, [r["text"] for r in rest], [names[r["label"]] for r in rest])
    still_wrong = rest[int(np.argmin(gaps))]
    assert gaps.min() < 0
    forge(out, folder, tmp_path / "copied", still_wrong["text"], names[still_wrong["label"]])
    return folder, tmp_path / "copied"


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_certificate_claim_the_model_does_not_bear_out_moves_nothing(forged, dry_run, capsys):
    folder, copied = forged
    digest = tree_digest(folder, skip=".warp")  # the representation cache may fill; the suite may not change
    suite = load_suite(folder)
    with pytest.raises(CertificateError) as refused:
        promote(suite, copied, dry_run=dry_run)
    line = suite.locations["forged"].line
    message = str(refused.value)
    where = f"{folder / 'fix.jsonl'}:{line}"
    assert f"{where}: the certificate says Cert 1 holds for 'forged', the model's gap is " in message
    assert "< γ_s = " in message and message.endswith(": not moved")
    assert "warp_certificate.json" in message
    argv = ["promote", str(folder), "--from", str(copied), *(["--dry-run"] if dry_run else [])]
    assert exit_code(argv) == 2
    assert "not moved" in capsys.readouterr().err
    assert tree_digest(folder, skip=".warp") == digest  # nothing changed, the true claims not moved either


def test_a_must_keep_line_with_the_same_text_and_another_label_is_refused_by_file_and_line(
    distilbert_dir, pool, tmp_path
):
    wrong, right = pool
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:2], keep=right[:6])
    out = repaired(folder, tmp_path / "r1")
    suite = load_suite(folder)
    other = "positive" if wrong[1]["label"] == "negative" else "negative"
    with (folder / "keep.jsonl").open("a", encoding="utf-8") as handle:  # written after the suite was loaded
        handle.write(json.dumps({"id": "clash", "text": wrong[1]["text"], "label": other}) + "\n")
    digest = tree_digest(folder)
    with pytest.raises(SuiteError, match=r"keep\.jsonl:7: the must_keep file holds the same text as must_fix case"):
        promote(suite, out)
    assert tree_digest(folder) == digest


def test_a_case_already_in_must_keep_loses_only_its_must_fix_line(distilbert_dir, pool, tmp_path, capsys):
    wrong, right = pool
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:3], keep=right[:8])
    out = repaired(folder, tmp_path / "r1")
    with (folder / "keep.jsonl").open("a", encoding="utf-8") as handle:  # the same text and label, another id
        handle.write(plain(wrong[0], id="kept-twin"))
    capsys.readouterr()
    assert exit_code(["promote", str(folder), "--from", str(out)]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith(f"moved 2 fixed must_fix case(s) to {folder / 'keep.jsonl'}")
    removed = "their must_fix line removed"
    assert said[1] == f"  1 already in must_keep (the same text and label), {removed}: {wrong[0]['id']}"
    kept = records(folder / "keep.jsonl")
    assert [r["id"] for r in kept] == [*(r["id"] for r in right[:8]), "kept-twin", wrong[1]["id"], wrong[2]["id"]]
    assert records(folder / "fix.jsonl") == []
    suite = load_suite(folder)
    assert sum(c.text == wrong[0]["text"] for c in suite.cases) == 1  # kept once, not lost


def test_dry_run_says_the_same_and_changes_nothing(distilbert_dir, pool, tmp_path, capsys):
    wrong, right = pool
    folder = one_file_suite(tmp_path / "suite", distilbert_dir, wrong[:3], right[:6], table_kind="must_keep")
    out = repaired(folder, tmp_path / "r1")
    digest = tree_digest(folder)
    dry = promote(load_suite(folder), out, dry_run=True)
    assert dry.in_place == dry.promoted == tuple(r["id"] for r in wrong[:3]) and dry.not_fixed == ()
    capsys.readouterr()
    assert exit_code(["promote", str(folder), "--from", str(out), "--dry-run"]) == 0
    assert "would rewrite 3 fixed must_fix case(s) in place as must_keep" in capsys.readouterr().out
    assert tree_digest(folder) == digest
    done = promote(load_suite(folder), out)
    assert (done.promoted, done.in_place) == (dry.promoted, dry.in_place)
    assert tree_digest(folder) != digest


def test_a_file_changed_since_the_suite_was_loaded_is_not_promoted_from(distilbert_dir, pool, tmp_path):
    wrong, right = pool
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:2], keep=right[:6])
    out = repaired(folder, tmp_path / "r1")
    suite = load_suite(folder)
    fix = folder / "fix.jsonl"
    fix.write_text(plain(wrong[5]) + fix.read_text(encoding="utf-8"), encoding="utf-8")  # every line one down
    digest = tree_digest(folder)
    with pytest.raises(SuiteError, match=r"fix\.jsonl:1: case .* is not on this line as the suite was loaded"):
        promote(suite, out)
    assert tree_digest(folder) == digest


def test_the_writers_refuse_what_the_loader_would_not_load_and_leave_the_file(tiny_suite):
    suite = load_suite(tiny_suite)
    keep = next(f for f in suite.case_files if f.kind.value == "must_keep")
    check = loader_check(suite, keep)
    before = keep.path.read_bytes()
    with pytest.raises(SuiteError, match=r"keep\.jsonl:\d+: field 'label': unknown label 'neutral'.*is unchanged"):
        append_cases(keep.path, [NewCase(text="brand new text", label="neutral")], id_prefix="p", check=check)
    with pytest.raises(SuiteError, match=r"keep\.jsonl:1: field 'kind': unknown kind 'kept'.*is unchanged"):
        rewrite_lines(keep.path, {1: {"kind": "kept"}}, check=check)
    assert keep.path.read_bytes() == before
    assert rewrite_lines(keep.path, {1: {"fixed_by": "abc"}}, check=check) == 1  # a valid rewrite goes through
    assert records(keep.path)[0]["fixed_by"] == "abc" and len(records(keep.path)) == len(before.splitlines())
