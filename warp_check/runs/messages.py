"""The words of verdicts and advice, in one place, so a case reads the same everywhere."""

from __future__ import annotations

from warp_check.certificates.words import named, num
from warp_check.suite.loader import Suite


def labelled(suite: Suite, label: int) -> str:
    return named(suite.label_name(int(label)))


__all__ = ["labelled", "num"]
