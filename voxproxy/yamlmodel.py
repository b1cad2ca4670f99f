"""YAML (or JSON) text -> a pydantic model, or one error that names the file and each
field that is wrong. The one way voxproxy reads its policy, term, flow and score files.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from voxproxy.errors import ConfigError, VoxproxyError

M = TypeVar("M", bound=BaseModel)


def parse_yaml(text: str, source: str, error: type[VoxproxyError] = ConfigError) -> Any:
    """The YAML document in ``text``; ``error`` naming ``source`` when it is not YAML."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise error(f"{source}: not valid YAML: {exc}") from None


def error_lines(exc: ValidationError, message: Callable[[ErrorDetails], str] | None = None) -> str:
    """One indented ``field: what is wrong`` line per error (``message`` may reword one)."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        lines.append(f"  {where}: {message(err) if message else err['msg']}")
    return "\n".join(lines)


def validate(
    model: type[M],
    data: Any,
    source: str,
    what: str,
    *,
    error: type[VoxproxyError] = ConfigError,
    message: Callable[[ErrorDetails], str] | None = None,
) -> M:
    """``data`` as a ``model``; else ``error``: "<source>: invalid <what>:" and the lines."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(f"{source}: invalid {what}:\n{error_lines(exc, message)}") from None
