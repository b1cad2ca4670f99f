"""Reading receipts for the ``verdict`` and ``gate`` commands: files and/or a store,
judged under a policy (their arguments, and the reading)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxproxy.core.errors import ConfigError

DEFAULT_RECEIPTS = "receipts.jsonl"
"""The proxy's default --receipts file: what the commands that read receipts read when
they are given none (``receipts``, ``receipts export``, ``verdict``, ``gate``)."""

if TYPE_CHECKING:
    from voxproxy.core.receipt import Receipt
    from voxproxy.receipts.policy import Policy


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


def judged_inputs(args: argparse.Namespace) -> tuple[list[Sourced], Policy, str | None]:
    """What a judging command judges (:func:`add_receipt_inputs`' arguments): the
    receipts, the policy and why it is that one (:func:`judging_policy`). A bad
    ``--policy`` is named before any receipt is read."""
    if args.policy is not None:
        from voxproxy.receipts.policy import load_policy

        load_policy(args.policy)
    inputs = load_receipts(args.receipts, args.store)
    policy, why = judging_policy(args.policy, inputs)
    return inputs, policy, why


def judging_policy(given: str | None, inputs: Sequence[Sourced]) -> tuple[Policy, str | None]:
    """The policy to judge ``inputs`` under, and a line saying why when it is not the
    one the proxy judged them under (each receipt carries that one's hash).

    ``--policy`` given: that one. Not given: the embedded profile the receipts carry,
    when they all carry one (the proxy's ``--policy latency-only``, say), so that
    ``verdict`` agrees with the proxy; else the default."""
    from collections import Counter

    from voxproxy.receipts.policy import PROFILES, load_policy

    carried = Counter(item.receipt.policy for item in inputs if item.receipt.policy)
    profiles = {load_policy(name).hash: name for name in PROFILES}
    if given is None and len(carried) == 1:
        (only,) = carried
        if only in profiles:
            policy = load_policy(profiles[only])
            return policy, f"judged under {policy.profile}, the profile the receipts carry"
    policy = load_policy(given)
    other = {h: n for h, n in carried.items() if h != policy.hash}
    if not other:
        return policy, None
    named = ", ".join(
        f"{h} ({profiles.get(h, 'a policy file')}, {n} receipt(s))" for h, n in other.items()
    )
    why = "as --policy says" if given is not None else "the default; no --policy given"
    hint = "" if given is not None else "; give --policy to judge them as the proxy did"
    return policy, (
        f"the proxy judged {sum(other.values())} of {len(inputs)} receipt(s) under another "
        f"policy: {named}; judged here under {policy.profile} ({why}){hint}"
    )
