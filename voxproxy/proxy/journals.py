"""The crash journals of ``voxproxy proxy --workers N``: where worker ``i`` journals its
calls in progress, folding the journals of workers that will not run again into worker
0's, and writing a dead worker's receipts from its journal (:func:`recover_journal`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from voxproxy.proxy.server import ServeConfig
from voxproxy.receipts.journal import journal_path
from voxproxy.receipts.policy import Policy


def worker_journal(receipts: str | Path, index: int) -> Path:
    """Where worker ``index`` journals its calls in progress."""
    base = journal_path(receipts)
    return base if index == 0 else base.with_name(f"{base.name}.{index}")


def fold_journals(receipts: str | Path, workers: int) -> int:
    """Append the journals of workers numbered ``workers`` and up (left by a run with
    more workers) to worker 0's, so that their calls get their receipts; returns how
    many journals were folded."""
    base = journal_path(receipts)
    folded = 0
    for path in sorted(base.parent.glob(base.name + ".*")):
        suffix = path.name[len(base.name) + 1 :]
        if not suffix.isdigit() or int(suffix) < workers:
            continue
        text = path.read_text(encoding="utf-8")
        if text.strip():
            head = base.read_bytes()[-1:] if base.exists() else b"\n"
            with open(base, "a", encoding="utf-8") as fh:
                if head not in (b"", b"\n"):
                    fh.write("\n")  # never glue a line to a torn one
                fh.write(text if text.endswith("\n") else text + "\n")
        path.unlink()
        folded += 1
    return folded


def recover_journal(config: ServeConfig, policy: Policy, index: int) -> int:
    """Write the receipts of the calls worker ``index`` (gone) left open in its journal,
    from this process: ``proxy_crashed``, judged under ``policy``, to the receipts file,
    the store and the sinks, as a restarted proxy writes them (not to telemetry, which
    lives in the workers). Returns how many; the journal is left empty (removed)."""
    from voxproxy.clock import new_secret
    from voxproxy.proxy.lifecycle import ReceiptOutlet, recover_crashed
    from voxproxy.proxy.websocket import ProxyConfig
    from voxproxy.receipts.journal import CallJournal
    from voxproxy.receipts.store import ReceiptStore
    from voxproxy.receipts.verdict import judged
    from voxproxy.receipts.writer import ReceiptWriter

    if config.receipts is None or not isinstance(config.proxy, ProxyConfig):
        return 0
    path = worker_journal(config.receipts, index)
    if not path.exists():
        return 0
    journal = CallJournal(path)
    left = journal.open(config.receipts)
    writer: ReceiptWriter | None = None
    store: ReceiptStore | None = None
    try:
        if not left:
            return 0
        writer = ReceiptWriter(config.receipts, on_written=journal.written)
        sinks: list[Callable[[Any], None]] = [writer.write]
        if config.store is not None:
            store = ReceiptStore(config.store)
            sinks.append(store.write)
        sinks.extend(config.sinks)
        proxy = config.proxy
        outlet = ReceiptOutlet(
            proxy.secret or new_secret(),
            proxy.dialect_options,
            sinks,
            None,
            lambda r: judged(r, policy),
        )
        outlet.journal = journal
        return recover_crashed(outlet, left, proxy.session)
    finally:
        if writer is not None:
            writer.close()  # on disk before the journal lets go of the calls
        if store is not None:
            store.close()
        journal.close()
