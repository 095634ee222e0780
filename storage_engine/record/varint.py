"""Zigzag varints and varlongs, the variable-length integers of the v2 record format.

Kafka (``ByteUtils``) zigzag-encodes a signed value, ``(v << 1) ^ (v >> 31)`` for an int32 and
``(v << 1) ^ (v >> 63)`` for an int64, so small magnitudes of either sign take one byte, then
writes it as unsigned LEB128: seven bits per byte, least significant group first, the high bit
meaning "another byte follows". A varint is at most 5 bytes and a varlong at most 10; a longer
encoding is corrupt data, never a bigger number, so the decoders reject it instead of reading on.

The decoders take ``(buffer, position)`` and return ``(value, next_position)`` so the record
decoder can walk one ``bytes`` object without slicing. They are the general, checked path; the
record decoder inlines the one-byte case (the common one for attribute, delta and length fields)
and calls these only when the continuation bit is set.
"""

from __future__ import annotations

__all__ = [
    "VarintError",
    "encode_varint",
    "encode_varlong",
    "encode_unsigned_varint",
    "decode_varint",
    "decode_varlong",
    "decode_unsigned_varint",
    "size_of_varint",
    "size_of_varlong",
]

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


class VarintError(ValueError):
    """Malformed varint: too many continuation bytes, or the buffer ends inside it.

    A ``ValueError`` rather than a storage-engine error because this module knows nothing about
    files or batches; the record decoder turns it into a ``CorruptRecordError`` that names them.
    """


def _leb128(u: int) -> bytes:
    """Unsigned LEB128 of a non-negative integer."""
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag varint of an int32 (1..5 bytes). Values outside int32 are a caller bug: ValueError."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint value {value} outside int32 range")
    return _leb128(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """Zigzag varlong of an int64 (1..10 bytes). Values outside int64: ValueError."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong value {value} outside int64 range")
    return _leb128(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def encode_unsigned_varint(value: int) -> bytes:
    """Unsigned varint (no zigzag) of a uint32; a negative int32 is written as its two's complement."""
    if not _INT32_MIN <= value <= 0xFFFFFFFF:
        raise ValueError(f"unsigned varint value {value} outside 32 bits")
    return _leb128(value & 0xFFFFFFFF)


def size_of_varint(value: int) -> int:
    """Bytes :func:`encode_varint` writes for ``value``."""
    u = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    return (max(u.bit_length(), 1) + 6) // 7


def size_of_varlong(value: int) -> int:
    """Bytes :func:`encode_varlong` writes for ``value``."""
    u = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    return (max(u.bit_length(), 1) + 6) // 7


def _read_leb128(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int, kind: str) -> tuple[int, int]:
    """Unsigned LEB128 of at most ``max_bytes`` bytes at ``pos``: ``(raw value, next position)``."""
    result = 0
    shift = 0
    n = len(buf)
    for _ in range(max_bytes):
        if pos >= n:
            raise VarintError(f"buffer ends inside a {kind}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise VarintError(f"illegal {kind}: more than {max_bytes} bytes")


def decode_unsigned_varint(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes; returns ``(uint32 value, next position)``.

    Like Kafka's ``readUnsignedVarint``, bits above 32 in the fifth byte are dropped (Java's int
    shift overflows) and a fifth byte with the continuation bit set is "illegal varint".
    """
    u, pos = _read_leb128(buf, pos, 5, "varint")
    return u & 0xFFFFFFFF, pos


def decode_varint(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Read a zigzag varint (int32, at most 5 bytes); returns ``(value, next position)``."""
    u, pos = decode_unsigned_varint(buf, pos)
    return (u >> 1) ^ -(u & 1), pos


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Read a zigzag varlong (int64, at most 10 bytes); returns ``(value, next position)``.

    A tenth byte with the continuation bit set is "illegal varlong" (Kafka's ``readVarlong``);
    bits beyond 64 wrap away as they do in Java.
    """
    u, pos = _read_leb128(buf, pos, 10, "varlong")
    u &= 0xFFFFFFFFFFFFFFFF
    return (u >> 1) ^ -(u & 1), pos
