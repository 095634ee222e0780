"""Codec containers as Kafka writes and reads them (spec 1.6)."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_engine.errors import CorruptRecordError, UnknownCompressionError
from storage_engine.record import CompressionType
from storage_engine.record.compression import compress, decompress, xxh32

CODECS = list(CompressionType)
XERIAL_HEADER = bytes.fromhex("82534E415050590000000001 00000001".replace(" ", ""))


def sample(n: int = 100_000) -> bytes:
    words = [os.urandom(4).hex().encode() for _ in range(50)]
    out = bytearray()
    i = 0
    while len(out) < n:
        out += words[(i * 7) % 50] + b" "
        i += 1
    return bytes(out[:n])


def test_enum_ids_and_names() -> None:
    assert [int(c) for c in CODECS] == [0, 1, 2, 3, 4]
    for c in CODECS:
        assert CompressionType.from_name(c.kafka_name) is c
        assert CompressionType.from_name(c.kafka_name.upper()) is c
    assert CompressionType.from_name("uncompressed") is CompressionType.NONE
    with pytest.raises(ValueError, match="brotli"):
        CompressionType.from_name("brotli")


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_ids(codec_id: int) -> None:
    with pytest.raises(UnknownCompressionError, match=f"Unknown compression type id: {codec_id}"):
        CompressionType.from_id(codec_id)
    with pytest.raises(UnknownCompressionError):
        decompress(codec_id, b"whatever")
    with pytest.raises(UnknownCompressionError):
        compress(codec_id, b"whatever")


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("size", [0, 1, 1000, 32 * 1024, 32 * 1024 + 1, 200_000])
def test_round_trip(codec: CompressionType, size: int) -> None:
    data = sample(size)
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    if codec is not CompressionType.NONE and size >= 1000:
        assert len(packed) < len(data)


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(CODECS), st.binary(max_size=5000), st.sampled_from([None, 1, 3]))
def test_round_trip_any_bytes(codec: CompressionType, data: bytes, level: int | None) -> None:
    assert decompress(codec, compress(codec, data, level)) == data


def test_levels_are_checked_against_kafka_ranges() -> None:
    assert decompress(CompressionType.GZIP, compress(CompressionType.GZIP, b"x" * 100, 9)) == b"x" * 100
    assert decompress(CompressionType.LZ4, compress(CompressionType.LZ4, b"x" * 100, 17)) == b"x" * 100
    with pytest.raises(ValueError):
        compress(CompressionType.GZIP, b"x", 10)
    with pytest.raises(ValueError):
        compress(CompressionType.ZSTD, b"x", 23)


# --- gzip ------------------------------------------------------------------------------------


def test_gzip_writes_one_rfc1952_member_and_reads_concatenated_members() -> None:
    packed = compress(CompressionType.GZIP, b"hello")
    assert packed[:4] == b"\x1f\x8b\x08\x00" and packed[4:8] == b"\0\0\0\0"  # no name, mtime 0
    assert gzip.decompress(packed) == b"hello"
    both = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(CompressionType.GZIP, both) == b"first second"


def test_gzip_truncated_and_trailing_garbage_are_corrupt() -> None:
    packed = gzip.compress(sample(5000))
    with pytest.raises(CorruptRecordError, match="gzip"):
        decompress(CompressionType.GZIP, packed[:-10])
    with pytest.raises(CorruptRecordError, match="gzip"):
        decompress(CompressionType.GZIP, packed + b"junk")


# --- snappy ----------------------------------------------------------------------------------


def test_snappy_writes_xerial_framing_with_32k_chunks() -> None:
    data = sample(70_000)
    packed = compress(CompressionType.SNAPPY, data)
    assert packed[:16] == XERIAL_HEADER
    pos, chunks = 16, []
    while pos < len(packed):
        (n,) = struct.unpack_from(">i", packed, pos)
        chunks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert [len(c) for c in chunks] == [32768, 32768, 70_000 - 65536]
    assert b"".join(chunks) == data


def test_snappy_reads_raw_unframed_blocks() -> None:
    # What sarama and other non-Java producers write (spec 1.7): one raw block, no header.
    data = sample(10_000)
    assert decompress(CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data


def test_snappy_reads_a_second_header_mid_stream() -> None:
    a, b = sample(40_000), b"tail" * 100
    both = compress(CompressionType.SNAPPY, a) + compress(CompressionType.SNAPPY, b)
    assert decompress(CompressionType.SNAPPY, both) == a + b


def test_snappy_corrupt_streams() -> None:
    packed = compress(CompressionType.SNAPPY, sample(10_000))
    with pytest.raises(CorruptRecordError, match="snappy"):
        decompress(CompressionType.SNAPPY, packed[:-3])  # block shorter than its length
    with pytest.raises(CorruptRecordError, match="snappy"):
        decompress(CompressionType.SNAPPY, packed[:18])  # truncated block length
    with pytest.raises(CorruptRecordError, match="snappy"):
        decompress(CompressionType.SNAPPY, XERIAL_HEADER + struct.pack(">i", 5) + b"\xff\xff\xff\xff\xff")
    with pytest.raises(CorruptRecordError, match="snappy"):
        decompress(CompressionType.SNAPPY, XERIAL_HEADER[:12])


# --- lz4 -------------------------------------------------------------------------------------


def test_lz4_frame_layout_is_kafkas() -> None:
    packed = compress(CompressionType.LZ4, sample(200_000))
    # magic, FLG 0x60 (v1, independent blocks, no checksums, no size), BD 0x40 (64 KiB), HC 0x82
    assert packed[:7] == bytes.fromhex("04224D18604082")
    assert packed[-4:] == b"\0\0\0\0"  # end mark, no content checksum


def test_lz4_reads_other_frame_options() -> None:
    data = sample(300_000)
    # sarama's style (spec 1.7): content checksum on, 4 MiB blocks; plus linked blocks and size.
    other = lz4.frame.compress(
        data, block_size=lz4.frame.BLOCKSIZE_MAX4MB, content_checksum=True, block_linked=True, store_size=True
    )
    assert other[4:6] != b"\x60\x40"
    assert decompress(CompressionType.LZ4, other) == data
    assert decompress(CompressionType.LZ4, other + lz4.frame.compress(b"more")) == data + b"more"


def test_lz4_corrupt_streams() -> None:
    packed = compress(CompressionType.LZ4, sample(10_000))
    with pytest.raises(CorruptRecordError, match="lz4"):
        decompress(CompressionType.LZ4, packed[:-6])
    with pytest.raises(CorruptRecordError, match="lz4"):
        decompress(CompressionType.LZ4, packed + b"junk")
    bad_hc = packed[:6] + bytes([packed[6] ^ 0xFF]) + packed[7:]
    with pytest.raises(CorruptRecordError, match="lz4"):
        decompress(CompressionType.LZ4, bad_hc)


def test_xxh32_vectors_and_kafka_header_checksum() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    assert (xxh32(b"\x60\x40") >> 8) & 0xFF == 0x82  # spec 1.6
    # lz4 itself is an independent oracle for descriptors with a content size (10 bytes).
    framed = lz4.frame.compress(b"x" * 1000, store_size=True)
    assert framed[4] & 0x08
    assert (xxh32(framed[4:14]) >> 8) & 0xFF == framed[14]


def test_legacy_magic0_lz4_broken_header_checksum_is_ignored() -> None:
    data = sample(5000)
    packed = bytearray(compress(CompressionType.LZ4, data))
    packed[6] = (xxh32(bytes(packed[0:6])) >> 8) & 0xFF  # Kafka 0.8's checksum over magic+FLG+BD
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.LZ4, bytes(packed))
    assert decompress(CompressionType.LZ4, bytes(packed), legacy_lz4=True) == data


# --- zstd ------------------------------------------------------------------------------------


def test_zstd_reads_streamed_frames_without_content_size_and_concatenated_frames() -> None:
    data = sample(100_000)
    cobj = zstandard.ZstdCompressor(level=3).compressobj()
    streamed = cobj.compress(data) + cobj.flush()
    with pytest.raises(zstandard.ZstdError):
        zstandard.ZstdDecompressor().decompress(streamed)  # the one-shot API cannot
    assert decompress(CompressionType.ZSTD, streamed) == data
    assert decompress(CompressionType.ZSTD, streamed + compress(CompressionType.ZSTD, b"!")) == data + b"!"


def test_zstd_corrupt_streams() -> None:
    packed = compress(CompressionType.ZSTD, sample(10_000))
    with pytest.raises(CorruptRecordError, match="zstd"):
        decompress(CompressionType.ZSTD, packed[:-5])
    with pytest.raises(CorruptRecordError, match="zstd"):
        decompress(CompressionType.ZSTD, packed + b"junk")
