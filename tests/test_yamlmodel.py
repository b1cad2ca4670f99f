"""YAML -> pydantic -> one error naming the file and each wrong field."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, Field

from voxproxy.core.errors import ConfigError, FixtureError
from voxproxy.yamlmodel import parse_yaml, validate


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    level: int = Field(ge=0)


def test_a_valid_document() -> None:
    assert validate(_Doc, parse_yaml("name: a\nlevel: 3\n", "a.yaml"), "a.yaml", "doc") == _Doc(
        name="a", level=3
    )


def test_not_yaml_names_the_source() -> None:
    with pytest.raises(ConfigError, match=r"^b\.yaml: not valid YAML: "):
        parse_yaml("name: [unclosed", "b.yaml")
    with pytest.raises(FixtureError, match="not valid YAML"):
        parse_yaml("{", "c.yaml", FixtureError)


def test_each_wrong_field_is_named_on_its_own_line() -> None:
    with pytest.raises(ConfigError) as err:
        validate(_Doc, {"level": -1, "colour": "red"}, "d.yaml", "doc")
    assert str(err.value).splitlines() == [
        "d.yaml: invalid doc:",
        "  name: Field required",
        "  level: Input should be greater than or equal to 0",
        "  colour: Extra inputs are not permitted",
    ]


def test_a_message_can_be_reworded_and_the_error_chosen() -> None:
    with pytest.raises(FixtureError) as err:
        validate(
            _Doc,
            ["not", "a", "mapping"],
            "e.yaml",
            "doc",
            error=FixtureError,
            message=lambda e: f"{e['type']}!",
        )
    assert str(err.value) == "e.yaml: invalid doc:\n  (top level): model_type!"
