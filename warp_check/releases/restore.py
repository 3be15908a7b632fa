"""Restoring regressions: a must_keep case the model under repair gets wrong, but the suite's
baseline got right, is repaired back instead of being left out.

The baseline is the model the user names (``--warp-baseline`` under pytest, ``--baseline`` for
``warp-check repair``), or else the first model of the input model's certificate chain
(:func:`warp_check.certificates.chain.first_model`). A restored case joins the QP as a must_fix row
with margin γ_s, not γ_h: it must end right with a margin, and with the margin and Cert 3 radius a
fixed case gets, since it is one a release already lost once; the certificate records it with its
kind (must_keep) and ``restored: true``, under Cert 1 and 3. ``[repair] restore_regressions =
false`` leaves such cases out, as a case the model never got right is.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from warp_check.cases import Kind
from warp_check.certificates.chain import first_model
from warp_check.errors import CertificateError, ModelError
from warp_check.releases.baseline_folder import check_baseline
from warp_check.suite.loader import Suite

CHAIN_START = "the first model of the input model's certificate chain"


@dataclass(frozen=True, kw_only=True)
class Reference:
    """The suite's baseline for a repair: the model, how it was chosen, and the cases restored
    against it (the must_keep cases the model under repair gets wrong and it got right)."""

    model_dir: Path
    chosen_by: str  # the option that named it, or CHAIN_START
    restored: tuple[str, ...] = ()
    wrong_there_too: tuple[str, ...] = ()  # wrong on the model under repair and on the baseline: left out


def reference_for(source: str | Path | None, baseline: str | Path | None, *, option: str) -> Reference | None:
    """The baseline a repair of the model at ``source`` restores against: ``baseline`` where given
    (named by ``option``), else its certificate chain's first model; None where there is neither."""
    if baseline is not None:
        if not Path(baseline).is_dir():
            raise ModelError(f"{option}: {baseline} is not a folder (the last release's model)")
        return Reference(model_dir=Path(baseline), chosen_by=option)
    try:
        first = first_model(source) if source is not None else None
    except CertificateError:  # a chain that cannot be read names no baseline (verify --chain says why)
        return None
    return Reference(model_dir=first, chosen_by=CHAIN_START) if first is not None else None


def checked(reference: Reference | None, suite: Suite) -> Reference | None:
    """``reference``, refused (:func:`check_baseline`) where it cannot be the suite's baseline."""
    if reference is None:
        return None
    try:
        check_baseline(suite, reference.model_dir)
    except ModelError as exc:
        if reference.chosen_by != CHAIN_START:
            raise
        raise ModelError(f"{exc} (it is {CHAIN_START}: name the last release with --baseline)") from None
    return reference


def judged(reference: Reference, wrong: Sequence[str], right_there: Collection[str]) -> Reference:
    """``reference`` with the ``wrong`` must_keep cases (ids the model under repair gets wrong) it got
    right (``right_there``: the ids its answers got right), to restore, and those it got wrong too."""
    return Reference(
        model_dir=reference.model_dir,
        chosen_by=reference.chosen_by,
        restored=tuple(i for i in wrong if i in right_there),
        wrong_there_too=tuple(i for i in wrong if i not in right_there),
    )


def wrong_keep(cases: Sequence, gaps: Sequence[float]) -> tuple[str, ...]:
    """The must_keep cases (of ``cases``, with their ``gaps``) the model gets wrong."""
    return tuple(c.id for c, gap in zip(cases, gaps, strict=True) if c.kind is Kind.MUST_KEEP and not gap > 0)


__all__ = ["CHAIN_START", "Reference", "checked", "judged", "reference_for", "wrong_keep"]
