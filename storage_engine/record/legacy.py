"""Magic v0 and v1 messages (Kafka's ``LegacyRecord``), read-only.

Kafka before 0.11 stored message sets: each entry is ``offset int64 | size int32`` followed by a
message ``crc uint32 | magic int8 | attributes int8 | [timestamp int64, v1 only] | key (int32
length, -1 = null) | value (int32 length, -1 = null)``. The CRC is zlib's CRC-32 over
magic..end. Brokers still read such segments (and so must we: archived logs predate v2), but
never write them, so this module only decodes.

Compression wraps a whole inner message set into the value of one wrapper message whose
attributes name the codec. Inner offsets are absolute in v0; in v1 they are relative
(0, 1, ...) and the wrapper carries the absolute offset of the *last* inner message, so
``absolute = wrapper offset - last relative + relative``. With LogAppendTime (v1) every inner
message takes the wrapper's timestamp. Nested compression is invalid.

Each shallow message is one "batch" for scanning, so the shared :class:`BatchHeader` describes
it (see that class for how the fields are filled).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

from ..errors import CorruptRecordError, UnknownCompressionError
from .compression import CompressionType, decompress
from .records import BatchHeader, RawBatch, Record

__all__ = ["parse_legacy_header", "verify_legacy", "decode_legacy", "decode_legacy_tuples"]

_V0 = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes: 18 bytes
_V1 = struct.Struct(">qiIbbq")  # + timestamp: 26 bytes
_INT32 = struct.Struct(">i")

#: Smallest message body (``size`` field) per magic: crc, magic, attributes, [timestamp], key and value lengths.
_MIN_SIZE = {0: 14, 1: 22}


def parse_legacy_header(buf: bytes | bytearray | memoryview, pos: int, magic: int) -> BatchHeader:
    """Shallow header of the legacy message at ``pos`` (26 bytes must be readable for v1, 18 for v0)."""
    if magic == 0:
        offset, size, crc, _, attrs = _V0.unpack_from(buf, pos)
        ts = -1
    else:
        offset, size, crc, _, attrs, ts = _V1.unpack_from(buf, pos)
    return BatchHeader(
        offset, size, -1, magic, crc, attrs & 0xFF, 0, ts, ts, -1, -1, -1, -1 if attrs & 0x07 else 1
    )


def _corrupt(reason: str, raw: RawBatch, path: str | None) -> CorruptRecordError:
    return CorruptRecordError(reason, path=path, position=raw.position, offset=raw.header.base_offset)


def verify_legacy(raw: RawBatch, path: str | None = None) -> None:
    """Size, CRC-32 (magic..end) and codec checks of one shallow legacy message."""
    h = raw.header
    minimum = _MIN_SIZE.get(h.magic)
    if minimum is None:
        raise _corrupt(f"Invalid magic found in record: {h.magic}", raw, path)
    if h.length < minimum:
        raise _corrupt(f"Record is corrupt (size {h.length} is smaller than the minimum {minimum} for magic {h.magic})", raw, path)
    data = raw.data
    if len(data) != h.length + 12:
        raise _corrupt(f"Record is truncated: {len(data)} bytes present of {h.length + 12} declared", raw, path)
    computed = zlib.crc32(memoryview(data)[16:])
    if computed != h.crc:
        raise _corrupt(f"Record is corrupt (stored crc = {h.crc}, computed crc = {computed})", raw, path)
    _check_codec(h.attributes & 0x07, raw, path)


def _check_codec(codec: int, raw: RawBatch, path: str | None) -> None:
    if codec > 4:
        raise UnknownCompressionError(
            f"Unknown compression type id: {codec}", path=path, position=raw.position, offset=raw.header.base_offset
        )
    if codec == CompressionType.ZSTD:
        raise _corrupt("ZStandard compression is not supported for magic < 2", raw, path)


def _key_value(
    buf: bytes, pos: int, end: int, fail: Callable[[str], CorruptRecordError]
) -> tuple[bytes | None, bytes | None]:
    """Key and value of a message whose key-length field is at ``pos`` and which ends at ``end``."""
    if pos + 4 > end:
        raise fail("key length runs past the end of the message")
    (klen,) = _INT32.unpack_from(buf, pos)
    pos += 4
    if klen == -1:
        key = None
    elif 0 <= klen <= end - pos:
        key = buf[pos : pos + klen]
        pos += klen
    else:
        raise fail(f"invalid key size {klen}")
    if pos + 4 > end:
        raise fail("value length runs past the end of the message")
    (vlen,) = _INT32.unpack_from(buf, pos)
    pos += 4
    if vlen == -1:
        value = None
    elif 0 <= vlen <= end - pos:
        value = buf[pos : pos + vlen]
        pos += vlen
    else:
        raise fail(f"invalid value size {vlen}")
    if pos != end:
        raise fail(f"{end - pos} bytes left after the value")
    return key, value


def decode_legacy_tuples(raw: RawBatch, path: str | None = None, *, verify_inner: bool = True) -> list[tuple]:
    """Records of one shallow legacy message as ``(offset, timestamp, key, value, ())`` tuples:
    the message itself, or the inner messages of a compressed wrapper."""
    h = raw.header
    magic = h.magic
    minimum = _MIN_SIZE.get(magic)
    if minimum is None:
        raise _corrupt(f"Invalid magic found in record: {magic}", raw, path)
    buf = bytes(raw.data)
    end = len(buf)
    if h.length < minimum or end != h.length + 12:
        raise _corrupt(f"Record is corrupt (size {h.length}, {end} bytes present)", raw, path)

    def fail(reason: str) -> CorruptRecordError:
        return _corrupt(f"Record is corrupt: {reason}", raw, path)

    header_size = 18 if magic == 0 else 26
    key, value = _key_value(buf, header_size, end, fail)
    codec = h.attributes & 0x07
    if codec == 0:
        return [(h.base_offset, h.max_timestamp, key, value, ())]

    _check_codec(codec, raw, path)
    if value is None:
        raise fail("value of compressed message is None")
    try:
        inner = decompress(codec, value, legacy_lz4=(magic == 0))
    except CorruptRecordError as exc:
        raise _corrupt(exc.reason, raw, path) from exc

    messages = []
    pos = 0
    n = len(inner)
    struct_ = _V0 if magic == 0 else _V1
    while pos < n:
        if pos + header_size > n:
            raise fail(f"inner message set ends inside a message header ({n - pos} bytes left)")
        fields = struct_.unpack_from(inner, pos)
        ioffset, isize, icrc, imagic, iattrs = fields[:5]
        its = fields[5] if magic == 1 else -1
        iend = pos + 12 + isize
        if isize < minimum or iend > n:
            raise fail(f"inner message at offset {ioffset} has invalid size {isize}")
        if imagic != magic:
            raise fail(f"compressed message magic {imagic} does not match wrapper magic {magic}")
        if iattrs & 0x07:
            raise fail(f"inner message at offset {ioffset} is itself compressed (double compression)")
        if verify_inner:
            computed = zlib.crc32(memoryview(inner)[pos + 16 : iend])
            if computed != icrc:
                raise fail(f"inner message at offset {ioffset} has stored crc = {icrc}, computed crc = {computed}")
        ikey, ivalue = _key_value(inner, pos + header_size, iend, fail)
        messages.append((ioffset, its, ikey, ivalue))
        pos = iend
    if not messages:
        raise fail("compressed message set is empty")

    if magic == 0:
        return [(o, -1, k, v, ()) for o, _, k, v in messages]
    base = h.base_offset - messages[-1][0]
    log_append = bool(h.attributes & 0x08)
    wrapper_ts = h.max_timestamp
    return [(base + o, wrapper_ts if log_append else t, k, v, ()) for o, t, k, v in messages]


def decode_legacy(raw: RawBatch, path: str | None = None, *, verify_inner: bool = True) -> list[Record]:
    """All records of one shallow legacy message (CRC of the outer message not checked here)."""
    return [Record(o, t, k, v) for o, t, k, v, _ in decode_legacy_tuples(raw, path, verify_inner=verify_inner)]
