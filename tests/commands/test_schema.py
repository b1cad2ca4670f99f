"""voxproxy.commands.schema: ``voxproxy schema receipt`` prints the receipt's JSON Schema,
by the receipt's own (aliased) field names."""

from __future__ import annotations

import json

import pytest

from voxproxy.cli import build_parser
from voxproxy.core.receipt import Receipt


def test_the_receipt_schema_is_printed_as_json_by_alias(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["schema", "receipt"])
    assert args.func(args) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema == Receipt.model_json_schema(by_alias=True)
    assert schema["type"] == "object" and "terminal" in schema["properties"]
    assert "schema" in schema["properties"] and "schema_" not in schema["properties"]


def test_only_known_documents_are_offered(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["schema", "verdict"])
    assert "unknown command 'verdict'; one of: receipt" in capsys.readouterr().err
