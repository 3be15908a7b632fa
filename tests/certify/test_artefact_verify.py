"""The certified artefact (atomic writes, hashes, the certificate file) and ``verify``'s checks."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from warp_check import CERTIFICATE_NAME, Certificate, ClassifierAdapter, repair_cases, verify, write_artefact
from warp_check.certify.artefact import check_destination, folder_hashes
from warp_check.errors import ArtefactError, CertificateError
from warp_check.model.hashing import parameter_hashes


@pytest.fixture
def artefact(written, tmp_path) -> Path:
    """A private copy of the written folder, free to damage."""
    return Path(shutil.copytree(written.folder, tmp_path / "artefact"))


def _write(written, out: Path) -> Path:
    repaired = written.adapter.with_head(written.outcome.result.head_after)
    return write_artefact(
        repaired.model,
        written.adapter.tokenizer,
        written.outcome.certificate,
        out,
        source=written.adapter.source,
        repair_layer=written.adapter.spec.repair_layer,
    )


# ---- where an artefact may go


def test_destinations_that_touch_the_input_are_refused(written, tmp_path):
    source = Path(written.adapter.source)
    for out in (source, source / "repaired", source.parent):
        with pytest.raises(ArtefactError, match="overlaps the input model.*never overwritten"):
            check_destination(out, source)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(ArtefactError, match="not empty and holds no warp_certificate.json"):
        _write(written, foreign)
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ArtefactError, match="exists and is not a folder"):
        check_destination(tmp_path / "a_file", source)


def test_repair_refuses_the_input_folder_before_any_work(written, monkeypatch):
    source = Path(written.adapter.source)
    adapter = ClassifierAdapter.from_pretrained(source)
    # internal: the API prints nothing that tells an encode from none; the model's forward is the witness
    monkeypatch.setattr(adapter.model, "forward", lambda **_: pytest.fail("encoded before refusing"))
    with pytest.raises(ArtefactError, match="overlaps the input model"):
        repair_cases(adapter, written.cases, out_dir=source / "repaired", progress=False)


def test_a_failed_write_leaves_no_folder_and_keeps_an_older_artefact(written, tmp_path, monkeypatch):
    class Broken:
        def save_pretrained(self, folder):
            (Path(folder) / "tokenizer.json").write_text("{")  # half written
            raise OSError(28, "No space left on device")

    repaired = written.adapter.with_head(written.outcome.result.head_after)

    def write(out: Path) -> None:
        write_artefact(
            repaired.model, Broken(), written.outcome.certificate, out, source=None, repair_layer="pre_classifier"
        )

    with pytest.raises(OSError, match="No space left"):
        write(tmp_path / "new")
    assert list(tmp_path.iterdir()) == []
    # Over an older artefact: it stays complete and untouched.
    old = _write(written, tmp_path / "old")
    before = {p.name: p.read_bytes() for p in old.iterdir()}
    with pytest.raises(OSError, match="No space left"):
        write(old)
    assert {p.name: p.read_bytes() for p in old.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["old"]


def test_an_older_artefact_is_replaced_whole(written, tmp_path):
    out = _write(written, tmp_path / "out")
    (out / "stale.txt").write_text("from an earlier run")
    _write(written, out)
    assert not (out / "stale.txt").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temp or old folder left
    assert verify(out).ok


# ---- hashes


def test_hashes_separate_the_repair_layer_from_everything_else(written):
    state = {k: v.clone() for k, v in written.adapter.model.state_dict().items()}
    layer, frozen = parameter_hashes(state, "pre_classifier")
    state["pre_classifier.bias"][3] += 1e-6
    layer2, frozen2 = parameter_hashes(state, "pre_classifier")
    assert layer2 != layer and frozen2 == frozen
    state["classifier.bias"][0] += 1e-6
    layer3, frozen3 = parameter_hashes(state, "pre_classifier")
    assert layer3 == layer2 and frozen3 != frozen
    # A renamed tensor with the same bytes is a different model.
    state["classifier.renamed"] = state.pop("classifier.bias")
    layer4, frozen4 = parameter_hashes(state, "pre_classifier")
    assert layer4 == layer3 and frozen4 != frozen3


def test_certificate_hashes_are_those_of_the_written_files(written):
    cert = Certificate.read(written.folder / CERTIFICATE_NAME)
    assert (cert.model.sha256_repair_layer, cert.model.sha256_frozen) == folder_hashes(written.folder, "pre_classifier")
    # Only the repair layer differs from the input model.
    source_layer, source_frozen = folder_hashes(written.adapter.source, "pre_classifier")
    assert cert.model.sha256_frozen == source_frozen == cert.model.sha256_source_frozen
    assert cert.model.sha256_repair_layer != source_layer


# ---- reading a certificate


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: "{not json", "not a readable JSON certificate"),
        (lambda c: json.dumps([c]), "a certificate is a JSON object, got list"),
        (lambda c: json.dumps({k: v for k, v in c.items() if k not in ("lipschitz", "summary")}), "lipschitz, summary"),
        (lambda c: json.dumps({**c, "format": "warp-certificate/0"}), "format 'warp-certificate/0' is not"),
        (lambda c: json.dumps({**c, "model": "distilbert"}), "model must be an object, got str"),
        (lambda c: json.dumps({**c, "model": {**c["model"], "sha256_frozen": None}}), "model.sha256_frozen"),
        (lambda c: json.dumps({**c, "cases": {}}), "cases must be a list"),
    ],
    ids=["bad-json", "not-object", "missing-keys", "format", "model-not-object", "hash-missing", "cases-not-list"],
)
def test_malformed_certificates_name_the_file_and_the_key(artefact, edit, message):
    path = artefact / CERTIFICATE_NAME
    path.write_text(edit(json.loads(path.read_text())))
    with pytest.raises(CertificateError, match=message) as info:
        Certificate.read(path)
    assert str(path) in str(info.value)
    with pytest.raises(CertificateError):
        verify(artefact)


def test_a_missing_certificate_is_an_error_not_a_pass(artefact):
    (artefact / CERTIFICATE_NAME).unlink()
    with pytest.raises(CertificateError, match="no certificate file here"):
        verify(artefact)


# ---- verify checks the claims, not only the hashes


def test_verify_reads_a_certificate_kept_elsewhere(artefact, tmp_path):
    elsewhere = tmp_path / "kept.json"
    (artefact / CERTIFICATE_NAME).rename(elsewhere)
    assert verify(artefact, elsewhere).ok


@pytest.mark.parametrize(
    ("field", "change", "failing"),
    [
        ("gap_after", lambda x: x + 0.01, "gap"),
        ("eps_star", lambda x: x * 1.01, "eps_star"),
    ],
)
def test_verify_rejects_an_inflated_claim_and_names_the_case(written, artefact, field, change, failing):
    path = artefact / CERTIFICATE_NAME
    cert = json.loads(path.read_text())
    target = next(c for c in cert["cases"] if c["kind"] == "must_fix")
    target[field] = change(target[field])
    path.write_text(json.dumps(cert))
    verification = verify(artefact)
    assert [(c.name, c.case_id) for c in verification.failures()] == [(failing, target["id"])]
    assert verification.for_case(target["id"])


def test_verify_rejects_a_wrong_lipschitz_claim_and_a_claim_about_another_text(artefact):
    path = artefact / CERTIFICATE_NAME
    cert = json.loads(path.read_text())
    cert["lipschitz"]["L"] *= 0.99  # a smaller L would mean larger certified radii
    target = next(c for c in cert["cases"] if c["kind"] == "must_fix")
    target["text"] = target["text"] + " and the cast was quiet"  # not the text that was repaired
    path.write_text(json.dumps(cert))
    failed = {(c.name, c.case_id) for c in verify(artefact).failures()}
    assert ("lipschitz", None) in failed
    assert ("gap", target["id"]) in failed


def test_verify_rejects_a_summary_that_the_cases_do_not_give(artefact):
    path = artefact / CERTIFICATE_NAME
    cert = json.loads(path.read_text())
    assert cert["summary"]["cert2"] == "50/50"
    cert["summary"]["cert2"] = "60/60"
    path.write_text(json.dumps(cert))
    failures = verify(artefact).failures()
    assert [(c.name, c.case_id) for c in failures] == [("summary", None)]
    assert "'cert2': '50/50'" in failures[0].detail


def test_written_files_get_the_umask_mode_not_the_temp_files_0600(written, tmp_path):
    # mkdtemp/mkstemp make 0700/0600 and a rename keeps the mode: a CI upload running as
    # another user could not read the artefact. What is written gets open()'s mode instead.
    old = os.umask(0o022)
    try:
        folder = _write(written, tmp_path / "moded")
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    for path in folder.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path.name
