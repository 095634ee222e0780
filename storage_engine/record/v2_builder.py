"""Building magic v2 record batches (Kafka's ``DefaultRecordBatch`` written by a producer or a
broker): encoding records and headers, the attributes, an empty batch header, and the in-place
header updates a broker makes on append (base offset, partition leader epoch, log append
time). The layout and the decoder are in ``v2``.

``encode_batch`` has a compiled twin (``native/src/encode.rs``, used when the switch
:mod:`storage_engine.native` selects the compiled core) that writes the same bytes; this module
stays the definition of the rules and the errors, and compressed batches go through the one
codec call here (``_assemble``) under both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

from crc32c import crc32c

from .. import native
from ..errors import LogError
from .compression import CompressionType, compress
from .records import Record, TimestampType
from .v2 import (
    _ATTR_CONTROL,
    _ATTR_TIMESTAMP_TYPE,
    _ATTR_TRANSACTIONAL,
    _ENC,
    _INT32,
    _INT32_MAX,
    _INT64,
    _UINT32,
    ATTR_DELETE_HORIZON,
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEAD_STRUCT,
    MAX_TIMESTAMP_OFFSET,
    RECORD_BATCH_OVERHEAD,
    TAIL_STRUCT,
)
from .varint import encode_varint, encode_varlong


def _encode_headers(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    parts = [encode_varint(len(headers))]
    for hkey, hval in headers:
        if hkey is None:
            raise ValueError("Invalid null header key found in headers")
        kb = hkey.encode("utf-8")
        parts.append(encode_varint(len(kb)))
        parts.append(kb)
        if hval is None:
            parts.append(b"\x01")
        else:
            parts.append(encode_varint(len(hval)))
            parts.append(hval)
    return b"".join(parts)


def _attributes(
    compression: int,
    timestamp_type: TimestampType,
    is_transactional: bool,
    is_control: bool,
    delete_horizon: bool,
) -> int:
    if timestamp_type not in (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME):
        raise ValueError(f"Invalid timestamp type {timestamp_type!r} for a v2 batch")
    attrs = int(compression)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attrs |= _ATTR_TIMESTAMP_TYPE
    if is_transactional:
        attrs |= _ATTR_TRANSACTIONAL
    if is_control:
        attrs |= _ATTR_CONTROL
    if delete_horizon:
        attrs |= ATTR_DELETE_HORIZON
    return attrs


def assemble_batch(
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
    payload: bytes,
) -> bytes:
    """Header + payload (records bytes, already compressed if the attributes name a codec) with
    the CRC-32C computed over everything from the attributes on; the one place a v2 batch
    header is written."""
    length = 49 + len(payload)
    if length > _INT32_MAX:
        raise ValueError(f"Record batch of {length + 12} bytes does not fit the int32 batchLength field")
    tail = TAIL_STRUCT.pack(
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    crc = crc32c(payload, crc32c(tail))
    return b"".join((HEAD_STRUCT.pack(base_offset, length, partition_leader_epoch, 2, crc), tail, payload))


@dataclass(frozen=True, slots=True)
class PlainRecords:
    """A batch's records before compression (``payload``) and the header fields the record loop
    determines; what :func:`_encode_records` and the compiled core's ``encode_records`` give."""

    payload: bytes
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int,
    compression: CompressionType = CompressionType.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
    base_timestamp: int | None = None,
) -> bytes:
    """Encode records as one v2 batch (``MemoryRecordsBuilder`` semantics).

    Record offsets are absolute and must increase; ``offsetDelta = offset - base_offset``.
    ``baseTimestamp`` is ``delete_horizon_ms`` when given (attribute bit 6 set) else the first
    record's timestamp, and timestamp deltas are relative to it (negative deltas are legal).
    ``max_timestamp`` defaults to the largest record timestamp; pass the broker time for
    LogAppendTime. ``last_offset_delta`` defaults to the last record's delta; compaction passes
    the original one so the batch keeps its offset range and last sequence. ``base_timestamp``
    overrides Kafka's baseTimestamp rule (other writers, e.g. sarama, differ; tests reproduce
    their bytes with it); it cannot be combined with ``delete_horizon_ms``.

    The compiled core (:mod:`storage_engine.native`) writes the batch when it is in use and takes
    the arguments; it returns None for anything unusual (an error, a type it does not read), and
    this reference then writes the batch or raises its own error.
    """
    core = native.compiled()
    if core is not None:
        data = _compiled_batch(core, records, base_offset, compression, compression_level, timestamp_type, producer_id,
                               producer_epoch, base_sequence, partition_leader_epoch, is_transactional, is_control,
                               delete_horizon_ms, last_offset_delta, max_timestamp, base_timestamp)
        if data is not None:
            return data
    count = len(records)
    if count == 0:
        raise ValueError("encode_batch needs at least one record (use encode_empty_batch for an empty header)")
    first = records[0]
    if base_timestamp is not None:
        if delete_horizon_ms is not None:
            raise ValueError("base_timestamp and delete_horizon_ms both set the baseTimestamp field")
        base_ts = base_timestamp
    else:
        base_ts = delete_horizon_ms if delete_horizon_ms is not None else first.timestamp
    if base_ts < 0 and base_ts != -1:
        raise ValueError(f"Invalid message timestamp {base_ts}")
    if first.offset < base_offset:
        raise ValueError(f"Record offset {first.offset} is below the batch base offset {base_offset}")
    attrs = _batch_attributes(compression, timestamp_type, is_transactional, is_control, delete_horizon_ms)
    plain = _encode_records(records, base_offset, base_ts, last_offset_delta, max_timestamp)
    return _assemble(plain, base_offset, attrs, compression_level, partition_leader_epoch, producer_id,
                     producer_epoch, base_sequence, count)


def _batch_attributes(compression: int, timestamp_type: TimestampType, is_transactional: bool, is_control: bool,
                      delete_horizon_ms: int | None) -> int:
    return _attributes(CompressionType.from_id(int(compression)), timestamp_type, is_transactional, is_control,
                       delete_horizon_ms is not None)


def _compiled_batch(
    core: ModuleType,
    records: Sequence[Record],
    base_offset: int,
    compression: int,
    compression_level: int | None,
    timestamp_type: TimestampType,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    is_transactional: bool,
    is_control: bool,
    delete_horizon_ms: int | None,
    last_offset_delta: int | None,
    max_timestamp: int | None,
    base_timestamp: int | None,
) -> bytes | None:
    """``encode_batch`` by the compiled core: the whole batch when uncompressed, else the plain
    records it writes compressed by :func:`_assemble`; None where the reference must run."""
    try:
        attrs = _batch_attributes(compression, timestamp_type, is_transactional, is_control, delete_horizon_ms)
    except (ValueError, TypeError, LogError):
        return None  # the reference raises it, or an error it checks first
    if not attrs & 0x07:
        data: bytes | None = core.encode_batch(records, Record, base_offset, attrs, partition_leader_epoch, producer_id,
                                               producer_epoch, base_sequence, delete_horizon_ms, last_offset_delta,
                                               max_timestamp, base_timestamp)
        return data
    plain = core.encode_records(records, Record, base_offset, delete_horizon_ms, last_offset_delta, max_timestamp,
                                base_timestamp)
    if plain is None:
        return None
    return _assemble(PlainRecords(*plain), base_offset, attrs, compression_level, partition_leader_epoch, producer_id,
                     producer_epoch, base_sequence, len(records))


def _encode_records(
    records: Sequence[Record], base_offset: int, base_ts: int, last_offset_delta: int | None, max_timestamp: int | None
) -> PlainRecords:
    """The reference's record loop: every record as ``DefaultRecord`` bytes, the offsets checked."""
    first = records[0]
    enc = _ENC.get
    parts: list[bytes] = []
    app = parts.append
    join = b"".join
    prev = first.offset - 1
    max_ts = first.timestamp
    for r in records:
        off = r.offset
        if off <= prev:
            raise ValueError(f"Illegal offset {off} following previous offset {prev} (offsets must increase)")
        prev = off
        ts = r.timestamp
        if ts > max_ts:
            max_ts = ts
        d = ts - base_ts
        ts_b = enc(d) or encode_varlong(d)
        d = off - base_offset
        off_b = enc(d) or encode_varint(d)
        key = r.key
        if key is None:
            key_b = b"\x01"
            key = b""
        else:
            d = len(key)
            key_b = enc(d) or encode_varint(d)
        value = r.value
        if value is None:
            value_b = b"\x01"
            value = b""
        else:
            d = len(value)
            value_b = enc(d) or encode_varint(d)
        headers = r.headers
        body = join((b"\x00", ts_b, off_b, key_b, key, value_b, value, _encode_headers(headers) if headers else b"\x00"))
        d = len(body)
        app(enc(d) or encode_varint(d))
        app(body)

    lod = prev - base_offset
    if lod > _INT32_MAX:
        raise ValueError(f"Offset range {base_offset}..{prev} does not fit in one batch (delta > Int.MAX)")
    if last_offset_delta is not None:
        if not lod <= last_offset_delta <= _INT32_MAX:
            raise ValueError(f"last_offset_delta {last_offset_delta} is below the last record's delta {lod}")
        lod = last_offset_delta
    return PlainRecords(join(parts), lod, base_ts, max_ts if max_timestamp is None else max_timestamp)


def _assemble(
    plain: PlainRecords,
    base_offset: int,
    attrs: int,
    compression_level: int | None,
    partition_leader_epoch: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    count: int,
) -> bytes:
    """The records compressed with the batch's codec (``compress``: one codec call for both
    cores, so their bytes are the same) under the header."""
    payload = plain.payload
    if attrs & 0x07:
        payload = compress(attrs & 0x07, payload, compression_level)
    return assemble_batch(
        base_offset,
        partition_leader_epoch,
        attrs,
        plain.last_offset_delta,
        plain.base_timestamp,
        plain.max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
        payload,
    )


def encode_empty_batch(
    *,
    base_offset: int,
    last_offset_delta: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    is_transactional: bool,
    is_control: bool,
    timestamp_type: TimestampType,
    base_timestamp: int = -1,
) -> bytes:
    """Kafka's ``writeEmptyHeader``: a 61-byte batch with no records that keeps an offset range
    and producer state alive after compaction removed every record (recordsCount 0,
    baseTimestamp -1, no compression, no delete-horizon bit). ``base_timestamp`` exists only to
    reproduce other writers' empty batches byte for byte; Kafka always writes -1."""
    if last_offset_delta < 0:
        raise ValueError(f"Invalid last_offset_delta {last_offset_delta}")
    attrs = _attributes(CompressionType.NONE, timestamp_type, is_transactional, is_control, False)
    return assemble_batch(
        base_offset,
        partition_leader_epoch,
        attrs,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        0,
        b"",
    )


# --------------------------------------------------------------------------------------------
# in-place header updates (what a broker does on append)


def _check_v2(batch: bytes | bytearray | memoryview, what: str) -> None:
    if len(batch) < RECORD_BATCH_OVERHEAD or batch[16] != 2:
        raise ValueError(f"{what} needs a magic v2 batch of at least 61 bytes")


def set_base_offset(batch: bytes | bytearray | memoryview, base_offset: int) -> bytes:
    """Copy of ``batch`` with baseOffset (bytes 0..8) replaced; the CRC does not cover it.

    Also valid for a legacy message, whose first 8 bytes are its offset (equally uncovered).
    """
    if len(batch) < 17:
        raise ValueError("set_base_offset needs a complete batch header")
    return _INT64.pack(base_offset) + bytes(batch[8:])


def set_partition_leader_epoch(batch: bytes | bytearray | memoryview, epoch: int) -> bytes:
    """Copy of a v2 ``batch`` with partitionLeaderEpoch (bytes 12..16) replaced; CRC unchanged.

    Legacy messages have their CRC at those bytes and no epoch, hence the magic check.
    """
    _check_v2(batch, "set_partition_leader_epoch")
    return bytes(batch[:12]) + _INT32.pack(epoch) + bytes(batch[16:])


def set_max_timestamp(batch: bytes | bytearray | memoryview, timestamp_ms: int) -> bytes:
    """Copy of a CreateTime v2 ``batch`` whose maxTimestamp is ``timestamp_ms``, CRC recomputed
    (Kafka's ``DefaultRecordBatch.setMaxTimestamp``: a broker stamps the records' true maximum
    over whatever the producer wrote there)."""
    _check_v2(batch, "set_max_timestamp")
    out = bytearray(batch)
    _INT64.pack_into(out, MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def set_log_append_time(batch: bytes | bytearray | memoryview, timestamp_ms: int) -> bytes:
    """Copy of a v2 ``batch`` stamped with LogAppendTime: attribute bit 3 set, maxTimestamp =
    ``timestamp_ms``, CRC recomputed (both fields are covered). Readers then report every
    record's timestamp as ``timestamp_ms``."""
    _check_v2(batch, "set_log_append_time")
    out = bytearray(batch)
    out[22] |= _ATTR_TIMESTAMP_TYPE  # low byte of the int16 attributes
    _INT64.pack_into(out, MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)
