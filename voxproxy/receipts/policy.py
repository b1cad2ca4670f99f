"""The verdict policy: which gates a call must pass, and their thresholds (MEASUREMENT.md 6).

A policy is a small YAML file, validated here (the edge) into a frozen
:class:`Policy`. Its hash, ``sha256:`` + 16 hex digits of the SHA-256 of a
canonical JSON dump of the validated model, goes into every receipt judged
under it. The dump has sorted keys and every field filled in (defaults
included), so comments, key order, ``1200`` versus ``1200.0`` or a default
spelled out do not change the hash, and any threshold, gate or version change
does. ``description`` is the one field left out: it does not change a verdict.

Named profiles ship inside the package (``voxproxy/data/policy.<name>.yaml``), and
``--policy NAME`` takes one instead of a file:

* ``auto`` (the default): every gate; an ``outcome.verified`` event is required only
  of calls that carried task events (tool calls, state, confirmations), so a
  latency-only agent gets a verdict on the gates it can have;
* ``latency-only``: reachability, turn timing and interruption;
* ``task-outcome``: every gate, and an outcome check required of every call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import ErrorDetails

from voxproxy.core.errors import ConfigError
from voxproxy.yamlmodel import (
    VersionText,
    canonical_json,
    content_hash,
    parse_yaml,
    read_text,
    resource_text,
    validate,
)

GateName = Literal["reachability", "turn_timing", "interruption", "tool_effect", "outcome"]
GATE_ORDER: tuple[GateName, ...] = get_args(GateName)
"""The fixed order in which gates are checked."""

DEFAULT_POLICY_RESOURCE = "data/policy.default.yaml"
PROFILES: dict[str, str] = {
    "auto": DEFAULT_POLICY_RESOURCE,
    "latency-only": "data/policy.latency-only.yaml",
    "task-outcome": "data/policy.task-outcome.yaml",
}
_HASH_EXCLUDE = {"description", "profile"}


class Policy(BaseModel):
    """Thresholds and gates for verdicts. Every field has the contract's default."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    version: VersionText = Field(
        default="1", min_length=1, description="The policy's own revision label; part of its hash."
    )
    description: str = Field(default="", description="Free text; not part of the hash.")
    profile: str = Field(
        default="custom",
        description="The profile's name (auto, latency-only, task-outcome, or custom for "
        "a file of your own); reported in every verdict, not part of the hash.",
    )
    gates: tuple[GateName, ...] = Field(
        default=GATE_ORDER,
        description="Gates a call must pass, in the fixed order "
        "reachability, turn_timing, interruption, tool_effect, outcome.",
    )
    max_first_response_ms: float = Field(
        default=1200.0, gt=0, description="Largest ttfs_ms a response turn may have."
    )
    max_interrupt_stop_ms: float = Field(
        default=300.0, gt=0, description="Largest barge-in stop latency."
    )
    require_outcome: bool | Literal["auto"] = Field(
        default="auto",
        description="A call without an outcome.verified event is insufficient_evidence "
        "(outcome gate); when false such calls pass the outcome gate, which is then not "
        "evaluated; auto: required only of calls that carried task events (tool calls, "
        "state, confirmations).",
    )
    critical_tools: tuple[str, ...] = Field(
        default=(),
        description="Tools whose every call must be verified against the backend (release gate).",
    )

    @field_validator("require_outcome", mode="before")
    @classmethod
    def _true_false_or_auto(cls, value: object) -> object:
        if isinstance(value, bool) or value == "auto":
            return value
        raise ValueError(f"must be true, false or auto, got {value!r}")

    @field_validator("gates")
    @classmethod
    def _gates_in_order(cls, value: tuple[GateName, ...]) -> tuple[GateName, ...]:
        if not value:
            raise ValueError("at least one gate is needed")
        if len(set(value)) != len(value):
            raise ValueError(f"a gate is listed twice: {', '.join(value)}")
        ranks = [GATE_ORDER.index(g) for g in value]
        if ranks != sorted(ranks):
            raise ValueError(
                f"gates are checked in the fixed order {', '.join(GATE_ORDER)}; "
                f"list them in that order (got {', '.join(value)})"
            )
        return value

    @field_validator("critical_tools")
    @classmethod
    def _tools_as_set(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not name for name in value):
            raise ValueError("a tool name is empty")
        return tuple(sorted(set(value)))

    def canonical_json(self) -> str:
        return canonical_json(self, _HASH_EXCLUDE)

    @property
    def hash(self) -> str:
        """``sha256:`` + 16 hex digits of the canonical dump."""
        return content_hash(self, _HASH_EXCLUDE)

    @property
    def label(self) -> str:
        """How the policy is named wherever verdicts are printed (the proxy's log,
        ``verdict``, ``gate``): ``sha256:... (auto, version 1)``."""
        return f"{self.hash} ({self.profile}, version {self.version})"


def _message(err: ErrorDetails) -> str:
    if err["type"] == "extra_forbidden":
        return f"unknown field (known: {', '.join(Policy.model_fields)})"
    return err["msg"]


def parse_policy(text: str, source: str = "<policy>") -> Policy:
    """Validate a policy document. Raises :class:`ConfigError` naming ``source``."""
    data: Any = parse_yaml(text, source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a policy is a mapping of fields, got {type(data).__name__}")
    return validate(Policy, data, source, "policy", message=_message)


def default_policy_text() -> str:
    return resource_text(DEFAULT_POLICY_RESOURCE)


def profile_text(name: str) -> str:
    return resource_text(PROFILES[name])


def load_policy(path: str | Path | None = None) -> Policy:
    """The policy in ``path``, a named profile (:data:`PROFILES`), or the embedded
    default (``auto``) when ``path`` is None."""
    if path is None:
        return parse_policy(default_policy_text(), "embedded default policy")
    if isinstance(path, str) and path in PROFILES:
        return parse_policy(profile_text(path), f"embedded policy profile {path}")
    hint = f" (a profile name is one of {', '.join(PROFILES)})"
    return parse_policy(read_text(path, "policy", hint), str(path))
