"""Encoder batches: inputs of one length, never padded, so a case's v does not depend on its company."""

from __future__ import annotations

from collections.abc import Sequence


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Batches of positions into ``lengths``, each of inputs of one length.

    Never padded, so a case's v does not depend on the company it is encoded in: some encoders
    let padding leak into the representation (the tiny ConvBERT and ModernBERT of the family tests
    moved gaps by more than a unit), and a cache, a neighbourhood or an audit encodes a case among
    other cases than the repair did. Real suites have a few dozen lengths: the batches stay full.
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    for i in order:
        if batches and len(batches[-1]) < batch_size and lengths[batches[-1][0]] == lengths[i]:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches
