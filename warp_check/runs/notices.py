"""Collect the WarpWarnings a run gives (a cache it could not write, ...) as lines for its result.

A frontend shows them once, in its own words, whatever the warnings filter says: a user's
``filterwarnings = error`` must not turn a cache that cannot be written into a failed gate.
Other warnings pass through to whoever shows them.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

from warp_check.errors import WarpWarning


@contextlib.contextmanager
def collected() -> Iterator[list[str]]:
    """Within the block, each distinct WarpWarning message is appended to the list yielded."""
    lines: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("always", WarpWarning)
        show = warnings.showwarning

        def keep(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, WarpWarning):
                if str(message) not in lines:
                    lines.append(str(message))
            else:
                show(message, category, filename, lineno, file, line)

        warnings.showwarning = keep
        yield lines
