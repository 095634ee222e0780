"""Corrupt input: every failure names file, position and offset; nothing wrong is ever decoded."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_engine.errors import CorruptRecordError, UnknownCompressionError
from storage_engine.record import (
    CompressionType,
    Record,
    decode_batch,
    encode_batch,
    scan_batches,
    verify_batch,
)

PATH = "/logs/topic-0/00000000000000000100.log"
CODECS = list(CompressionType)


def records(base: int, n: int = 20) -> list[Record]:
    return [
        Record(base + i, 1_600_000_000_000 + i, b"key-%d" % i, (b"value-%d " % i) * (i % 4 + 1), (("h", b"x"),) if i % 5 == 0 else ())
        for i in range(n)
    ]


def segment(codec: CompressionType = CompressionType.NONE) -> tuple[bytes, bytes, bytes]:
    """A leading batch (offsets 100..119) and the batch under test (offsets 120..139)."""
    first = encode_batch(records(100), base_offset=100, compression=codec)
    second = encode_batch(records(120), base_offset=120, compression=codec)
    return first, second, first + second


def decode_all(buf: bytes, *, verify: bool = True) -> list[Record]:
    return [r for raw in scan_batches(buf, path=PATH, base_position=4096) for r in decode_batch(raw, verify=verify, path=PATH)]


def recrc(batch: bytes | bytearray) -> bytes:
    out = bytearray(batch)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def assert_located(exc: pytest.ExceptionInfo, position: int, offset: int) -> None:
    msg = str(exc.value)
    assert PATH in msg and f"position {position}" in msg and f"offset {offset}" in msg, msg
    assert (exc.value.path, exc.value.position, exc.value.offset) == (PATH, position, offset)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("where", [21, 23, 30, 45, 57, 61, -1])
def test_flipped_byte_in_crc_region_is_reported_with_location(codec: CompressionType, where: int) -> None:
    first, second, _ = segment(codec)
    bad = bytearray(second)
    bad[where] ^= 0x10
    buf = first + bytes(bad)
    raws = list(scan_batches(buf, path=PATH, base_position=4096))
    verify_batch(raws[0], path=PATH)
    with pytest.raises(CorruptRecordError, match=r"crc") as exc:
        verify_batch(raws[1], path=PATH)
    assert_located(exc, 4096 + len(first), 120)
    with pytest.raises(CorruptRecordError) as exc:
        decode_all(buf)
    assert_located(exc, 4096 + len(first), 120)


def test_flipped_crc_field_itself() -> None:
    _, second, _ = segment()
    bad = bytearray(second)
    bad[18] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="stored crc"):
        decode_all(bytes(bad))


def test_truncated_tail_ends_the_scan_silently() -> None:
    first, second, buf = segment(CompressionType.GZIP)
    for cut in (1, 12, 17, 60, len(second) - 1):
        got = list(scan_batches(buf[: len(first) + cut], path=PATH))
        assert [r.header.base_offset for r in got] == [100]
    assert decode_all(buf[: len(first) + 30]) == records(100)
    assert decode_all(buf[:16]) == []


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("delta,message", [(+1, "premature EOF"), (-1, "records still remaining"), (+100, "premature EOF")])
def test_wrong_records_count(codec: CompressionType, delta: int, message: str) -> None:
    first, second, _ = segment(codec)
    bad = bytearray(second)
    struct.pack_into(">i", bad, 57, 20 + delta)
    buf = first + recrc(bad)  # a valid CRC: it is the count check that must fail
    raws = list(scan_batches(buf, path=PATH, base_position=4096))
    verify_batch(raws[1], path=PATH)
    with pytest.raises(CorruptRecordError, match=message) as exc:
        decode_batch(raws[1], path=PATH)
    assert_located(exc, 4096 + len(first), 120)


def test_negative_records_count() -> None:
    _, second, _ = segment()
    bad = bytearray(second)
    struct.pack_into(">i", bad, 57, -3)
    with pytest.raises(CorruptRecordError, match="invalid record count -3"):
        decode_all(recrc(bad))


@pytest.mark.parametrize("codec_id", [5, 6, 7])
@pytest.mark.parametrize("verify", [True, False])
def test_unknown_codec_ids(codec_id: int, verify: bool) -> None:
    first, second, _ = segment(CompressionType.NONE)
    bad = bytearray(second)
    bad[22] = (bad[22] & ~0x07) | codec_id
    buf = first + recrc(bad)
    with pytest.raises(UnknownCompressionError, match=f"Unknown compression type id: {codec_id}") as exc:
        decode_all(buf, verify=verify)
    assert_located(exc, 4096 + len(first), 120)


@pytest.mark.parametrize("length", [-1, 0, 13])
def test_length_below_minimum_overhead(length: int) -> None:
    first, second, _ = segment()
    bad = bytearray(second)
    struct.pack_into(">i", bad, 8, length)
    with pytest.raises(CorruptRecordError, match=rf"Found record size {length} smaller than minimum record overhead \(14\)") as exc:
        list(scan_batches(first + bytes(bad), path=PATH, base_position=4096))
    assert_located(exc, 4096 + len(first), 120)


def test_v2_batch_shorter_than_61_and_bad_magic() -> None:
    _, second, _ = segment()
    short = bytearray(second)
    struct.pack_into(">i", short, 8, 30)
    with pytest.raises(CorruptRecordError, match="minimum allowed overhead 61"):
        list(scan_batches(bytes(short), path=PATH))
    magic = bytearray(second)
    magic[16] = 3
    with pytest.raises(CorruptRecordError, match="Invalid magic found in record: 3") as exc:
        list(scan_batches(bytes(magic), path=PATH))
    assert exc.value.offset == 120


def test_record_level_structure_is_checked_even_with_a_valid_crc() -> None:
    batch = bytearray(encode_batch([Record(0, 5, b"abc", b"defg")], base_offset=0))
    # record: len 0x1A (13) | attr | tsDelta | offDelta | keyLen 06 "abc" | valueLen 08 "defg" | headers 00
    assert batch[61:] == bytes.fromhex("1A 00 00 00 06 616263 08 64656667 00".replace(" ", ""))
    cases = {
        "longer declared length": (61, 0x1C, "Invalid record size"),
        "shorter declared length": (61, 0x18, "Invalid record size"),
        "key runs past the record": (65, 0x26, "Invalid record size"),
        "key length -2": (65, 0x03, "Invalid key size -2"),
        "negative header count": (74, 0x01, "invalid number of record headers -1"),
        "header count beyond the record": (74, 0x7E, "Invalid record size|number of record headers"),
        "offset delta beyond lastOffsetDelta": (64, 0x02, "outside 0..0"),
    }
    for _name, (pos, byte, message) in cases.items():
        bad = bytearray(batch)
        bad[pos] = byte
        with pytest.raises(CorruptRecordError, match=message):
            decode_all(recrc(bad))
    bad = bytearray(batch)
    bad[61:62] = b"\xff\xff\xff\xff\xff\x01"  # a varint longer than 5 bytes
    struct.pack_into(">i", bad, 8, len(bad) - 12)
    with pytest.raises(CorruptRecordError, match="illegal varint|record structure"):
        decode_all(recrc(bad))


def test_invalid_utf8_header_key() -> None:
    batch = bytearray(encode_batch([Record(0, 5, None, None, (("ab", None),))], base_offset=0))
    i = batch.index(b"ab")
    batch[i] = 0xFF
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        decode_all(recrc(batch))


# --- properties --------------------------------------------------------------------------------

VALID = {codec: segment(codec) for codec in CODECS}


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(CODECS), st.data())
def test_random_corruption_never_yields_different_records(codec: CompressionType, data) -> None:
    """Flip bytes anywhere from the length field on (baseOffset, bytes 0-7, is by Kafka's design
    not covered by the CRC: the broker rewrites it in place). The result is an error, or the
    original records, or nothing (a length pushed past the end reads as a partial tail)."""
    first, second, _ = VALID[codec]
    flips = data.draw(st.lists(st.tuples(st.integers(8, len(second) - 1), st.integers(1, 255)), min_size=1, max_size=4))
    bad = bytearray(second)
    for pos, mask in flips:
        bad[pos] ^= mask
    try:
        got = decode_all(first + bytes(bad))
    except CorruptRecordError as exc:
        assert exc.path == PATH and exc.position is not None
        return
    assert got in (records(100) + records(120), records(100))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CODECS), st.data())
def test_decoder_only_ever_raises_corrupt_record_error(codec: CompressionType, data) -> None:
    """Structural fuzzing behind a *valid* CRC (recomputed after mutating): the record decoder
    must reject bad structure with CorruptRecordError, never crash with another exception, and a
    batch it accepts has exactly ``recordsCount`` records."""
    _, second, _ = VALID[codec]
    bad = bytearray(second)
    for pos, value in data.draw(st.lists(st.tuples(st.integers(21, len(bad) - 1), st.integers(0, 255)), min_size=1, max_size=6)):
        bad[pos] = value
    if data.draw(st.booleans()):
        cut = data.draw(st.integers(61, len(bad)))
        del bad[cut:]
        struct.pack_into(">i", bad, 8, len(bad) - 12)
    try:
        raws = list(scan_batches(recrc(bad), path=PATH))
        for raw in raws:
            got = decode_batch(raw, path=PATH)
            assert len(got) == raw.header.records_count
    except CorruptRecordError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 3000))
def test_every_prefix_scans_to_a_prefix_of_the_batches(cut: int) -> None:
    first, second, buf = VALID[CompressionType.LZ4]
    buf = buf + encode_batch(records(140, 3), base_offset=140)
    got = [raw.header.base_offset for raw in scan_batches(buf[:cut])]
    ends = [len(first), len(first) + len(second), len(buf)]
    assert got == [100, 120, 140][: sum(1 for e in ends if e <= cut)]
