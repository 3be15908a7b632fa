"""A chain's drawdown counts the suite's deferred cases as cases the chain can lose: moving a case out of
must_fix because a budget could not buy it never hides it from ``verify --chain --suite``."""

from __future__ import annotations

from pathlib import Path

from testkit.releases import leaning
from testkit.suite_builder import margins, split_cases, write_suite

from warp_check import chain_drawdown, defer_cases, load_suite
from warp_check.certificates.chain import ChainVerification, Link


def test_a_deferred_case_the_newest_model_lost_is_in_the_drawdown(distilbert_dir: Path, tmp_path: Path) -> None:
    wrong, right = split_cases(distilbert_dir, 24, seed=2)
    newest = leaning(distilbert_dir, tmp_path / "leaning", 3.0)
    gaps = margins(newest, [c["text"] for c in right], [1 if c["label"] == "positive" else 0 for c in right])
    lost = [c for c, gap in zip(right, gaps, strict=True) if gap <= 0]
    assert lost, "the leaning copy loses none of the cases the tiny model gets right"
    # One of them was a must_fix case a budget could not buy: deferred (the model under test got it right)
    suite = write_suite(
        tmp_path / "suite", model=distilbert_dir, fix=[*wrong, lost[0]], keep=[c for c in right if c is not lost[0]]
    )
    defer_cases(load_suite(suite), [lost[0]["id"]], reason="test")
    chain = ChainVerification(
        links=(Link(model_dir=newest, verification=None), Link(model_dir=distilbert_dir, verification=None))
    )
    drawdown = chain_drawdown(suite, chain, cache_dir=None)
    assert set(drawdown.lost) == {c["id"] for c in lost}
    assert drawdown.lost_deferred == (lost[0]["id"],)
    assert drawdown.deferred == {lost[0]["id"]}
    assert drawdown.links[-1].checked == len(wrong) + len(right)
