"""Scenario files: what a scripted caller says and does, and what it expects.

A scenario is YAML::

    name: interruption
    description: The caller interrupts the agent mid-sentence.
    noise: {clip: noise_pink, snr_db: 10}     # optional background under the call
    expect: {max_no_response: 0}             # optional, per call
    steps:
      - say: caller_where_is_order           # a fixture clip name or a WAV path
        expect: {ttfs_ms_max: 1500}
      - wait: agent_end                      # or agent_start; quiet_ms, timeout_ms
      - barge_in: {after_ms: 900, say: caller_interrupt}
        expect: {stop_latency_ms_max: 600, outcome: stopped}
      - interject: {after_ms: 900, sound: noise_cough}
        expect: {agent_keeps_talking: true}
      - silence: 3000
        expect: {agent_speaks: false}

Each step is a mapping with exactly one action key (``say``, ``wait``,
``barge_in``, ``interject``, ``silence``) and an optional ``expect``. Files are
validated with pydantic; an invalid file gets an error naming the file, the step
and what is wrong.

An outcome testbench scenario (``fixtures/testbench/``) adds a ``category``, a
``setup`` (what each caller turn means and what the tool backend does with each
attempt; the mock agent gets it as a task script, :mod:`voxproxy.mockagent.task`)
and an ``expected`` block (what a correct agent must end with, scored by
:mod:`voxproxy.loadgen.outcome`)::

    category: correction
    setup:
      stage: during_tool_prep
      tool: update_order
      args: [order_number]
      backend: {order_number: "0000"}
      turns:
        - {set: {order_number: "4821"}, act: true}
        - {set: {order_number: "4281"}}
      prep_ms: 3000
      attempts: [ok]                         # or {kind: timeout, latency_ms: 600}, ...
    expected:
      should_execute: true
      state: {order_number: "4281"}
      args: {order_number: "4281"}
      backend: {order_number: "4281"}
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    ValidationError,
    model_validator,
)

from voxproxy.clips import Clip, fixtures_dir, load_clips, read_wav
from voxproxy.core.analysis.truth import speech_edges
from voxproxy.core.audio.resample import resample_clip
from voxproxy.core.errors import ConfigError, FixtureError
from voxproxy.loadgen.caller import (
    BargeIn,
    Interject,
    NoiseBed,
    Say,
    Silence,
    Step,
    WaitAgentEnd,
    WaitAgentStart,
)
from voxproxy.loadgen.outcome import ExpectedOutcome
from voxproxy.simcall.script import Attempt, AttemptKind, Effect, TaskScript, Turn

ACTIONS = ("say", "wait", "barge_in", "interject", "silence")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StepExpect(_Strict):
    """Thresholds for one step, judged on the caller's ground truth."""

    ttfs_ms_max: float | None = Field(default=None, gt=0)
    stop_latency_ms_max: float | None = Field(default=None, gt=0)
    outcome: Literal["stopped", "not_stopped"] | None = None
    agent_keeps_talking: bool | None = None  # interject: the agent must not yield to a noise
    agent_speaks: bool | None = None  # silence: does the agent (re)prompt during it?
    response: bool | None = None  # say: must the agent answer at all?


class CallExpect(_Strict):
    ttfs_ms_p95_max: float | None = Field(default=None, gt=0)
    max_no_response: int | None = Field(default=None, ge=0)
    max_anomalies: int | None = Field(default=None, ge=0)


class NoiseSpec(_Strict):
    clip: str = "noise_pink"
    snr_db: float = Field(ge=-10, le=60)


class BargeInSpec(_Strict):
    after_ms: float = Field(ge=0, le=60_000)
    say: str
    timeout_ms: float = Field(default=10_000, gt=0)


class InterjectSpec(_Strict):
    after_ms: float = Field(ge=0, le=60_000)
    sound: str
    timeout_ms: float = Field(default=10_000, gt=0)


class WaitSpec(_Strict):
    until: Literal["agent_start", "agent_end"]
    quiet_ms: float = Field(default=600, ge=0)
    timeout_ms: float = Field(default=30_000, gt=0)


class StepSpec(_Strict):
    say: str | None = None
    wait: WaitSpec | None = None
    barge_in: BargeInSpec | None = None
    interject: InterjectSpec | None = None
    silence: float | None = Field(default=None, ge=0, le=600_000)
    expect: StepExpect | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_action(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError(f"a step must be a mapping with one of {', '.join(ACTIONS)}")
        present = [k for k in ACTIONS if k in data]
        if len(present) != 1:
            found = ", ".join(present) if present else "none"
            actions = ", ".join(ACTIONS)
            raise ValueError(f"a step needs exactly one action of {actions} (found {found})")
        if isinstance(data.get("wait"), str):
            data = {**data, "wait": {"until": data["wait"]}}
        return data

    @property
    def action(self) -> str:
        return next(k for k in ACTIONS if getattr(self, k) is not None)


FieldName = Annotated[
    str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")
]
"""A state, backend or tool name: kept verbatim in receipts, so identifier-like."""
Category = Literal["correction", "interruption", "tool_failure"]


class AttemptSpec(_Strict):
    """What the tool backend does with one attempt (voxproxy.mockagent.task.Attempt)."""

    kind: AttemptKind = "ok"
    latency_ms: float = Field(default=400.0, ge=0, le=60_000)
    commit: bool | None = None
    answer_ms: float | None = Field(default=None, ge=0, le=60_000)
    ack_ms: float = Field(default=100.0, ge=0, le=60_000)

    @model_validator(mode="before")
    @classmethod
    def _kind_alone(cls, data: Any) -> Any:
        return {"kind": data} if isinstance(data, str) else data


class TurnSpec(_Strict):
    """What one caller turn means: state updates (a mapping, or a list of them applied in
    order), and whether the caller asks for the action or withdraws it."""

    updates: dict[FieldName, JsonValue] | list[dict[FieldName, JsonValue]] = Field(
        default_factory=dict, alias="set"
    )
    act: bool = False
    negate: bool = False


class SetupSpec(_Strict):
    """The testbench's input: what the turns mean, the tool and what its backend does.

    This reaches the mock agent only as a task script in its configuration (a test and
    benchmark channel); nothing of it travels on the call."""

    stage: str | None = None  # a label: when the change or failure happens
    tool: FieldName
    args: list[FieldName] = Field(min_length=1)
    effect: Effect = "set"
    record: FieldName | None = None
    backend: dict[FieldName, JsonValue] = Field(default_factory=dict)
    turns: list[TurnSpec] = Field(min_length=1)
    prep_ms: float = Field(default=300.0, ge=0, le=60_000)
    attempts: list[AttemptSpec] = Field(default_factory=lambda: [AttemptSpec()], min_length=1)

    @model_validator(mode="after")
    def _valid_script(self) -> SetupSpec:
        try:
            self.task_script()
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

    def task_script(self) -> TaskScript:
        turns = []
        for t in self.turns:
            sets = t.updates if isinstance(t.updates, list) else [t.updates]
            updates = tuple((k, v) for mapping in sets for k, v in mapping.items())
            turns.append(Turn(updates, t.act, t.negate))
        return TaskScript(
            tool=self.tool,
            args=tuple(self.args),
            turns=tuple(turns),
            effect=self.effect,
            record=self.record,
            backend=dict(self.backend),
            prep_ms=self.prep_ms,
            attempts=tuple(
                Attempt(a.kind, a.latency_ms, a.commit, a.answer_ms, a.ack_ms)
                for a in self.attempts
            ),
        )


class Scenario(_Strict):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    noise: NoiseSpec | None = None
    steps: list[StepSpec] = Field(min_length=1)
    expect: CallExpect | None = None
    # The outcome testbench: the failure category, the setup and the expected outcome.
    category: Category | None = None
    setup: SetupSpec | None = None
    expected: ExpectedOutcome | None = None

    @model_validator(mode="after")
    def _setup_with_expected(self) -> Scenario:
        if (self.setup is None) != (self.expected is None):
            raise ValueError("a testbench scenario needs both setup and expected")
        return self

    def caller_steps(self, base: Path | None = None) -> list[Step]:
        """The caller's script, with every clip resolved."""
        out: list[Step] = []
        for step in self.steps:
            if step.say is not None:
                out.append(Say(resolve_clip(step.say, base)))
            elif step.wait is not None:
                w = step.wait
                if w.until == "agent_start":
                    out.append(WaitAgentStart(timeout_ms=w.timeout_ms))
                else:
                    out.append(WaitAgentEnd(quiet_ms=w.quiet_ms, timeout_ms=w.timeout_ms))
            elif step.barge_in is not None:
                b = step.barge_in
                out.append(BargeIn(b.after_ms, resolve_clip(b.say, base), b.timeout_ms))
            elif step.interject is not None:
                i = step.interject
                out.append(Interject(i.after_ms, resolve_clip(i.sound, base), i.timeout_ms))
            elif step.silence is not None:
                out.append(Silence(step.silence))
        return out

    def noise_bed(self, base: Path | None = None) -> NoiseBed | None:
        if self.noise is None:
            return None
        return NoiseBed(resolve_clip(self.noise.clip, base), self.noise.snr_db)


def resolve_clip(ref: str, base: Path | None = None) -> Clip:
    """A fixture clip by name, or a mono 16-bit WAV file (relative to the scenario)."""
    clips = load_clips()
    if ref in clips:
        return clips[ref]
    path = Path(ref)
    if not path.is_absolute() and base is not None:
        path = base / path
    if not path.exists():
        raise FixtureError(f"{ref!r} is neither a fixture clip nor a file")
    return _wav_clip(str(path.resolve()))


@functools.cache
def _wav_clip(path: str) -> Clip:
    # Recordings as people have them: stereo is mixed down, other rates (44.1 kHz, 22.05
    # kHz...) are brought to 16 kHz; the detectors run at 8, 16, 32 and 48 kHz.
    pcm, rate = read_wav(path, downmix=True)
    if rate not in (8000, 16000, 32000, 48000):
        pcm, rate = resample_clip(pcm, rate, 16000), 16000
    edges = speech_edges(pcm, rate)
    if not edges:
        raise FixtureError(f"{path}: no speech found (nothing above the truth threshold)")
    return Clip(
        name=Path(path).stem,
        role="caller",
        kind="speech",
        text="",
        pcm=pcm,
        sample_rate_hz=rate,
        segments_ms=tuple((a, b) for a, b in edges),
    )


def _describe(error: ValidationError, data: Any) -> str:
    lines = []
    for e in error.errors():
        loc = list(e["loc"])
        where = "scenario"
        if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int):
            i = loc[1]
            action = "?"
            steps = data.get("steps") if isinstance(data, dict) else None
            if isinstance(steps, list) and i < len(steps) and isinstance(steps[i], dict):
                action = next((k for k in ACTIONS if k in steps[i]), "?")
            where = f"step {i + 1} ({action})"
            loc = loc[2:]
        field = ".".join(str(x) for x in loc if x not in ("function-after",))
        msg = e["msg"].removeprefix("Value error, ")
        lines.append(f"{where}{': ' + field if field else ''}: {msg}")
    return "; ".join(lines)


def load_scenario(path: str | Path) -> Scenario:
    """Load and validate one scenario file; errors name the file and the step."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FixtureError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise FixtureError(f"{p}: not valid YAML: {exc}") from exc
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise FixtureError(f"{p}: {_describe(exc, data)}") from None
    # Resolve clips now, so a missing recording is reported with its file and step.
    for i, step in enumerate(scenario.steps):
        try:
            Scenario(name=scenario.name, steps=[step]).caller_steps(p.parent)
        except FixtureError as exc:
            raise FixtureError(f"{p}: step {i + 1} ({step.action}): {exc}") from None
    try:
        scenario.noise_bed(p.parent)
    except FixtureError as exc:
        raise FixtureError(f"{p}: noise: {exc}") from None
    return scenario


def builtin_dir() -> Path:
    return fixtures_dir() / "scenarios"


def builtin_names() -> list[str]:
    return sorted(p.stem for p in builtin_dir().glob("*.yaml"))


def find_scenario(ref: str) -> tuple[Scenario, Path]:
    """A scenario by file path, or by the name of a built-in one."""
    p = Path(ref)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return load_scenario(p), p.parent
    candidate = builtin_dir() / f"{ref}.yaml"
    if candidate.exists():
        return load_scenario(candidate), candidate.parent
    raise FixtureError(
        f"no scenario file {ref!r} and no built-in scenario of that name "
        f"(built-in: {', '.join(builtin_names())})"
    )
