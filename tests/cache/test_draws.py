"""The perturbation memo: draws read back under the same code, never under another; never an error."""

from __future__ import annotations

import json
import warnings

import pytest

from warp_check.cache import draws
from warp_check.cache.draws import FILE_NAME, DrawMemo
from warp_check.errors import CacheWarning
from warp_check.perturb import draw_key, drawing_code


def test_draws_are_read_back_under_the_same_code_only(tmp_path):
    memo = DrawMemo(tmp_path, "code-a")
    assert memo.get("k") is None
    memo.put("k", ["x", "y"])
    memo.save()
    again = DrawMemo(tmp_path, "code-a")
    assert again.get("k") == ["x", "y"] and again.read_back == 1
    assert DrawMemo(tmp_path, "code-b").get("k") is None  # other perturbation code: other draws
    assert not list(tmp_path.glob(".tmp-*"))


@pytest.mark.parametrize(
    "content",
    ["{not json", "[]", json.dumps({"format": "other", "code": "c", "draws": {"k": ["x"]}}),
     json.dumps({"format": draws.FORMAT, "code": "c", "draws": {"k": [1, 2]}})],
)  # fmt: skip
def test_a_damaged_or_foreign_memo_is_empty(tmp_path, content):
    (tmp_path / FILE_NAME).write_text(content)
    assert DrawMemo(tmp_path, "c").get("k") is None


def test_nothing_is_written_without_a_folder_or_a_new_draw(tmp_path):
    memo = DrawMemo(None, "c")
    memo.put("k", ["x"])
    memo.save()
    assert memo.get("k") is None
    DrawMemo(tmp_path, "c").save()
    assert not (tmp_path / FILE_NAME).exists()


def test_the_oldest_draws_go_past_the_limit(tmp_path, monkeypatch):
    # internal: the limit is 50,000 draws; a test reaches it only by lowering it
    monkeypatch.setattr(draws, "MAX_ENTRIES", 3)
    memo = DrawMemo(tmp_path, "c")
    for i in range(5):
        memo.put(f"k{i}", [str(i)])
    memo.save()
    kept = DrawMemo(tmp_path, "c")
    assert [kept.get(f"k{i}") for i in range(5)] == [None, None, ["2"], ["3"], ["4"]]


def test_a_memo_that_cannot_be_written_warns_once_and_goes_on(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the memo's folder should be
    memo = DrawMemo(blocked / "cache", "c")
    memo.put("k", ["x"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        memo.save()
        memo.save()
    assert [type(w.message) for w in caught] == [CacheWarning]
    assert "cannot be written" in str(caught[0].message)


def test_the_key_and_the_code_name_what_decides_a_draw():
    assert draw_key("a b", 8, seed=1) != draw_key("a b", 8, seed=2) != draw_key("a b", 16, seed=2)
    assert draw_key("a b", 8, seed=1, max_edits=3) != draw_key("a b", 8, seed=1)
    assert drawing_code(False) == drawing_code(False) and len(drawing_code(False)) == 64
