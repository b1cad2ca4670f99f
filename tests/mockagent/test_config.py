"""The mock agent's configuration: its defaults, what it refuses, and the switch of each
task fault."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

import pytest

from voxproxy.core.errors import ConfigError
from voxproxy.mockagent import MockAgent, MockAgentConfig, default_responses
from voxproxy.mockagent.config import fault_switch
from voxproxy.simcall.script import TASK_FAULTS


def test_config_validation_and_defaults() -> None:
    assert default_responses() == (
        "agent_greeting",
        "agent_order_status",
        "agent_long_answer",
        "agent_reprompt",
        "agent_confirm",
        "agent_ask_number",
        "agent_hours",
    )
    cfg = MockAgentConfig(responses=["agent_hours"], subprotocols=["a"])
    assert cfg.responses == ("agent_hours",) and cfg.subprotocols == ("a",)
    assert MockAgentConfig().response_names == default_responses()
    assert MockAgentConfig(dialect="twilio", sample_rate_hz=24000).agent_rate_hz == 8000
    bad: list[Callable[[], object]] = [
        lambda: MockAgentConfig(dialect="sip"),  # type: ignore[arg-type]
        lambda: MockAgentConfig(sample_rate_hz=24000),
        lambda: MockAgentConfig(delay_ms=-1),
        lambda: MockAgentConfig(send_mode="fast"),  # type: ignore[arg-type]
        lambda: MockAgentConfig(barge_in="maybe"),  # type: ignore[arg-type]
        lambda: MockAgentConfig(responses=[]),
        lambda: MockAgentConfig(refuse_status=101),
        lambda: MockAgentConfig(close_code=1006),
        lambda: MockAgentConfig(drop_after_ms=-5),
        lambda: MockAgentConfig(tool_timeout_ms=0),
        lambda: MockAgent(MockAgentConfig(responses=["agent_nope"])),
        lambda: MockAgent(MockAgentConfig(greeting="nope")),
    ]
    for make in bad:
        with pytest.raises(ConfigError):
            make()


def test_each_task_fault_turns_on_its_own_switch_and_no_other() -> None:
    plain = MockAgentConfig()
    for fault in TASK_FAULTS:
        faulty = plain.with_faults([fault])
        changed = [
            f.name for f in fields(plain) if getattr(plain, f.name) != getattr(faulty, f.name)
        ]
        assert changed == [fault_switch(fault)], fault
    everything = plain.with_faults(TASK_FAULTS)
    assert all(getattr(everything, fault_switch(f)) is True for f in TASK_FAULTS)
    assert (fault_switch("noise_is_speech"), fault_switch("no_cancel")) == (
        "noise_is_speech",
        "fault_no_cancel",
    )
