"""Reading receipts for the ``verdict`` and ``gate`` commands: files and/or a store,
judged under a policy (their arguments, and the reading)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxproxy.errors import ConfigError

DEFAULT_RECEIPTS = "receipts.jsonl"
"""The proxy's default --receipts file: what the commands that read receipts read when
they are given none (``receipts``, ``receipts export``, ``verdict``, ``gate``)."""

if TYPE_CHECKING:
    from voxproxy.receipts.model import Receipt


def add_receipt_inputs(p: Any) -> None:
    """The receipt files, ``--store`` and ``--policy`` arguments of a judging command."""
    p.add_argument(
        "receipts",
        nargs="*",
        metavar="RECEIPTS",
        help=f"JSON-lines receipt files (default, without --store: {DEFAULT_RECEIPTS} here, "
        "the proxy's default --receipts)",
    )
    p.add_argument("--store", default=None, metavar="PATH", help="read receipts from this store")
    p.add_env_argument(
        "--policy",
        default=None,
        metavar="FILE|PROFILE",
        help="policy YAML, or a profile: auto (default: an outcome check is required only "
        "of calls that carried task events), latency-only, task-outcome",
    )


@dataclass(frozen=True, slots=True)
class Sourced:
    source: str  # the file (or store) the receipt came from
    receipt: Receipt


def load_receipts(paths: Sequence[str], store: str | None) -> list[Sourced]:
    """Every receipt in ``paths`` and ``store``. Raises :class:`ConfigError` on bad input."""
    from pydantic import ValidationError

    from voxproxy.receipts.store import query_receipts
    from voxproxy.receipts.writer import read_receipts

    if not paths and store is None:
        if not Path(DEFAULT_RECEIPTS).is_file():
            raise ConfigError(
                f"no receipts given and no {DEFAULT_RECEIPTS} here: name JSON-lines receipt "
                "files (the proxy's --receipts) or --store PATH"
            )
        paths = [DEFAULT_RECEIPTS]
    out: list[Sourced] = []
    for path in paths:
        n = 0  # receipts read from this file so far
        try:
            for receipt in read_receipts(path):
                out.append(Sourced(path, receipt))
                n += 1
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read receipts: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not a JSON-lines receipt file (not UTF-8 text)") from None
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            raise ConfigError(
                f"{path}: receipt {n + 1} is not a valid receipt: {where}: {err['msg']}"
            ) from None
    if store is not None:
        out.extend(Sourced(store, r) for r in query_receipts(store))
    if not out:
        where = ", ".join([*paths, *([store] if store else [])])
        raise ConfigError(f"no receipts found in {where}")
    return out
