"""Cert 2: every must_keep case keeps its label with a gap of at least γ_h."""

from __future__ import annotations

from typing import ClassVar

from warp_check.cases import Kind
from warp_check.certificates.base import Cert


class MustKeepKept(Cert):
    name = "cert2"
    title = "Cert 2"
    claim = "every must_keep case keeps its label with a gap of at least γ_h"
    further = False
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.MUST_KEEP})


CERT2 = MustKeepKept()

__all__ = ["CERT2", "MustKeepKept"]
