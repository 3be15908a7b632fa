"""The ratchet: must_fix cases a certified repair fixed become must_keep cases for the next release.

``promote(suite, repaired)`` checks that the repaired folder is what its certificate describes
(the two parameter hashes), takes the suite's must_fix cases the certificate shows fixed (Cert 1
on the very text, pair and label the suite holds now) and recomputes Cert 1 for them from the
repaired weights: a claim the model does not bear out refuses the whole promotion, nothing
changed. Then each case becomes must_keep with ``fixed_by`` (the certificate's SHA-256), its id
and source kept:

- a line that sets its own kind (its file's [[cases]] table is not must_fix) is rewritten in
  place, kind must_keep;
- a line of a must_fix file is appended to the suite's must_keep file, read back there by the
  loader's rules, and only then removed from its must_fix file. Where the must_keep file already
  holds the same text with the same label, the must_fix line goes (the case is already kept);
  with another label, nothing is promoted and the line is named.

A token classifier's case file line is a sentence, its rows its constrained words: a sentence moves
whole, only where every must_fix word of it is certified fixed (else all its words stay must_fix),
and is appended as its words and tags (``append_sentences``).

Every write is atomic and checked by the loader's rules first (``casefile``). Should the process
die between the append and the removal, the suite refuses to load with the duplicate id named at
both lines; removing either line finishes the move.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from warp_check.cache.fingerprint import file_sha256
from warp_check.cases import Case, Kind
from warp_check.certificates.cases import certify_cases
from warp_check.certify.artefact import folder_hashes
from warp_check.certify.certificate import CERTIFICATE_NAME, CaseRecord, Certificate
from warp_check.errors import CertificateError, SuiteError
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.encode import encode_cases
from warp_check.model.specs import recorded_head
from warp_check.progress import Progress
from warp_check.suite.case_files import CaseFile, CaseReader, Location
from warp_check.suite.casefile import (
    NewCase,
    append_cases,
    append_sentences,
    loader_check,
    remove_lines,
    rewrite_lines,
)
from warp_check.suite.loader import Suite


@dataclass(frozen=True, kw_only=True)
class Promotion:
    promoted: tuple[str, ...]  # ids now must_keep: appended to keep_file, or rewritten in place
    in_place: tuple[str, ...]  # those of promoted whose own line was rewritten (its file sets kinds per line)
    already_kept: tuple[str, ...]  # certified fixed, the same case already in must_keep: only the must_fix line went
    not_fixed: tuple[str, ...]  # must_fix ids the certificate does not show fixed: left where they are
    keep_file: Path | None  # the suite's must_keep file (None: it has none, and nothing had to move there)
    in_place_files: tuple[Path, ...]  # the files whose lines were rewritten in place
    certificate_sha256: str


@dataclass(frozen=True, kw_only=True)
class _Candidate:
    case: Case
    claim: CaseRecord
    at: Location
    case_file: CaseFile

    @property
    def in_place(self) -> bool:
        # A line in a file whose table is not must_fix sets its own kind: it becomes must_keep where it is.
        return self.case_file.kind is not Kind.MUST_FIX


def promote(
    suite: Suite,
    repaired: str | Path,
    *,
    dry_run: bool = False,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = False,
) -> Promotion:
    """Promote what the certificate in ``repaired`` shows fixed and the model bears out (see the module);
    ``cache_dir``: the representation cache, where the recomputation reads and stores v; ``progress``:
    how its encoding shows (:mod:`warp_check.progress`)."""
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
    files = {case_file.path: case_file for case_file in suite.case_files}
    candidates: list[_Candidate] = []
    not_fixed: list[str] = []
    for case in suite.cases:
        if case.kind is not Kind.MUST_FIX:
            continue
        claim = certified.get(case.id)
        said = None if claim is None else (claim.text, claim.text_pair, claim.label)
        same = said == (case.text, case.text_pair, case.label)
        if claim is None or claim.cert1 is not True or not same:
            not_fixed.append(case.id)
            continue
        at = suite.locations[case.id]
        candidates.append(_Candidate(case=case, claim=claim, at=at, case_file=files[at.path]))
    per_word = suite.decision.per_word
    if per_word:  # a line is a sentence: it moves whole, or not at all
        candidates, partial = _whole_sentences(suite, candidates)
        not_fixed += partial
    moving = [c for c in candidates if not c.in_place]
    keep = _keep_file(suite) if moving else _keep_file_or_none(suite)
    _refuse_false_claims(suite, folder, path, certificate, candidates, cache_dir, progress)
    _unchanged_since_loaded(suite, candidates)
    rewritten = {c.case.id for c in candidates if c.in_place}
    kept_before = set()
    if moving:
        kept_before = (_sentences_kept if per_word else _already_kept)(suite, keep, moving, rewritten)
    in_place = [c for c in candidates if c.in_place]
    appended = [c for c in moving if c.case.id not in kept_before]
    if candidates and not dry_run:
        _rewrite_in_place(suite, in_place, sha)
        if keep is not None and appended:
            (_append_sentences if per_word else _append_verified)(suite, keep, appended, sha)
        _remove_moved(suite, moving)
    return Promotion(
        promoted=tuple(c.case.id for c in candidates if c.case.id not in kept_before),
        in_place=tuple(c.case.id for c in in_place),
        already_kept=tuple(c.case.id for c in moving if c.case.id in kept_before),
        not_fixed=tuple(not_fixed),
        keep_file=keep.path if keep is not None else None,
        in_place_files=tuple(dict.fromkeys(c.at.path for c in in_place)),
        certificate_sha256=sha,
    )


def _refuse_false_claims(
    suite: Suite,
    folder: Path,
    path: Path,
    certificate: Certificate,
    candidates: Sequence[_Candidate],
    cache_dir: str | Path | None,
    progress: bool | Progress = False,
) -> None:
    """Cert 1 recomputed from the repaired weights (the core's certify_cases on v the model encodes):
    every case about to move must be predicted its label with a gap ≥ γ_s, or nothing moves."""
    if not candidates:
        return
    m = certificate.model
    spec = recorded_head(repair_layer=m.repair_layer, activation=m.activation, classifier=m.classifier, form=m.form)
    adapter = ClassifierAdapter.from_pretrained(folder, layer=spec, max_length=m.max_length, decision=suite.decision)
    cases = [c.case for c in candidates]
    batch = suite.model.batch_size
    encoded = encode_cases(adapter, cases, batch_size=batch, cache_dir=cache_dir, progress=progress)
    gamma_s = certificate.settings.gamma_s
    records, _ = certify_cases(
        adapter.head(),
        ids=tuple(c.id for c in cases),
        kinds=tuple(c.kind for c in cases),
        V=encoded.V,
        labels=adapter.decision.answers([c.label for c in cases], adapter.num_classes),
        gaps_before=np.array([c.claim.gap_before for c in candidates]),
        gamma_s=gamma_s,
        gamma_h=certificate.settings.gamma_h,
        keep_margin=certificate.settings.keep_margin,
    )
    false = [
        f"{c.at}: the certificate says Cert 1 holds for {c.case.id!r}, the model's gap is {r.held_gap:.6g} < "
        f"γ_s = {gamma_s:g}: not moved"
        for c, r in zip(candidates, records, strict=True)
        if not (r.cert1 and r.held_gap > 0)
    ]
    if false:
        raise CertificateError(
            f"{path}: claims the model in {folder} does not bear out; nothing is promoted:\n  " + "\n  ".join(false)
        )


def _unchanged_since_loaded(suite: Suite, candidates: Sequence[_Candidate]) -> None:
    """Each candidate's file read again by the loader's rules: the case still at its line, as loaded."""
    readers: dict[Path, CaseReader] = {}
    for c in candidates:
        if c.at.path not in readers:
            readers[c.at.path] = loader_check(suite, c.case_file)(c.at.path)
        now = readers[c.at.path]
        if now.locations.get(c.case.id) != c.at or _content(now, c.case.id) != _content_of(c.case):
            raise SuiteError(
                f"case {c.case.id!r} is not on this line as the suite was loaded (the file changed since): "
                "load the suite again; nothing is promoted",
                path=c.at.path,
                line=c.at.line,
            )


def _already_kept(suite: Suite, keep: CaseFile, moving: Sequence[_Candidate], rewritten: set[str]) -> set[str]:
    """Ids of ``moving`` whose text the must_keep file already holds with the same label. The same
    text with another label, or as a must_fix case not being promoted, or the id taken by another
    text, refuses the promotion: appending would skip the case or rename it."""
    reader = loader_check(suite, keep)(keep.path)
    by_text = {(case.text, case.text_pair): case for case in reader.cases if case.kind is not Kind.AUX}
    kept: set[str] = set()
    for c in moving:
        there = by_text.get((c.case.text, c.case.text_pair))
        if there is None:
            if c.case.id in reader.locations:
                raise _refused(reader, c.case.id, f"id {c.case.id!r} is taken there by another text")
            continue
        if there.label != c.case.label:
            raise _refused(
                reader,
                there.id,
                f"the same text as must_fix case {c.case.id!r} ({c.at}) with label "
                f"{suite.answer_name(there.label)!r}, not {suite.answer_name(c.case.label)!r}",
            )
        if there.kind is not Kind.MUST_KEEP and there.id not in rewritten:
            raise _refused(reader, there.id, f"the same text as {c.case.id!r} ({c.at}), as a must_fix case")
        kept.add(c.case.id)
    return kept


def _refused(reader: CaseReader, case_id: str, why: str) -> SuiteError:
    at = reader.locations[case_id]
    return SuiteError(f"the must_keep file holds {why}: nothing is promoted", path=at.path, line=at.line)


def _rewrite_in_place(suite: Suite, in_place: Sequence[_Candidate], sha: str) -> None:
    by_file: dict[Path, list[_Candidate]] = defaultdict(list)
    for c in in_place:
        by_file[c.at.path].append(c)
    for file_path, group in by_file.items():
        check = loader_check(suite, group[0].case_file)
        changes = {c.at.line: {"kind": Kind.MUST_KEEP.value, "fixed_by": sha} for c in group}
        rewrite_lines(file_path, changes, check=check)
        _read_back(check(file_path), group, file_path)


def _append_verified(suite: Suite, keep: CaseFile, appended: Sequence[_Candidate], sha: str) -> None:
    """Append to the must_keep file, then read it back by the loader's rules: each case there, must_keep."""
    new = [
        NewCase(
            id=c.case.id,
            text=c.case.text,
            text_pair=c.case.text_pair,
            label=suite.label_as_written(c.case.label),
            kind=Kind.MUST_KEEP.value,
            source=c.case.source,
            fixed_by=sha,
        )
        for c in appended
    ]
    check = loader_check(suite, keep)
    append_cases(keep.path, new, id_prefix="promoted", check=check)
    _read_back(check(keep.path), appended, keep.path)


def _whole_sentences(suite: Suite, candidates: Sequence[_Candidate]) -> tuple[list[_Candidate], list[str]]:
    """The candidates of the sentences whose every must_fix word is a candidate (a line moves whole),
    and the ids of the others' candidates (not promoted: their sentence holds a word not certified fixed)."""
    group = suite.decision.group
    shown = {c.case.id for c in candidates}
    whole = {group(c.id) for c in suite.cases if c.kind is Kind.MUST_FIX}
    whole -= {group(c.id) for c in suite.cases if c.kind is Kind.MUST_FIX and c.id not in shown}
    return [c for c in candidates if group(c.case.id) in whole], [
        c.case.id for c in candidates if group(c.case.id) not in whole
    ]


def _sentences_kept(suite: Suite, keep: CaseFile, moving: Sequence[_Candidate], rewritten: set[str]) -> set[str]:
    """Ids of ``moving`` whose sentence the must_keep file already keeps: every word of it there, the
    same tag, must_keep (a sentence only partly there is appended whole; the loader's rules refuse a
    word tagged otherwise)."""
    reader = loader_check(suite, keep)(keep.path)
    held = {(c.text, c.label) for c in reader.cases if c.kind is Kind.MUST_KEEP or c.id in rewritten}
    group = suite.decision.group
    missing = {group(c.case.id) for c in moving if (c.case.text, c.case.label) not in held}
    return {c.case.id for c in moving if group(c.case.id) not in missing}


def _append_sentences(suite: Suite, keep: CaseFile, appended: Sequence[_Candidate], sha: str) -> None:
    """Append each sentence to the must_keep file as its words and tags (its rows' tags, null where the
    sentence left a word unconstrained), then read it back by the loader's rules: each word there, must_keep."""
    records: dict[str, dict[str, Any]] = {}
    for c in appended:
        found = suite.decision.word_of(c.case.text)
        assert found is not None  # a per-word kind's row marks its word
        words, word = found
        name = suite.decision.group(c.case.id)
        record = records.setdefault(name, {"id": name, "tokens": list(words), "tags": [None] * len(words)})
        record["tags"][word] = suite.label_name(c.case.label)
        record.update({"kind": Kind.MUST_KEEP.value, "fixed_by": sha})
        if c.case.source is not None:
            record["source"] = c.case.source
    check = loader_check(suite, keep)
    append_sentences(keep.path, list(records.values()), check=check)
    _read_back(check(keep.path), appended, keep.path)


def _read_back(reader: CaseReader, written: Sequence[_Candidate], path: Path) -> None:
    for c in written:
        if _content(reader, c.case.id) != (*_content_of(c.case)[:3], Kind.MUST_KEEP):
            raise SuiteError(
                f"case {c.case.id!r} does not read back as must_keep here after the write: its must_fix line "
                f"({c.at}) is left",
                path=path,
            )


def _remove_moved(suite: Suite, moving: Sequence[_Candidate]) -> None:
    """The must_fix lines whose case is must_keep now (appended and read back, or already kept)."""
    by_file: dict[Path, list[_Candidate]] = defaultdict(list)
    for c in moving:
        by_file[c.at.path].append(c)
    for file_path, group in by_file.items():
        lines = sorted({c.at.line for c in group})  # a sentence's words share its line
        remove_lines(file_path, lines, check=loader_check(suite, group[0].case_file))


def _content(reader: CaseReader, case_id: str) -> tuple[str, str | None, int, Kind] | None:
    for case in reader.cases:
        if case.id == case_id:
            return _content_of(case)
    return None


def _content_of(case: Case) -> tuple[str, str | None, int, Kind]:
    return (case.text, case.text_pair, case.label, case.kind)


def _keep_file_or_none(suite: Suite) -> CaseFile | None:
    return next((f for f in suite.case_files if f.kind is Kind.MUST_KEEP), None)


def _keep_file(suite: Suite) -> CaseFile:
    keep = _keep_file_or_none(suite)
    if keep is None:
        raise SuiteError(
            'the suite has no must_keep case file to promote into: add a [[cases]] table with kind = "must_keep"',
            path=suite.toml,
            field="cases",
        )
    return keep
