"""Magic v2 batches: the worked byte examples of spec 1.7, header semantics, round trips."""

from __future__ import annotations

import dataclasses
import struct

import cramjam
import lz4.frame
import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_engine.record import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    CompressionType,
    RawBatch,
    Record,
    TimestampType,
    decode_batch,
    encode_batch,
    encode_empty_batch,
    scan_batches,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    verify_batch,
)
from storage_engine.record.v2 import record_header_value, timestamp_deltas, walk_records

H = bytes.fromhex

# Spec 1.7 (a): sarama's record_test.go vectors.
SARAMA_EMPTY = H(
    "0000000000000000" "00000031" "00000000" "02" "595FB7DD" "0000" "00000000"
    "0000000000000000" "0000000000000000" "0000000000000000" "0000" "00000000" "00000000"
)
SARAMA_RECORD_BYTES = H("28000A00080102030406050607020608090A040B0C")
# Spec 1.7 (b): Kafka-default fields, two records.
KAFKA_DEFAULT = H(
    "0000000000000000 00000045 00000000 02 54568cd1 0000 00000001"
    "00000000000003e8 00000000000003e9 ffffffffffffffff ffff ffffffff 00000002"
    "14 00 00 00 04 6b30 04 7630 00"
    "10 00 02 02 04 6b31 01 00".replace(" ", "")
)

EMPTY_KW = dict(
    base_offset=0,
    last_offset_delta=0,
    max_timestamp=0,
    producer_id=0,
    producer_epoch=0,
    base_sequence=0,
    partition_leader_epoch=0,
    is_transactional=False,
    is_control=False,
    timestamp_type=TimestampType.CREATE_TIME,
)


def one(data: bytes, path: str = "mem.log") -> tuple[RawBatch, list[Record]]:
    (raw,) = list(scan_batches(data, path=path))
    return raw, decode_batch(raw, path=path)


def test_constants() -> None:
    assert (RECORD_BATCH_OVERHEAD, LOG_OVERHEAD, HEADER_SIZE_UP_TO_MAGIC) == (61, 12, 17)


def test_crc32c_vector() -> None:
    assert crc32c(b"Some String") == 608512271  # spec 1.2


def test_kafka_default_example_byte_for_byte() -> None:
    records = [Record(0, 1000, b"k0", b"v0"), Record(1, 1001, b"k1", None)]
    assert encode_batch(records, base_offset=0, partition_leader_epoch=0) == KAFKA_DEFAULT
    raw, decoded = one(KAFKA_DEFAULT)
    assert decoded == records
    h = raw.header
    assert (h.base_offset, h.length, h.partition_leader_epoch, h.magic, h.crc) == (0, 69, 0, 2, 0x54568CD1)
    assert (h.last_offset_delta, h.base_timestamp, h.max_timestamp, h.records_count) == (1, 1000, 1001, 2)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (-1, -1, -1)
    assert h.size_in_bytes == 81 and h.last_offset == 1 and h.next_offset == 2
    assert not h.has_producer_id and h.last_sequence == -1


def test_sarama_empty_batches_byte_for_byte() -> None:
    assert encode_empty_batch(**EMPTY_KW, base_timestamp=0) == SARAMA_EMPTY
    control = encode_empty_batch(**{**EMPTY_KW, "is_control": True}, base_timestamp=0)
    assert control[17:21] == H("512E43D9") and control[21:23] == H("0020")
    for data in (SARAMA_EMPTY, control):
        raw, decoded = one(data)
        assert decoded == [] and raw.header.records_count == 0
    assert one(control)[0].header.is_control


def test_sarama_one_record_byte_for_byte() -> None:
    record = Record(0, 1479847795000 + 5, H("01020304"), H("050607"), (("\x08\x09\x0a", H("0B0C")),))
    kw = dict(
        base_offset=0, partition_leader_epoch=0, producer_id=0, producer_epoch=0, base_sequence=0,
        max_timestamp=0, base_timestamp=1479847795000,
    )
    data = encode_batch([record], **kw)
    assert len(data) == 82 and data[8:12] == struct.pack(">i", 70)
    assert data[17:21] == H("547961FD")
    assert data[27:35] == H("0000 0158 8DCD 5938".replace(" ", ""))
    assert data[61:] == SARAMA_RECORD_BYTES
    assert one(data)[1] == [record]


def _with_payload(data: bytes, attributes: int, payload: bytes) -> bytes:
    """Replace a batch's records with ``payload`` under ``attributes`` and fix length and CRC."""
    out = bytearray(data[:61] + payload)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, attributes)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def test_sarama_style_raw_snappy_and_lz4_decode() -> None:
    record = Record(0, 1479847795005, H("01020304"), H("050607"), (("\x08\x09\x0a", H("0B0C")),))
    plain = encode_batch([record], base_offset=0, base_timestamp=1479847795000)
    raw_snappy = _with_payload(plain, 2, bytes(cramjam.snappy.compress_raw(SARAMA_RECORD_BYTES)))
    assert one(raw_snappy)[1] == [record]
    c = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB, content_checksum=True, block_linked=False)
    sarama_lz4 = c.begin() + c.compress(SARAMA_RECORD_BYTES) + c.flush()
    assert sarama_lz4[:6] == H("04224D186470")  # FLG 0x64, BD 0x70 as in spec 1.7
    assert one(_with_payload(plain, 3, sarama_lz4))[1] == [record]


# --- header semantics --------------------------------------------------------------------------


def test_header_flags_and_producer_fields() -> None:
    recs = [Record(100, 5000, b"a", b"1"), Record(103, 4000, None, None)]
    data = encode_batch(
        recs, base_offset=100, compression=CompressionType.GZIP, producer_id=42, producer_epoch=3,
        base_sequence=2147483646, partition_leader_epoch=7, is_transactional=True,
    )
    raw, decoded = one(data)
    h = raw.header
    assert decoded == recs
    assert h.compression is CompressionType.GZIP and h.timestamp_type is TimestampType.CREATE_TIME
    assert h.is_transactional and not h.is_control and not h.has_delete_horizon and h.delete_horizon_ms is None
    assert h.has_producer_id and (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, 2147483646)
    assert h.last_offset_delta == 3 and h.last_sequence == 1  # wraps past Int.MAX like Kafka
    assert h.base_timestamp == 5000 and h.max_timestamp == 5000  # second record is older: negative delta
    assert h.partition_leader_epoch == 7 and h.records_count == 2


def test_delete_horizon_and_original_last_offset_delta() -> None:
    recs = [Record(10, 1_000, b"k", None), Record(12, 2_000, b"j", b"v")]
    data = encode_batch(recs, base_offset=10, delete_horizon_ms=9_000, last_offset_delta=5)
    raw, decoded = one(data)
    h = raw.header
    assert decoded == recs  # deltas relative to the horizon are negative and still exact
    assert h.has_delete_horizon and h.delete_horizon_ms == 9_000 and h.attributes & 0x40
    assert h.base_timestamp == 9_000 and h.max_timestamp == 2_000
    assert h.last_offset_delta == 5 and h.last_offset == 15 and h.next_offset == 16


def test_empty_batch_is_kafkas_write_empty_header() -> None:
    data = encode_empty_batch(
        base_offset=50, last_offset_delta=9, max_timestamp=1234, producer_id=7, producer_epoch=1,
        base_sequence=20, partition_leader_epoch=3, is_transactional=True, is_control=False,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
    )
    assert len(data) == 61
    raw, decoded = one(data)
    h = raw.header
    assert decoded == [] and h.records_count == 0 and h.base_timestamp == -1 and h.max_timestamp == 1234
    assert h.compression is CompressionType.NONE and not h.has_delete_horizon
    assert h.timestamp_type is TimestampType.LOG_APPEND_TIME and h.is_transactional
    assert (h.base_offset, h.last_offset, h.producer_id, h.producer_epoch, h.base_sequence) == (50, 59, 7, 1, 20)


def test_log_append_time_sets_every_record_timestamp() -> None:
    recs = [Record(0, 10, b"a", b"x"), Record(1, 20, b"b", b"y")]
    stamped = set_log_append_time(encode_batch(recs, base_offset=0, compression=CompressionType.LZ4), 99_999)
    raw, decoded = one(stamped)
    verify_batch(raw)  # CRC recomputed
    assert raw.header.timestamp_type is TimestampType.LOG_APPEND_TIME and raw.header.max_timestamp == 99_999
    assert [r.timestamp for r in decoded] == [99_999, 99_999]
    assert [(r.offset, r.key, r.value) for r in decoded] == [(0, b"a", b"x"), (1, b"b", b"y")]
    direct = encode_batch(recs, base_offset=0, timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=5)
    assert [r.timestamp for r in one(direct)[1]] == [5, 5]


def test_base_offset_and_leader_epoch_patches_keep_the_crc() -> None:
    recs = [Record(0, 1, b"a", b"b"), Record(1, 2, None, b"c")]
    data = encode_batch(recs, base_offset=0)
    moved = set_partition_leader_epoch(set_base_offset(data, 1_000_000), 17)
    assert moved[16:] == data[16:] or moved[17:21] == data[17:21]
    raw, decoded = one(moved)
    verify_batch(raw)
    assert raw.header.partition_leader_epoch == 17 and raw.header.base_offset == 1_000_000
    assert [r.offset for r in decoded] == [1_000_000, 1_000_001]
    with pytest.raises(ValueError):
        set_log_append_time(data[:40], 1)


def test_control_batches_decode_normally() -> None:
    marker = Record(5, 77, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 12))  # COMMIT
    data = encode_batch([marker], base_offset=5, is_control=True, is_transactional=True, producer_id=9, producer_epoch=0)
    raw, decoded = one(data)
    assert raw.header.is_control and decoded == [marker]


def test_encode_rejects_what_kafka_rejects() -> None:
    with pytest.raises(ValueError):
        encode_batch([], base_offset=0)
    with pytest.raises(ValueError, match="increase"):
        encode_batch([Record(1, 0, b"", b""), Record(1, 0, b"", b"")], base_offset=0)
    with pytest.raises(ValueError):
        encode_batch([Record(0, 0, b"", b"")], base_offset=1)
    with pytest.raises(ValueError, match="timestamp"):
        encode_batch([Record(0, -5, b"", b"")], base_offset=0)
    with pytest.raises(ValueError, match="null header key"):
        encode_batch([Record(0, 0, b"", b"", ((None, b""),))], base_offset=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="last_offset_delta"):
        encode_batch([Record(0, 0, b"", b""), Record(3, 0, b"", b"")], base_offset=0, last_offset_delta=2)


def test_batch_header_is_a_plain_dataclass_and_record_is_frozen() -> None:
    assert [f.name for f in dataclasses.fields(BatchHeader)] == [
        "base_offset", "length", "partition_leader_epoch", "magic", "crc", "attributes", "last_offset_delta",
        "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "records_count",
    ]
    r = Record(1, 2, b"k", None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.offset = 5  # type: ignore[misc]
    assert r == Record(1, 2, b"k", None, ()) and hash(r) == hash(Record(1, 2, b"k", None))
    assert dataclasses.replace(r, value=b"v").value == b"v"


# --- scanning ----------------------------------------------------------------------------------


def test_scan_positions_start_end_and_memoryviews() -> None:
    a = encode_batch([Record(0, 1, b"a", b"1")], base_offset=0)
    b = encode_batch([Record(1, 2, b"b", b"2"), Record(2, 3, b"c", b"3")], base_offset=1)
    c = encode_empty_batch(**{**EMPTY_KW, "base_offset": 3})
    buf = b"JUNK" + a + b + c
    raws = list(scan_batches(buf, start=4, path="f.log", base_position=1000))
    assert [r.position for r in raws] == [1004, 1004 + len(a), 1004 + len(a) + len(b)]
    assert [bytes(r.data) for r in raws] == [a, b, c]
    assert [r.header.base_offset for r in raws] == [0, 1, 3]
    assert len(list(scan_batches(buf, start=4, end=4 + len(a) + len(b)))) == 2
    assert len(list(scan_batches(bytearray(buf), start=4, end=4 + len(a) + 20))) == 1  # partial tail


# --- round trips -------------------------------------------------------------------------------

header_st = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20)))
record_st = st.tuples(
    st.integers(1, 5000),  # offset gap
    st.integers(-(2**40), 2**40),  # timestamp delta (varlong range, negative allowed)
    st.one_of(st.none(), st.binary(max_size=300)),
    st.one_of(st.none(), st.binary(max_size=9000)),
    st.lists(header_st, max_size=3).map(tuple),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(record_st, min_size=1, max_size=40),
    st.sampled_from(list(CompressionType)),
    st.integers(0, 2**62),
    st.integers(0, 2**41),
)
def test_round_trip(specs, codec: CompressionType, base_offset: int, first_ts: int) -> None:
    records, offset = [], base_offset
    for gap, ts_delta, key, value, headers in specs:
        records.append(Record(offset, max(0, first_ts + ts_delta), key, value, headers))
        offset += gap
    data = encode_batch(records, base_offset=base_offset, compression=codec)
    raw, decoded = one(data)
    verify_batch(raw)
    assert decoded == records
    assert all(type(r) is Record for r in decoded)  # genuine frozen Records, not decoder drafts
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded[0].value = b"changed"  # type: ignore[misc]
    assert raw.header.records_count == len(records)
    assert raw.header.last_offset == records[-1].offset
    assert raw.header.max_timestamp == max(r.timestamp for r in records)
    assert raw.header.compression is codec


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=8)), st.one_of(st.none(), st.binary(max_size=8)),
                          st.lists(st.tuples(st.sampled_from(["ver", "v", "other", "é"]),
                                             st.one_of(st.none(), st.binary(max_size=9))), max_size=4)),
                min_size=1, max_size=6))
def test_record_header_value_agrees_with_the_decoder(records):
    """What a compaction strategy reads of a record (the last header of a name) is what the
    decoder reads, on the record spans the cleaner walks."""
    batch = encode_batch([Record(i, 1000 + i, k, v, tuple(h)) for i, (k, v, h) in enumerate(records)], base_offset=0)
    raw = next(scan_batches(batch))
    decoded = decode_batch(raw)
    buf = bytes(raw.data)
    spans = walk_records(buf, raw.header.records_count, RECORD_BATCH_OVERHEAD, len(buf))
    for (start, end, *_), record in zip(spans, decoded, strict=False):
        for name in ("ver", "v", "other", "é", "absent"):
            values = [value for key, value in record.headers if key == name]
            assert record_header_value(buf, start, end, name.encode()) == (values[-1] if values else None)


def test_timestamp_deltas_read_what_the_decoder_reads() -> None:
    """The append's timestamp-only walk agrees with the full decode on deltas of every varint
    width (one byte, two, the checked decoder's longer ones, negative), and refuses what
    ``walk_records`` refuses: a record running past the batch, bytes after the last one."""
    stamps = [1_000, 1_001, 1_070, 40_000, -1, 1_000 + (1 << 40), 0, 999]
    batch = encode_batch([Record(i, ts, b"k%d" % i, b"v" * i) for i, ts in enumerate(stamps)], base_offset=0)
    raw = next(scan_batches(batch))
    buf = bytes(raw.data)
    deltas, last = timestamp_deltas(buf, len(stamps), RECORD_BATCH_OVERHEAD, len(buf))
    assert [raw.header.base_timestamp + d for d in deltas] == [r.timestamp for r in decode_batch(raw)] == stamps
    assert last == walk_records(buf, len(stamps), RECORD_BATCH_OVERHEAD, len(buf))[-1][0]
    with pytest.raises(ValueError, match="runs past the batch"):
        timestamp_deltas(buf[:-1], len(stamps), RECORD_BATCH_OVERHEAD, len(buf) - 1)
    with pytest.raises(ValueError, match="bytes after the declared 7 records"):
        timestamp_deltas(buf, len(stamps) - 1, RECORD_BATCH_OVERHEAD, len(buf))
