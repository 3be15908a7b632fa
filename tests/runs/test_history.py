"""``verify --chain`` that tells the truth: past a model without a certificate (fine-tuned elsewhere)
it goes on to the baseline the newer certificate names, or to ``--from``; every model is checked with
the suite, each link's losses and gains are reported, and a drawdown since the first model fails the
command unless accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit.releases import leaning
from testkit.suite_builder import exit_code, margins, split_cases, write_suite

LABEL = {"negative": 0, "positive": 1}


def right_on(model: Path, cases: list[dict]) -> set[str]:
    """The cases ``model`` gets right, measured with plain transformers."""
    gaps = margins(model, [c["text"] for c in cases], [LABEL[c["label"]] for c in cases])
    return {c["id"] for c, gap in zip(cases, gaps, strict=True) if gap > 0}


@pytest.fixture(scope="module")
def releases(distilbert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Release 1 repaired from the tiny model; release 2 fine-tuned elsewhere from it (no certificate,
    some of release 1's cases broken); release 2 repaired with release 1 as its baseline, and again
    with restoring turned off (its certificate then names no baseline)."""
    root = tmp_path_factory.mktemp("history")
    wrong, right = split_cases(distilbert_dir, 80, seed=11)
    cases = [*wrong[:3], *right]
    suite = write_suite(root / "suite", model=distilbert_dir, fix=wrong[:3], keep=right)
    r1 = root / "r1"
    assert exit_code(["repair", str(suite), "--out", str(r1), "--cache", "none", "-q"]) == 0
    finetuned = leaning(r1, root / "r2-finetuned", 1.5)
    (finetuned / "warp_certificate.json").unlink()  # fine-tuned elsewhere: nothing vouches for it
    r2 = root / "r2"
    args = ["repair", str(suite), "--model", str(finetuned), "--baseline", str(r1), "--cache", "none", "-q"]
    assert exit_code([*args, "--out", str(r2)]) == 0
    off = "[repair]\nrestore_regressions = false\n"
    unrestored = write_suite(root / "unrestored", model=distilbert_dir, fix=wrong[:3], keep=right, extra=off)
    r2_off = root / "r2-off"
    exit_code(["repair", str(unrestored), "--model", str(finetuned), "--out", str(r2_off), "--cache", "none", "-q"])
    first, r1_right, ft_right = right_on(distilbert_dir, cases), right_on(r1, cases), right_on(finetuned, cases)
    assert r1_right - ft_right, "the fine-tune breaks none of release 1's cases"
    return {"suite": suite, "first": distilbert_dir, "r1": r1, "finetuned": finetuned, "r2": r2, "r2_off": r2_off,
            "lost_by_finetune": r1_right - ft_right, "drawdown_finetuned": first - ft_right,
            "right_first": len(first)}  # fmt: skip


def chain(capsys, *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = exit_code(["verify", *argv, "--chain", "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_chain_goes_on_past_a_fine_tune_to_the_baseline_and_checks_it_with_the_suite(releases, capsys):
    code, out = chain(capsys, str(releases["r2"]), "--suite", str(releases["suite"]))
    links = out["links"]
    assert [(Path(link["model_dir"]), link["repaired"], link["reached_by"]) for link in links] == [
        (releases["r2"], True, "given"),
        (releases["finetuned"], False, "repaired from"),
        (releases["r1"], True, "baseline"),
        (releases["first"], False, "repaired from"),
    ]
    assert all(link["ok"] for link in links)
    # The fine-tune's losses against release 1, and the repair that won them back.
    assert set(links[1]["lost"]) == releases["lost_by_finetune"]
    assert set(links[0]["gained"]) >= releases["lost_by_finetune"] and links[0]["lost"] == []
    assert out["drawdown"]["lost"] == [] and out["drawdown"]["right_first"] == releases["right_first"]
    assert code == 0 and out["ok"]


def test_an_uncertified_link_s_drawdown_fails_the_chain_unless_accepted(releases, capsys):
    # Release 2 repaired without restoring: its certificate names no baseline, so --from says where the
    # fine-tune came from; the cases the first model got right that it lost are the drawdown.
    suite = str(releases["suite"])
    code, out = chain(capsys, str(releases["r2_off"]), "--suite", suite, "--from", str(releases["r1"]))
    assert [Path(link["model_dir"]) for link in out["links"]] == [
        releases["r2_off"], releases["finetuned"], releases["r1"], releases["first"]
    ]  # fmt: skip
    assert out["links"][2]["reached_by"] == "--from"
    lost = set(out["drawdown"]["lost"])
    assert lost and lost <= releases["drawdown_finetuned"]
    assert code == 1 and not out["ok"]
    # Printed, the last line is the verdict that exit 1 gives (not "every link holds" alone).
    assert (
        exit_code(["verify", str(releases["r2_off"]), "--chain", "--suite", suite, "--from", str(releases["r1"])]) == 1
    )
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("chain of 4 model(s): ")
    assert last.endswith(
        f"; FAILED: a drawdown of {len(lost)} case(s), over the 0 accepted (--accept-drawdown N accepts up to N)"
    )
    code, out = chain(capsys, str(releases["r2_off"]), "--suite", suite, "--from", str(releases["r1"]),
                      "--accept-drawdown", str(len(lost)))  # fmt: skip
    assert code == 0 and out["ok"]
    # Without --from the walk stops at the fine-tune: its first model; the chain holds as far as it reaches.
    code, out = chain(capsys, str(releases["r2_off"]), "--suite", suite)
    assert [Path(link["model_dir"]) for link in out["links"]] == [releases["r2_off"], releases["finetuned"]]
    # The fine-tune itself, as given, with where it came from: its drawdown since the first model.
    code, out = chain(capsys, str(releases["finetuned"]), "--suite", suite, "--from", str(releases["r1"]))
    assert set(out["drawdown"]["lost"]) == releases["drawdown_finetuned"] and code == 1


def test_without_a_suite_an_uncertified_link_is_not_taken_on_trust(releases, capsys):
    capsys.readouterr()
    assert exit_code(["verify", str(releases["r2"]), "--chain"]) == 1
    printed = capsys.readouterr().out
    assert f"{releases['finetuned']}: no certificate (a model from elsewhere)\n" in printed
    assert "FAILED uncertified: no certificate vouches for this model: give --suite" in printed
    assert printed.splitlines()[-1] == "chain of 4 model(s): a link does NOT hold; 1 model(s) without a certificate"
