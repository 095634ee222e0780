"""read_committed reads (``storage_engine/log/isolation.py``): below the last stable offset, aborted
transactions left out, as Kafka's consumer sees them; over hand-built transactional logs."""

from __future__ import annotations

import json

import pytest

from storage_engine.errors import ConfigError
from storage_engine.log.segment import LogSegment
from tests.helpers.cleaner import data_batch, marker, raw_log
from tests.helpers.cli import run_logctl

P1, P2, P3 = 101, 202, 303


def txn(base: int, pid: int, *values: str) -> bytes:
    return data_batch(base, [(f"k{base + i}", v) for i, v in enumerate(values)], pid=pid, epoch=0, seq=0,
                      transactional=True)


def plain(base: int, *values: str) -> bytes:
    return data_batch(base, [(f"k{base + i}", v) for i, v in enumerate(values)])


def offsets(log, start: int | None = None, **kwargs) -> list[int]:
    start = log.log_start_offset if start is None else start
    return [r.offset for r in log.read(start, max_records=10**6, **kwargs)]


def committed(log, start: int | None = None, **kwargs) -> list[int]:
    return offsets(log, start, isolation_level="read_committed", **kwargs)


def open_log(tmp_path, *batches: bytes, segments: list[list[bytes]] | None = None):
    manager = raw_log(tmp_path, segments or [list(batches)], cleanup_policy="delete")
    return manager.get_log("t", 0)


def test_committed_shown_aborted_hidden_control_batches_skipped(tmp_path):
    log = open_log(tmp_path,
                   txn(0, P1, "a", "b"), marker(2, P1, 0, commit=True),
                   txn(3, P2, "x"), marker(4, P2, 0, commit=False),
                   plain(5, "p"))
    assert offsets(log) == [0, 1, 3, 5]
    assert committed(log) == [0, 1, 5]
    assert log.last_stable_offset() == log.log_end_offset == 6
    assert [r.offset for r in log.read(0, isolation_level="read_committed", include_control=True,
                                       max_records=100)] == [0, 1, 2, 4, 5]


def test_open_transaction_hides_everything_from_its_first_offset(tmp_path):
    log = open_log(tmp_path, plain(0, "before"), txn(1, P1, "open"), plain(2, "after"),
                   txn(3, P2, "done"), marker(4, P2, 0, commit=True))
    assert log.last_stable_offset() == 1
    assert committed(log) == [0]
    assert committed(log, 2) == []
    assert offsets(log) == [0, 1, 2, 3]


def test_interleaved_producers_each_decided_by_its_own_next_marker(tmp_path):
    log = open_log(tmp_path,
                   txn(0, P1, "a"), txn(1, P2, "x"), txn(2, P1, "b"), plain(3, "p"),
                   txn(4, P2, "y"), marker(5, P2, 0, commit=False),
                   txn(6, P1, "c"), marker(7, P1, 0, commit=True),
                   txn(8, P2, "z"), marker(9, P2, 0, commit=True),  # P2's next transaction commits
                   txn(10, P3, "open"))
    assert committed(log) == [0, 2, 3, 6, 8]
    assert committed(log, 2) == [2, 3, 6, 8]
    # one batch per chunk: markers lie in later chunks, chunks of aborted batches alone are read past
    assert committed(log, max_bytes=1) == [0, 2, 3, 6, 8]
    assert [r.offset for r in log.read(1, isolation_level="read_committed", max_bytes=1)] == [2]


@pytest.mark.parametrize("commit", [True, False])
def test_a_marker_above_the_last_stable_offset_decides_a_batch_below_it(tmp_path, commit):
    # P1's transaction began first and ends after P2's open one began: LSO 1, P1's marker at 2
    log = open_log(tmp_path, txn(0, P1, "a"), txn(1, P2, "open"), marker(2, P1, 0, commit=commit))
    assert log.last_stable_offset() == 1
    assert committed(log) == ([0] if commit else [])


def test_markers_in_later_segments_and_across_chunks(tmp_path):
    log = open_log(tmp_path, segments=[[txn(0, P1, "a"), txn(1, P2, "b")],
                                       [plain(2, "p"), marker(3, P1, 0, commit=False)],
                                       [marker(4, P2, 0, commit=True), plain(5, "q")]])
    assert committed(log) == [1, 2, 5]
    assert committed(log, max_bytes=1) == [1, 2, 5]


def test_one_read_committed_call_reads_each_batch_once_however_many_windows_it_reads_past(tmp_path, monkeypatch):
    """An aborted transaction of many batches, one per ``max_bytes`` window: the read goes past
    every window it leaves out whole in one pass (re-scanning from each window to the ABORT
    marker would read the range quadratically)."""
    n = 300
    log = open_log(tmp_path, *(txn(i, P1, "x") for i in range(n)), marker(n, P1, 0, commit=False), plain(n + 1, "p"))
    assert committed(log) == [n + 1]
    read = []
    batches = LogSegment.batches

    def counted(segment, *args, **kwargs):
        for raw in batches(segment, *args, **kwargs):
            read.append(raw.header.base_offset)
            yield raw

    monkeypatch.setattr(LogSegment, "batches", counted)
    assert [r.offset for r in log.read(0, isolation_level="read_committed", max_bytes=1)] == [n + 1]
    assert len(read) < 2 * n, len(read)


def test_an_unknown_isolation_level_is_refused_in_the_consumers_words(tmp_path):
    log = open_log(tmp_path, plain(0, "p"))
    with pytest.raises(ConfigError, match="^Invalid value 'committed' for configuration isolation.level: "
                                          "String must be one of: read_committed, read_uncommitted$"):
        log.read(0, isolation_level="committed")


def test_logctl_consume_isolation_level(tmp_path, monkeypatch, capsys):
    raw_log(tmp_path, [[txn(0, P1, "a"), marker(1, P1, 0, commit=False), txn(2, P2, "b"),
                        marker(3, P2, 0, commit=True), txn(4, P1, "open")]], cleanup_policy="delete").close()

    def consume(*extra: str) -> list[int]:
        code, out, err = run_logctl(tmp_path, monkeypatch, capsys, "consume", "t", "--partition", "0", *extra)
        assert code == 0, err
        return [json.loads(line)["offset"] for line in out.splitlines()]

    assert consume() == [0, 2, 4]
    assert consume("--isolation-level", "read_uncommitted") == [0, 2, 4]
    assert consume("--isolation-level", "read_committed") == [2]
    code, _, err = run_logctl(tmp_path, monkeypatch, capsys, "consume", "t", "--partition", "0",
                              "--isolation-level", "committed")
    assert code != 0 and "read_committed" in err
