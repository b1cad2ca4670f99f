"""The transcript tests' shared fixture: the default scoring (normalization and terms)."""

from __future__ import annotations

import pytest

from voxproxy.transcripts import Scoring


@pytest.fixture(scope="module")
def scoring() -> Scoring:
    return Scoring.load()
