"""The one header iterator and the one chunked batch iterator over segment files: they agree with
a whole-buffer scan on mixed files, stop at torn tails (including a file shorter than the end
they were given), grow their chunk past large batches and raise on impossible sizes."""

from __future__ import annotations

import os
import random
import struct

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from storage_engine.errors import CorruptRecordError
from storage_engine.record import Record, encode_batch, scan_batches
from storage_engine.record.file_records import (
    HEADER_WINDOW,
    SKIP_AT_LEAST,
    read_batch_at,
    read_batches,
    read_batches_skipping,
    read_headers,
)


def _v2(base: int, n: int, value_bytes: int, rnd: random.Random) -> bytes:
    records = [Record(base + i, 1_000 + i, b"k%d" % i, rnd.randbytes(value_bytes)) for i in range(n)]
    return encode_batch(records, base_offset=base)


def _legacy(magic: int, offset: int) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 30)
    builder.append(0, timestamp=5_000 if magic else None, key=b"old", value=b"x" * 30)
    message = bytearray(builder.build())
    struct.pack_into(">q", message, 0, offset)
    return bytes(message)


def _segment(tmp_path, seed: int) -> tuple[str, bytes]:
    """Small and large v2 batches (some larger than a header window or a read chunk) and legacy
    messages, in one file."""
    rnd = random.Random(seed)
    parts, offset = [], 0
    for _ in range(60):
        kind = rnd.random()
        if kind < 0.1:
            parts.append(_legacy(rnd.choice([0, 1]), offset))
            offset += 1
            continue
        n = rnd.randrange(1, 6)
        parts.append(_v2(offset, n, rnd.choice([10, 200, HEADER_WINDOW // 3]), rnd))
        offset += n
    data = b"".join(parts)
    path = tmp_path / f"{seed}.log"
    path.write_bytes(data)
    return str(path), data


def _open(path: str) -> int:
    return os.open(path, os.O_RDONLY)


@pytest.mark.parametrize("seed", range(4))
def test_headers_and_chunked_batches_agree_with_a_whole_buffer_scan(tmp_path, seed):
    path, data = _segment(tmp_path, seed)
    expected = [(raw.header, raw.position) for raw in scan_batches(data)]
    fd = _open(path)
    try:
        assert list(read_headers(fd, end=len(data), path=path)) == expected
        for chunk in (4096, 64 * 1024):
            got = []
            for raw, buf, offset in read_batches(fd, end=len(data), chunk=chunk, path=path):
                assert bytes(buf[offset:offset + raw.header.size_in_bytes]) == bytes(raw.data)
                got.append((raw.header, raw.position))
            assert got == expected
        header, position = expected[7]
        assert read_batch_at(fd, position, header.size_in_bytes, path).header == header
        # from a later batch on, and up to an earlier end
        assert list(read_headers(fd, start=expected[5][1], end=expected[9][1], path=path)) == expected[5:9]
    finally:
        os.close(fd)


@pytest.mark.parametrize("seed", range(4))
def test_skipping_leaves_only_large_accepted_batches_unread(tmp_path, seed):
    """``read_batches_skipping``: the same batches in the same order; the large v2 ones ``skip``
    accepts come with their header only, every other one with its bytes in its chunk."""
    path, data = _segment(tmp_path, seed)
    expected = [(raw.header, raw.position, bytes(raw.data)) for raw in scan_batches(data)]
    fd = _open(path)
    try:
        for chunk in (4096, 64 * 1024):
            got, unread = [], 0
            for raw, buf, offset in read_batches_skipping(fd, end=len(data), chunk=chunk, path=path,
                                                          skip=lambda h: h.base_offset % 2 == 1):
                h = raw.header
                if h.magic == 2 and h.size_in_bytes >= SKIP_AT_LEAST and h.base_offset % 2 == 1:
                    assert (bytes(raw.data), buf) == (b"", None)
                    unread += 1
                    got.append((h, raw.position, data[raw.position:raw.position + h.size_in_bytes]))
                else:
                    assert buf is not None and bytes(buf[offset:offset + h.size_in_bytes]) == bytes(raw.data)
                    got.append((h, raw.position, bytes(raw.data)))
            assert got == expected
            assert unread > 0
    finally:
        os.close(fd)


def test_a_torn_tail_ends_both_iterators_silently(tmp_path):
    path, data = _segment(tmp_path, 9)
    whole = [position for _, position in read_headers(_open(path), end=len(data))]
    last = whole[-1]
    torn = tmp_path / "torn.log"
    torn.write_bytes(data[:last + 70])  # the last batch cut short
    fd = _open(str(torn))
    try:
        assert [p for _, p in read_headers(fd, end=last + 70)] == whole[:-1]
        assert [raw.position for raw, _, _ in read_batches(fd, end=last + 70, chunk=4096)] == whole[:-1]
        # the file is shorter than the end the caller believes in (a truncation after a plan)
        assert [p for _, p in read_headers(fd, end=len(data))] == whole[:-1]
        assert [raw.position for raw, _, _ in read_batches(fd, end=len(data), chunk=4096)] == whole[:-1]
        skipping = read_batches_skipping(fd, end=len(data), chunk=4096, skip=lambda h: True)
        assert [raw.position for raw, _, _ in skipping] == whole[:-1]
    finally:
        os.close(fd)


def test_an_impossible_size_is_corruption_not_a_tail(tmp_path):
    batch = _v2(0, 2, 10, random.Random(1))
    bad = bytearray(batch + batch)
    struct.pack_into(">i", bad, len(batch) + 8, 5)  # the second batch declares 5 bytes
    path = tmp_path / "bad.log"
    path.write_bytes(bytes(bad))
    fd = _open(str(path))
    try:
        with pytest.raises(CorruptRecordError, match="smaller than minimum record overhead"):
            list(read_headers(fd, end=len(bad), path=str(path)))
        with pytest.raises(CorruptRecordError, match=f"position {len(batch)}"):
            list(read_batches(fd, end=len(bad), chunk=4096, path=str(path)))
    finally:
        os.close(fd)
