"""The mock agent's configuration: its defaults and what it refuses."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from voxproxy.core.errors import ConfigError
from voxproxy.mockagent import MockAgent, MockAgentConfig, default_responses


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
        lambda: MockAgent(MockAgentConfig(responses=["agent_nope"])),
        lambda: MockAgent(MockAgentConfig(greeting="nope")),
    ]
    for make in bad:
        with pytest.raises(ConfigError):
            make()
