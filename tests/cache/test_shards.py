"""The representation cache's shards read back memory-mapped: only the rows asked for, a damaged
shard or a non-finite row a miss, never an error or a wrong row."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from warp_check.cache.shards import ShardStore


def shard(folder: Path, name: str, keys: list[str], V: np.ndarray) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.safetensors"
    save_file({"v": np.ascontiguousarray(V, dtype=np.float32)}, str(path), metadata={"keys": json.dumps(keys)})
    return path


def test_the_rows_asked_for_come_back_from_any_shard_and_the_rest_are_misses(tmp_path):
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(5, 4)).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32)
    shard(tmp_path, "a", [f"a{i}" for i in range(5)], A)
    shard(tmp_path, "b", [f"b{i}" for i in range(3)], B)
    keys = ["b2", "zz", "a4", "a0", "b2"]
    found, V = ShardStore(tmp_path).lookup(keys, 4)
    assert found.tolist() == [True, False, True, True, True] and V.dtype == np.float32
    np.testing.assert_array_equal(V[[0, 2, 3, 4]], np.stack([B[2], A[4], A[0], B[2]]))
    assert not V[1].any() and not isinstance(V, np.memmap)
    assert ShardStore(tmp_path).lookup(keys, 5)[0].sum() == 0  # another layer's width: no row of it
    assert ShardStore(tmp_path / "none").lookup(keys, 4)[0].sum() == 0


def test_a_row_that_is_not_finite_misses_alone(tmp_path):
    V = np.ones((3, 2), dtype=np.float32)
    V[1, 0] = np.nan
    shard(tmp_path, "a", ["k0", "k1", "k2"], V)
    found, _ = ShardStore(tmp_path).lookup(["k0", "k1", "k2"], 2)
    assert found.tolist() == [True, False, True]


def _rewritten_header(path: Path, edit) -> None:
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    edit(header)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + length :])


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(b""),
        lambda p: p.write_bytes(p.read_bytes()[:20]),
        lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size - 4]),
        lambda p: p.write_bytes(struct.pack("<Q", 1 << 40) + p.read_bytes()[8:]),
        lambda p: _rewritten_header(p, lambda h: h["v"].update(dtype="F64")),
        lambda p: _rewritten_header(p, lambda h: h["v"].update(shape=[4, 2])),
        lambda p: _rewritten_header(p, lambda h: h["__metadata__"].update(keys='["k0"]')),
        lambda p: _rewritten_header(p, lambda h: h["__metadata__"].update(keys="not json")),
        lambda p: _rewritten_header(p, lambda h: h.pop("__metadata__")),
    ],
)
def test_a_damaged_shard_is_a_miss_beside_a_whole_one(tmp_path, damage):
    V = np.arange(6, dtype=np.float32).reshape(3, 2)
    damaged = shard(tmp_path, "a", ["k0", "k1", "k2"], V)
    shard(tmp_path, "b", ["k9"], np.array([[7.0, 8.0]]))
    damage(damaged)
    found, got = ShardStore(tmp_path).lookup(["k0", "k1", "k2", "k9"], 2)
    assert found.tolist() == [False, False, False, True]
    np.testing.assert_array_equal(got[3], [7.0, 8.0])
