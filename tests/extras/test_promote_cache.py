"""``warp-check promote --cache``: the claims it recomputes read v from the representation cache, as
``check`` does (the suite's own cache by default), or from no cache with ``--cache none``."""

from __future__ import annotations

from pathlib import Path

from testkit.suite_builder import exit_code, record_encoder_batches, split_cases, write_suite


def test_promote_reads_and_fills_the_cache_it_is_given(distilbert_dir: Path, tmp_path: Path, monkeypatch):
    wrong, right = split_cases(distilbert_dir, 40, seed=5)
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong[:2], keep=right[:8])
    out = tmp_path / "r1"
    assert exit_code(["repair", str(folder), "--out", str(out), "--cache", "none", "-q"]) == 0
    batches = record_encoder_batches(monkeypatch)
    cache = tmp_path / "cache"
    promote = ["promote", str(folder), "--from", str(out), "--dry-run"]

    def encoded(argv: list[str]) -> int:
        """Inputs through the encoder while ``argv`` ran (the model's load-time probe included)."""
        batches.clear()
        assert exit_code(argv) == 0
        return sum(n for n, _, _ in batches)

    cold = encoded([*promote, "--cache", str(cache)])
    assert any(cache.rglob("*.safetensors"))  # stored
    # The two fixed cases' v from the cache: only the load-time probe is encoded.
    assert encoded([*promote, "--cache", str(cache)]) == cold - 2
    assert encoded([*promote, "--cache", "none"]) == cold  # no cache: encoded again
    assert not (folder / ".warp" / "cache").exists()  # and none written beside the suite
    encoded(promote)
    assert any((folder / ".warp" / "cache").rglob("*.safetensors"))  # the default: the suite's own
