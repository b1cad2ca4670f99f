"""``voxproxy schema``: the JSON Schema of a voxproxy document."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of a voxproxy document")
    p.add_argument("document", choices=["receipt"], help="which document")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from voxproxy.core.receipt import Receipt

    del args
    print(json.dumps(Receipt.model_json_schema(by_alias=True), indent=2))
    return 0
