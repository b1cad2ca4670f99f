from __future__ import annotations

from collections.abc import Iterator

import pytest

from voxproxy.clips import load_clips
from voxproxy.session import CallSession


@pytest.fixture(scope="session")
def clips():  # type: ignore[no-untyped-def]
    return load_clips()


@pytest.fixture(autouse=True)
def strict_sessions(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every CallSession a test builds in this process is strict: a failure of the core
    itself raises in the test that met it instead of being counted as
    ``measurement_error``. A test of that counting asks for ``lenient_sessions`` (or
    passes ``strict=False``)."""
    monkeypatch.setattr(CallSession, "strict_by_default", True)
    yield


@pytest.fixture
def lenient_sessions(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """CallSessions count their own failures, as in production."""
    monkeypatch.setattr(CallSession, "strict_by_default", False)
    yield
