"""The solver's settings on disk: [repair.solver.<backend>] tables and the old flat keys read the same,
a certificate's flat "solver" object is written and read exactly as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from warp_check.errors import SettingsError, SuiteError
from warp_check.qp.backends.alm import AlmSettings
from warp_check.qp.backends.ipm import IpmSettings
from warp_check.qp.backends.osqp import OsqpSettings
from warp_check.qp.settings import FLAT_KEYS, SolverSettings
from warp_check.repair.settings import RepairSettings
from warp_check.suite.loader import load_suite

# A certificate's "solver" object as every certificate so far holds it (the example's, verbatim).
WRITTEN_BEFORE = (
    '{"form": "auto", "eps_abs": 1e-07, "eps_rel": 1e-07, "eps_infeasible": 1e-07, "max_iter": 20000, '
    '"time_limit_s": 600.0, "polishing": true, "polish_refine_iter": 10, "scaling": 10, "sigma": 1e-06, '
    '"working_set": true, "working_set_rounds": 50, "working_set_window": 0.05, "working_set_batch": 300, '
    '"backend": "auto", "ipm_min_rows": 1000, "ipm_max_unknowns": 2048, "ipm_tolerance": 1e-06, '
    '"ipm_max_iter": 200, "active_set_tolerance": 1e-09, "active_set_max_iter": 100, "alm_tolerance": 1e-09, '
    '"alm_max_iter": 2000}'
)


def test_a_certificate_written_before_reads_the_same_and_is_written_back_byte_for_byte():
    settings = SolverSettings.from_json(json.loads(WRITTEN_BEFORE))
    assert settings == SolverSettings()
    assert json.dumps(settings.to_json()) == WRITTEN_BEFORE
    assert json.dumps(RepairSettings().to_dict()["solver"]) == WRITTEN_BEFORE
    assert list(json.loads(WRITTEN_BEFORE)) == list(FLAT_KEYS)
    tuned = SolverSettings(
        backend="alm", working_set_batch=50, backend_settings=(AlmSettings(max_iter=9), OsqpSettings(eps_abs=1e-6))
    )
    written = tuned.to_json()
    assert (written["alm_max_iter"], written["eps_abs"], written["backend"]) == (9, 1e-6, "alm")
    assert RepairSettings.from_dict(RepairSettings(solver=tuned).to_dict()).solver == tuned


def test_flat_keys_and_nested_tables_give_the_same_settings():
    flat = {"ipm_min_rows": 500, "ipm_tolerance": 1e-5, "alm_max_iter": 30, "eps_abs": 1e-6, "max_iter": 50}
    nested = {
        "newton_min_rows": 500,
        "ipm": {"tolerance": 1e-5},
        "alm": {"max_iter": 30},
        "osqp": {"eps_abs": 1e-6, "max_iter": 50},
    }
    expected = SolverSettings(
        newton_min_rows=500,
        backend_settings=(
            OsqpSettings(eps_abs=1e-6, max_iter=50),
            IpmSettings(tolerance=1e-5),
            AlmSettings(max_iter=30),
        ),
    )
    assert SolverSettings.from_json(flat) == SolverSettings.from_json(nested) == expected
    # Defaults are dropped: a record holding only defaults is the same settings as none.
    assert SolverSettings(backend_settings=(IpmSettings(),)) == SolverSettings()
    assert expected.of(IpmSettings).max_iter == 200 and expected.of(AlmSettings).max_iter == 30


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"ipm": {"tolerence": 1e-5}}, r"ipm\.tolerence=1e-05: is not a setting of the 'ipm' backend"),
        ({"ipm": {"tolerance": 2.0}}, r"ipm\.tolerance=2\.0: must be a number in \(0, 1\)"),
        ({"ipm_tolerance": 2.0}, r"ipm_tolerance=2\.0: must be a number in \(0, 1\)"),
        ({"ipm_min_rows": 0}, r"ipm_min_rows=0: must be an integer >= 1"),
        ({"ipm_tolerance": 1e-5, "ipm": {"tolerance": 1e-5}}, "'ipm_tolerance' sets it already"),
        ({"ipm": 3}, "must be a table of the 'ipm' backend's settings"),
        ({"steps": 2}, "steps=2: is not a solver setting"),
        ({"backend_settings": ()}, "is not a solver setting"),
    ],
)
def test_a_bad_key_is_refused_naming_it_as_written(values, message):
    with pytest.raises(SettingsError, match=message):
        SolverSettings.from_json(values)


def test_backend_settings_hold_registered_records_once():
    with pytest.raises(SettingsError, match="backend_settings"):
        SolverSettings(backend_settings=(IpmSettings(max_iter=3), IpmSettings(max_iter=4)))
    with pytest.raises(SettingsError, match="backend_settings"):
        SolverSettings(backend_settings=({"max_iter": 3},))


# -- warp.toml -----------------------------------------------------------------------------------


def suite_with(tmp_path: Path, solver: str) -> Path:
    model = tmp_path / "model"
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(json.dumps({"num_labels": 2, "id2label": {"0": "neg", "1": "pos"}}))
    (model / "model.safetensors").write_bytes(b"")
    folder = tmp_path / "suite"
    folder.mkdir(exist_ok=True)
    (folder / "fix.jsonl").write_text('{"text": "x", "label": "pos"}\n')
    head = '[model]\npath = "../model"\n[[cases]]\npath = "fix.jsonl"\nkind = "must_fix"\n'
    (folder / "warp.toml").write_text(head + solver)
    return folder


def test_warp_toml_reads_the_nested_tables_and_the_old_flat_keys_alike(tmp_path):
    flat = load_suite(suite_with(tmp_path / "a", "[repair.solver]\nipm_tolerance = 1e-5\nmax_iter = 50\n"))
    nested = load_suite(
        suite_with(tmp_path / "b", "[repair.solver.ipm]\ntolerance = 1e-5\n[repair.solver.osqp]\nmax_iter = 50\n")
    )
    expected = SolverSettings(backend_settings=(OsqpSettings(max_iter=50), IpmSettings(tolerance=1e-5)))
    assert flat.repair.solver == nested.repair.solver == expected


@pytest.mark.parametrize(
    ("solver", "message"),
    [
        (
            "[repair.solver.ipm]\ntolerence = 1e-5\n",
            "warp.toml:7: field 'repair.solver.ipm.tolerence': unknown key 'tolerence' in [repair.solver.ipm] "
            "(did you mean 'tolerance'?)",
        ),
        ("[repair.solver.ipm]\ntolerance = 2.0\n", "warp.toml:7: field 'repair.solver.ipm.tolerance': 2.0: must be"),
        ("[repair.solver.alm]\nmax_iter = 1.5\n", "field 'repair.solver.alm.max_iter': must be an integer, got 1.5"),
        ("[repair.solver]\nipm = 3\n", "field 'repair.solver.ipm': must be a table ([repair.solver.ipm])"),
        ("[repair.solver]\nipm_max_iter = 0\n", "warp.toml:7: field 'repair.solver.ipm_max_iter': 0: must be"),
        ('[repair.solver]\nbackend = "toy"\n', "field 'repair.solver.backend': 'toy': must be 'auto', 'osqp'"),
    ],
)
def test_a_misspelt_or_bad_solver_key_in_warp_toml_is_refused_naming_it(tmp_path, solver, message):
    with pytest.raises(SuiteError) as caught:
        load_suite(suite_with(tmp_path, solver))
    assert message in str(caught.value)
