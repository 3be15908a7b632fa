"""A mistyped flag or command gets the one it likely meant, from the command it was given to."""

from __future__ import annotations

import pytest

from warp_check.cli import main


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    return capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize(
    ("argv", "usage", "meant"),
    [
        (
            ["repair", "suite", "--max-chnage", "0.05"],
            "usage: warp-check repair",
            "--max-chnage: did you mean --max-change?",
        ),
        (
            ["repair", "suite", "--max-chnage=0.05"],
            "usage: warp-check repair",
            "--max-chnage: did you mean --max-change?",
        ),
        (["verify", "folder", "--chian"], "usage: warp-check verify", "--chian: did you mean --chain?"),
        (
            ["import", "suite", "rows.csv", "--split-by-modle"],
            "usage: warp-check import",
            "did you mean --split-by-model?",
        ),
        (["repiar", "suite"], "usage: warp-check [-h]", "did you mean 'repair'?"),
    ],
)
def test_a_typo_gets_what_it_likely_meant_and_the_commands_own_usage(argv, usage, meant, capsys):
    lines = _refused(argv, capsys)
    assert lines[0].startswith(usage)
    assert lines[-1].startswith(f"warp-check{' ' + argv[0] if usage != 'usage: warp-check [-h]' else ''}: error: ")
    assert meant in lines[-1] and "Traceback" not in "\n".join(lines)


def test_a_flag_far_from_any_gets_no_guess(capsys):
    (*_, last) = _refused(["check", "suite", "--zzzz"], capsys)
    assert last == "warp-check check: error: unrecognized arguments: --zzzz"
