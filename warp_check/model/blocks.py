"""Cases a block at a time: wherever a (cases × d_out) array would otherwise be built (pre-activations,
σ, logits), the loop's and the certificates' temporaries stay O(block·d_out) however many cases there are."""

from __future__ import annotations

BLOCK_ROWS = 4096


def blocks(n: int):
    """Slices over n rows, BLOCK_ROWS at a time."""
    return (slice(lo, min(lo + BLOCK_ROWS, n)) for lo in range(0, n, BLOCK_ROWS))
