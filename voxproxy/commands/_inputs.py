"""Reading receipts for the ``verdict`` and ``gate`` commands: files and/or a store,
judged under a policy (their arguments, and the reading)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from voxproxy.errors import ConfigError

if TYPE_CHECKING:
    from voxproxy.receipts.model import Receipt


def add_receipt_inputs(p: Any) -> None:
    """The receipt files, ``--store`` and ``--policy`` arguments of a judging command."""
    p.add_argument("receipts", nargs="*", metavar="RECEIPTS", help="JSON-lines receipt files")
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
        raise ConfigError("no receipts given: name JSON-lines receipt files or --store PATH")
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
