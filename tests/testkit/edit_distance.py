"""An edit distance to check what a perturbation changed."""

from __future__ import annotations


def damerau_levenshtein(a: str, b: str) -> int:
    """Unrestricted Damerau–Levenshtein (Lowrance–Wagner): a metric, so k edits ⇒ distance ≤ k."""
    big = len(a) + len(b)
    last_row: dict[str, int] = {}
    d = [[big] * (len(b) + 2) for _ in range(len(a) + 2)]
    for i in range(len(a) + 1):
        d[i + 1][1] = i
    for j in range(len(b) + 1):
        d[1][j + 1] = j
    for i in range(1, len(a) + 1):
        last_col = 0
        for j in range(1, len(b) + 1):
            k, m = last_row.get(b[j - 1], 0), last_col
            cost = 0 if a[i - 1] == b[j - 1] else 1
            if cost == 0:
                last_col = j
            d[i + 1][j + 1] = min(
                d[i][j] + cost,
                d[i + 1][j] + 1,
                d[i][j + 1] + 1,
                d[k][m] + (i - k - 1) + 1 + (j - m - 1),
            )
        last_row[a[i - 1]] = i
    return d[len(a) + 1][len(b) + 1]
