from __future__ import annotations

import pytest

from voxproxy.fixtures import load_clips


@pytest.fixture(scope="session")
def clips():  # type: ignore[no-untyped-def]
    return load_clips()
