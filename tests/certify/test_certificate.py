"""``Certificate``: the one reader and writer of warp_certificate.json, on a real certificate.

Reading a certificate and writing it again gives the file back byte for byte (the key order is
the format's), and every key is checked on reading: a missing key, a value of the wrong type or
another format is an error that names the file and the key.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from warp_check import CERTIFICATE_NAME, FORMAT, Certificate, Lipschitz
from warp_check.certify.certificate import LATER_KEYS, TOP_LEVEL_KEYS
from warp_check.errors import CertificateError
from warp_check.perturb import wordnet_available
from warp_check.repair.settings import NeighbourSettings
from warp_check.serial import finite


@pytest.fixture
def path(written) -> Path:
    return written.folder / CERTIFICATE_NAME


@pytest.fixture
def data(path) -> dict:
    return json.loads(path.read_text())


def test_a_written_certificate_reads_back_to_the_same_json_byte_for_byte(written, path):
    outcome = written.outcome
    text = path.read_text()
    certificate = Certificate.read(path)
    assert json.dumps(certificate.to_json(), indent=2, allow_nan=False) + "\n" == text
    assert Certificate.from_json(json.loads(text), path=path) == certificate
    # What the pipeline built is what was written, less the hashes of the written files.
    model = certificate.model
    assert outcome.certificate.with_hashes(model.sha256_repair_layer, model.sha256_frozen) == certificate
    assert outcome.certificate.model.sha256_frozen is None


def test_the_file_keeps_the_format_and_its_key_order(data):
    assert data["format"] == FORMAT and tuple(data) == TOP_LEVEL_KEYS + LATER_KEYS
    assert list(data["model"])[-2:] == ["sha256_repair_layer", "sha256_frozen"]
    assert list(data["cases"][0]) == [
        "id", "kind", "label", "text", "text_pair", "source", "gap_before", "gap_after", "gap_as_saved", "cert1",
        "cert2", "cert3", "eps_star", "eps_local", "attack_min_gap", "flip_radius", "excluded",
        "restored",
    ]  # fmt: skip


def test_a_certificate_written_before_neighbourhoods_still_reads(data, path):
    # No [repair.neighbours] settings and no case sources: its repair drew no neighbourhood.
    old = json.loads(json.dumps(data))
    del old["settings"]["neighbours"]
    for case in old["cases"]:
        del case["source"]
    certificate = Certificate.from_json(old, path=path)
    assert certificate.settings.neighbours == NeighbourSettings.off()
    assert all(c.source is None for c in certificate.cases)
    drawn = dataclasses.replace(NeighbourSettings().drawing(), synonyms=wordnet_available())  # "auto" as found
    assert Certificate.from_json(data, path=path).settings.neighbours == drawn
    assert list(data["repair"]["history"][0])[:3] == ["iteration", "min_gap_fix", "min_gap_keep"]


def test_write_goes_through_a_temporary_file_and_refuses_what_json_cannot_hold(path, tmp_path):
    certificate = Certificate.read(path)
    again = certificate.write(tmp_path / CERTIFICATE_NAME)
    assert again.read_text() == path.read_text() and [p.name for p in tmp_path.iterdir()] == [CERTIFICATE_NAME]
    bad = dataclasses.replace(certificate, lipschitz=Lipschitz(L=math.inf, norm_W=1.0, norm_Wc=1.0, L_sigma=1.0))
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        bad.write(tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()
    assert finite(math.nan) is None and finite(math.inf) is None and finite(2) == 2.0


def _set(where: str, value: object) -> Callable[[dict], None]:
    """An edit that sets ``where`` (dotted keys, list indices) to ``value``; ``...`` deletes it."""

    def edit(data: dict) -> None:
        *parents, last = [int(k) if k.isdigit() else k for k in where.split(".")]
        node = data
        for key in parents:
            node = node[key]
        if value is ...:
            del node[last]
        else:
            node[last] = value

    return edit


MALFORMED = {
    # missing keys
    "top-level key": (_set("radius_space", ...), r"missing key\(s\) radius_space"),
    "model key": (_set("model.max_length", ...), "model.max_length is missing or not an integer"),
    "setting": (_set("settings.gamma_h", ...), "settings.gamma_h is missing"),
    "solver setting": (_set("settings.solver.eps_abs", ...), "settings.solver.eps_abs is missing"),
    "history row key": (
        _set("repair.history.0.seconds", ...),
        r"repair.history\[0\].seconds is missing or not a number",
    ),
    "case key": (_set("cases.2.gap_after", ...), r"cases\[2\].gap_after is missing or not a number"),
    "summary key": (_set("summary.cert3", ...), "summary.cert3 is missing or not a string"),
    # wrong types and values
    "lipschitz not a number": (_set("lipschitz.L", "large"), "lipschitz.L is missing or not a number"),
    "flag not a bool": (_set("repair.converged", "yes"), "repair.converged is missing or not true or false"),
    "integer not an int": (_set("model.max_length", 1.5), "model.max_length is missing or not an integer"),
    "unknown kind": (_set("cases.0.kind", "sometimes"), r"cases\[0\].kind is 'sometimes', not one of 'must_fix'"),
    "unknown status": (_set("repair.status", "fine"), "repair.status is 'fine', not one of 'converged'"),
    "case with no text": (_set("cases.1.text", " "), r"cases\[1\]: text=' ': must be a non-empty string"),
    "optional radius": (_set("cases.0.eps_star", "wide"), r"cases\[0\].eps_star is missing or not a number \(or null"),
    "cases not objects": (_set("cases.0", "a case"), r"cases\[0\] must be an object, got str"),
    "history not a list": (_set("repair.history", {}), "repair.history must be a list"),
    "setting out of range": (_set("settings.rank", 0), "settings.rank=0: must be an integer >= 1"),
    "solver setting out of range": (_set("settings.solver.eps_abs", -1.0), "settings.solver.eps_abs=-1.0"),
    "unknown setting": (_set("settings.learning_rate", 0.1), "settings.learning_rate is not a setting"),
    "qp statuses not strings": (_set("repair.qp_status", [1]), "repair.qp_status is missing or not a list of strings"),
    "unknown form": (_set("model.form", "sideways"), "model.form is 'sideways', not one of 'dense', 'final_linear'"),
    "form the head contradicts": (
        _set("model.form", "final_linear"),
        "model.form is 'final_linear', which classifier 'classifier' contradicts",
    ),
    "how the head was found": (_set("model.found_by", 3), "model.found_by is missing or not a string"),
    # another format
    "format": (_set("format", "warp-certificate/2"), "format 'warp-certificate/2' is not 'warp-certificate/1'"),
}


@pytest.mark.parametrize(("edit", "message"), MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_certificate_names_the_file_and_the_key(data, tmp_path, edit, message):
    edited = copy.deepcopy(data)
    edit(edited)
    damaged = tmp_path / CERTIFICATE_NAME
    damaged.write_text(json.dumps(edited))
    with pytest.raises(CertificateError, match=message) as info:
        Certificate.read(damaged)
    assert str(info.value).startswith(f"{damaged}: ")
    with pytest.raises(CertificateError, match=message):
        Certificate.from_json(edited, path=damaged)


def test_the_certificate_says_which_form_was_repaired_and_how_the_head_was_found(data, tmp_path):
    assert data["model"]["form"] == "dense" and data["model"]["classifier"] == "classifier"
    assert data["model"]["found_by"] == "the head table's entry for distilbert"
    # A certificate written before these were recorded still reads.
    older = copy.deepcopy(data)
    del older["model"]["form"], older["model"]["found_by"]
    model = Certificate.from_json(older, path=tmp_path / CERTIFICATE_NAME).model
    assert model.form is None and model.found_by is None
