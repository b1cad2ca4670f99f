"""Subcommands beyond the core ones in :mod:`voxproxy.cli`.

Each module listed in ``MODULES`` defines ``add_parser(sub)``, which adds its
subcommand(s) to the ``voxproxy`` parser and sets ``func`` (taking the parsed
arguments, returning an exit status). Import work happens inside ``func``, so
``voxproxy --help`` stays fast.

The top of the house. May import: anything in voxproxy; nothing imports it but
:mod:`voxproxy.cli`.
"""

MODULES: list[str] = ["load", "load_merge", "verdict", "receipts", "gate", "transcripts"]
