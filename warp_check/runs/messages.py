"""The words of verdicts and advice, in one place, so a case reads the same everywhere."""

from __future__ import annotations

from warp_check.certificates.words import named, num
from warp_check.suite.loader import Suite


def labelled(suite: Suite, label: object) -> str:
    """A case's answer as the suite's kind of decision states it, each class's name quoted."""
    return suite.decision.stated(label, lambda c: named(suite.label_name(int(c))))


__all__ = ["labelled", "num"]
