"""Environment variables a test exports, as a shell would before running a command."""

from __future__ import annotations

import pytest


def export(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    """Export each of ``values`` (``NAME="value"``) for the test, as ``export NAME=value``
    does in a shell; pytest undoes them when the test ends."""
    for name, value in values.items():
        monkeypatch.setenv(name, value)
