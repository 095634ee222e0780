"""The partition log on real files: append, read, roll, indexes, timestamps, log start offset."""

from __future__ import annotations

import os

import pytest

from storage_engine.errors import InvalidRecordError, OffsetOutOfRangeError, RecordTooLargeError
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.log.checkpoint import read_checkpoint
from storage_engine.record import CompressionType, scan_batches
from tests.helpers.engine import append_each, open_topic, records


@pytest.mark.parametrize("codec", list(CompressionType))
def test_append_then_read_every_codec(tmp_path, codec):
    with open_topic(tmp_path) as m:
        log = m.get_log("t", 0)
        recs = records(25)
        info = log.append(recs[:10], compression=codec)
        log.append(recs[10:], compression=codec)
        assert (info.first_offset, info.last_offset) == (0, 9)
        got = log.read(0)
        assert [r.offset for r in got] == list(range(25))
        assert [(r.key, r.value, r.timestamp, r.headers) for r in got] == [
            (p.key, p.value, p.timestamp, p.headers) for p in recs
        ]
        assert log.log_end_offset == 25


def test_read_from_the_middle_of_a_batch_and_limits(tmp_path):
    with open_topic(tmp_path) as m:
        log = m.get_log("t", 0)
        log.append(records(10))
        log.append(records(10, start=10))
        assert [r.offset for r in log.read(7, max_records=5)] == [7, 8, 9, 10, 11]
        # Reads are batch-granular: a tiny byte limit still returns the first whole batch.
        assert len(log.read_batches(3, max_bytes=1)) == 1
        assert log.read(20) == []
        with pytest.raises(OffsetOutOfRangeError, match="range 0 to 20"):
            log.read(21)


def test_segments_roll_on_segment_bytes_and_never_exceed_it(tmp_path):
    with open_topic(tmp_path, segment_bytes=1000) as m:
        log = m.get_log("t", 0)
        append_each(log, records(60))
        assert len(log.segments) > 3
        for seg in log.segments:
            assert 0 < seg.size <= 1000
        bases = [s.base_offset for s in log.segments]
        assert bases == sorted(bases) and bases[0] == 0
        assert [r.offset for r in log.read(0, max_records=100)] == list(range(60))


def test_roll_on_segment_ms_uses_record_timestamps_and_not_empty_segments(tmp_path):
    with open_topic(tmp_path, segment_ms=100) as m:
        log = m.get_log("t", 0)
        log.append([ProducerRecord(b"a", b"1", 1000)])
        log.append([ProducerRecord(b"b", b"2", 1100)])  # waited exactly 100: no roll
        assert len(log.segments) == 1
        info = log.append([ProducerRecord(b"c", b"3", 1101)])
        assert info.rolled == "segment.ms"
        assert [s.base_offset for s in log.segments] == [0, 2]
        # The new segment is empty before this append; an empty segment never time-rolls.
        assert log.active_segment.size > 0


def test_index_is_sparse_per_index_interval_bytes(tmp_path):
    # Kafka's UnifiedLogTest#testIndexResizingAtTruncation: interval 1, 10 appends -> 9 entries
    with open_topic(tmp_path, index_interval_bytes=1) as m:
        log = m.get_log("t", 0)
        append_each(log, records(10))
        assert log.active_segment.offset_index.entries == 9
        assert log.active_segment.time_index.entries == 9
    with open_topic(tmp_path / "b", index_interval_bytes=100_000) as m:
        log = m.get_log("t", 0)
        append_each(log, records(10))
        assert log.active_segment.offset_index.entries == 0


def test_active_index_preallocated_then_trimmed_on_roll_and_close(tmp_path):
    with open_topic(tmp_path, index_interval_bytes=1, segment_index_bytes=4096, segment_bytes=2000) as m:
        log = m.get_log("t", 0)
        append_each(log, records(5))
        active = log.active_segment
        assert os.path.getsize(active.offset_index.path) == 4096
        log.roll()
        assert os.path.getsize(active.offset_index.path) == 8 * active.offset_index.entries
        assert os.path.getsize(active.time_index.path) == 12 * active.time_index.entries
        append_each(log, records(3, start=5))
        path = log.active_segment.offset_index.path
    assert os.path.getsize(path) == 8 * 2  # trimmed on close: 3 appends, first never indexed


def test_close_writes_the_active_segments_largest_timestamp_as_its_final_time_index_entry(tmp_path):
    """Kafka's ``LogSegment.close``: a broker loading the folder after a clean shutdown reads a
    segment's largest timestamp from its time index alone (ListOffsets MAX_TIMESTAMP); without
    the entry it answered with an older segment's record."""
    from storage_engine.index.time_index import TimeIndex

    with open_topic(tmp_path / "one") as m:  # index.interval.bytes 4096: no entry while appending
        log = m.get_log("t", 0)
        log.append(records(3, ts=5_000))
        log.append([ProducerRecord(b"late", b"v", 9_000), ProducerRecord(b"early", b"v", 1_000)])
        path = log.active_segment.time_index.path
        assert log.active_segment.time_index.entries == 0
    index = TimeIndex(path, 0)
    assert index.entries == 1 and index.last_entry().timestamp == 9_000
    assert index.last_entry().offset in (3, 4)  # in the batch holding it, where a lookup reads from
    with open_topic(tmp_path / "empty") as m:
        m.get_log("t", 0)
    assert os.path.getsize(tmp_path / "empty" / "t-0" / "00000000000000000000.timeindex") == 0  # nothing to index


def test_roll_when_the_offset_index_is_full(tmp_path):
    with open_topic(tmp_path, index_interval_bytes=1, segment_index_bytes=24) as m:
        log = m.get_log("t", 0)
        append_each(log, records(12))
        assert len(log.segments) >= 3
        assert all(s.offset_index.entries <= 3 for s in log.segments)
        assert [r.offset for r in log.read(0, max_records=50)] == list(range(12))


def test_offset_for_timestamp(tmp_path):
    with open_topic(tmp_path, segment_bytes=600, index_interval_bytes=1) as m:
        log = m.get_log("t", 0)
        append_each(log, records(40, ts=10_000))
        assert log.offset_for_timestamp(10_017) == (10_017, 17)
        assert log.offset_for_timestamp(9_000) == (10_000, 0)
        assert log.offset_for_timestamp(99_999) is None
        assert log.offset_for_timestamp(-2) == (-1, 0)
        assert log.offset_for_timestamp(-1) == (-1, 40)
        assert log.offset_for_timestamp(-3) == (10_039, 39)


def test_compacted_topic_rejects_null_keys_and_writes_nothing(tmp_path):
    with open_topic(tmp_path, cleanup_policy="compact") as m:
        log = m.get_log("t", 0)
        with pytest.raises(InvalidRecordError, match="Compacted topic cannot accept message without key in topic partition t-0"):
            log.append([ProducerRecord(b"k", b"v"), ProducerRecord(None, b"v")])
        assert log.log_end_offset == 0 and log.active_segment.size == 0
        log.append([ProducerRecord(b"k", None)])  # a tombstone is fine
        assert log.read(0)[0].value is None


@pytest.mark.parametrize("topic_codec,producer_codec,expected", [
    ("producer", CompressionType.SNAPPY, CompressionType.SNAPPY),
    ("gzip", CompressionType.NONE, CompressionType.GZIP),
    ("uncompressed", CompressionType.ZSTD, CompressionType.NONE),
    ("lz4", CompressionType.ZSTD, CompressionType.LZ4),
])
def test_topic_compression_type(tmp_path, topic_codec, producer_codec, expected):
    with open_topic(tmp_path, compression_type=topic_codec) as m:
        log = m.get_log("t", 0)
        log.append(records(5), compression=producer_codec)
        data = log.active_segment.log_path.read_bytes()
        assert [b.header.compression for b in scan_batches(data)] == [expected]
        assert len(log.read(0)) == 5


def test_producer_built_batch_keeps_its_bytes_but_gets_offsets(tmp_path):
    from storage_engine.record import Record, encode_batch

    batch = encode_batch([Record(i, 500 + i, b"k", b"v%d" % i) for i in range(3)], base_offset=0,
                         compression=CompressionType.ZSTD, producer_id=7, producer_epoch=1, base_sequence=0)
    with open_topic(tmp_path) as m:
        log = m.get_log("t", 0)
        log.append(records(4))
        info = log.append_batch(batch)
        assert (info.first_offset, info.last_offset) == (4, 6)
        on_disk = log.active_segment.log_path.read_bytes()
        assert on_disk.endswith(batch[8:])  # only the base offset changed; the CRC still holds
        with pytest.raises(InvalidRecordError, match="should be 0"):
            from storage_engine.record import set_base_offset
            log.append_batch(set_base_offset(batch, 5))


def test_a_batch_with_a_valid_crc_over_malformed_records_is_refused(tmp_path):
    """The in-place append walks every record (Kafka's LogValidator does): a byte after the
    declared records, under a CRC recomputed to match, is refused and nothing is written."""
    import struct

    from crc32c import crc32c

    from storage_engine.errors import CorruptRecordError
    from storage_engine.record import Record, encode_batch

    batch = bytearray(encode_batch([Record(i, 500 + i, b"k", b"v") for i in range(3)], base_offset=0) + b"\x00")
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    with open_topic(tmp_path) as m:
        log = m.get_log("t", 0)
        with pytest.raises(CorruptRecordError, match="1 bytes after the declared 3 records"):
            log.append_batch(bytes(batch))
        assert log.active_segment.size == 0


def test_oversized_batch_is_rejected_before_anything_is_written(tmp_path):
    with open_topic(tmp_path, segment_bytes=500) as m:
        log = m.get_log("t", 0)
        with pytest.raises(RecordTooLargeError, match="exceeds the maximum configured segment size of 500"):
            log.append(records(1, value_size=600))
        assert log.active_segment.size == 0


def test_log_append_time_stamps_the_broker_clock(tmp_path):
    with open_topic(tmp_path, message_timestamp_type="LogAppendTime") as m:
        log = m.get_log("t", 0)
        log.append(records(3, ts=5), now=123_456)
        assert {r.timestamp for r in log.read(0)} == {123_456}


def test_delete_records_moves_the_log_start_offset_durably(tmp_path):
    with open_topic(tmp_path, segment_bytes=400) as m:
        log = m.get_log("t", 0)
        append_each(log, records(20))
        assert log.delete_records(7) == 7
        with pytest.raises(OffsetOutOfRangeError):
            log.read(3)
        assert log.read(7)[0].offset == 7
        with pytest.raises(OffsetOutOfRangeError, match="larger than the high watermark 20"):
            log.delete_records(21)
        assert log.delete_records(2) == 7  # never moves backwards
    assert read_checkpoint(tmp_path / "log-start-offset-checkpoint")[("t", 0)] == 7
    with open_topic_again(tmp_path) as m:
        assert m.get_log("t", 0).log_start_offset == 7


def open_topic_again(root):
    from storage_engine.logdir.manager import LogManager

    return LogManager([root])


def test_flush_messages_moves_the_recovery_point(tmp_path):
    with open_topic(tmp_path, flush_messages=3) as m:
        log = m.get_log("t", 0)
        append_each(log, records(2))
        assert log.recovery_point == 0
        append_each(log, records(1, start=2))
        assert log.recovery_point == 3


def test_reopen_continues_offsets_and_writes_clean_shutdown(tmp_path):
    with open_topic(tmp_path, segment_bytes=500) as m:
        append_each(m.get_log("t", 0), records(15))
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    with open_topic_again(tmp_path) as m:
        assert not (tmp_path / ".kafka_cleanshutdown").exists()  # consumed on open
        log = m.get_log("t", 0)
        assert log.log_end_offset == 15
        assert log.append(records(1)).first_offset == 15
    assert read_checkpoint(tmp_path / "recovery-point-offset-checkpoint")[("t", 0)] == 16
