"""Interop with an independent implementation, kafka-python 3.0.12, for every codec, both ways.

kafka-python is used only here and in bench/ as an oracle. Its snappy support needs the
``python-snappy`` module, which is not a dependency of this project; when it is missing, its
``kafka.codec`` module is given a two-function stand-in (raw snappy block compress/decompress
from cramjam). Everything else (xerial framing, chunking, batch container, CRC) is still
kafka-python's own code, so the test still checks our container against theirs.
"""

from __future__ import annotations

import struct

import kafka.codec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from storage_engine.record import (
    CompressionType,
    Record,
    TimestampType,
    decode_batch,
    encode_batch,
    scan_batches,
    set_base_offset,
    verify_batch,
)
from tests.helpers.kafka_oracle import kafka_python_codecs  # noqa: F401  (autouse fixture)

CODECS = list(CompressionType)




def require(codec: CompressionType) -> None:
    available = {
        CompressionType.NONE: lambda: True,
        CompressionType.GZIP: kafka.codec.has_gzip,
        CompressionType.SNAPPY: kafka.codec.has_snappy,
        CompressionType.LZ4: kafka.codec.has_lz4,
        CompressionType.ZSTD: kafka.codec.has_zstd,
    }[codec]
    if not available():
        pytest.skip(f"kafka-python has no {codec.kafka_name} codec in this environment")


def sample_records(n: int = 200, base: int = 0, ts: int = 1_700_000_000_000) -> list[Record]:
    out = []
    for i in range(n):
        key = None if i % 17 == 5 else b"key-%d" % (i % 23)
        value = None if i % 13 == 7 else (b"value %d " % i) * (1 + i % 5)
        headers = (("trace", b"%d" % i), ("empty", b""), ("none", None)) if i % 4 == 0 else ()
        out.append(Record(base + i * 2, ts + (i * 37) % 1000 - 300, key, value, headers))
    return out


def theirs_build(records: list[Record], codec: CompressionType, base_offset: int, **producer) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=producer.get("is_transactional", False),
        producer_id=producer.get("producer_id", -1),
        producer_epoch=producer.get("producer_epoch", -1),
        base_sequence=producer.get("base_sequence", -1),
        batch_size=1 << 30,
    )
    for r in records:
        assert builder.append(r.offset - base_offset, r.timestamp, r.key, r.value, list(r.headers)) is not None
    data = bytes(builder.build())
    assert data[22] & 0x07 == int(codec), "kafka-python fell back to no compression; use more compressible data"
    return set_base_offset(data, base_offset)


def as_tuples(records) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in records]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_decode_identically(codec: CompressionType) -> None:
    require(codec)
    records = sample_records(base=5000)
    data = theirs_build(records, codec, 5000, producer_id=77, producer_epoch=2, base_sequence=10, is_transactional=True)
    (raw,) = list(scan_batches(data, path="kp.log"))
    verify_batch(raw, path="kp.log")
    assert as_tuples(decode_batch(raw, path="kp.log")) == as_tuples(records)
    h, kp = raw.header, DefaultRecordBatch(data)
    assert h.compression is codec and h.compression == kp.compression_type
    assert (h.base_offset, h.last_offset, h.records_count) == (kp.base_offset, kp.last_offset, kp.records_count)
    assert (h.base_timestamp, h.max_timestamp) == (kp.first_timestamp, kp.max_timestamp)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (77, 2, 10) and h.is_transactional


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_decode_in_kafka_python(codec: CompressionType) -> None:
    require(codec)
    records = sample_records(base=1 << 40)
    data = encode_batch(
        records, base_offset=1 << 40, compression=codec, producer_id=5, producer_epoch=1, base_sequence=0,
        partition_leader_epoch=3,
    )
    kp = DefaultRecordBatch(data)
    assert kp.validate_crc()
    assert kp.compression_type == int(codec) and kp.magic == 2 and kp.leader_epoch == 3
    assert (kp.base_offset, kp.last_offset, kp.records_count) == (1 << 40, records[-1].offset, len(records))
    assert (kp.producer_id, kp.producer_epoch, kp.base_sequence) == (5, 1, 0)
    assert kp.max_timestamp == max(r.timestamp for r in records) and kp.timestamp_type == 0
    assert as_tuples(kp) == as_tuples(records)


@pytest.mark.parametrize("codec", CODECS)
def test_memory_records_both_ways(codec: CompressionType) -> None:
    """A whole segment-like buffer: kafka-python's MemoryRecordsBuilder output read by us, and a
    buffer of several of our batches (with a LogAppendTime one) read by MemoryRecords."""
    require(codec)
    builder = MemoryRecordsBuilder(magic=2, compression_type=int(codec), batch_size=1 << 30, offset=0)
    expected = []
    for i in range(50):
        value = b"payload %03d " % i * 10
        builder.append(timestamp=1000 + i, key=b"k%d" % (i % 7), value=value, headers=[("h", b"%d" % i)])
        expected.append((i, 1000 + i, b"k%d" % (i % 7), value, (("h", b"%d" % i),)))
    builder.close()
    got = [r for raw in scan_batches(builder.buffer()) for r in decode_batch(raw)]
    assert as_tuples(got) == expected

    ours = b"".join(
        [
            encode_batch(sample_records(30, base=0), base_offset=0, compression=codec),
            encode_batch(
                sample_records(10, base=100), base_offset=100, compression=codec,
                timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=424242,
            ),
        ]
    )
    batches = list(MemoryRecords(ours))
    assert len(batches) == 2 and all(b.validate_crc() for b in batches)
    assert as_tuples(batches[0]) == as_tuples(sample_records(30, base=0))
    assert batches[1].timestamp_type == 1
    assert [(r.offset, r.timestamp) for r in batches[1]] == [(r.offset, 424242) for r in sample_records(10, base=100)]


record_st = st.tuples(
    st.integers(1, 3000),
    st.integers(-(10**9), 10**9),
    st.one_of(st.none(), st.binary(max_size=64)),
    st.one_of(st.none(), st.binary(max_size=2000)),
    st.lists(st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=10))), max_size=2),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(record_st, min_size=1, max_size=30), st.sampled_from(CODECS), st.integers(0, 2**50))
def test_random_batches_both_ways(specs, codec: CompressionType, base_offset: int) -> None:
    require(codec)
    records, offset = [], base_offset
    for gap, ts, key, value, headers in specs:
        records.append(Record(offset, 10**12 + ts, key, value, tuple(headers)))
        offset += gap
    ours = encode_batch(records, base_offset=base_offset, compression=codec)
    kp = DefaultRecordBatch(ours)
    assert kp.validate_crc() and as_tuples(kp) == as_tuples(records)

    # kafka-python skips compression when it does not pay off; we read whatever it wrote.
    builder = DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 30)
    for r in records:
        builder.append(r.offset - base_offset, r.timestamp, r.key, r.value, list(r.headers))
    theirs = set_base_offset(bytes(builder.build()), base_offset)
    (raw,) = list(scan_batches(theirs))
    assert as_tuples(decode_batch(raw)) == as_tuples(records)


def test_control_batch_from_us_is_a_control_record_in_kafka_python() -> None:
    commit = Record(9, 5, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 3))
    data = encode_batch([commit], base_offset=9, is_control=True, is_transactional=True, producer_id=1, producer_epoch=0)
    kp = DefaultRecordBatch(data)
    assert kp.validate_crc() and kp.is_control_batch and kp.is_transactional
    (rec,) = list(kp)
    assert rec.commit and rec.offset == 9
