"""The parser machinery every subcommand builds on: :class:`EnvParser` (each flag also read
from ``VOXPROXY_<COMMAND>_<FLAG>``), :class:`DefaultsShown`, the argument types and the
shared transport flags. :mod:`voxproxy.cli` puts the subcommands together into one
parser and runs it; the rule for environment variables is said there.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from voxproxy.core.errors import ConfigError

log = logging.getLogger("voxproxy")


def _upper(words: str) -> str:
    return re.sub(r"[- ]+", "_", words.strip().lstrip("-")).upper()


def env_name(command: str, flag: str) -> str:
    """The variable that sets ``flag`` of ``command`` (``"receipts export"``, ``"--out"``
    -> ``VOXPROXY_RECEIPTS_EXPORT_OUT``)."""
    return f"VOXPROXY_{_upper(command)}_{_upper(flag)}"


def legacy_env_name(flag: str) -> str:
    """The old name without the subcommand (``--listen`` -> ``VOXPROXY_LISTEN``), read by
    :data:`LEGACY_COMMAND` only."""
    return "VOXPROXY_" + _upper(flag)


LEGACY_COMMAND = "proxy"
"""The one subcommand that still reads the old names (it is the container's command, and
what they meant there was never in doubt), with a warning; the next release drops them."""

_ENV_ACTIONS = (None, "store", "store_true")


class EnvParser(argparse.ArgumentParser):
    """An ArgumentParser whose options fall back to ``VOXPROXY_<COMMAND>_<FLAG>``
    environment variables, that names the closest flag for a mistyped one, and errs in one
    line, not a usage dump."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._env_errors: list[str] = []  # variables that did not parse, raised if run
        self._env_legacy: list[tuple[str, str, str]] = []  # (old name read, new, flag)
        self.env_vars: dict[str, str] = {}  # variable -> the dest it sets
        super().__init__(*args, **kwargs)

    @property
    def command(self) -> str:
        """The subcommand this parser parses (``"receipts export"``; ``""`` for the top):
        its ``prog`` without the program's name."""
        return self.prog.partition(" ")[2]

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        tokens = list(args if args is not None else sys.argv[1:])
        sub = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]
        if sub:  # its subcommands check their own flags; its own variables count only
            parsed = super().parse_known_args(tokens, namespace)  # when none is chosen
            if getattr(parsed[0], sub[0].dest, None) is None:
                self._check_env(tokens)
            return parsed
        self._check_env(tokens)
        known = {o for action in self._actions for o in action.option_strings}
        for flag in _flags(tokens):
            if flag not in known:
                close = difflib.get_close_matches(flag, sorted(known), n=1)
                hint = f"; did you mean {close[0]}?" if close else ""
                self.error(f"unknown option {flag}{hint}")
        return super().parse_known_args(tokens, namespace)

    def _check_env(self, tokens: list[str]) -> None:
        """Raise the first variable that did not parse; in one line, warn of the old names
        read for flags the command line does not give."""
        if self._env_errors:
            raise ConfigError(self._env_errors[0])
        given = set(_flags(tokens))
        legacy = [(o, n, f) for o, n, f in self._env_legacy if f not in given]
        if legacy:
            old = ", ".join(o for o, _, _ in legacy)
            new = ", ".join(n for _, n, _ in legacy)
            print(
                f"voxproxy {self.command}: warning: {old}: old name(s), read for one more "
                f"release; rename to {new}",
                file=sys.stderr,
            )

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
        """As argparse's; a ``--flag`` that stores one value also reads
        ``VOXPROXY_<COMMAND>_<FLAG>`` (see :func:`env_name`), and its help says its
        default once."""
        return super().add_argument(*names, **self._prepared(names, kwargs))

    def add_env_argument(self, *names: Any, **kwargs: Any) -> argparse.Action:
        """The same as :meth:`add_argument` (every flag reads its variable now)."""
        return self.add_argument(*names, **kwargs)

    def add_group(self, title: str, description: str | None = None) -> EnvGroup:
        """An argument group (a heading in ``--help``) whose flags read the environment
        as this parser's do."""
        return EnvGroup(self, self.add_argument_group(title, description))

    def format_help(self) -> str:
        text = super().format_help()
        if not self.env_vars:
            return text
        example = next(iter(self.env_vars))
        width = self._get_formatter()._width
        said = (
            "Every option that takes one value (or none) can also be set with "
            f"VOXPROXY_{_upper(self.command)}_<OPTION> ({example}, ...); the command line "
            "wins."
        )
        return text + "\n" + textwrap.fill(said, width) + "\n"

    def _prepared(self, names: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` with the default the code gives shown in the help (not one from
        the environment: it may be a secret) and, for a ``--flag`` that stores one
        value, the default its variable sets."""
        kwargs = dict(kwargs)
        help_text = kwargs.get("help")
        if help_text is not argparse.SUPPRESS and any(str(n).startswith("-") for n in names):
            kwargs["help"] = _with_default(help_text or "", kwargs.get("default"))
        flag = next((n for n in names if isinstance(n, str) and n.startswith("--")), None)
        if flag is not None and self.command and kwargs.get("action") in _ENV_ACTIONS:
            env = env_name(self.command, flag)
            old = legacy_env_name(flag)
            self.env_vars[env] = kwargs.get("dest") or flag.lstrip("-").replace("-", "_")
            if env in os.environ:
                self._env_default(env, os.environ[env], kwargs)
            elif self.command == LEGACY_COMMAND and old in os.environ:
                self._env_legacy.append((old, env, flag))
                self._env_default(old, os.environ[old], kwargs)
        return kwargs

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


class EnvGroup:
    """An argument group of an :class:`EnvParser`: its flags read the environment and
    show their defaults as the parser's own do."""

    def __init__(self, parser: EnvParser, group: argparse._ArgumentGroup) -> None:
        self._parser = parser
        self._group = group

    def add_argument(self, *names: Any, **kwargs: Any) -> argparse.Action:
        return self._group.add_argument(*names, **self._parser._prepared(names, kwargs))

    add_env_argument = add_argument

    def add_seconds(self, flag: str, default: float, help: str) -> None:
        """A duration in seconds, 0 or more."""
        self.add_argument(flag, metavar="S", type=non_negative_float, default=default, help=help)

    def add_ms(self, flag: str, default: float, help: str, *, signed: bool = False) -> None:
        """A time in milliseconds: 0 or more, or any (``signed``: an offset either way)."""
        kind = float if signed else non_negative_float
        self.add_argument(flag, metavar="MS", type=kind, default=default, help=help)


def _with_default(text: str, default: Any) -> str:
    """``text`` and the default as it is typed (``HOST:PORT``, ``100`` not ``100.0``),
    unless the text says its default already or there is none to say."""
    none = default is None or default is False or default == argparse.SUPPRESS
    if "default" in text or none or (isinstance(default, (str, list)) and not default):
        return text
    if isinstance(default, tuple) and len(default) == 2:
        default = f"{default[0]}:{default[1]}"
    elif isinstance(default, float):
        default = f"{default:g}"
    shown = f"(default: {default})".replace("%", "%%")
    return f"{text} {shown}".lstrip()


class DefaultsShown(argparse.HelpFormatter):
    """The help formatter of voxproxy's parsers. Defaults are said by
    :meth:`EnvParser.add_argument` (once, as typed); kept as a name subcommands pass."""


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


def byte_size(value: str) -> int:
    """A size in bytes: a positive number, or one with K, M or G (powers of 1024)."""
    text = value.strip().upper().removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    try:
        n = int(float(text[:-1] if scale > 1 else text) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a size in bytes (or 500M, 2G), got {value}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return n


def duration_s(value: str) -> float:
    """A duration in seconds: a positive number, or one with s, m, h or d."""
    text = value.strip().lower()
    scale = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}.get(text[-1:], 0.0)
    try:
        n = float(text[:-1] if scale else text) * (scale or 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a duration in seconds (or 90s, 30m, 12h, 7d), got {value}"
        ) from None
    if not n > 0 or n == float("inf"):
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


def _flags(tokens: Sequence[str]) -> list[str]:
    """The ``--flags`` among command-line words (``--out=x`` -> ``--out``), up to ``--``."""
    out = []
    for token in tokens:
        if token == "--":
            break
        if token.startswith("--"):
            out.append(token.split("=", 1)[0])
    return out


def subcommand_parsers(parser: argparse.ArgumentParser) -> list[EnvParser]:
    """Every subcommand's parser under ``parser``, nested ones (``receipts export``)
    included, in help order."""
    out: list[EnvParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # aliases once
                out.append(child)
                out.extend(subcommand_parsers(child))
    return out


def print_help(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    """The ``func`` of a command that is only a group of others (``voxproxy``,
    ``voxproxy transcripts``): given no subcommand, it prints its help and exits 0, as
    ``docker``, ``kubectl`` and ``cargo`` do, rather than an error."""

    def run(args: argparse.Namespace) -> int:
        del args
        parser.print_help()
        return 0

    return run
