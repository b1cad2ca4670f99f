"""Where the subcommands of ``voxproxy`` live: one rule.

:mod:`voxproxy.cli` puts the subcommands into one parser and runs it (``main``: one-line
errors); the parser machinery they build on (``VOXPROXY_<COMMAND>_*`` environment
defaults, the argument types) is :mod:`.parsing`. Every subcommand is a module here,
``proxy`` (the product itself: its flags into a :class:`voxproxy.proxy.server.ServeConfig`,
then :func:`voxproxy.proxy.workers.serve`) included, listed in ``MODULES`` (in the order
``voxproxy --help`` shows them), named after it (dashes as underscores). Each defines
``add_parser(sub)``, which adds its subcommand(s) to the ``voxproxy`` parser and sets
``func`` (taking the parsed arguments, returning an exit status). A subcommand only
parses: the work is a call into the package's Python API, imported inside ``func`` so
that ``voxproxy --help`` stays fast.

The top of the house. May import: anything in voxproxy; nothing imports it but
:mod:`voxproxy.cli`.
"""

MODULES: list[str] = [
    "proxy",
    "mock_agent",
    "schema",
    "demo",
    "load",
    "load_merge",
    "scenarios",
    "verdict",
    "receipts",
    "gate",
    "transcripts",
    "analyze",
]
