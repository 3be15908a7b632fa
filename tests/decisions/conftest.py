"""The tiny BERT tagger the token-kind tests share (trained once a session, seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest
from testkit.token_tags import build_tagger


@pytest.fixture(scope="session")
def shared_tagger(tmp_path_factory) -> Path:
    return build_tagger(tmp_path_factory.mktemp("shared_tagger") / "model", family="bert")
