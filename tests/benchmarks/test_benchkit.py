"""benchmarks/benchkit.py: the wait for a child's port returns once something listens and
gives up, naming the port, when nothing does; a figures table right-justifies its columns."""

from __future__ import annotations

import socket

import pytest
from support.benchmarks import load_benchmark
from support.ports import refusing_port

benchkit = load_benchmark("benchkit")


def test_wait_port_returns_once_something_listens() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        benchkit.wait_port(server.getsockname()[1], 5.0)


def test_wait_port_gives_up_when_nothing_listens() -> None:
    with refusing_port() as port, pytest.raises(RuntimeError, match=f"nothing listening on {port}"):
        benchkit.wait_port(port, 0.2)


def test_a_figures_table_right_justifies_every_column_and_passes_its_options() -> None:
    table = benchkit.figures_table("costs", ("stage", "µs"), title_justify="left")
    assert table.title == "costs" and table.title_justify == "left"
    assert [c.header for c in table.columns] == ["stage", "µs"]
    assert {c.justify for c in table.columns} == {"right"}
