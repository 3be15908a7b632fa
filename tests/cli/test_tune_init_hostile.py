"""Hostile input to ``warp-check tune`` and ``warp-check init``: exit 2 with one line, no traceback,
nothing half written, and the user's warp.toml (its comments, its line endings, its mode) kept.

Both commands exist only in the CLI, so the CLI is what is tested; where a full tune run is not
needed, the write path is tested through the function tune writes with (write_choice).
"""

from __future__ import annotations

import json
import re
import shutil
import stat
import sys
import threading
import time
from pathlib import Path

import pytest
from testkit.hub import COMMIT, REPO_ID, lay_out_hub_cache
from testkit.suite_builder import exit_code, write_suite
from testkit.tiny_models import synthetic_cases

from warp_check import Kind, SuiteError, load_suite, write_choice
from warp_check.budget import tune as tune_module
from warp_check.budget.tune import Candidate, CandidateScore, TuneResult
from warp_check.cases import Case
from warp_check.suite.toml_lines import rewrite_toml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib

# Every kind of comment a user leaves: on its own line, after a header, after a key, with a '#' or
# quotes inside a string, inside a multi-line string that looks like a key, in a multi-line array.
COMMENTED = """# my suite: tuned by hand first  (a "quoted" word, a # sign)
description = \"\"\"
repair.mu = 5   # not a key: text of the description
\"\"\"

# --- the model ---
[model]  # a comment after a header
path = {model}  # where it lives
layer = [
  "pre_classifier",  # the dense layer
  "relu",
  "classifier",
]  # three parts

[[cases]]  # the hard ones
path = "fix.jsonl"
kind = "must_fix"

[[cases]]
path = "keep.jsonl"  # kept right
kind = "must_keep"

# --- repair ---
[repair]   # our settings
gamma_s = 1.0   # margin, with a '#' inside: "x # y"
# mu = 10  tried, too slow
mu = 100.0 # a dear move

# the end
"""


def err_of(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def one_line(err: str) -> str:
    """The error line argparse or the command printed (argparse puts its usage above)."""
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


def choice(suite_dir: Path, *, gamma_s=0.5, mu=1000.0, per_case=4, keep_per_case=8, guards=(), seconds=0.0):
    """A TuneResult as tune would return it, chosen without running it: write_choice is what is tested."""
    base = load_suite(suite_dir).settings()
    candidate = Candidate(name="picked", gamma_s=gamma_s, mu=mu, per_case=per_case, keep_per_case=keep_per_case,
                          guards=bool(guards), levers=1)  # fmt: skip
    score = CandidateScore(candidate=candidate, fixed=3, scored=4, changed=0, measured=100, bound=0.03,
                           confidence=0.95, guards=len(guards), seconds=seconds)  # fmt: skip
    return TuneResult(scores=(score,), chosen=score, budget=None, folds=2, base=base, must_fix=4, tune_texts=100,
                      guard_pool=tuple(guards), seconds=1.0)  # fmt: skip


def guard_cases(n: int) -> tuple[Case, ...]:
    texts = sorted({c["text"] for c in synthetic_cases("binary", 3 * n, seed=5)})[:n]
    return tuple(
        Case(id=f"g{i}", text=t, label=i % 2, kind=Kind.MUST_KEEP, source="prediction:traffic")
        for i, t in enumerate(texts)
    )


@pytest.fixture
def commented_suite(tmp_path: Path, distilbert_dir: Path, tiny_split) -> Path:
    wrong, right = tiny_split
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong, keep=right)
    (folder / "warp.toml").write_text(COMMENTED.format(model=json.dumps(str(distilbert_dir))), encoding="utf-8")
    load_suite(folder)  # the hand-written file is one the loader takes
    return folder


def comments(text: str) -> list[str]:
    return [line[line.index("#") :] for line in text.splitlines() if "#" in line]


# -- tune: folds -------------------------------------------------------------------------------


@pytest.mark.parametrize("folds", ["0", "1", "-2"])
def test_too_few_folds_is_a_usage_error_naming_the_option(tiny_suite, folds, capsys):
    before = (tiny_suite / "warp.toml").read_bytes()
    assert exit_code(["tune", str(tiny_suite), "--folds", folds, "--write"]) == 2
    assert f"--folds: '{folds}': must be an integer >= 2" in one_line(err_of(capsys))
    assert (tiny_suite / "warp.toml").read_bytes() == before


def test_more_folds_than_must_fix_cases_says_the_most_it_can_be(tiny_suite, tiny_split, capsys):
    fix = len(tiny_split[0])
    before = (tiny_suite / "warp.toml").read_bytes()
    # Refused before the traffic or the model is read: this suite has no traffic at all.
    assert exit_code(["tune", str(tiny_suite), "--folds", str(fix + 1), "--write"]) == 2
    line = one_line(err_of(capsys))
    assert f"--folds: folds={fix + 1}: at most {fix}: the suite has {fix} must_fix cases" in line
    assert (tiny_suite / "warp.toml").read_bytes() == before
    assert sorted(p.name for p in tiny_suite.iterdir() if p.name != ".warp") == ["fix.jsonl", "keep.jsonl", "warp.toml"]


def test_a_suite_with_one_must_fix_case_cannot_be_folded(tmp_path, distilbert_dir, tiny_split, capsys):
    wrong, right = tiny_split
    folder = write_suite(tmp_path / "one", model=distilbert_dir, fix=wrong[:1], keep=right)
    assert exit_code(["tune", str(folder)]) == 2
    assert "the suite has 1 must_fix case(s): tune needs at least 2" in one_line(err_of(capsys))


# -- tune --write: the file as the user left it ---------------------------------------------------


def test_write_on_a_read_only_warp_toml_is_refused_before_the_run(tiny_suite, capsys):
    toml = tiny_suite / "warp.toml"
    before = toml.read_bytes()
    toml.chmod(0o444)
    # No traffic and no model run needed: the refusal comes first, not after minutes of repairs.
    assert exit_code(["tune", str(tiny_suite), "--folds", "2", "--write"]) == 2
    line = one_line(err_of(capsys))
    assert f"{toml}: is read-only (mode 444)" in line and "chmod u+w" in line
    assert toml.read_bytes() == before and stat.S_IMODE(toml.stat().st_mode) == 0o444


def test_write_choice_on_a_read_only_warp_toml_writes_nothing_at_all(commented_suite):
    toml = commented_suite / "warp.toml"
    before = toml.read_bytes()
    toml.chmod(0o444)
    with pytest.raises(SuiteError, match="is read-only"):
        write_choice(load_suite(commented_suite), choice(commented_suite, guards=guard_cases(3)))
    assert toml.read_bytes() == before and stat.S_IMODE(toml.stat().st_mode) == 0o444
    assert not (commented_suite / "traffic_guards.jsonl").exists()  # the guards are not appended either


def test_write_keeps_every_comment_and_changes_only_the_keys(commented_suite):
    toml = commented_suite / "warp.toml"
    before = toml.read_text(encoding="utf-8")
    write_choice(load_suite(commented_suite), choice(commented_suite))
    after = toml.read_text(encoding="utf-8")
    assert comments(after) == comments(before)
    assert "repair.mu = 5   # not a key" in after  # the description's text is not a key to set
    settings = load_suite(commented_suite).settings()
    assert (settings.gamma_s, settings.mu) == (0.5, 1000.0)
    assert (settings.neighbours.per_case, settings.neighbours.keep_per_case) == (4, 8)
    edited = {"gamma_s = 0.5  # margin, with a '#' inside: \"x # y\"", "mu = 1000.0  # a dear move"}
    old_lines, new_lines = before.splitlines(), after.splitlines()
    assert [line for line in new_lines if line not in old_lines] == [*sorted(edited, key=after.index),
                                                                   "[repair.neighbours]", "per_case = 4",
                                                                   "keep_per_case = 8"]  # fmt: skip
    assert [line for line in old_lines if line not in new_lines] == [
        "gamma_s = 1.0   # margin, with a '#' inside: \"x # y\"",
        "mu = 100.0 # a dear move",
    ]


@pytest.mark.parametrize("final_newline", [True, False])
def test_write_on_a_crlf_warp_toml_keeps_its_line_endings(commented_suite, final_newline):
    toml = commented_suite / "warp.toml"
    crlf = toml.read_bytes().replace(b"\n", b"\r\n")
    crlf = crlf if final_newline else crlf.rstrip(b"\r\n")
    toml.write_bytes(crlf)
    write_choice(load_suite(commented_suite), choice(commented_suite, guards=guard_cases(2)))
    after = toml.read_bytes()
    assert b"\n" not in after.replace(b"\r\n", b"")  # no bare LF anywhere, the new lines' included
    assert after.endswith(b"\r\n") == final_newline
    assert comments(after.decode()) == comments(crlf.decode())
    # Nothing else changed: the old lines are all there, in order, but the two keys set.
    old = [line for line in crlf.split(b"\r\n") if not line.startswith((b"gamma_s", b"mu ="))]
    new = iter(after.split(b"\r\n"))
    assert all(any(line == other for other in new) for line in old)
    data = tomllib.loads(after.decode())
    assert data["repair"]["gamma_s"] == 0.5 and data["repair"]["neighbours"]["per_case"] == 4
    suite = load_suite(commented_suite)
    assert any(f.path.name == "traffic_guards.jsonl" for f in suite.case_files)


def test_write_keeps_the_files_mode_and_the_symlink_to_it(commented_suite):
    real = commented_suite / "real.toml"
    shutil.move(commented_suite / "warp.toml", real)
    real.chmod(0o640)
    (commented_suite / "warp.toml").symlink_to(real)
    write_choice(load_suite(commented_suite), choice(commented_suite))
    assert (commented_suite / "warp.toml").is_symlink()
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert tomllib.loads(real.read_text(encoding="utf-8"))["repair"]["gamma_s"] == 0.5


def test_two_writers_at_once_edit_one_after_the_other(commented_suite):
    toml = commented_suite / "warp.toml"
    started = threading.Barrier(4)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        def change(text: str) -> str:
            time.sleep(0.05)  # read, then think: a writer without the lock would lose the others' lines
            return text + f"# writer {n}\n"

        try:
            started.wait()
            rewrite_toml(toml, change, hint="")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    text = toml.read_text(encoding="utf-8")
    assert sorted(line for line in text.splitlines() if line.startswith("# writer")) == [
        f"# writer {n}" for n in range(4)
    ]
    tomllib.loads(text)
    assert not [p.name for p in commented_suite.iterdir() if p.name.startswith(".tmp-")]


def test_two_tune_writes_at_once_leave_one_valid_suite_listing_the_guards_once(commented_suite):
    result = choice(commented_suite, guards=guard_cases(6))
    suites = [load_suite(commented_suite) for _ in range(3)]  # each loaded before any writes: none lists them
    started = threading.Barrier(len(suites))
    errors: list[BaseException] = []

    def writer(suite) -> None:
        try:
            started.wait()
            write_choice(suite, result)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(s,)) for s in suites]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    text = (commented_suite / "warp.toml").read_text(encoding="utf-8")
    assert text.count('path = "traffic_guards.jsonl"') == 1
    again = load_suite(commented_suite)
    assert len([c for c in again.cases if c.source == "prediction:traffic"]) == 6
    assert again.settings().gamma_s == 0.5


def test_an_inline_table_refuses_the_write_and_appends_no_guard(commented_suite):
    toml = commented_suite / "warp.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + "neighbours = { seed = 3 }\n", encoding="utf-8")
    before = toml.read_bytes()
    with pytest.raises(SuiteError, match=r"\[repair.neighbours\] is written inline"):
        write_choice(load_suite(commented_suite), choice(commented_suite, guards=guard_cases(2)))
    assert toml.read_bytes() == before and not (commented_suite / "traffic_guards.jsonl").exists()


def test_tune_write_end_to_end_on_a_crlf_commented_suite(commented_suite, monkeypatch, capsys):
    lines = sorted({c["text"] for c in synthetic_cases("binary", 600, seed=7, unseen_rate=0.5)})
    (commented_suite / "traffic.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in lines))
    toml = commented_suite / "warp.toml"
    text = toml.read_text(encoding="utf-8") + '\n[traffic]  # ours\npath = "traffic.jsonl"\n'
    toml.write_bytes(text.replace("\n", "\r\n").encode())
    one = Candidate(name="gamma_s / 2 + guards", gamma_s=0.5, mu=100.0, per_case=0, keep_per_case=0, guards=True,
                    levers=2)  # fmt: skip
    # internal: the grid of candidates is fixed, no setting; one candidate keeps this run to seconds
    monkeypatch.setattr(tune_module, "candidates", lambda base: (one,))  # one candidate: a run of a second or two
    assert exit_code(["tune", str(commented_suite), "--folds", "2", "--write", "--cache", "none"]) == 0
    assert f"written: {toml}" in capsys.readouterr().out
    after = toml.read_bytes()
    assert b"\n" not in after.replace(b"\r\n", b"") and comments(after.decode()) == comments(text)
    suite = load_suite(commented_suite)
    assert suite.settings().gamma_s == 0.5 and any(c.source == "prediction:traffic" for c in suite.cases)


# -- init -------------------------------------------------------------------------------------


def model_with(tmp_path: Path, distilbert_dir: Path, id2label: dict | None, **config) -> Path:
    """A copy of the tiny model whose config.json names its classes ``id2label`` (None: names none)."""
    model = Path(shutil.copytree(distilbert_dir, tmp_path / "model"))
    data = json.loads((model / "config.json").read_text(encoding="utf-8"))
    data.pop("label2id", None)
    if id2label is None:
        data.pop("id2label", None)
    else:
        data["id2label"] = id2label
    data.update(config)
    (model / "config.json").write_text(json.dumps(data), encoding="utf-8")
    return model


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("existing", ["warp.toml", "must_keep.jsonl", "must_fix.jsonl"])
def test_init_refuses_a_folder_holding_a_file_it_would_write(distilbert_dir, tmp_path, existing, capsys):
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / existing).write_text("mine\n", encoding="utf-8")
    assert exit_code(["init", str(folder), "--model", str(distilbert_dir)]) == 2
    assert f"{folder / existing}: already exists: warp-check init never overwrites" in one_line(err_of(capsys))
    assert tree(folder) == {existing: b"mine\n"}


def test_init_into_a_folder_of_other_files_adds_the_suite_beside_them(distilbert_dir, tmp_path, capsys):
    # The README's promise: only the three files it writes make a folder refused; notes stay.
    folder = tmp_path / "project"
    (folder / "data").mkdir(parents=True)
    (folder / "notes.md").write_text("mine", encoding="utf-8")
    (folder / "data" / "rows.csv").write_text("sentence,label\n", encoding="utf-8")
    assert exit_code(["init", str(folder), "--model", str(distilbert_dir)]) == 0
    err_of(capsys)
    files = tree(folder)
    assert files["notes.md"] == b"mine" and files["data/rows.csv"] == b"sentence,label\n"
    assert {"warp.toml", "must_keep.jsonl", "must_fix.jsonl"} <= set(files)


def test_init_on_a_file_or_below_one_is_refused(distilbert_dir, tmp_path, capsys):
    target = tmp_path / "suite"
    target.write_text("not a folder", encoding="utf-8")
    assert exit_code(["init", str(target), "--model", str(distilbert_dir)]) == 2
    assert f"{target}: exists and is not a folder" in one_line(err_of(capsys))
    assert exit_code(["init", str(target / "inner"), "--model", str(distilbert_dir)]) == 2
    assert f"{target}: is not a folder, so the suite's folder 'inner' cannot be made in it" in one_line(err_of(capsys))
    assert target.read_text(encoding="utf-8") == "not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["suite"]


def test_init_through_a_symlink_to_a_folder_writes_there(distilbert_dir, tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert exit_code(["init", str(tmp_path / "link"), "--model", str(distilbert_dir)]) == 0
    err_of(capsys)
    assert (tmp_path / "link").is_symlink()
    assert sorted(p.name for p in real.iterdir()) == ["must_fix.jsonl", "must_keep.jsonl", "warp.toml"]
    assert load_suite(tmp_path / "link", empty=True).model_dir == distilbert_dir.resolve()


@pytest.mark.parametrize("loop", [False, True])
def test_init_on_a_dangling_or_looping_symlink_is_refused(distilbert_dir, tmp_path, loop, capsys):
    link = tmp_path / "link"
    link.symlink_to(link if loop else tmp_path / "nowhere")
    assert exit_code(["init", str(link), "--model", str(distilbert_dir)]) == 2
    line = one_line(err_of(capsys))
    assert f"{link}: a symlink to " in line and ("which loops" if loop else "which does not exist") in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link"] and link.is_symlink()  # no .tmp-* left


def test_init_with_a_hub_revision_not_in_the_cache_names_the_download(distilbert_dir, tmp_path, monkeypatch, capsys):
    lay_out_hub_cache(tmp_path / "hub", distilbert_dir, monkeypatch)
    folder = tmp_path / "work" / "suite"
    assert exit_code(["init", str(folder), "--model", REPO_ID, "--revision", "v2"]) == 2
    line = one_line(err_of(capsys))
    assert "not in the local Hugging Face cache" in line
    assert f"hf download {REPO_ID} --revision v2" in line
    assert not (tmp_path / "work").exists()
    assert exit_code(["init", str(folder), "--model", REPO_ID]) == 0  # main is there: the same call works
    assert f"commit {COMMIT}" in capsys.readouterr().out


def test_init_for_a_model_that_names_no_classes(distilbert_dir, tmp_path, capsys):
    model = model_with(tmp_path, distilbert_dir, None)
    assert exit_code(["init", str(tmp_path / "suite"), "--model", str(model)]) == 0
    assert "labels: none named: the case files give class ids" in capsys.readouterr().out
    assert "labels" not in tomllib.loads((tmp_path / "suite" / "warp.toml").read_text(encoding="utf-8"))


def test_init_says_generic_label_names_are_made_up(distilbert_dir, tmp_path, capsys):
    model = model_with(tmp_path, distilbert_dir, {"0": "LABEL_0", "1": "LABEL_1"})
    assert exit_code(["init", str(tmp_path / "suite"), "--model", str(model)]) == 0
    out = capsys.readouterr().out
    assert "labels: LABEL_0 (0), LABEL_1 (1)" in out and "made-up names" in out
    text = (tmp_path / "suite" / "warp.toml").read_text(encoding="utf-8")
    assert re.search(r"^\[labels\] +# transformers' made-up names", text, re.M)
    assert load_suite(tmp_path / "suite", empty=True).labels == {"LABEL_0": 0, "LABEL_1": 1}


@pytest.mark.parametrize(
    "names",
    [
        ['a, "b"', "c,d"],  # commas and quotes
        ["line\nbreak", "tab\there \\ back\\slash"],  # control characters and backslashes
        ["del\x7fchar", "'single' quotes"],  # DEL: JSON leaves it bare, TOML does not take it so
        ["négatif 😀", "line\u2028separator"],  # beyond ASCII and beyond the BMP; a line end only to Python
        ["1", "0"],  # names that read as the other class's id
    ],
)
def test_init_writes_label_names_that_read_back_the_same(distilbert_dir, tmp_path, names, capsys):
    model = model_with(tmp_path, distilbert_dir, {str(i): name for i, name in enumerate(names)})
    assert exit_code(["init", str(tmp_path / "suite"), "--model", str(model)]) == 0
    err_of(capsys)
    expected = {name: i for i, name in enumerate(names)}
    assert tomllib.loads((tmp_path / "suite" / "warp.toml").read_text(encoding="utf-8"))["labels"] == expected
    assert load_suite(tmp_path / "suite", empty=True).labels == expected


def test_init_refuses_a_label_name_that_is_not_unicode(distilbert_dir, tmp_path, capsys):
    model = model_with(tmp_path, distilbert_dir, {"0": "neg", "1": "\ud800"})
    assert exit_code(["init", str(tmp_path / "suite"), "--model", str(model)]) == 2
    line = one_line(err_of(capsys))
    assert "config.json: id2label names class 1" in line and "not valid Unicode" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_init_with_ten_thousand_labels_round_trips_quickly(distilbert_dir, tmp_path, capsys):
    names = {str(i): f'class {i}, "{chr(0x4E00 + i)}"' for i in range(10_000)}
    model = model_with(tmp_path, distilbert_dir, names, num_labels=10_000)
    started = time.perf_counter()
    assert exit_code(["init", str(tmp_path / "suite"), "--model", str(model)]) == 0
    assert time.perf_counter() - started < 10
    err_of(capsys)
    written = tomllib.loads((tmp_path / "suite" / "warp.toml").read_text(encoding="utf-8"))["labels"]
    assert written == {name: int(i) for i, name in names.items()}


def test_init_removes_what_it_made_when_the_suite_written_does_not_load(distilbert_dir, tmp_path, capsys):
    # Class 5 of a 2-class model: the loader refuses the [labels] written, and nothing stays behind.
    model = model_with(tmp_path, distilbert_dir, {"0": "neg", "1": "pos", "5": "odd"}, num_labels=2)
    assert exit_code(["init", str(tmp_path / "a" / "b" / "suite"), "--model", str(model)]) == 2
    line = one_line(err_of(capsys))
    assert "does not load, so it was removed again" in line and "class id 5 is out of range" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    existing = tmp_path / "mine"
    existing.mkdir()
    (existing / "notes.md").write_text("mine", encoding="utf-8")
    assert exit_code(["init", str(existing), "--model", str(model)]) == 2
    err_of(capsys)
    assert tree(existing) == {"notes.md": b"mine"}
