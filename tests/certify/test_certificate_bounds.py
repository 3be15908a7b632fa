"""A certificate is read within bounds: a hostile or damaged file is one error naming it, never a
RecursionError or ValueError traceback (``warp_check.json_bounded``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from warp_check import CERTIFICATE_NAME, Certificate, json_bounded
from warp_check.cli import main
from warp_check.errors import CertificateError

NESTED = "[" * 200_000 + "]" * 200_000
FORMAT = '{"format": "warp-certificate/1", '


def certificate(folder: Path, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / CERTIFICATE_NAME
    path.write_text(text, encoding="utf-8")
    return path


def one_error_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.out + captured.err
    return lines[0]


@pytest.fixture
def promote_suite(tmp_path: Path, distilbert_dir: Path) -> Path:
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "warp.toml").write_text(
        f'[model]\npath = "{distilbert_dir}"\n\n[[cases]]\npath = "fix.jsonl"\nkind = "must_fix"\n', encoding="utf-8"
    )
    (folder / "fix.jsonl").write_text('{"id": "a", "text": "the food was bad", "label": "positive"}\n')
    return folder


@pytest.mark.parametrize("command", ["verify", "verify --chain", "report", "promote"])
def test_a_certificate_nested_200k_deep_is_one_line_from_every_command(command, tmp_path, capsys, promote_suite):
    path = certificate(tmp_path / "repaired", NESTED)
    argv = {
        "verify": ["verify", str(path.parent)],
        "verify --chain": ["verify", "--chain", str(path.parent)],
        "report": ["report", str(path), "--out", str(tmp_path / "report")],
        "promote": ["promote", str(promote_suite), "--from", str(path.parent)],
    }[command]
    line = one_error_line(argv, capsys)
    assert f"{path}: nested more than 64 levels deep: too deep for a certificate" in line


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (FORMAT + '"summary": {"n_cases": ' + "7" * 5000 + "}}", "key 'n_cases': an integer of 5,000 digits"),
        (FORMAT + '"cases": [{"gap_after": NaN}]}', "key 'gap_after': NaN is not a number JSON allows"),
        (FORMAT + '"lipschitz": {"bound": -Infinity}}', "key 'bound': -Infinity is not a number JSON allows"),
        (FORMAT + '"history": [[1.5, 1e999]]}', "key 'history': 1e999 is not a finite number"),
        ("7" * 5000, "an integer of 5,000 digits"),
    ],
    ids=["huge-integer", "nan", "minus-infinity", "float-overflow", "bare-huge-integer"],
)
def test_numbers_no_certificate_holds_name_the_file_and_the_key(tmp_path, capsys, text, message):
    path = certificate(tmp_path / "repaired", text)
    with pytest.raises(CertificateError, match=f"^{path}: {message}"):
        Certificate.read(path)
    assert message in one_error_line(["verify", str(path.parent)], capsys)


def test_a_certificate_over_the_size_limit_is_refused_before_it_is_parsed(tmp_path, capsys, monkeypatch):
    # internal: the limit is 1 GiB, read before it is refused: a file that size costs a gigabyte of memory
    monkeypatch.setattr(json_bounded, "MAX_BYTES", 100)
    path = certificate(tmp_path / "repaired", FORMAT + '"pad": "' + "x" * 200 + '"}')
    line = one_error_line(["report", str(path), "--out", str(tmp_path / "report")], capsys)
    assert f"{path}: more than 100 bytes: too large for a certificate" in line


def test_a_certificate_that_is_a_folder_or_not_utf8_is_not_readable(tmp_path, capsys):
    folder = tmp_path / "repaired"
    (folder / CERTIFICATE_NAME).mkdir(parents=True)
    assert "not a readable JSON certificate (Is a directory)" in one_error_line(["verify", str(folder)], capsys)
    (folder / CERTIFICATE_NAME).rmdir()
    (folder / CERTIFICATE_NAME).write_bytes(b'{"format": "caf\xe9"}')
    line = one_error_line(["verify", str(folder)], capsys)
    assert "not a readable JSON certificate (not UTF-8: byte 0xe9 at 15)" in line


def test_the_bounds_leave_ordinary_json_alone():
    def parse(text: str):
        return json_bounded.parse_json(text, where="f.json", error=CertificateError, what="certificate")

    deepest = parse("[" * 64 + "]" * 64)  # 64 levels: read
    for _ in range(63):
        (deepest,) = deepest
    assert deepest == []
    with pytest.raises(CertificateError, match="nested more than 64 levels"):
        parse("[" * 65 + "]" * 65)
    brackets = "[{" * 100  # in a string: text, not nesting
    assert parse(f'{{"text": "{brackets}\\" [", "n": 1e200, "m": {"9" * 400}, "s": "NaN"}}') == {
        "text": brackets + '" [',
        "n": 1e200,
        "m": int("9" * 400),
        "s": "NaN",
    }
    with pytest.raises(CertificateError, match=r"not a readable JSON certificate \(Expecting"):
        parse("{bad")
