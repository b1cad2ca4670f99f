"""``voxproxy receipts --store``: filters, table and JSON lines output."""

from __future__ import annotations

import errno
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.flowkit import flow_receipts

from voxproxy.cli import main
from voxproxy.core.receipt import Receipt
from voxproxy.receipts.policy import load_policy
from voxproxy.receipts.store import connect, insert, query_receipts
from voxproxy.receipts.verdict import judged


@pytest.fixture(autouse=True)
def _wide_and_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "260")  # the full layout of these receipts fits
    for name in ("VOXPROXY_RECEIPTS_STORE", "VOXPROXY_RECEIPTS_RECEIPTS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, list[Receipt]]:
    policy = load_policy()
    receipts = [
        judged(
            r.model_copy(
                update={
                    "started_at": f"2025-06-0{1 + i % 2}T08:00:0{i % 10}.000Z",
                    "dialect": "twilio" if i < 4 else "raw",
                }
            ),
            policy,
        )
        for i, r in enumerate(flow_receipts())
    ]
    path = tmp_path / "r.db"
    conn = connect(path)
    insert(conn, receipts)
    conn.close()
    return path, receipts


def json_calls(out: str) -> list[str]:
    return [Receipt.model_validate(json.loads(line)).call for line in out.splitlines()]


def test_json_lines_with_filters(
    store: tuple[Path, list[Receipt]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, receipts = store
    assert main(["receipts", "--store", str(path), "--json"]) == 0
    assert sorted(json_calls(capsys.readouterr().out)) == sorted(r.call for r in receipts)

    argv = ["receipts", "--store", str(path), "--json", "--verdict", "tool_effect_failed"]
    assert main([*argv, "--verdict", "unreachable"]) == 0
    want = {
        r.call
        for r in receipts
        if r.verdict and r.verdict.verdict in ("tool_effect_failed", "unreachable")
    }
    assert set(json_calls(capsys.readouterr().out)) == want and len(want) == 5

    assert main([*argv, "--since", "2025-06-02", "--dialect", "raw"]) == 0
    got = json_calls(capsys.readouterr().out)
    assert got and set(got) == {
        r.call
        for r in receipts
        if r.verdict
        and r.verdict.verdict == "tool_effect_failed"
        and r.started_at >= "2025-06-02"
        and r.dialect == "raw"
    }
    assert main(["receipts", "--store", str(path), "--json", "--until", "2025-06-01T23:00"]) == 0
    got = json_calls(capsys.readouterr().out)
    assert len(got) == 6 and all(c in {r.call for r in receipts[::2]} for c in got)
    assert main(["receipts", "--store", str(path), "--json", "--terminal", "agent_closed"]) == 0
    assert json_calls(capsys.readouterr().out) == [receipts[11].call]
    assert main(["receipts", "--store", str(path), "--json", "--limit", "2"]) == 0
    assert len(json_calls(capsys.readouterr().out)) == 2


def test_table(store: tuple[Path, list[Receipt]], capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = store
    assert main(["receipts", "--store", str(path), "--verdict", "barge_in_failed"]) == 0
    out = capsys.readouterr().out
    assert f"2 receipt(s) in {path}" in out
    rows = [line for line in out.splitlines() if "barge_in_failed" in line]
    assert len(rows) == 2 and all("interruption" in row for row in rows)


def test_the_store_can_come_from_the_environment(
    store: tuple[Path, list[Receipt]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, receipts = store
    monkeypatch.setenv("VOXPROXY_RECEIPTS_STORE", str(path))
    assert main(["receipts", "--json"]) == 0
    assert len(json_calls(capsys.readouterr().out)) == len(receipts)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--since", "last tuesday"], "not an ISO 8601 time: 'last tuesday'"),
        (["--verdict", "fine"], "--verdict 'fine': expected one of"),
        (["--terminal", "hung_up"], "--terminal 'hung_up': expected one of"),
        (["--limit", "0"], "--limit must be positive"),
    ],
)
def test_bad_filters_exit_2(
    store: tuple[Path, list[Receipt]],
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    path, _ = store
    assert main(["receipts", "--store", str(path), *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_missing_store_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["receipts", "--store", str(tmp_path / "none.db")]) == 2
    assert "none.db: no receipt store there" in capsys.readouterr().err


# -- voxproxy receipts export -----------------------------------------------------------------


def test_export_calls_to_parquet_from_the_store(
    store: tuple[Path, list[Receipt]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow.parquet as pq

    path, receipts = store
    out = tmp_path / "calls.parquet"
    argv = [
        "receipts",
        "export",
        "--store",
        str(path),
        "--out",
        str(out),
        "--tag",
        "agent_version=v7",
    ]
    assert main(argv) == 0
    assert f"{len(receipts)} calls row(s) -> {out} (parquet)" in capsys.readouterr().err
    table = pq.read_table(out)
    assert sorted(table.column("call").to_pylist()) == sorted(r.call for r in receipts)
    assert set(table.column("agent_version").to_pylist()) == {"v7"}
    by_call = {r.call: r for r in receipts}
    for call, verdict in zip(
        table.column("call").to_pylist(), table.column("verdict").to_pylist(), strict=True
    ):
        assert verdict == by_call[call].verdict.verdict  # type: ignore[union-attr]


def test_export_turns_as_json_lines_from_receipt_files(
    store: tuple[Path, list[Receipt]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, receipts = store
    files = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    files[0].write_text("".join(r.to_json_line() for r in receipts[:5]))
    files[1].write_text("".join(r.to_json_line() for r in receipts[5:]))
    out = tmp_path / "turns.jsonl"  # the format follows the suffix
    argv = ["receipts", "export", "--table", "turns", "--out", str(out)]
    assert main([*argv, "--receipts", str(files[0]), "--receipts", str(files[1])]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == sum(len(r.turns) for r in receipts)
    assert [(x["call"], x["turn"]) for x in rows] == [
        (r.call, t.index) for r in receipts for t in r.turns
    ]
    # '-' writes JSON lines to stdout.
    capsys.readouterr()
    assert (
        main(["receipts", "export", "--receipts", str(files[0]), "--out", "-", "--format", "jsonl"])
        == 0
    )
    assert [json.loads(x)["call"] for x in capsys.readouterr().out.splitlines()] == [
        r.call for r in receipts[:5]
    ]


def test_export_without_pyarrow_names_the_extra_in_one_line(
    store: tuple[Path, list[Receipt]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a)
    )
    path, _ = store
    out = tmp_path / "calls.parquet"
    assert main(["receipts", "export", "--store", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'voxproxy[parquet]'" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "receipts.jsonl is not a file here; give --receipts PATH"),
        (["--receipts", "/nonexistent/r.jsonl"], "no such file"),
        (["--receipts", "{r}", "--out", "x.csv"], "cannot tell from --out"),
        (["--receipts", "{r}", "--tag", "call=x"], "a column of that name exists"),
        (["--receipts", "{r}", "--out", "-", "--format", "parquet"], "stdout takes jsonl only"),
    ],
)
def test_export_mistakes_exit_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    r = tmp_path / "r.jsonl"
    r.write_text("")
    argv = ["receipts", "export", *(a.replace("{r}", str(r)) for a in extra)]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "o.jsonl")]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_without_receipts_here_listing_says_what_to_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VOXPROXY_RECEIPTS_RECEIPTS", raising=False)
    assert main(["receipts"]) == 2
    err = capsys.readouterr().err
    assert "receipts.jsonl is not a file; give --receipts PATH" in err and "--store" in err


@pytest.fixture
def receipts_here(
    store: tuple[Path, list[Receipt]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, list[Receipt]]:
    """The store, its receipts also in receipts.jsonl in the working folder (the proxy's
    default --receipts file, read without a flag)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "receipts.jsonl").write_bytes(b"".join(_lines(store[1])))
    return store


def test_the_proxy_receipts_file_lists_like_the_store_with_latency_columns(
    receipts_here: tuple[Path, list[Receipt]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, receipts = receipts_here
    for filters in (
        [],
        ["--verdict", "tool_effect_failed", "--verdict", "unreachable"],
        ["--since", "2025-06-02", "--dialect", "raw"],
        ["--until", "2025-06-01T23:00", "--limit", "3"],
        ["--terminal", "agent_closed"],
    ):
        assert main(["receipts", "--json", "--store", str(path), *filters]) == 0
        want = json_calls(capsys.readouterr().out)
        assert main(["receipts", "--json", *filters]) == 0
        assert json_calls(capsys.readouterr().out) == want, filters
    assert main(["receipts"]) == 0
    out = capsys.readouterr().out
    assert f"{len(receipts)} receipt(s) in receipts.jsonl" in out
    header = next(line for line in out.splitlines() if "ttfs p50" in line)
    assert "ttfs max" in header and "stop max" in header and "barge-ins" in header
    timed = next(r for r in receipts if r.summary.ttfs_ms_median is not None)
    row = next(line for line in out.splitlines() if timed.call in line)
    assert f"{timed.summary.ttfs_ms_median:.0f} ms" in row, row
    assert f"{timed.summary.barge_ins_stopped}/{timed.summary.barge_ins}" in row


def _lines(receipts: list[Receipt]) -> list[bytes]:
    return [r.to_json_line().encode() for r in receipts]


def test_export_skips_and_names_bad_lines_and_recovers_a_receipt_after_a_torn_fragment(
    store: tuple[Path, list[Receipt]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, receipts = store
    good = _lines(receipts[:4])
    path = tmp_path / "r.jsonl"
    path.write_bytes(
        good[0]
        + b'{"hello": "not a receipt"}\n'
        + b"\xff\xfe\xfd\n"  # not UTF-8
        + good[1][:50]  # a writer killed mid-line; the next line glued to it
        + good[2]
        + good[3]
    )
    out = tmp_path / "calls.jsonl"
    assert main(["receipts", "export", "--receipts", str(path), "--out", str(out)]) == 0
    exported = [json.loads(line)["call"] for line in out.read_text().splitlines()]
    assert exported == [receipts[0].call, receipts[2].call, receipts[3].call]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4 and err[-1] == f"3 calls row(s) -> {out} (jsonl)", err
    assert f"{path}:2: not a receipt" in err[0] and f"{path}:3: not UTF-8" in err[1]
    assert f"{path}:4: a torn fragment (50 bytes)" in err[2] and "receipt kept" in err[2]
    # The listing reads the same way.
    assert main(["receipts", "--receipts", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    assert json_calls(captured.out) == exported and len(captured.err.splitlines()) == 3


def test_many_bad_lines_are_shown_ten_then_counted_in_one_line(
    store: tuple[Path, list[Receipt]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, receipts = store
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"".join(_lines(receipts[:2])) + b"garbage\n" * 25)
    assert main(["receipts", "export", "--receipts", str(path), "--out", "-"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2
    err = captured.err.splitlines()
    assert len(err) == 11 and "25 line(s) that are not receipts skipped" in err[-1], err


def test_export_refuses_to_write_over_an_input_by_any_name(
    store: tuple[Path, list[Receipt]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, receipts = store
    path = tmp_path / "receipts.jsonl"
    path.write_bytes(b"".join(_lines(receipts)))
    before = path.read_bytes()
    (tmp_path / "link.jsonl").hardlink_to(path)
    (tmp_path / "sym.jsonl").symlink_to(path)
    for out in (path, tmp_path / "link.jsonl", tmp_path / "sym.jsonl", tmp_path / "." / path.name):
        argv = ["receipts", "export", "--receipts", str(path), "--out", str(out)]
        assert main(argv) == 2, out
        assert "is the input" in capsys.readouterr().err
        assert path.read_bytes() == before
    argv = ["receipts", "export", "--store", str(db), "--out", str(db), "--format", "jsonl"]
    assert main(argv) == 2 and "is the input" in capsys.readouterr().err
    assert len(list(query_receipts(str(db)))) == len(receipts)


def test_an_export_that_fails_midway_leaves_the_old_file_whole(
    store: tuple[Path, list[Receipt]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import voxproxy.receipts.export as export

    db, _ = store
    out = tmp_path / "calls.jsonl"
    out.write_text("the export of yesterday\n")
    real = export.rows

    def rows_then_fail(*args: object, **kwargs: object) -> Iterator[dict[str, object]]:
        it = real(*args, **kwargs)  # type: ignore[arg-type]
        yield next(it)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(export, "rows", rows_then_fail)
    with pytest.raises(OSError):
        main(["receipts", "export", "--store", str(db), "--out", str(out)])
    assert out.read_text() == "the export of yesterday\n"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_export_defaults_read_receipts_jsonl_here_like_the_listing(
    receipts_here: tuple[Path, list[Receipt]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow.parquet as pq

    _, receipts = receipts_here
    # As the README writes it: no --receipts, no --out.
    assert main(["receipts", "export"]) == 0
    out = [json.loads(line)["call"] for line in capsys.readouterr().out.splitlines()]
    assert out == [r.call for r in receipts]
    assert main(["receipts", "export", "--format", "parquet", "--table", "turns"]) == 0
    assert pq.read_table(tmp_path / "turns.parquet").num_rows == sum(len(r.turns) for r in receipts)


@pytest.mark.parametrize("columns", [80, 100, 120, 149])
def test_the_listing_is_one_line_a_receipt_at_80_and_120_columns(
    store: tuple[Path, list[Receipt]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    columns: int,
) -> None:
    # Before: 13 columns of full values; below ~150 columns each cell wrapped over 4-8 lines.
    path, receipts = store
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["receipts", "--store", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= columns
    for r in receipts:
        (row,) = [line for line in lines if r.call[:8] in line]  # one line, no more
        assert r.verdict is not None and r.verdict.verdict[:12] in row, row
        assert f"{r.summary.barge_ins_stopped}/{r.summary.barge_ins}" in row
    rows = [line for line in lines if any(r.call[:8] in line for r in receipts)]
    assert len(rows) == len(receipts)
