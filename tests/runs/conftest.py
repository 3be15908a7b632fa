"""Fixtures the report page's tests share."""

from __future__ import annotations

import os
import shutil

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


@pytest.fixture(scope="module")
def browser() -> str:
    """A headless browser's path; a skip where none is installed (a failure under WARP_REQUIRE_BROWSER=1, as in CI)."""
    found = next((path for path in map(shutil.which, BROWSERS) if path), None)
    if found is None:
        reason = "no headless browser (chromium) installed: the report page's browser tests cannot run"
        if os.environ.get("WARP_REQUIRE_BROWSER") == "1":
            pytest.fail(f"WARP_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    return found
