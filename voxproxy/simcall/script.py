"""Task scripts: what a simulated call's turns mean, shared by the scripted caller and
the mock agent.

The mock agent cannot understand speech, so a **task script** tells it what each of
the caller's turns means (which state fields it sets, whether it asks for the action
or withdraws it) and what the tool backend does with each request it gets, in order
over the call (latency, whether the write lands, what it answers). The script is a
test/bench-only channel: it reaches the mock through
:attr:`MockAgentConfig.scripts <voxproxy.mockagent.config.MockAgentConfig>`, keyed
by name, and a call runs the script named by a segment of its request path (the
load generator's ``tag_scenario`` puts the scenario name there). Nothing in the
audio or the wire carries it, and the proxy never sees it. The load generator's
scenarios build the same scripts, so both sides speak of one vocabulary.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from voxproxy.core.errors import ConfigError

Json = Any
"""A JSON value (what a state field, a backend field or a tool argument holds)."""

AttemptKind = Literal[
    "ok", "timeout", "late", "error", "empty", "wrong_record", "malformed", "async"
]
ATTEMPT_KINDS: tuple[AttemptKind, ...] = get_args(AttemptKind)
Effect = Literal["set", "append"]
TaskFault = Literal[
    "stale_args",
    "no_cancel",
    "unchecked_result",
    "noise_is_speech",
    "unsafe_retry",
    "confirm_before_result",
]
TASK_FAULTS: tuple[TaskFault, ...] = get_args(TaskFault)

_COMMITS: Mapping[AttemptKind, bool] = {
    "ok": True,
    "timeout": True,  # the write lands; the answer never comes
    "late": True,  # the write lands; the answer comes after the agent gave up
    "error": True,  # the write lands, then the handler fails (a 500 after the commit)
    "async": True,  # "pending" at once, the real result later
    "empty": False,
    "wrong_record": False,
    "malformed": False,
}
LATE_ANSWER_MS = 4000.0  # a late answer comes this long after the write, by default


@dataclass(frozen=True, slots=True)
class Attempt:
    """What the simulated backend does with one attempt of the call."""

    kind: AttemptKind = "ok"
    latency_ms: float = 400.0  # request -> the write lands (and, for most kinds, the answer)
    commit: bool | None = None  # does the write land? None: the kind's default
    answer_ms: float | None = None  # request -> the answer, when it differs from latency_ms
    ack_ms: float = 100.0  # async: request -> the "pending" acknowledgement

    def __post_init__(self) -> None:
        if self.kind not in ATTEMPT_KINDS:
            raise ConfigError(f"attempt kind must be one of {', '.join(ATTEMPT_KINDS)}")
        if self.latency_ms < 0 or self.ack_ms < 0 or (self.answer_ms or 0) < 0:
            raise ConfigError("attempt times must not be negative")

    @property
    def commits(self) -> bool:
        return _COMMITS[self.kind] if self.commit is None else self.commit

    @property
    def answer_after_ms(self) -> float | None:
        """Request -> answer (None: no answer ever comes)."""
        if self.kind == "timeout":
            return None
        if self.answer_ms is not None:
            return max(self.answer_ms, self.latency_ms)
        if self.kind == "late":
            return self.latency_ms + LATE_ANSWER_MS
        return self.latency_ms


@dataclass(frozen=True, slots=True)
class Turn:
    """What one caller turn means: state updates (applied in order), then the intent."""

    updates: tuple[tuple[str, Json], ...] = ()
    act: bool = False  # the caller asks for the action ("yes, send it")
    negate: bool = False  # the caller withdraws it ("no, don't")


@dataclass(frozen=True, slots=True)
class TaskScript:
    """One call's task: the tool, the backend record, the caller's turns and what the
    backend does with each request it gets (the last entry repeats)."""

    tool: str
    args: tuple[str, ...]  # the state fields that make the tool's arguments
    turns: tuple[Turn, ...]
    effect: Effect = "set"  # set: write each argument into its field; append: add the
    record: str | None = None  # arguments to this (list) field of the record
    backend: Mapping[str, Json] = field(default_factory=dict)  # the record at call start
    prep_ms: float = 300.0  # state stable -> tool.started
    attempts: tuple[Attempt, ...] = (Attempt(),)  # by request to the backend, in order

    def __post_init__(self) -> None:
        if not self.tool or not self.args:
            raise ConfigError("a task script needs a tool and at least one argument field")
        if self.effect not in ("set", "append"):
            raise ConfigError(f"effect must be set or append, got {self.effect!r}")
        if self.effect == "append" and (
            self.record is None or not isinstance(self.backend.get(self.record), list)
        ):
            raise ConfigError("an append effect needs record: a list field of the backend")
        if not self.attempts:
            raise ConfigError("a task script needs at least one attempt")
        if self.prep_ms < 0:
            raise ConfigError("prep_ms must not be negative")

    @property
    def written(self) -> tuple[str, ...]:
        """The backend fields the tool writes (and the agent confirms)."""
        if self.effect == "append":
            assert self.record is not None
            return (self.record,)
        return self.args

    def attempt(self, n: int) -> Attempt:
        """What the backend does with the call's ``n``-th request (1-based, over every
        operation of the call); the last entry repeats."""
        return self.attempts[min(n, len(self.attempts)) - 1]

    def projection(self, args: Mapping[str, Json] | None) -> dict[str, Json]:
        """What the written fields hold after the action with ``args`` (None: no action)."""
        if args is None:
            return {f: copy.deepcopy(self.backend.get(f)) for f in self.written}
        if self.effect == "set":
            return {f: copy.deepcopy(args.get(f)) for f in self.args}
        assert self.record is not None
        return {self.record: [*copy.deepcopy(self.backend[self.record]), dict(args)]}


def script_for(
    path: str, scripts: Mapping[str, TaskScript] | None
) -> tuple[str, TaskScript] | None:
    """The script a request path names: its first segment that is a script's name."""
    if not scripts:
        return None
    for segment in path.partition("?")[0].split("/"):
        if segment in scripts:
            return segment, scripts[segment]
    return None
