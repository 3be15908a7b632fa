"""[model] id = "org/name" with a revision: read from the Hugging Face cache, offline, pinned.

No network: the fixture lays out a cache folder as huggingface_hub writes it
(models--org--name/refs/main and snapshots/<commit>/).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from testkit.suite_builder import exit_code

from warp_check.errors import SuiteError
from warp_check.suite.loader import load_suite

COMMIT = "0123456789abcdef0123456789abcdef01234567"
TOML = '[model]\nid = "acme/tiny-sentiment"\n{revision}\n\n[[cases]]\npath = "keep.jsonl"\nkind = "must_keep"\n'


@pytest.fixture
def hub_cache(tmp_path: Path, distilbert_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hub"
    repo = cache / "models--acme--tiny-sentiment"
    shutil.copytree(distilbert_dir, repo / "snapshots" / COMMIT)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def suite_with(folder: Path, revision_lines: str) -> Path:
    folder.mkdir()
    (folder / "warp.toml").write_text(TOML.format(revision=revision_lines), encoding="utf-8")
    (folder / "keep.jsonl").write_text('{"id": "a", "text": "the food was good", "label": "positive"}\n')
    return folder


def test_a_pinned_hub_model_is_read_from_the_cache_and_its_commit_recorded(hub_cache, tmp_path):
    folder = suite_with(tmp_path / "suite", f'revision = "{COMMIT}"')
    suite = load_suite(folder)
    assert suite.model_dir == (hub_cache / "models--acme--tiny-sentiment" / "snapshots" / COMMIT).resolve()
    assert suite.model_commit == COMMIT and suite.model.id == "acme/tiny-sentiment"
    assert exit_code(["check", str(folder), "-q"]) in (0, 1)  # it runs like any local model


def test_a_moving_revision_is_refused_unless_allowed(hub_cache, tmp_path):
    with pytest.raises(
        SuiteError, match=r"warp.toml:3: field 'model.revision': 'main' is a branch or tag.*pin the commit"
    ):
        load_suite(suite_with(tmp_path / "branch", 'revision = "main"'))
    allowed = load_suite(suite_with(tmp_path / "allowed", 'revision = "main"\nallow_moving_revision = true'))
    assert allowed.model_commit == COMMIT  # the branch, resolved to the commit it points at now


@pytest.mark.parametrize(
    ("lines", "field", "message"),
    [
        ("", "model.revision", "a Hub model needs model.revision"),
        (f'revision = "{"f" * 40}"', "model.id", "the Hub model .* is not in the local Hugging Face cache.*fetch it"),
        ('revision = "main"\nallow_moving_revision = "yes"', "model.allow_moving_revision", "must be true or false"),
    ],
    ids=["no-revision", "not-in-cache", "allow-not-a-bool"],
)
def test_hub_mistakes_name_the_field(hub_cache, tmp_path, lines, field, message):
    with pytest.raises(SuiteError, match=f"field '{field}': {message}"):
        load_suite(suite_with(tmp_path / "s", lines))


def test_a_hub_id_is_one_source_of_the_model(tmp_path, distilbert_dir):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "warp.toml").write_text(
        f'[model]\npath = "{distilbert_dir}"\nid = "acme/x"\n\n[[cases]]\npath = "k.jsonl"\n'
    )
    (folder / "k.jsonl").write_text('{"text": "good", "label": 1, "kind": "must_keep"}\n')
    with pytest.raises(SuiteError, match="field 'model.id': give one of model.path, model.factory or model.id"):
        load_suite(folder)
    (folder / "warp.toml").write_text(
        f'[model]\npath = "{distilbert_dir}"\nrevision = "main"\n\n[[cases]]\npath = "k.jsonl"\n'
    )
    with pytest.raises(SuiteError, match="field 'model.revision': applies to model.id only"):
        load_suite(folder)
