"""``voxproxy analyze``: the same measurement, receipts and verdicts for recorded calls.

Dual-channel WAV (16-bit PCM, μ-law, A-law, ...) or FLAC, any rate; a folder is
searched for them and analysed across cores. Mono pairs come with ``--pair``. Writes
the receipts (JSON lines, as the proxy's ``--receipts``), ``report.html`` (whose
timelines play the calls) and, when asked, exports them over OTLP. A file that cannot
be analysed is one line on stderr; the exit status is 1 when any was skipped.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    from voxproxy.commands.parsing import DefaultsShown, positive_int

    p = sub.add_parser(
        "analyze",
        help="measure recorded calls (dual-channel WAV/FLAC, mono pairs) and captures of "
        "the proxy's calls (.vxcap): receipts, verdicts and a report that plays them",
        description="Measure calls that never passed through the proxy: each recording "
        "gets the receipt and verdict a live call gets (source: recording, measured at the "
        "listener's vantage). Left channel = caller, right = agent unless --channels says "
        "otherwise. A capture of a call (voxproxy proxy --capture) is replayed through the "
        "same core and gives the receipt the live proxy gave (source: capture). Exit status "
        "1 when a file was skipped.",
        formatter_class=DefaultsShown,
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="a dual-channel recording or a capture, or a folder searched for "
        ".wav/.wave/.flac/.vxcap files",
    )
    p.add_argument(
        "--pair",
        nargs=3,
        action="append",
        default=[],
        metavar=("CALLER", "AGENT", "OFFSET_MS"),
        help="a call recorded as two mono files, the agent's first sample OFFSET_MS after "
        "the caller's (negative: before); repeatable",
    )
    p.add_env_argument(
        "--receipts",
        default="receipts.jsonl",
        metavar="OUT",
        help="the JSON-lines receipt file to write (replaced)",
    )
    p.add_env_argument(
        "--report",
        default=None,
        metavar="PATH",
        help="report.html to write (default: report.html beside --receipts; 'none': no report)",
    )
    p.add_env_argument(
        "--channels",
        default="caller,agent",
        metavar="LEFT,RIGHT",
        help="the roles of a dual-channel file's left and right channels: caller,agent or "
        "agent,caller",
    )
    p.add_env_argument(
        "--policy",
        default=None,
        metavar="FILE|PROFILE",
        help="verdict policy, as voxproxy proxy --policy (default: auto)",
    )
    p.add_env_argument(
        "--secret",
        default=None,
        help="key for the pseudonymous call ids (HMAC of each recording's file name); "
        "for captures, the proxy's --secret (then every keyed hash is the live receipt's); "
        "without it a random per-run key is used",
    )
    p.add_env_argument(
        "--jobs",
        type=positive_int,
        default=None,
        metavar="N",
        help="worker processes (default: one per core)",
    )
    p.add_env_argument(
        "--otel",
        action="store_true",
        default=False,
        help="export each receipt's spans, metrics and log records over OTLP, configured by "
        "the standard OTEL_* variables (also on when OTEL_EXPORTER_OTLP_ENDPOINT is set)",
    )
    p.add_env_argument("--no-progress", action="store_true", default=False, help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from voxproxy.captures.replay import register
    from voxproxy.recordings.run import run_analyze

    register()  # captures of the proxy's wire (proxy --capture) too
    return run_analyze(args)
