"""YAML (or JSON) text -> a pydantic model, or one error that names the file and each
field that is wrong. The one way voxproxy reads its policy, term, flow and score files,
and the pieces those models share: a ``version`` label that YAML may spell as a number
(``VersionText``) and the content hash recorded with each judgement (``content_hash``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import BaseModel, BeforeValidator, ValidationError
from pydantic_core import ErrorDetails

from voxproxy.core.errors import ConfigError, VoxproxyError

M = TypeVar("M", bound=BaseModel)


def _version_as_text(value: object) -> object:
    # ``version: 2`` in YAML is an int; a revision label is text either way.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


VersionText = Annotated[str, BeforeValidator(_version_as_text)]
"""A revision label: text, also when the YAML wrote a whole number."""


def canonical_json(model: BaseModel, exclude: Collection[str] = ()) -> str:
    """``model`` as JSON with sorted keys, no blanks and ASCII only, without ``exclude``."""
    data = model.model_dump(mode="json", exclude=set(exclude))
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def content_hash(model: BaseModel, exclude: Collection[str] = ()) -> str:
    """``sha256:`` + 16 hex digits of :func:`canonical_json`."""
    digest = hashlib.sha256(canonical_json(model, exclude).encode("ascii")).hexdigest()
    return "sha256:" + digest[:16]


def resource_text(name: str) -> str:
    """A data file shipped inside the ``voxproxy`` package."""
    return (resources.files("voxproxy") / name).read_text(encoding="utf-8")


def read_text(path: str | Path, what: str, hint: str = "") -> str:
    """The UTF-8 text of ``path``; else :class:`ConfigError` "<path>: cannot read <what>"."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc}{hint}") from None


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
