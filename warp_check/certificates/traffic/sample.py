"""Unlabelled traffic as a sample: each text once, split by a stable hash into the part Cert 4 is
measured on and the part a tuner may use.

- **The key** of a text is the SHA-256 of its normalised text and pair (Unicode NFC, runs of
  whitespace as one space, ends stripped): two rows that differ only in spacing are one text.
- **Duplicates**: a text is counted once, wherever and however often it appears; the sample says
  how many rows were merged into an earlier one.
- **Suite cases** (a must_fix or must_keep case with the same key) are left out and counted: their
  predictions are the suite's to certify, not a sample of unseen traffic.
- **The split** depends on the key alone: a text whose key's first bit is 0 is in the *bound* part
  (Cert 4 is measured on it, and no repair ever sees it), the other half in the *tune* part. A file
  that grows keeps every earlier text in its part, whatever the order or the other rows.
- **The order** of a part is its keys' order, and its digest the SHA-256 of those keys: a file
  reordered, or with a duplicate added, is the same sample.

Standard library only.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, replace

from warp_check.cases import Case, Kind

_SPACES = re.compile(r"\s+")


class Part(str, enum.Enum):
    """Which part of the traffic a text is in."""

    BOUND = "bound"  # Cert 4 is measured here; never seen by a repair
    TUNE = "tune"  # for choosing settings; never used by Cert 4

    def __str__(self) -> str:
        return self.value


def normalised(text: str) -> str:
    """``text`` as the key reads it: Unicode NFC, whitespace runs as one space, ends stripped."""
    return _SPACES.sub(" ", unicodedata.normalize("NFC", text)).strip()


def text_key(text: str, text_pair: str | None = None) -> str:
    """The SHA-256 (hex) naming a text and its pair after normalisation."""
    pair = None if text_pair is None else normalised(text_pair)
    return hashlib.sha256(json.dumps([normalised(text), pair], ensure_ascii=False).encode("utf-8")).hexdigest()


def part_of(key: str) -> Part:
    """The part of the text whose key is ``key``: its first bit 0 is the bound part (half the texts)."""
    return Part.BOUND if int(key[0], 16) < 8 else Part.TUNE


@dataclass(frozen=True, kw_only=True)
class TrafficText:
    """One text of the traffic, as first read, and its key."""

    text: str
    text_pair: str | None
    key: str
    where: str  # file:line (or the row / entry) of its first appearance

    def case(self, index: int) -> Case:
        """The text as an input for the encoder (its label is what is measured, not given)."""
        return Case(
            id=f"traffic-{index}-{self.key[:12]}",
            text=self.text,
            text_pair=self.text_pair,
            label=0,
            kind=Kind.MUST_KEEP,
            origin=self.where,
        )


@dataclass(frozen=True, kw_only=True)
class TrafficSample:
    """The traffic read and split: each part in key order, and what was merged or left out."""

    source: str  # the file
    bound: tuple[TrafficText, ...]
    tune: tuple[TrafficText, ...]
    rows: int  # rows read
    duplicates: int  # rows that repeated an earlier text (counted once)
    in_suite: int  # texts that are suite cases (left out)
    confidence: float
    max_change: float | None = None

    @property
    def digest(self) -> str:
        """SHA-256 of the bound part's keys, in order: names the sample Cert 4 is measured on."""
        return digest_of(self.bound)

    def part(self, part: Part) -> tuple[TrafficText, ...]:
        return self.bound if part is Part.BOUND else self.tune

    def excluding(self, cases: Iterable[Case]) -> TrafficSample:
        """This sample without the texts that are must_fix or must_keep ``cases`` (counted in ``in_suite``)."""
        keys = {text_key(c.text, c.text_pair) for c in cases if c.kind is not Kind.AUX}
        bound = tuple(t for t in self.bound if t.key not in keys)
        tune = tuple(t for t in self.tune if t.key not in keys)
        left = len(self.bound) + len(self.tune) - len(bound) - len(tune)
        return replace(self, bound=bound, tune=tune, in_suite=self.in_suite + left) if left else self


def digest_of(texts: Iterable[TrafficText]) -> str:
    h = hashlib.sha256()
    for text in texts:
        h.update(text.key.encode("ascii"))
    return h.hexdigest()


def split_traffic(
    rows: Iterable[tuple[str, str | None, str]],
    *,
    source: str,
    confidence: float,
    max_change: float | None = None,
    exclude: Iterable[Case] = (),
) -> TrafficSample:
    """``rows`` of (text, text_pair, where) as a sample: each text once, suite cases left out, split
    by its key's hash into the bound and tune parts, each in key order."""
    first: dict[str, TrafficText] = {}
    count = 0
    for text, pair, where in rows:
        count += 1
        key = text_key(text, pair)
        if key not in first:
            first[key] = TrafficText(text=text, text_pair=pair, key=key, where=where)
    ordered = sorted(first.values(), key=lambda t: t.key)
    sample = TrafficSample(
        source=source,
        bound=tuple(t for t in ordered if part_of(t.key) is Part.BOUND),
        tune=tuple(t for t in ordered if part_of(t.key) is Part.TUNE),
        rows=count,
        duplicates=count - len(first),
        in_suite=0,
        confidence=confidence,
        max_change=max_change,
    )
    return sample.excluding(exclude)


__all__ = ["Part", "TrafficSample", "TrafficText", "digest_of", "normalised", "part_of", "split_traffic", "text_key"]
