"""The cleaner's "is this the producer's last batch" comes from the log's producer state
(snapshot + replay), as Kafka's ``lastRecordsOfActiveProducers``: a producer's last batch header,
even an emptied control batch, survives every later pass while it is that producer's last batch.
Every step reopens the log dir, so state crosses processes only through the snapshot files."""

from __future__ import annotations

from pathlib import Path

from storage_engine.log.producer_snapshot import SnapshotEntry, write_snapshot
from storage_engine.logdir.manager import LogManager
from storage_engine.record import encode_empty_batch
from storage_engine.record.records import TimestampType
from storage_engine.tools.verify import verify_log
from tests.helpers.cleaner import NOW, compact, data_batch, headers, marker, put, raw_log


def _headers(root: Path) -> list[tuple[int, int, bool, int]]:
    """(base offset, producer id, control, record count) of every batch."""
    with LogManager([root]) as m:
        log = m.get_log("t", 0)
        assert verify_log(log).ok
        return [(h.base_offset, h.producer_id, h.is_control, h.records_count) for h in headers(log)]


def _compact(root: Path, now: int) -> None:
    with LogManager([root]) as m:
        compact(m, now)


def _produce_and_compact(root: Path, now: int, value: str) -> None:
    with LogManager([root]) as m:
        log = m.get_log("t", 0)
        put(log, ("more", value), ts=now)
        log.roll(now=now)
        compact(m, now)


def _empty_marker(offset: int, pid: int, epoch: int) -> bytes:
    """A marker whose record an earlier cleaning removed, as a broker leaves it."""
    return encode_empty_batch(base_offset=offset, last_offset_delta=0, max_timestamp=NOW, producer_id=pid,
                              producer_epoch=epoch, base_sequence=-1, partition_leader_epoch=0,
                              is_transactional=True, is_control=True, timestamp_type=TimestampType.CREATE_TIME)


def test_an_abort_after_an_epoch_bump_ends_as_an_empty_header_that_later_passes_keep(tmp_path):
    """The coordinator aborts a timed-out transaction with a bumped epoch: the producer's current
    epoch has no data batch, so its abort marker is its last batch. Kafka removes the aborted data,
    then (after delete.retention.ms) the marker's record, and keeps the marker's header for good."""
    raw_log(tmp_path, [
        [data_batch(0, [("k", "aborted")], pid=1, epoch=0, seq=0, transactional=True),
         marker(1, 1, 1, commit=False),
         data_batch(2, [("x", "1")])],
        [data_batch(3, [("filler", "1")])],
    ], delete_retention_ms=100).close()
    _compact(tmp_path, NOW)  # the aborted data goes: its batch is not the producer's last
    assert _headers(tmp_path)[:2] == [(1, 1, True, 1), (2, -1, False, 1)]
    _compact(tmp_path, NOW + 10)
    _produce_and_compact(tmp_path, NOW + 20, "a")  # the marker's horizon is stamped
    _produce_and_compact(tmp_path, NOW + 200, "b")  # past it: the record goes, the header stays
    assert _headers(tmp_path)[:2] == [(1, 1, True, 0), (2, -1, False, 1)]
    for i in range(3):  # compact, produce more, compact again: still there
        _produce_and_compact(tmp_path, NOW + 300 + i, str(i))
        assert _headers(tmp_path)[:2] == [(1, 1, True, 0), (2, -1, False, 1)]


def test_an_emptied_marker_a_broker_left_stays_while_the_snapshot_says_it_is_the_last_batch(tmp_path):
    """A directory as a broker leaves it: two emptied markers; the snapshot knows producer 4 (its
    epoch 2 has only markers) and not producer 5 (expired). Producer 4's header is kept through
    every pass, producer 5's goes, as Kafka does."""
    raw_log(tmp_path, [
        [data_batch(0, [("k", "v0")]), _empty_marker(1, 4, 2), _empty_marker(2, 5, 0),
         data_batch(3, [("k", "v1")])],
        [data_batch(4, [("filler", "1")])],
    ]).close()
    write_snapshot(tmp_path / "t-0", 4, [SnapshotEntry(4, 2, -1, -1, 0, NOW, 0, -1)])
    _compact(tmp_path, NOW)
    assert _headers(tmp_path) == [(1, 4, True, 0), (3, -1, False, 1), (4, -1, False, 1)]
    for i in range(3):
        _produce_and_compact(tmp_path, NOW + i, str(i))
        assert _headers(tmp_path)[:2] == [(1, 4, True, 0), (3, -1, False, 1)]
