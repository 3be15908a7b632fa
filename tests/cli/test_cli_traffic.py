"""``warp-check repair --traffic --max-change`` and ``warp-check verify --traffic``: Cert 4 outside pytest."""

from __future__ import annotations

import json
from pathlib import Path

from testkit.suite_builder import exit_code
from testkit.tiny_models import synthetic_cases

from warp_check.cli import main


def traffic(path: Path, seed: int = 7, n: int = 600) -> Path:
    texts = sorted({c["text"] for c in synthetic_cases("binary", n, seed=seed, unseen_rate=0.5)})
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


def test_repair_measures_cert4_gates_its_budget_and_verify_recomputes_it(tiny_suite, tmp_path, capsys):
    sample = traffic(tmp_path / "traffic.jsonl")
    out = tmp_path / "gated"
    assert main(["repair", str(tiny_suite), "--out", str(out), "--traffic", str(sample), "--max-change", "0.05"]) == 1
    printed = capsys.readouterr().out
    assert "FAILED Cert 4 fails the budget" in printed and "repaired model: none written" in printed
    assert not out.exists()

    out = tmp_path / "model"
    assert main(["repair", str(tiny_suite), "--out", str(out), "--traffic", str(sample), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["traffic"]["passed"] and result["details"]["traffic"]["n"] == result["traffic"]["properties"]["n"]

    assert main(["verify", str(out), "--traffic", str(sample)]) == 0
    assert "Cert 4 holds: the repair changes at most" in capsys.readouterr().out
    assert main(["verify", str(out)]) == 0
    assert "Cert 4 not re-checked" in capsys.readouterr().out
    assert main(["verify", str(out), "--suite", str(tiny_suite), "--traffic", str(sample)]) == 0
    assert "Cert 4 holds" in capsys.readouterr().out
    assert main(["verify", str(out), "--traffic", str(sample), "--max-change", "0.05"]) == 1
    assert "FAILED traffic_budget" in capsys.readouterr().out

    other = traffic(tmp_path / "other.jsonl", seed=9)
    assert main(["verify", str(out), "--traffic", str(other)]) == 2
    assert "not the sample the certificate's Cert 4 was measured on" in capsys.readouterr().err


def test_a_bad_budget_is_a_usage_error(tiny_suite, tmp_path, capsys):
    assert main(["repair", str(tiny_suite), "--max-change", "0.01"]) == 2
    assert "a budget needs traffic" in capsys.readouterr().err
    given = ["repair", str(tiny_suite), "--traffic", str(traffic(tmp_path / "t.jsonl")), "--max-change", "0"]
    assert exit_code(given) == 2  # argparse's refusal, as of any bad flag value
    assert "argument --max-change: '0': must be a share of predictions: a number in (0, 1)" in capsys.readouterr().err
