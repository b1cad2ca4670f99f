"""Reading receipts for the ``verdict`` and ``gate`` commands: files and/or a store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from voxproxy.errors import ConfigError
from voxproxy.receipts.model import Receipt
from voxproxy.receipts.store import query_receipts
from voxproxy.receipts.writer import read_receipts


@dataclass(frozen=True, slots=True)
class Sourced:
    source: str  # the file (or store) the receipt came from
    receipt: Receipt


def load_receipts(paths: Sequence[str], store: str | None) -> list[Sourced]:
    """Every receipt in ``paths`` and ``store``. Raises :class:`ConfigError` on bad input."""
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
