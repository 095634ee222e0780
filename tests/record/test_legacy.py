"""Magic v0/v1 message sets built by kafka-python's LegacyRecordBatchBuilder, read by us."""

from __future__ import annotations

import struct
import zlib

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from storage_engine.errors import CorruptRecordError, UnknownCompressionError
from storage_engine.record import (
    CompressionType,
    TimestampType,
    decode_batch,
    scan_batches,
    set_base_offset,
    set_partition_leader_epoch,
    verify_batch,
)
from storage_engine.record.compression import compress, xxh32
from tests.helpers.kafka_oracle import kafka_python_codecs  # noqa: F401  (autouse fixture)

MESSAGES = [
    (b"k0", b"v0"),
    (None, b"no key"),
    (b"k2", None),
    (b"", b""),
    (b"k4", b"x" * 3000),
]


def build(magic: int, codec: int, offsets: list[int], timestamps: list[int]) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
    for (key, value), off, ts in zip(MESSAGES, offsets, timestamps, strict=False):
        assert builder.append(off, timestamp=ts, key=key, value=value) is not None
    return bytes(builder.build())


def read(data: bytes, path: str = "legacy.log"):
    raws = list(scan_batches(data, path=path))
    for raw in raws:
        verify_batch(raw, path=path)
    return raws, [r for raw in raws for r in decode_batch(raw, path=path)]


def restamp(message: bytes, *, attributes: int | None = None, timestamp: int | None = None) -> bytes:
    """Change a v1 message's attributes/timestamp and recompute its CRC (magic..end)."""
    out = bytearray(message)
    if attributes is not None:
        out[17] = attributes
    if timestamp is not None:
        struct.pack_into(">q", out, 18, timestamp)
    struct.pack_into(">I", out, 12, zlib.crc32(bytes(out[16:])))
    return bytes(out)


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_message_sets(magic: int) -> None:
    offsets = [10, 11, 12, 13, 14]
    timestamps = [1000, 999, 5000, 0, 1234]
    raws, records = read(build(magic, 0, offsets, timestamps))
    assert len(raws) == 5  # every legacy message is its own shallow "batch"
    assert [(r.offset, r.key, r.value, r.headers) for r in records] == [
        (o, k, v, ()) for o, (k, v) in zip(offsets, MESSAGES, strict=False)
    ]
    expected_ts = timestamps if magic == 1 else [-1] * 5
    assert [r.timestamp for r in records] == expected_ts
    for raw, o, ts in zip(raws, offsets, expected_ts, strict=False):
        h = raw.header
        assert (h.magic, h.base_offset, h.last_offset, h.next_offset, h.records_count) == (magic, o, o, o + 1, 1)
        assert (h.max_timestamp, h.producer_id, h.producer_epoch, h.base_sequence) == (ts, -1, -1, -1)
        assert h.partition_leader_epoch == -1 and not h.is_control and not h.is_transactional
        assert h.compression is CompressionType.NONE and h.crc == zlib.crc32(bytes(raw.data[16:]))
        assert h.timestamp_type is (TimestampType.CREATE_TIME if magic == 1 else TimestampType.NO_TIMESTAMP_TYPE)


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4])
def test_v1_compressed_wrapper_relative_offsets(codec: CompressionType) -> None:
    timestamps = [1000, 2000, 1500, 3000, 2500]
    wrapper = build(1, int(codec), [0, 1, 2, 3, 4], timestamps)  # relative inner offsets
    wrapper = set_base_offset(wrapper, 104)  # the broker sets the wrapper offset to the last inner offset
    raws, records = read(wrapper)
    assert len(raws) == 1 and raws[0].header.compression is codec
    assert raws[0].header.records_count == -1 and raws[0].header.last_offset == 104
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (100 + i, ts, k, v) for i, (ts, (k, v)) in enumerate(zip(timestamps, MESSAGES, strict=False))
    ]


def test_v1_compressed_wrapper_with_log_append_time() -> None:
    wrapper = set_base_offset(build(1, 1, [0, 1, 2, 3, 4], [1, 2, 3, 4, 5]), 4)
    stamped = restamp(wrapper, attributes=0x08 | 0x01, timestamp=777_777)
    raws, records = read(stamped)
    assert raws[0].header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert raws[0].header.max_timestamp == 777_777
    assert [r.timestamp for r in records] == [777_777] * 5 and [r.offset for r in records] == [0, 1, 2, 3, 4]


def test_v0_gzip_wrapper_absolute_offsets() -> None:
    offsets = [50, 51, 52, 53, 54]
    wrapper = set_base_offset(build(0, 1, offsets, [0] * 5), 54)
    raws, records = read(wrapper)
    assert [r.offset for r in records] == offsets and all(r.timestamp == -1 for r in records)
    assert [(r.key, r.value) for r in records] == MESSAGES


def test_v0_lz4_wrapper_with_kafka_08_header_checksum() -> None:
    """Kafka 0.8/0.9 computed the LZ4 frame header checksum over magic+FLG+BD; readers ignore it."""
    inner = build(0, 0, [7, 8, 9, 10, 11], [0] * 5)
    frame = bytearray(compress(CompressionType.LZ4, inner))
    frame[6] = (xxh32(bytes(frame[0:6])) >> 8) & 0xFF
    body = struct.pack(">bb", 0, 3) + struct.pack(">i", -1) + struct.pack(">i", len(frame)) + bytes(frame)
    message = struct.pack(">qiI", 11, 4 + len(body), zlib.crc32(body)) + body
    raws, records = read(message)
    assert [r.offset for r in records] == [7, 8, 9, 10, 11]
    assert [(r.key, r.value) for r in records] == MESSAGES


def test_legacy_corruption_and_codec_errors() -> None:
    data = bytearray(build(1, 0, [0, 1, 2, 3, 4], [1, 2, 3, 4, 5]))
    data[30] ^= 0x01  # inside the first message's key
    raws = list(scan_batches(bytes(data), path="old.log"))
    with pytest.raises(CorruptRecordError, match=r"crc.*file old.log, position 0, offset 0"):
        verify_batch(raws[0], path="old.log")
    for raw in raws[1:]:
        verify_batch(raw, path="old.log")

    message = build(1, 0, [0], [1])  # one message
    with pytest.raises(UnknownCompressionError, match="id: 6"):
        verify_batch(next(scan_batches(restamp(message, attributes=6))), path="old.log")
    zstd_wrapped = restamp(message, attributes=4)
    with pytest.raises(CorruptRecordError, match="ZStandard"):
        verify_batch(next(scan_batches(zstd_wrapped)))
    with pytest.raises(CorruptRecordError):
        decode_batch(next(scan_batches(restamp(message, attributes=1))))  # "gzip" value is not gzip
    with pytest.raises(ValueError):
        set_partition_leader_epoch(message, 3)  # legacy messages keep their CRC there


def test_legacy_structure_is_checked_without_crc() -> None:
    message = bytearray(build(1, 0, [0], [1]))
    struct.pack_into(">i", message, 26, 500)  # key length beyond the message
    with pytest.raises(CorruptRecordError, match="key size"):
        decode_batch(next(scan_batches(bytes(message))), verify=False)
