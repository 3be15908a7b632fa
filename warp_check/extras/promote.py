"""The ratchet: must_fix cases a certified repair fixed become must_keep cases for the next release.

``promote(suite, repaired)`` checks that the repaired folder is what its certificate describes
(the two parameter hashes), takes the suite's must_fix cases the certificate shows fixed (Cert 1
on the very text, pair and label the suite holds now), appends them to the suite's must_keep
file with their ids, their source and ``fixed_by`` (the certificate's SHA-256), then removes
them from their must_fix files. Each file is rewritten atomically; should the process die between
the two writes, the suite refuses to load with the duplicate id named at both lines, and running
promote again finishes the move.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from warp_check.cache.fingerprint import file_sha256
from warp_check.cases import Kind
from warp_check.certify.artefact import folder_hashes
from warp_check.certify.certificate import CERTIFICATE_NAME, Certificate
from warp_check.errors import CertificateError, SuiteError
from warp_check.suite.casefile import NewCase, append_cases, remove_lines
from warp_check.suite.loader import Suite


@dataclass(frozen=True)
class Promotion:
    promoted: tuple[str, ...]  # ids moved from must_fix to must_keep
    not_fixed: tuple[str, ...]  # must_fix ids the certificate does not show fixed: left where they are
    keep_file: Path
    certificate_sha256: str


def promote(suite: Suite, repaired: str | Path, *, dry_run: bool = False) -> Promotion:
    repaired = Path(repaired)
    path = repaired / CERTIFICATE_NAME if repaired.is_dir() else repaired
    folder = path.parent
    certificate = Certificate.read(path)
    layer, frozen = folder_hashes(folder, certificate.model.repair_layer)
    if (layer, frozen) != (certificate.model.sha256_repair_layer, certificate.model.sha256_frozen):
        raise CertificateError(
            f"{folder}: its weights are not the ones {path.name} certifies (hashes differ): nothing is promoted "
            "from a model its certificate does not describe"
        )
    sha = file_sha256(path)
    certified = {c.id: c for c in certificate.cases if c.kind is Kind.MUST_FIX}
    keep_file = _keep_file(suite)
    promoted, not_fixed = [], []
    moved: dict[Path, list[int]] = defaultdict(list)
    new = []
    for case in suite.cases:
        if case.kind is not Kind.MUST_FIX:
            continue
        claim = certified.get(case.id)
        if claim is None or claim.cert1 is not True or (claim.text, claim.text_pair, claim.label) != (
            case.text,
            case.text_pair,
            case.label,
        ):
            not_fixed.append(case.id)
            continue
        promoted.append(case.id)
        location = suite.locations[case.id]
        moved[location.path].append(location.line)
        new.append(
            NewCase(
                id=case.id,
                text=case.text,
                text_pair=case.text_pair,
                label=suite.label_name(case.label),
                kind=Kind.MUST_KEEP.value,
                source=case.source,
                fixed_by=sha,
            )
        )
    if promoted and not dry_run:
        append_cases(keep_file, new, id_prefix="promoted")
        for case_path, lines in moved.items():
            remove_lines(case_path, lines)
    return Promotion(tuple(promoted), tuple(not_fixed), keep_file, sha)


def _keep_file(suite: Suite) -> Path:
    for case_file in suite.case_files:
        if case_file.kind is Kind.MUST_KEEP:
            return case_file.path
    raise SuiteError(
        'the suite has no must_keep case file to promote into: add a [[cases]] table with kind = "must_keep"',
        path=suite.toml,
        field="cases",
    )
