from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from voxproxy import native
from voxproxy.clips import load_clips
from voxproxy.core.session import CallSession

# The property-based tests draw the same examples on every run of ``make test``: a green
# main stays green on CI's clean clone. ``make fuzz`` searches afresh (random seeds and
# twenty times the budgets) and its finds become fixes plus a test here.
settings.register_profile("fixed", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("VOXPROXY_FUZZ_EXPLORE") == "1" else "fixed")


def pytest_configure(config: pytest.Config) -> None:
    # A compiled module older than its source would test yesterday's code.
    warning = native.stale_warning()
    if warning is not None:
        raise pytest.UsageError(warning)
    config.addinivalue_line(
        "markers",
        "pure_python: patches a measurement-core method, which compiled callers never look "
        "up (runs in make test's pure-Python pass, VOXPROXY_PURE_PYTHON=1)",
    )


def pytest_report_header(config: pytest.Config) -> str:
    del config
    return f"voxproxy measurement core: {native.build()} (voxproxy/native.py)"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    # The real-time tests first (in their collected order, the quick ones after them in
    # theirs): under pytest-xdist the workers wait on those seconds-long tests side by
    # side and finish on the quick ones, instead of one worker still playing a long call
    # while the others have run out of work.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if native.build() == "pure-python":
        return
    skip = pytest.mark.skip(reason="patches a compiled method: runs in the pure-Python pass")
    for item in items:
        if item.get_closest_marker("pure_python"):
            item.add_marker(skip)


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
