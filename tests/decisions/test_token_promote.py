"""``promote`` on a token suite: a must_fix sentence whose every constrained word the certificate shows
fixed (and the repaired weights bear out) becomes a must_keep line, whole; a sentence with a word not
certified fixed stays must_fix, every word of it."""

from __future__ import annotations

import json

from testkit.suite_builder import write_kind_suite
from testkit.token_tags import split_by_model

from warp_check.cases import Kind
from warp_check.cli import main
from warp_check.suite.loader import load_suite


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_fixed_sentences_move_whole_and_a_partly_certified_one_stays(tmp_path, shared_tagger, capsys):
    wrong, right = split_by_model(shared_tagger, fix=4, keep=10)
    held_back = dict(wrong[0], tags=[*wrong[0]["tags"][:-1], None])  # its last word is constrained after the repair
    suite = write_kind_suite(tmp_path / "suite", shared_tagger, [held_back, *wrong[1:]], right)
    out = tmp_path / "repaired"
    assert main(["repair", str(suite), "--out", str(out)]) == 0
    fix_file, keep_file = suite / "must_fix.jsonl", suite / "must_keep.jsonl"
    fix_file.write_text(
        "".join(json.dumps(r) + "\n" for r in [wrong[0], *wrong[1:]]), encoding="utf-8"
    )  # the last word of wrong[0] now constrained: a row the certificate does not hold
    capsys.readouterr()

    assert main(["promote", str(suite), "--from", str(out)]) == 0
    printed = capsys.readouterr().out
    n = len(wrong[0]["tokens"])
    assert f"{n} not certified fixed, left as must_fix" in printed
    assert [r["id"] for r in lines(fix_file)] == [wrong[0]["id"]]
    moved = lines(keep_file)[len(right) :]
    assert [r["id"] for r in moved] == [r["id"] for r in wrong[1:]]
    for record, original in zip(moved, wrong[1:], strict=True):
        assert (record["tokens"], record["tags"]) == (original["tokens"], original["tags"])
        assert record["kind"] == "must_keep" and len(record["fixed_by"]) == 64
    # The suite loads: the promoted sentences' words are must_keep rows, the held-back sentence's must_fix.
    loaded = load_suite(suite)
    kinds = {c.id: c.kind for c in loaded.cases}
    for original in wrong[1:]:
        assert all(kinds[f"{original['id']}#{w}"] is Kind.MUST_KEEP for w in range(len(original["tokens"])))
    assert all(kinds[f"{wrong[0]['id']}#{w}"] is Kind.MUST_FIX for w in range(n))
    # Promoting again moves nothing more.
    assert main(["promote", str(suite), "--from", str(out)]) == 0
    assert [r["id"] for r in lines(fix_file)] == [wrong[0]["id"]]
