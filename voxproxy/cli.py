"""The ``voxproxy`` command: a thin layer over the Python API.

Every flag of every subcommand can also be set with an environment variable named
``VOXPROXY_`` + the subcommand + the flag, in upper case with dashes and spaces as
underscores (``proxy --receipts`` -> ``VOXPROXY_PROXY_RECEIPTS``, ``receipts export
--out`` -> ``VOXPROXY_RECEIPTS_EXPORT_OUT``); a flag given on the command line wins. Each
subcommand has its own names because the same flag means different things to different
subcommands (``--listen``, ``--dialect``, ``--policy``, ``--out``): a variable exported for
one never changes another. ``proxy`` also reads the old names without the subcommand
(``VOXPROXY_LISTEN``), with a one-line warning, for one release (:data:`LEGACY_COMMAND`).
Repeatable flags (``--scenario A --scenario B``) and positional arguments are read from
the command line only. A variable that does not parse is an error only for the
subcommand that has the flag, when it is run.

Here: :func:`build_parser` and :func:`main`; the parser machinery (:class:`EnvParser`,
:class:`DefaultsShown`, the argument types) is in :mod:`voxproxy.commands.parsing`.
Every subcommand, ``voxproxy proxy`` included, is a module of :mod:`voxproxy.commands`,
which says the rule.
"""

from __future__ import annotations

import argparse
import errno
import io
import logging
import os
import re
import select
import signal
import sys
from collections.abc import Sequence

from voxproxy import __version__
from voxproxy.commands.parsing import EnvParser as EnvParser
from voxproxy.commands.parsing import env_name as env_name
from voxproxy.commands.parsing import legacy_env_name as legacy_env_name
from voxproxy.commands.parsing import print_help
from voxproxy.commands.parsing import subcommand_parsers as subcommand_parsers
from voxproxy.core.errors import VoxproxyError

log = logging.getLogger("voxproxy")


def build_parser() -> argparse.ArgumentParser:
    parser = EnvParser(
        prog="voxproxy",
        description="Measure voice agents on the wire: time-to-first-sound, barge-in stop "
        "latency, one content-free receipt per call.",
    )
    parser.add_argument("--version", action="version", version=f"voxproxy {__version__}")
    parser.set_defaults(func=print_help(parser))  # bare `voxproxy`: the help, exit 0
    sub = parser.add_subparsers(dest="command", parser_class=EnvParser)
    import importlib

    from voxproxy.commands import MODULES

    for name in MODULES:
        importlib.import_module(f"voxproxy.commands.{name}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        from voxproxy.commands.load_merge import rewrite_argv  # `load merge` -> `load-merge`

        args = parser.parse_args(rewrite_argv(list(sys.argv[1:] if argv is None else argv)))
        level = getattr(args, "log_level", "info").upper()
        logging.basicConfig(
            level=getattr(logging, level, logging.INFO),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        logging.getLogger("websockets").setLevel(logging.WARNING)
        logging.getLogger("matplotlib").setLevel(logging.WARNING)
        _rich_passes_broken_pipes_on()
        result: int = args.func(args)
        sys.stdout.flush()  # here, where a reader that went away is seen (below)
        return result
    except VoxproxyError as exc:
        print(f"voxproxy: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `voxproxy receipts --json | head`: the reader has what it wanted. Say nothing
        # and exit as a command killed by SIGPIPE does (128 + 13), as `yes | head` does.
        # (SIGPIPE itself stays ignored: a proxy must not die of a caller's socket.)
        if not _stdout_gone():
            raise
        _quiet_stdout()
        return 128 + signal.SIGPIPE
    except OSError as exc:
        # The common mistakes (a port already in use, a path that cannot be written)
        # deserve one line that says what to fix, not a traceback.
        if exc.errno not in _USER_ERRNOS:
            raise
        print(f"voxproxy: error: {_describe_os_error(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _rich_passes_broken_pipes_on() -> None:
    """rich's consoles exit 1 on a broken pipe (``Console.on_broken_pipe``); ``verdict``
    and ``gate`` mean a failed call by 1, so the pipe's end goes to :func:`main` instead,
    which ends every command alike."""
    from rich.console import Console

    def on_broken_pipe(self: Console) -> None:
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    setattr(Console, "on_broken_pipe", on_broken_pipe)  # noqa: B010 (a method, replaced)


def _stdout_gone() -> bool:
    """Whether stdout is a pipe (or socket) whose reader has gone: polled, it reports
    an error. A broken pipe elsewhere (a socket of a call) is not this."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError, io.UnsupportedOperation):
        return False


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush at exit does not
    fail on the broken pipe again (and print a traceback of its own)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


_USER_ERRNOS = frozenset(
    {
        errno.EADDRINUSE,
        errno.EADDRNOTAVAIL,
        errno.EACCES,
        errno.EPERM,
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EROFS,
        errno.EEXIST,
    }
)


def _describe_os_error(exc: OSError) -> str:
    text = re.sub(r"^\[Errno \d+\] ", "", str(exc))
    if exc.errno == errno.EADDRINUSE:
        return f"{text}: another process listens there; choose another port or stop it"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{text}: that address is not on this machine"
    if exc.errno in (errno.EEXIST, errno.ENOTDIR) and exc.filename:
        return f"{exc.filename}: a file stands where a directory is needed"
    return text


if __name__ == "__main__":
    sys.exit(main())
