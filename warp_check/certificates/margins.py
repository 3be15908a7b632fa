"""Cert 1: every must_fix case's gap on the saved weights is at least γ_s."""

from __future__ import annotations

from typing import ClassVar

from warp_check.cases import Kind
from warp_check.certificates.base import Cert


class MustFixMargins(Cert):
    name = "cert1"
    title = "Cert 1"
    claim = "every must_fix case's gap is at least γ_s on the saved weights"
    further = False
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.MUST_FIX})


CERT1 = MustFixMargins()

__all__ = ["CERT1", "MustFixMargins"]
