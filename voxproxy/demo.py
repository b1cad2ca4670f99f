"""``voxproxy demo`` lives in :mod:`voxproxy.harness.demo`; this name stays for the CLI."""

from voxproxy.harness.demo import run_demo

__all__ = ["run_demo"]
