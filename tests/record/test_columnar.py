"""batches_to_arrow agrees with decode_batch, filters offsets and skips control batches."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_engine.errors import CorruptRecordError
from storage_engine.record import (
    CompressionType,
    RawBatch,
    Record,
    TimestampType,
    decode_batch,
    encode_batch,
    scan_batches,
)
from storage_engine.record.columnar import ARROW_SCHEMA, batches_to_arrow


def expected_rows(raws: list[RawBatch], lo: int = 0, hi: int | None = None) -> list[dict]:
    rows = []
    for raw in raws:
        if raw.header.is_control:
            continue
        for r in decode_batch(raw):
            if lo <= r.offset and (hi is None or r.offset < hi):
                rows.append(
                    {
                        "key": r.key,
                        "value": r.value,
                        "offset": r.offset,
                        "timestamp": r.timestamp,
                        "timestampType": int(raw.header.timestamp_type),
                        "headers": [{"key": k, "value": v} for k, v in r.headers],
                    }
                )
    return rows


def test_schema() -> None:
    assert ARROW_SCHEMA.names == ["key", "value", "offset", "timestamp", "timestampType", "headers"]
    assert ARROW_SCHEMA.field("key").type == pa.binary() and ARROW_SCHEMA.field("value").type == pa.binary()
    assert ARROW_SCHEMA.field("offset").type == pa.int64() and ARROW_SCHEMA.field("timestamp").type == pa.int64()
    assert ARROW_SCHEMA.field("timestampType").type == pa.int32()
    headers = ARROW_SCHEMA.field("headers").type
    assert pa.types.is_list(headers)
    assert headers.value_type == pa.struct([("key", pa.string()), ("value", pa.binary())])


def test_empty_input() -> None:
    out = batches_to_arrow([])
    assert out.num_rows == 0 and out.schema == ARROW_SCHEMA


def mixed_log() -> bytes:
    parts = [
        encode_batch([Record(0, 10, b"a", b"1"), Record(1, 11, None, None, (("h", b"v"), ("n", None)))], base_offset=0),
        encode_batch(
            [Record(2, 12, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 0))],
            base_offset=2, is_control=True, is_transactional=True, producer_id=1, producer_epoch=0,
        ),
        encode_batch(
            [Record(3, 5, b"c", b"3"), Record(5, 6, b"d", b"4")], base_offset=3, compression=CompressionType.ZSTD,
            timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=999,
        ),
        encode_batch([Record(o, 20 + o, b"k%d" % o, b"v") for o in range(6, 12)], base_offset=6, compression=CompressionType.GZIP),
    ]
    return b"".join(parts)


def test_control_batches_skipped_and_fields_match() -> None:
    raws = list(scan_batches(mixed_log()))
    out = batches_to_arrow(raws)
    assert out.schema == ARROW_SCHEMA
    assert 2 not in out.column("offset").to_pylist()
    assert out.to_pylist() == expected_rows(raws)
    assert out.column("timestamp").to_pylist()[2:4] == [999, 999]
    assert out.column("timestampType").to_pylist()[:4] == [0, 0, 1, 1]
    assert out.column("headers").to_pylist()[1] == [{"key": "h", "value": b"v"}, {"key": "n", "value": None}]


@pytest.mark.parametrize("lo,hi", [(0, None), (1, None), (4, 9), (5, 6), (3, 3), (12, None), (0, 1), (7, 100)])
def test_offset_filtering(lo: int, hi: int | None) -> None:
    raws = list(scan_batches(mixed_log()))
    out = batches_to_arrow(raws, min_offset=lo, max_offset=hi)
    assert out.to_pylist() == expected_rows(raws, lo, hi)
    assert all(lo <= o and (hi is None or o < hi) for o in out.column("offset").to_pylist())


def test_batches_outside_the_range_are_not_even_decoded() -> None:
    good = encode_batch([Record(10, 1, b"k", b"v")], base_offset=10)
    broken = bytearray(encode_batch([Record(0, 1, b"k", b"v")], base_offset=0))
    broken[-3] ^= 0xFF  # corrupt, but below min_offset
    raws = list(scan_batches(bytes(broken) + good))
    assert batches_to_arrow(raws, min_offset=10).column("offset").to_pylist() == [10]
    with pytest.raises(CorruptRecordError):
        batches_to_arrow(raws)


record_st = st.tuples(
    st.integers(1, 300),
    st.integers(0, 10**6),
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=400)),
    st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))), max_size=2).map(tuple),
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.lists(record_st, min_size=1, max_size=20), st.sampled_from(list(CompressionType)), st.booleans()), min_size=1, max_size=5),
    st.integers(0, 3000),
    st.one_of(st.none(), st.integers(0, 6000)),
)
def test_random_batches_match_decode_batch(batches, lo: int, hi: int | None) -> None:
    parts, offset = [], 0
    for specs, codec, log_append in batches:
        base = offset
        recs = []
        for gap, ts, key, value, headers in specs:
            recs.append(Record(offset, ts, key, value, headers))
            offset += gap
        parts.append(
            encode_batch(
                recs, base_offset=base, compression=codec, max_timestamp=123 if log_append else None,
                timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
            )
        )
    raws = list(scan_batches(b"".join(parts)))
    assert batches_to_arrow(raws).to_pylist() == expected_rows(raws)
    assert batches_to_arrow(raws, min_offset=lo, max_offset=hi).to_pylist() == expected_rows(raws, lo, hi)


def fixture_logs(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith((".log", ".log.swap", ".log.deleted")))


def test_fixtures_match_decode_batch(real_kafka: Path) -> None:
    files = fixture_logs(real_kafka)
    assert files
    total = 0
    for path in files:
        raws = list(scan_batches(path.read_bytes(), path=str(path)))
        out = batches_to_arrow(raws, path=str(path))
        assert out.to_pylist() == expected_rows(raws), path
        total += out.num_rows
    assert total > 50_000
