"""One certified artefact of the tiny DistilBERT, written once and shared read-only by the
certificate and artefact tests (a test that damages it works on a copy). Its repair draws the
neighbourhood (off by default), so that its copies are certified, written and read back too."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from testkit.tiny_models import repair_suite

from warp_check import Case, ClassifierAdapter, RepairSettings, repair_cases
from warp_check.repair.settings import NeighbourSettings
from warp_check.runs.repair_cases import RepairOutcome


@dataclass(frozen=True)
class Written:
    adapter: ClassifierAdapter
    cases: list[Case]
    outcome: RepairOutcome
    folder: Path


@pytest.fixture(scope="session")
def written(distilbert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Written:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the autouse fixture is per test; this one runs first
    try:
        adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
        cases = repair_suite(adapter, "binary", n_fix=5, n_keep=50, seed=2)
        out = tmp_path_factory.mktemp("artefact") / "repaired"
        settings = RepairSettings(neighbours=NeighbourSettings().drawing())
        outcome = repair_cases(adapter, cases, settings, out_dir=out, progress=False)
    finally:
        torch.set_num_threads(threads)
    assert outcome.result.repaired, outcome.result.message
    return Written(adapter, cases, outcome, outcome.artefact)
