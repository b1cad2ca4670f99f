"""The ``voxproxy`` command: a thin layer over the Python API.

Every flag of every subcommand can also be set with an environment variable named
``VOXPROXY_`` + the flag in upper case with dashes as underscores (``--receipts`` ->
``VOXPROXY_RECEIPTS``); a flag given on the command line wins. The names are shared:
``VOXPROXY_EVENTS_TOKEN`` is the proxy's ``--events-token`` and the mock agent's.
Repeatable flags (``--scenario A --scenario B``) and positional arguments are read from
the command line only. A variable that does not parse is an error only for a subcommand
that has the flag and is run.

Here: the parser machinery (:class:`EnvParser`, :class:`DefaultsShown`, the argument
types) and :func:`main`. Every subcommand, ``voxproxy proxy`` included, is a module of
:mod:`voxproxy.commands`, which says the rule.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from voxproxy import __version__
from voxproxy.errors import ConfigError, VoxproxyError

log = logging.getLogger("voxproxy")


def env_name(flag: str) -> str:
    return "VOXPROXY_" + flag.lstrip("-").upper().replace("-", "_")


_ENV_ACTIONS = (None, "store", "store_true")


class EnvParser(argparse.ArgumentParser):
    """An ArgumentParser whose options fall back to VOXPROXY_* environment variables, that
    names the closest flag for a mistyped one, and errs in one line, not a usage dump."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._env_errors: list[str] = []  # variables that did not parse, raised if run
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if any(isinstance(a, argparse._SubParsersAction) for a in self._actions):
            return super().parse_known_args(args, namespace)  # its subcommands check
        if self._env_errors:
            raise ConfigError(self._env_errors[0])
        known = {o for action in self._actions for o in action.option_strings}
        for token in list(args if args is not None else sys.argv[1:]):
            if token == "--":
                break
            flag = token.split("=", 1)[0]
            if flag.startswith("--") and flag not in known:
                close = difflib.get_close_matches(flag, sorted(known), n=1)
                hint = f"; did you mean {close[0]}?" if close else ""
                self.error(f"unknown option {flag}{hint}")
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        choice = re.fullmatch(
            r"argument (.+?): invalid choice: (.+?) \(choose from (.*)\)", message
        )
        if choice is not None:  # a mistyped command or value: name the closest one
            given = choice.group(2).strip("'")
            choices = [c.strip().strip("'") for c in choice.group(3).split(",")]
            close = difflib.get_close_matches(given, choices, n=1)
            what = choice.group(1) if choice.group(1).startswith("-") else "command"
            message = f"unknown {what} {given!r}; " + (
                f"did you mean {close[0]}?" if close else f"one of: {', '.join(choices)}"
            )
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def add_argument(self, *names: Any, **kwargs: Any) -> argparse.Action:
        """As argparse's; a ``--flag`` that stores one value also reads ``VOXPROXY_FLAG``."""
        flag = next((n for n in names if isinstance(n, str) and n.startswith("--")), None)
        if flag is not None and kwargs.get("action") in _ENV_ACTIONS:
            env = env_name(flag)
            if env in os.environ:
                self._env_default(env, os.environ[env], kwargs)
            if kwargs.get("help") is not argparse.SUPPRESS:
                kwargs["help"] = f"{kwargs.get('help') or ''} [env {env}]".lstrip()
        return super().add_argument(*names, **kwargs)

    def _env_default(self, env: str, raw: str, kwargs: dict[str, Any]) -> None:
        if kwargs.get("action") == "store_true":
            kwargs["default"] = raw.lower() in ("1", "true", "yes", "on")
            return
        kind: Callable[[str], Any] = kwargs.get("type", str)
        try:
            value = kind(raw)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            self._env_errors.append(f"{env}={raw!r}: {exc}")
            return
        choices = kwargs.get("choices")
        if choices is not None and value not in choices:
            self._env_errors.append(f"{env}={raw!r}: not one of {', '.join(map(str, choices))}")
            return
        kwargs["default"] = value
        kwargs.pop("required", None)

    def add_env_argument(self, flag: str, **kwargs: Any) -> None:
        """:meth:`add_argument`, with the default shown in the help."""
        default = kwargs.get("default")
        if isinstance(default, tuple) and len(default) == 2:
            default = f"{default[0]}:{default[1]}"  # HOST:PORT as it is typed
        shown = f" (default: {default})" if default not in (None, False) else ""
        kwargs["help"] = kwargs.get("help", "") + shown
        self.add_argument(flag, **kwargs)


class DefaultsShown(argparse.HelpFormatter):
    """Help that shows each option's default as it is typed (HOST:PORT, not a tuple),
    unless the help already says it or there is none (None, False, empty)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or "default" in text
            or default is None
            or default is False
            or default == argparse.SUPPRESS
            or default == []
        ):
            return text
        if isinstance(default, tuple) and len(default) == 2:
            default = f"{default[0]}:{default[1]}"
        shown = f" (default: {default})"
        head, env, tail = text.rpartition(" [env ")
        # the default before the environment variable that can set it
        out = f"{head}{shown}{env}{tail}" if env else f"{text}{shown}"
        return out.replace("%", "%%").replace("%%(", "%(")


def add_transport_arguments(add: Callable[..., object], transport: str, signaling: str) -> None:
    """``--transport`` (websocket or webrtc) and ``--signaling`` (whip or pipecat), with a
    subcommand's own help texts; ``add``: its parser's ``add_argument`` or
    ``add_env_argument``."""
    add("--transport", choices=["websocket", "webrtc"], default="websocket", help=transport)
    add("--signaling", choices=["whip", "pipecat"], default="whip", help=signaling)


def host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host or "127.0.0.1", int(port)


def upstream_url(value: str) -> str:
    """The agent's URL: ws:// or wss:// (websocket), http:// or https:// (webrtc signaling)."""
    if not value.startswith(("ws://", "wss://", "http://", "https://")):
        raise argparse.ArgumentTypeError(
            f"expected a ws://, wss://, http:// or https:// URL, got {value!r}"
        )
    return value


def positive_int(value: str) -> int:
    n = int(value)
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return n


def non_negative_int(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return n


def non_negative_float(value: str) -> float:
    x = float(value)
    if x < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return x


# -- main ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = EnvParser(
        prog="voxproxy",
        description="Measure voice agents on the wire: time-to-first-sound, barge-in stop "
        "latency, one content-free receipt per call.",
    )
    parser.add_argument("--version", action="version", version=f"voxproxy {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=EnvParser)
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
        result: int = args.func(args)
        return result
    except VoxproxyError as exc:
        print(f"voxproxy: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        # The common mistakes (a port already in use, a path that cannot be written)
        # deserve one line that says what to fix, not a traceback.
        if exc.errno not in _USER_ERRNOS:
            raise
        print(f"voxproxy: error: {_describe_os_error(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


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
