"""Zigzag varints/varlongs against Kafka's ByteUtilsTest vectors (spec 1.4) and round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage_engine.record.varint import (
    VarintError,
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    size_of_varint,
    size_of_varlong,
)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# (value, hex) from clients/src/test/java/org/apache/kafka/common/utils/ByteUtilsTest.java, as listed in spec 1.4
VARINT_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7E"),
    (-64, "7F"),
    (64, "80 01"),
    (-65, "81 01"),
    (8191, "FE 7F"),
    (-8192, "FF 7F"),
    (8192, "80 80 01"),
    (1048576, "80 80 80 01"),
    (134217728, "80 80 80 80 01"),
    (INT32_MAX, "FE FF FF FF 0F"),
    (INT32_MIN, "FF FF FF FF 0F"),
]
VARLONG_VECTORS = [
    (17179869184, "80 80 80 80 80 01"),
    (-17179869185, "81 80 80 80 80 01"),
]


@pytest.mark.parametrize("value,hexstr", VARINT_VECTORS)
def test_varint_vectors(value: int, hexstr: str) -> None:
    encoded = bytes.fromhex(hexstr)
    assert encode_varint(value) == encoded
    assert decode_varint(encoded) == (value, len(encoded))
    assert size_of_varint(value) == len(encoded)
    # Every varint vector is also a valid varlong encoding of the same value.
    assert encode_varlong(value) == encoded
    assert decode_varlong(encoded) == (value, len(encoded))


@pytest.mark.parametrize("value,hexstr", VARLONG_VECTORS)
def test_varlong_vectors(value: int, hexstr: str) -> None:
    encoded = bytes.fromhex(hexstr)
    assert encode_varlong(value) == encoded
    assert decode_varlong(encoded) == (value, len(encoded))
    assert size_of_varlong(value) == len(encoded)
    with pytest.raises(ValueError):
        encode_varint(value)  # does not fit an int32


def test_unsigned_varint_vector() -> None:
    assert encode_unsigned_varint(-1) == bytes.fromhex("FF FF FF FF 0F")
    assert decode_unsigned_varint(bytes.fromhex("FF FF FF FF 0F")) == (0xFFFFFFFF, 5)


def test_decode_at_position_returns_next_position() -> None:
    buf = b"\xaa" + encode_varint(300) + encode_varlong(-5)
    value, pos = decode_varint(buf, 1)
    assert value == 300
    assert decode_varlong(buf, pos) == (-5, len(buf))


def test_illegal_fifth_varint_byte() -> None:
    # A fifth byte with the continuation bit set is "illegal varint", not a longer number.
    with pytest.raises(VarintError, match="illegal varint"):
        decode_varint(bytes.fromhex("FF FF FF FF 8F 01"))
    with pytest.raises(VarintError):
        decode_unsigned_varint(bytes.fromhex("80 80 80 80 80 00"))


def test_illegal_tenth_varlong_byte() -> None:
    with pytest.raises(VarintError, match="illegal varlong"):
        decode_varlong(bytes.fromhex("FF FF FF FF FF FF FF FF FF 81 01"))
    # Ten bytes whose last one ends the number are fine (INT64_MIN is one of them).
    assert decode_varlong(encode_varlong(INT64_MIN)) == (INT64_MIN, 10)


def test_truncated_varints() -> None:
    with pytest.raises(VarintError):
        decode_varint(b"\x80\x80")
    with pytest.raises(VarintError):
        decode_varlong(b"")


def test_out_of_range_encode_rejected() -> None:
    with pytest.raises(ValueError):
        encode_varint(INT32_MAX + 1)
    with pytest.raises(ValueError):
        encode_varlong(INT64_MIN - 1)


@given(st.integers(INT32_MIN, INT32_MAX))
def test_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert 1 <= len(encoded) <= 5 and len(encoded) == size_of_varint(value)
    assert decode_varint(encoded + b"\x99") == (value, len(encoded))


@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert 1 <= len(encoded) <= 10 and len(encoded) == size_of_varlong(value)
    assert decode_varlong(b"\x00" + encoded, 1) == (value, 1 + len(encoded))


@given(st.binary(min_size=0, max_size=12))
def test_decoding_arbitrary_bytes_never_misreads(data: bytes) -> None:
    """Any input either decodes to a value whose encoding is a prefix-consistent varint, or raises."""
    try:
        value, pos = decode_varlong(data)
    except VarintError:
        return
    assert INT64_MIN <= value <= INT64_MAX
    assert 1 <= pos <= 10 and data[pos - 1] < 0x80
