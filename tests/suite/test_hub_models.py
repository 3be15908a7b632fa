"""[model] id = "org/name" with a revision: read from the Hugging Face cache, offline, pinned.

No network: the fixture lays out a cache folder as huggingface_hub writes it
(models--org--name/refs/main and snapshots/<commit>/).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from testkit.hub import COMMIT, REPO_ID, hub_suite, lay_out_hub_cache
from testkit.suite_builder import exit_code, write_suite

from warp_check.certify.certificate import Certificate
from warp_check.errors import ModelError, SettingsError, SuiteError
from warp_check.model.hub_cache import HubModel, resolve_model
from warp_check.suite.loader import load_suite

pytest_plugins = ["pytester"]


@pytest.fixture
def hub_cache(tmp_path: Path, distilbert_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hub"
    lay_out_hub_cache(cache, distilbert_dir, monkeypatch)
    return cache


def test_a_pinned_hub_model_is_read_from_the_cache_and_its_commit_recorded(hub_cache, tmp_path):
    folder = hub_suite(tmp_path / "suite", f'revision = "{COMMIT}"')
    suite = load_suite(folder)
    assert suite.model_dir == (hub_cache / "models--acme--tiny-sentiment" / "snapshots" / COMMIT).resolve()
    assert suite.model_commit == COMMIT and suite.model.id == "acme/tiny-sentiment"
    assert exit_code(["check", str(folder), "-q"]) in (0, 1)  # it runs like any local model


def test_a_moving_revision_is_refused_unless_allowed(hub_cache, tmp_path):
    with pytest.raises(
        SuiteError, match=r"warp.toml:3: field 'model.revision': 'main' is a branch or tag.*pin the commit"
    ):
        load_suite(hub_suite(tmp_path / "branch", 'revision = "main"'))
    allowed = load_suite(hub_suite(tmp_path / "allowed", 'revision = "main"\nallow_moving_revision = true'))
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
        load_suite(hub_suite(tmp_path / "s", lines))


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


# ---- a damaged cache: every file warp-check depends on read defensively, one message naming it

MOVING = 'revision = "main"\nallow_moving_revision = true'
REPO = "models--acme--tiny-sentiment"


def _folder_for_a_file(path: Path) -> None:
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize(
    ("damage", "revision", "where", "message"),
    [
        (lambda r: _folder_for_a_file(r / "refs" / "main"), MOVING, "refs/main", "a folder where the Hugging Face"),
        (lambda r: (r / "refs" / "main").write_bytes(b"\xff\xfe garbage"), MOVING, "refs/main", "not the commit"),
        (lambda r: (r / "refs" / "main").write_text(""), MOVING, "refs/main", "holds '', not the commit"),
        (
            lambda r: (r / "trees").mkdir() or (r / "trees" / f"{COMMIT}.json").write_text("[]"),
            MOVING,
            f"trees/{COMMIT}.json",
            r"not a Hugging Face file listing \(a JSON list, not an object\)",
        ),
        (
            lambda r: (
                (r / "trees").mkdir()
                or (r / "trees" / f"{COMMIT}.json").write_text('{"format_version": 1, "files": []}')
            ),
            f'revision = "{COMMIT}"',
            f"trees/{COMMIT}.json",
            "'files' is list, not an object",
        ),
        (
            lambda r: (r / "trees").mkdir() or (r / "trees" / f"{COMMIT}.json").write_text("[" * 200_000),
            MOVING,
            f"trees/{COMMIT}.json",
            "nested more than 64 levels deep",
        ),
    ],
    ids=["ref-a-folder", "ref-garbage", "ref-empty", "listing-a-list", "listing-files-a-list", "listing-nested"],
)
def test_a_damaged_cache_is_one_error_naming_the_file_and_the_fix(
    hub_cache, tmp_path, damage, revision, where, message
):
    damage(hub_cache / REPO)
    with pytest.raises(SuiteError, match=f"field 'model.id': .*{REPO}/{where}: .*{message}") as info:
        load_suite(hub_suite(tmp_path / "s", revision))
    assert "hf download acme/tiny-sentiment --revision" in str(info.value)


def test_a_snapshot_that_is_a_file_is_named(hub_cache, tmp_path):
    snapshot = hub_cache / REPO / "snapshots" / COMMIT
    for path in sorted(snapshot.iterdir()):
        path.unlink()
    snapshot.rmdir()
    snapshot.write_text("not a folder")
    with pytest.raises(SuiteError, match=f"snapshots/{COMMIT}: not a folder.*hf download"):
        load_suite(hub_suite(tmp_path / "s", f'revision = "{COMMIT}"'))


def test_what_huggingface_hub_raises_on_a_cache_it_cannot_read_is_a_message(hub_cache, tmp_path, monkeypatch):
    import huggingface_hub

    def broken(*args, **kwargs):
        raise AttributeError("'list' object has no attribute 'get'")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", broken)
    with pytest.raises(SuiteError, match=rf"{REPO}: huggingface_hub cannot read this cache folder \(AttributeError: "):
        load_suite(hub_suite(tmp_path / "s", f'revision = "{COMMIT}"'))


def test_the_fix_for_a_missing_revision_is_the_hf_command(hub_cache, tmp_path):
    with pytest.raises(SuiteError, match=f"fetch it once with hf download acme/tiny-sentiment --revision {'f' * 40}"):
        load_suite(hub_suite(tmp_path / "s", f'revision = "{"f" * 40}"'))


def test_the_cli_says_a_damaged_cache_in_one_line(hub_cache, tmp_path, capsys):
    _folder_for_a_file(hub_cache / REPO / "refs" / "main")
    folder = hub_suite(tmp_path / "s", MOVING)
    assert exit_code(["check", str(folder), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{REPO}/refs/main: a folder" in err[0] and "Traceback" not in err[0]


# ---- a Hub id wherever a model is given: --model, --warp-model, --warp-baseline, the API


def test_a_hub_id_given_for_the_model_is_read_from_the_cache_at_main(hub_cache, tiny_suite):
    suite = load_suite(tiny_suite, model=REPO_ID)
    snapshot = hub_cache / REPO / "snapshots" / COMMIT
    assert suite.model_dir.resolve() == snapshot.resolve()
    assert suite.hub == HubModel(id=REPO_ID, revision="main", commit=COMMIT)
    pinned = load_suite(tiny_suite, model=f"{REPO_ID}@{COMMIT}")
    assert pinned.hub == HubModel(id=REPO_ID, revision=COMMIT, commit=COMMIT)
    assert load_suite(tiny_suite, model=REPO_ID, revision=COMMIT).hub == pinned.hub


def test_a_local_folder_spelt_like_a_hub_id_wins(hub_cache, tiny_suite, distilbert_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(distilbert_dir, tmp_path / REPO_ID)
    suite = load_suite(tiny_suite, model=REPO_ID)
    assert suite.hub is None and suite.model_dir == (tmp_path / REPO_ID).resolve()
    with pytest.raises(ModelError, match="is a local folder: a revision .* applies to a Hub id only"):
        resolve_model(REPO_ID, "main")


def test_a_hub_id_not_in_the_cache_says_how_to_fetch_it(hub_cache, tiny_suite, capsys):
    with pytest.raises(
        SettingsError,
        match=r"model='acme/other': no model folder 'acme/other' here, and the Hub model 'acme/other' at revision "
        r"'main' is not in the local Hugging Face cache; warp-check never downloads: fetch it once with "
        r"hf download acme/other --revision main$",
    ):
        load_suite(tiny_suite, model="acme/other")
    assert exit_code(["check", str(tiny_suite), "--model", "acme/other", "--cache", "none"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("warp-check check: error: --model: no model folder 'acme/other' here")  # not warp.toml's
    assert "hf download acme/other --revision main" in err and "huggingface-cli" not in err
    assert "local_files_only" not in err  # huggingface_hub's advice to download: warp-check never does


def test_a_mistyped_folder_is_named_as_one_with_the_nearest_folder(tiny_suite, distilbert_dir, tmp_path, capsys,
                                                                   monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    shutil.copytree(distilbert_dir, tmp_path / "releases" / "r3")
    (tmp_path / "releases" / "r1").mkdir()
    for given in ("releases/r3-does-not-exist", "releases/r33"):  # spelt like a Hub id (org/name)
        assert exit_code(["check", str(tiny_suite), "--model", given, "--cache", "none"]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"warp-check check: error: --model: {given!r} is neither a folder here nor a Hub model in the local "
            "cache; did you mean 'releases/r3'?\n"
        )
    with pytest.raises(SettingsError, match=r"the model folder '.*r3modle' does not exist; did you mean '.*r3'\?"):
        load_suite(tiny_suite, model=tmp_path / "releases" / "r3modle")


def test_a_revision_moves_the_suites_own_hub_model(hub_cache, tmp_path):
    folder = hub_suite(tmp_path / "s", f'revision = "{COMMIT}"')
    assert load_suite(folder, revision="main").hub == HubModel(id=REPO_ID, revision="main", commit=COMMIT)
    local = tmp_path / "local"
    write_suite(local, model=hub_cache / REPO / "snapshots" / COMMIT, keep=[{"text": "good", "label": "positive"}])
    with pytest.raises(SuiteError, match=r"field 'model': revision 'main' applies to a Hub model \(\[model\] id\)"):
        load_suite(local, revision="main")


def test_the_certificate_records_the_hub_id_and_the_commit(hub_cache, tiny_suite, tmp_path, capsys):
    out = tmp_path / "repaired"
    argv = ["repair", str(tiny_suite), "--model", REPO_ID, "--revision", "main", "--out", str(out), "--cache", "none"]
    assert exit_code(argv) == 0
    model = Certificate.read(out / "warp_certificate.json").model
    assert (model.hub_id, model.hub_revision, model.hub_commit) == (REPO_ID, "main", COMMIT)
    assert exit_code(["verify", str(out)]) == 0
    # A local model's certificate has no Hub keys, as certificates written before them.
    local = tmp_path / "local-repaired"
    assert exit_code(["repair", str(tiny_suite), "--out", str(local), "--cache", "none"]) == 0
    written = json.loads((local / "warp_certificate.json").read_text(encoding="utf-8"))["model"]
    assert not {"hub_id", "hub_revision", "hub_commit"} & set(written)
    assert Certificate.read(local / "warp_certificate.json").model.hub_id is None


def test_the_python_api_loads_a_hub_id(hub_cache):
    from warp_check import ClassifierAdapter

    adapter = ClassifierAdapter.from_pretrained(REPO_ID, revision="main")
    assert adapter.hub == HubModel(id=REPO_ID, revision="main", commit=COMMIT)
    assert Path(adapter.source).name == COMMIT


def test_pytest_takes_hub_ids_for_the_model_and_the_baseline(hub_cache, tiny_suite, tiny_split, pytester):
    wrong, right = tiny_split
    args = ["-p", "no:randomly", "-p", "no:cacheprovider", str(tiny_suite), "--warp-cache", "none"]
    result = pytester.runpytest(*args, "--warp-model", REPO_ID, "--warp-revision", COMMIT)
    result.assert_outcomes(failed=len(wrong), passed=len(right))
    gated = pytester.runpytest(*args, "--warp-model", REPO_ID, "--warp-baseline", f"{REPO_ID}@main")
    gated.assert_outcomes(xfailed=len(wrong), passed=len(right))  # the same model: no regression
    missing = pytester.runpytest(*args, "--warp-baseline", "acme/gone")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--warp-baseline: no model folder 'acme/gone' here*hf download acme/gone*"])
    local = pytester.runpytest(*args, "--warp-model", str(tiny_suite), "--warp-revision", "main")
    assert local.ret == pytest.ExitCode.USAGE_ERROR
    local.stderr.fnmatch_lines(["*--warp-revision: * is a local folder; a revision applies to a Hub id*"])


def test_every_command_that_takes_a_model_takes_a_hub_id(hub_cache, tiny_suite, tmp_path, capsys):
    assert exit_code(["check", str(tiny_suite), "--model", REPO_ID, "--cache", "none"]) == 1  # its must_fix fail
    assert f"model: {REPO_ID}@main = {COMMIT} (" in capsys.readouterr().out
    # diff: the baseline inline with its revision, the model under test by --revision; the same model twice
    # has no regression.
    argv = ["diff", f"{REPO_ID}@{COMMIT}", REPO_ID, str(tiny_suite), "--revision", "main", "--cache", "none", "-q"]
    assert exit_code(argv) == 0
    # A repaired model published to the Hub (here: laid out in the cache) is verified and promoted from by its id.
    out = tmp_path / "repaired"
    assert exit_code(["repair", str(tiny_suite), "--out", str(out), "--cache", "none", "-q"]) == 0
    repaired_commit = "f" * 40
    repo = hub_cache / "models--acme--tiny-repaired"
    shutil.copytree(out, repo / "snapshots" / repaired_commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(repaired_commit)
    capsys.readouterr()
    assert exit_code(["verify", "acme/tiny-repaired"]) == 0
    assert exit_code(["verify", "acme/tiny-repaired", "--revision", "v9"]) == 2
    assert "hf download acme/tiny-repaired --revision v9" in capsys.readouterr().err
    assert exit_code(["promote", str(tiny_suite), "--from", "acme/tiny-repaired", "--dry-run"]) == 0
    assert "would move" in capsys.readouterr().out


def test_pytest_gates_another_revision_of_the_suites_own_hub_model(hub_cache, tmp_path, pytester):
    folder = hub_suite(tmp_path / "s", f'revision = "{COMMIT}"')
    args = ["-p", "no:randomly", "-p", "no:cacheprovider", str(folder), "--warp-cache", "none"]
    pytester.runpytest(*args, "--warp-revision", "main").assert_outcomes(passed=1)
    missing = pytester.runpytest(*args, "--warp-revision", "v2")
    missing.assert_outcomes(errors=1)
    missing.stdout.fnmatch_lines(["*'model.id'*revision 'v2' is not in the local Hugging Face cache*hf download*"])
