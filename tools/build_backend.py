"""voxproxy's build backend: setuptools', plus what compiling the measurement core needs.

pyproject.toml names this module (``backend-path = ["tools"]``); setup.py does the
compiling. Beyond setuptools' own backend it

* asks for mypy and the package's dependencies when a wheel is built compiled (mypyc
  type-checks the compiled modules against the types of what they import, the same
  as ``make native`` in the development environment), and for none of them when
  ``VOXPROXY_PURE_PYTHON=1`` builds the pure-Python wheel;
* retries a wheel pure when the compile fails (a broken compiler, say), saying why,
  unless ``VOXPROXY_REQUIRE_NATIVE=1``.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401  (the hooks used unchanged)
    build_editable,
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

PURE_ENV = "VOXPROXY_PURE_PYTHON"
REQUIRE_ENV = "VOXPROXY_REQUIRE_NATIVE"
MYPY = "mypy>=1.10"


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def _dependencies() -> list[str]:
    """The package's dependencies and its WebRTC extra's (the compiled modules' imports
    reach the WebRTC transport's types; the other extras' stay out of their reach), and
    the type stubs the development environment's mypy reads (the ``types-*`` entries
    of the ``dev`` extra: the compiled modules' imports reach ``yaml`` through the
    receipts' policy, and mypyc stops at a library without types as mypy does)."""
    project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    stubs = [r for r in extras["dev"] if r.startswith("types-")]
    return [*project["dependencies"], *extras["webrtc"], *stubs]


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    base = list(_setuptools.get_requires_for_build_wheel(config_settings))
    if _flag(PURE_ENV):
        return base
    return [*base, MYPY, *_dependencies()]


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    try:
        return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
    except (Exception, SystemExit) as exc:  # setuptools reports a failed compile by exiting
        if _flag(PURE_ENV) or _flag(REQUIRE_ENV):
            raise
        print(
            f"compiling the measurement core failed ({exc!r}): building the pure-Python "
            f"wheel instead ({REQUIRE_ENV}=1 makes this an error)",
            file=sys.stderr,
        )
        os.environ[PURE_ENV] = "1"
        return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
