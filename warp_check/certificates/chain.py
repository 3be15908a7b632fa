"""``verify --chain``: a repaired model's whole history, walked link by link (:func:`walk`) and
re-checked (:func:`verify_chain`).

Each certificate names the model it was repaired from (:class:`ParentRecord`: its weights'
hashes and, where it was itself a repaired model, its certificate's SHA-256). Following
``model.source`` back, every repaired model is verified from scratch (:func:`verify`) and every
parent folder must hold the weights and the certificate its child names.

A parent with no certificate is a model from elsewhere (fine-tuned outside warp-check) or the
first model. The walk goes on past it where something says where it came from: the baseline its
child's certificate names (the suite's baseline the repair restored regressions against,
:class:`BaselineRecord`), or else the next folder the user gives (``--from``). Nothing vouches for
such a link: it is checked with a suite's cases (``warp_check.runs.history``), not a certificate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from warp_check.cache.fingerprint import file_sha256
from warp_check.certificates.verify import Check, Verification, verify
from warp_check.certify.artefact import folder_hashes
from warp_check.certify.certificate import CERTIFICATE_NAME, Certificate

MAX_LINKS = 1000  # a chain longer than this is a loop in the folders' sources


@dataclass(frozen=True, kw_only=True)
class Step:
    """One model the walk reached: its certificate (None: uncertified) and how the walk got there."""

    model_dir: Path
    certificate: Certificate | None
    reached_by: str  # "given", "repaired from", "baseline" (the child's certificate's), "--from"
    loops_to: Path | None = None  # a model already walked that this one names as where it came from
    baseline_gone: Path | None = None  # the baseline its child's certificate names, not there to go on to


def walk(model_dir: str | Path, *, came_from: Sequence[str | Path] = ()) -> tuple[Step, ...]:
    """The models of ``model_dir``'s history, newest first, as far as they can be reached: through
    each certificate's parent, and past a model without one through the baseline its child's
    certificate names, or else the next of ``came_from`` (in order). Reads certificates only."""
    steps: list[Step] = []
    folder, how = Path(model_dir), "given"
    seen: set[Path] = set()
    extra = [Path(p) for p in came_from]
    while len(steps) < MAX_LINKS:
        if folder.resolve() in seen:  # named again: edited or misplaced certificates, not a history
            steps[-1] = replace(steps[-1], loops_to=folder)
            break
        seen.add(folder.resolve())
        path = folder / CERTIFICATE_NAME
        certificate = Certificate.read(path) if path.is_file() else None
        steps.append(Step(model_dir=folder, certificate=certificate, reached_by=how))
        if certificate is not None:
            source = Path(certificate.model.source) if certificate.model.source else None
            if certificate.parent is None or source is None or not source.is_dir():
                break  # the link's checks say why the chain stops here
            folder, how = source, "repaired from"
            continue
        child = steps[-2].certificate if len(steps) > 1 else None
        baseline = child.baseline if child is not None else None
        if baseline is not None and Path(baseline.source).is_dir():
            folder, how = Path(baseline.source), "baseline"
        elif extra:
            folder, how = extra.pop(0), "--from"
        else:
            if baseline is not None:  # where this model came from is named, but gone
                steps[-1] = replace(steps[-1], baseline_gone=Path(baseline.source))
            break
    return tuple(steps)


def first_model(model_dir: str | Path) -> Path | None:
    """The model ``model_dir``'s certificate chain starts from (its first model), or None where
    ``model_dir`` has no certificate, or its chain loops or stops at a baseline that is gone (its first
    model cannot be reached)."""
    steps = walk(model_dir)
    broken = steps[-1].loops_to is not None or steps[-1].baseline_gone is not None
    return steps[-1].model_dir if len(steps) > 1 and not broken else None


@dataclass(frozen=True, kw_only=True)
class Link:
    """One model of the chain: its verification (None for a model without a certificate: the first
    model, or one from elsewhere), the checks that tie it to the next model back, and how the walk
    reached it."""

    model_dir: Path
    verification: Verification | None
    checks: tuple[Check, ...] = ()
    reached_by: str = "given"

    @property
    def certified(self) -> bool:
        return self.verification is not None

    @property
    def ok(self) -> bool:
        # A case a link left out is the suite's drawdown to judge (--suite, --accept-drawdown), not a claim.
        return (self.verification is None or self.verification.holds) and all(c.ok for c in self.checks)


@dataclass(frozen=True)
class ChainVerification:
    links: tuple[Link, ...]  # the newest model first, the first model reached last

    @property
    def ok(self) -> bool:
        return all(link.ok for link in self.links)

    @property
    def root(self) -> Path:
        return self.links[-1].model_dir

    @property
    def uncertified(self) -> tuple[Link, ...]:
        """The links past which the walk went with no certificate to vouch for them (not the first model)."""
        return tuple(link for link in self.links[:-1] if not link.certified)


def verify_chain(
    model_dir: str | Path, *, cache_dir: str | Path | None = None, came_from: Sequence[str | Path] = ()
) -> ChainVerification:
    """Every model :func:`walk` reaches: a certified one verified from scratch and tied to the model
    it names as its parent; one without a certificate listed as such (a suite checks it)."""
    steps = walk(model_dir, came_from=came_from)
    links = []
    for i, step in enumerate(steps):
        if step.certificate is None:
            checks = (*_loop_checks(step), *_gone_checks(step))
            links.append(Link(model_dir=step.model_dir, verification=None, checks=checks, reached_by=step.reached_by))
            continue
        verification = verify(step.model_dir, cache_dir=cache_dir)
        checks = (*_parent_checks(step.certificate, goes_on=i + 2 < len(steps)), *_loop_checks(step))
        links.append(
            Link(model_dir=step.model_dir, verification=verification, checks=checks, reached_by=step.reached_by)
        )
    return ChainVerification(tuple(links))


def _loop_checks(step: Step) -> tuple[Check, ...]:
    if step.loops_to is None:
        return ()
    why = (
        f"it names {step.loops_to} as where it came from, a model this chain has already reached: the chain loops "
        "(a certificate edited, or copied into another folder), so no model of it is the first; put back the "
        "certificates as the repairs wrote them"
    )
    return (Check("chain_loop", False, why),)


def _gone_checks(step: Step) -> tuple[Check, ...]:
    if step.baseline_gone is None:
        return ()
    why = (
        f"the baseline the newer model's certificate names as where it came from, {str(step.baseline_gone)!r}, "
        "is not there: the chain cannot be followed past this model; put that folder back, or give --from DIR"
    )
    return (Check("baseline_folder", False, why),)


def _parent_checks(certificate: Certificate, *, goes_on: bool) -> tuple[Check, ...]:
    """What ties a repaired model to the folder its certificate names as its parent (``goes_on``: the
    walk went on past that parent)."""
    parent = certificate.parent
    if parent is None:
        why = "the certificate names no parent (written before warp-check recorded chains): the chain stops here"
        return (Check("parent", False, why),)
    source = Path(certificate.model.source) if certificate.model.source else None
    if source is None or not source.is_dir():
        why = f"the model it was repaired from, {str(source)!r}, is not there: the chain cannot be followed"
        return (Check("parent_folder", False, why),)
    layer, frozen = folder_hashes(source, certificate.model.repair_layer)
    same = (layer, frozen) == (parent.sha256_repair_layer, parent.sha256_frozen)
    checks = [
        Check(
            "parent_weights",
            same,
            f"{source} holds the weights this model was repaired from"
            if same
            else f"{source} does not hold the weights this model was repaired from (hashes differ)",
        )
    ]
    parent_certificate = source / CERTIFICATE_NAME
    if parent.certificate_sha256 is None:  # repaired from a model without a certificate
        unchanged = not parent_certificate.is_file()
        if not unchanged:
            detail = f"{source} holds a certificate now, but had none when this model was repaired from it"
        elif goes_on:
            detail = f"{source} has no certificate (a model from elsewhere): a suite checks it, the chain goes on"
        else:
            detail = f"{source} is the first model of the chain (no certificate)"
        checks.append(Check("parent_certificate", unchanged, detail))
        return tuple(checks)
    matches = parent_certificate.is_file() and file_sha256(parent_certificate) == parent.certificate_sha256
    checks.append(
        Check(
            "parent_certificate",
            matches,
            f"{parent_certificate} is the certificate this model's names (SHA-256 {parent.certificate_sha256[:12]}…)"
            if matches
            else f"{parent_certificate} is not the certificate this model's names (SHA-256 differs or it is gone)",
        )
    )
    return tuple(checks)


__all__ = ["ChainVerification", "Link", "Step", "first_model", "verify_chain", "walk"]
