"""Compression codecs of Kafka record batches, at the byte level Kafka's own streams use.

A compressed v2 batch keeps its 61-byte header in the clear and stores the concatenated
records (bytes 61..end) as one stream of the codec named by attribute bits 0-2; a compressed
legacy (v0/v1) wrapper message stores an inner message set as its value. Kafka writes and
reads those streams with particular Java libraries, so compatibility is about the container
each one produces and accepts, not about identical compressed bytes:

* gzip: an RFC 1952 member (``GZIPOutputStream``); readers accept concatenated members.
* snappy: xerial ``SnappyOutputStream`` framing, a 16-byte header then ``int32 length +
  raw snappy block`` per <= 32 KiB of input. ``SnappyInputStream`` also accepts a second
  header mid-stream (concatenated streams) and, when the magic is absent, decodes the whole
  input as one raw block, which is what some non-Java clients (sarama) write.
* lz4: a standard LZ4 frame with independent 64 KiB blocks and no content checksum or content
  size, as ``Lz4BlockOutputStream`` writes; Kafka rejects linked blocks, so we never write them.
* zstd: standard zstd frames, read by a streaming decoder, so frames without a content size
  (what zstd-jni's stream writes) and concatenated frames work.

Decoding is strict where strictness costs nothing: a truncated stream or bytes after the last
frame/member are reported as corruption instead of silently yielding fewer records.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

from ..errors import CorruptRecordError, UnknownCompressionError

__all__ = ["CompressionType", "compress", "decompress", "xxh32"]


class CompressionType(IntEnum):
    """Codec ids of attribute bits 0-2 (``CompressionType.java``); 5..7 are unassigned."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def kafka_name(self) -> str:
        """The name Kafka configs and tools use: ``none``, ``gzip``, ``snappy``, ``lz4``, ``zstd``."""
        return self.name.lower()

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """Parse a codec name as Kafka configs spell it (``uncompressed`` is an alias of ``none``)."""
        key = name.strip().lower()
        if key == "uncompressed":
            return cls.NONE
        try:
            return cls[key.upper()]
        except KeyError:
            raise ValueError(
                f"Unknown compression name {name!r}: expected one of none, gzip, snappy, lz4, zstd"
            ) from None

    @classmethod
    def from_id(cls, codec_id: int) -> CompressionType:
        """Codec for an attribute id; ids 5..7 raise :class:`UnknownCompressionError` (Kafka's
        "Unknown compression type id"), which callers re-raise with the batch's location."""
        try:
            return cls(codec_id)
        except ValueError:
            raise UnknownCompressionError(f"Unknown compression type id: {codec_id}") from None


# Level ranges Kafka accepts (``GzipCompression``/``Lz4Compression``/``ZstdCompression``).
_LEVELS = {
    CompressionType.GZIP: (1, 9),
    CompressionType.LZ4: (1, 17),
    CompressionType.ZSTD: (-131072, 22),
}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
_XERIAL_MAGIC_HEAD = _XERIAL_MAGIC[:4]
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")
_LZ4_MAGIC = b"\x04\x22\x4d\x18"

_snappy_compress_raw = cramjam.snappy.compress_raw
_snappy_decompress_raw = cramjam.snappy.decompress_raw


def _check_level(codec: CompressionType, level: int | None) -> None:
    if level is None or codec not in _LEVELS:
        return
    lo, hi = _LEVELS[codec]
    if not (lo <= level <= hi or (codec is CompressionType.GZIP and level == -1)):
        raise ValueError(f"Invalid {codec.kafka_name} compression level {level}: allowed {lo}..{hi}")


_GZIP_OS_BYTE = 9  # RFC 1952: ID1 ID2 CM FLG MTIME(4) XFL OS


def compress(codec: CompressionType | int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress ``data`` into the stream Kafka writes for ``codec`` (``NONE`` returns it as bytes).

    ``level`` follows Kafka's per-codec ``compression.<codec>.level`` ranges; None is Kafka's
    default (gzip -1 i.e. zlib 6, lz4 fast mode, zstd 3).
    """
    codec = CompressionType.from_id(int(codec))
    _check_level(codec, level)
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        # wbits 31: a gzip member with mtime 0 and no name, deterministic like the JDK's header;
        # its OS byte is the JDK's too (255, "unknown", since JDK 16), not zlib's 3 (Unix), so a
        # batch Kafka's cleaner and ours rebuild compresses to the same bytes.
        c = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, 31)
        member = bytearray(c.compress(data) + c.flush())
        member[_GZIP_OS_BYTE] = 0xFF
        return bytes(member)
    if codec is CompressionType.SNAPPY:
        view = memoryview(data)
        parts = [_XERIAL_HEADER]
        for i in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(_snappy_compress_raw(view[i : i + _XERIAL_BLOCK]))
            parts.append(_INT32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec is CompressionType.LZ4:
        # lz4-java's default level 9 is its fast compressor; python-lz4 levels >= 3 use HC.
        lz4_level = 0 if level is None or level <= 9 else min(level, 16)
        return lz4.frame.compress(
            data,
            compression_level=lz4_level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    # ZSTD, framed as Kafka's ZstdOutputStream writes it: the size not pledged (no content size
    # in the frame header, the window of an unknown size), the data flushed as blocks, then the
    # end of the frame as an empty last block; so Kafka's cleaner and ours write the same bytes.
    stream = zstandard.ZstdCompressor(level=3 if level is None else level).compressobj()
    return (stream.compress(data) + stream.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
            + stream.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))


def decompress(codec: CompressionType | int, data: bytes | bytearray | memoryview, *, legacy_lz4: bool = False) -> bytes:
    """Decompress one batch payload. Raises :class:`CorruptRecordError` (without a location: the
    caller adds file, position and offset) for any malformed, truncated or over-long stream.

    ``legacy_lz4``: the payload comes from a magic-0 message, whose LZ4 frame header checksum
    Kafka 0.8/0.9 computed wrongly; like Kafka we ignore that byte (by recomputing it).
    """
    codec = CompressionType.from_id(int(codec))
    try:
        if codec is CompressionType.NONE:
            return bytes(data)
        if codec is CompressionType.GZIP:
            return _gunzip(data)
        if codec is CompressionType.SNAPPY:
            return _unsnappy(data)
        if codec is CompressionType.LZ4:
            if legacy_lz4:
                data = _fix_lz4_header_checksum(bytes(data))
            return _unlz4(data)
        return _unzstd(data)
    except CorruptRecordError:
        raise
    except Exception as exc:  # zlib.error, cramjam/lz4/zstd errors, struct errors
        raise CorruptRecordError(f"Invalid {codec.kafka_name} compressed data: {exc}") from exc


def _gunzip(data: bytes | bytearray | memoryview) -> bytes:
    out = []
    rest = data
    while True:
        d = zlib.decompressobj(31)
        out.append(d.decompress(rest))
        if not d.eof:
            raise CorruptRecordError("Invalid gzip compressed data: stream is truncated")
        rest = d.unused_data
        if not rest:
            return out[0] if len(out) == 1 else b"".join(out)


def _unsnappy(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(_snappy_decompress_raw(view))
    n = len(view)
    if n < 16:
        raise CorruptRecordError("Invalid snappy compressed data: xerial header is truncated")
    pos = 16
    out = []
    while pos < n:
        if view[pos : pos + 4] == _XERIAL_MAGIC_HEAD:
            # A second xerial header: concatenated SnappyOutputStream output.
            if pos + 16 > n or view[pos : pos + 8] != _XERIAL_MAGIC:
                raise CorruptRecordError("Invalid snappy compressed data: bad xerial header inside the stream")
            pos += 16
            continue
        if pos + 4 > n:
            raise CorruptRecordError("Invalid snappy compressed data: truncated block length")
        (size,) = _INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > n:
            raise CorruptRecordError(f"Invalid snappy compressed data: block length {size} exceeds the stream")
        out.append(_snappy_decompress_raw(view[pos : pos + size]))
        pos += size
    if len(out) == 1:
        return bytes(out[0])
    return b"".join(out)


def _unlz4(data: bytes | bytearray | memoryview) -> bytes:
    out = []
    rest = bytes(data)
    while True:
        d = lz4.frame.LZ4FrameDecompressor()
        out.append(d.decompress(rest))
        if not d.eof:
            raise CorruptRecordError("Invalid lz4 compressed data: frame is truncated")
        rest = d.unused_data
        if not rest:
            return out[0] if len(out) == 1 else b"".join(out)
        if rest[:4] != _LZ4_MAGIC:
            raise CorruptRecordError(f"Invalid lz4 compressed data: {len(rest)} bytes after the end of the frame")


def _unzstd(data: bytes | bytearray | memoryview) -> bytes:
    out = []
    rest = data
    dctx = zstandard.ZstdDecompressor()
    while True:
        d = dctx.decompressobj()
        out.append(d.decompress(rest))
        if not d.eof:
            raise CorruptRecordError("Invalid zstd compressed data: frame is truncated")
        rest = d.unused_data
        if not rest:
            return out[0] if len(out) == 1 else b"".join(out)


# --- xxHash32, only to repair the LZ4 header checksum of magic-0 messages -------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of ``data`` (pure Python; used on a handful of bytes, never on payloads)."""
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while i + 16 <= n:
            a, b, c, d = struct.unpack_from("<4I", data, i)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + k * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def _fix_lz4_header_checksum(frame: bytes) -> bytes:
    """Replace the frame-descriptor checksum byte with the correct one (see ``decompress``)."""
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        return frame
    flg = frame[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)  # content size, dict id
    if len(frame) <= end:
        return frame
    hc = (xxh32(frame[4:end]) >> 8) & 0xFF
    return frame[:end] + bytes((hc,)) + frame[end + 1 :]
