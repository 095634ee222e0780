"""Rewriting batch bytes for the cleaner, the byte side of Kafka's ``MemoryRecords.filterTo``:
a record's bytes as stored (decompressed when needed), a record restamped with a new timestamp
delta, a v2 batch assembled from surviving records' bytes, the empty header that keeps a
producer's last batch, and legacy (magic 0/1) messages (a control batch's type is ``control``'s).

The cleaner decides keep or drop (``storage_engine.cleaner``); only this module and the codecs
beside it write batch bytes.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from .. import native
from ..errors import CorruptRecordError
from . import RawBatch, encode_empty_batch
from .compression import compress, decompress
from .records import BatchHeader, Record, TimestampType
from .v2 import ATTR_DELETE_HORIZON, RECORD_BATCH_OVERHEAD
from .v2_builder import assemble_batch
from .varint import decode_varint, decode_varlong, encode_varint, encode_varlong

OFFSET_AND_LENGTH = struct.Struct(">qi")


# ------------------------------------------------------------------------------------------
# record walking and batch assembly


def corrupt_batch(reason: str, raw: RawBatch, path: str | None) -> CorruptRecordError:
    return CorruptRecordError(reason, path=path, position=raw.position, offset=raw.header.base_offset)


def record_bytes(raw: RawBatch, path: str | None = None, chunk: bytes | None = None,
                 chunk_offset: int = 0) -> tuple[bytes, int, int]:
    """Where a v2 batch's plain record bytes are: ``(buffer, start, end)``.

    For an uncompressed batch read from ``chunk`` (``raw.data`` being ``chunk[chunk_offset:...]``)
    that is the chunk itself, so nothing is copied; otherwise a copy or the decompressed stream.
    """
    h = raw.header
    codec = h.attributes & 0x07
    if codec == 0:
        if chunk is not None:
            return chunk, chunk_offset + RECORD_BATCH_OVERHEAD, chunk_offset + h.size_in_bytes
        payload = bytes(memoryview(raw.data)[RECORD_BATCH_OVERHEAD:])
        return payload, 0, len(payload)
    try:
        plain = decompress(codec, memoryview(raw.data)[RECORD_BATCH_OVERHEAD:])
    except CorruptRecordError as exc:
        raise corrupt_batch(exc.reason, raw, path) from exc
    return plain, 0, len(plain)


def restamp_record(record: bytes | memoryview, new_delta: int) -> bytes:
    """A record's bytes with its timestamp delta replaced (length prefix recomputed); the rest of
    the record (offset delta, key, value, headers) is copied unchanged."""
    _, p = decode_varint(record, 0)
    attributes = record[p]
    _, q = decode_varlong(record, p + 1)
    body = b"".join((bytes((attributes,)), encode_varlong(new_delta), bytes(record[q:])))
    return encode_varint(len(body)) + body


@dataclass(frozen=True, slots=True)
class RebuildPlan:
    """The header rules of a rebuilt v2 batch (Kafka's ``MemoryRecordsBuilder`` under
    ``filterTo``): its ``base_timestamp``, its ``attributes`` (the delete-horizon bit when one is
    stamped now), and ``fixed_timestamp``, every record's timestamp in a ``LOG_APPEND_TIME``
    batch (its original max timestamp; None: the original base timestamp plus the record's
    delta). Both cores take these numbers, so the rules are written once."""

    base_timestamp: int
    attributes: int
    fixed_timestamp: int | None

    @classmethod
    def of(cls, header: BatchHeader, spans: list[tuple[int, int, int]], horizon_ms: int | None) -> RebuildPlan:
        """The base timestamp is the delete horizon when ``horizon_ms`` stamps one or the batch
        has one, else the first survivor's timestamp (its ``LOG_APPEND_TIME``, the original max
        timestamp, for such a batch)."""
        fixed = header.max_timestamp if header.timestamp_type == TimestampType.LOG_APPEND_TIME else None
        if horizon_ms is not None:
            return cls(horizon_ms, header.attributes | ATTR_DELETE_HORIZON, fixed)
        if header.has_delete_horizon:  # stamped by an earlier pass: the horizon stays the base
            return cls(header.base_timestamp, header.attributes, fixed)
        return cls(fixed if fixed is not None else header.base_timestamp + spans[0][2], header.attributes, fixed)


def rebuild_v2_batch(header: BatchHeader, buf: bytes, spans: list[tuple[int, int, int]],
                     horizon_ms: int | None) -> tuple[bytes, int]:
    """The byte side of Kafka's ``filterTo`` for one v2 batch: the records of ``buf`` (the batch's
    records, decompressed) at ``spans`` (``(start, end, timestamp delta)`` of each survivor) under
    a new header with the batch's offsets, epoch and producer fields, compressed with its codec.
    Returns the bytes and the batch's max timestamp (the survivors' largest).

    The base timestamp is :class:`RebuildPlan`'s; each record's delta is rewritten against it
    only where it changes, so a batch that keeps its first record copies every record's bytes
    as they are. The compiled core (``native/src/rebuild.rs``) writes the same bytes when it is
    in use; it returns None for what it does not take, and the reference below runs.
    """
    plan = RebuildPlan.of(header, spans, horizon_ms)
    codec = header.attributes & 0x07
    core = native.compiled()
    if core is not None:
        fields = (header.base_offset, header.partition_leader_epoch, plan.attributes, header.last_offset_delta,
                  header.producer_id, header.producer_epoch, header.base_sequence)
        out = core.rebuild_v2(buf, spans, header.base_timestamp, plan.base_timestamp, plan.fixed_timestamp,
                              None if codec else fields)
        if out is not None:
            data, max_ts = out
            return (_seal(header, plan, data, max_ts, len(spans)) if codec else data), max_ts
    base_ts = header.base_timestamp
    fixed = plan.fixed_timestamp
    parts = []
    for s, e, d in spans:
        delta = (base_ts + d if fixed is None else fixed) - plan.base_timestamp
        parts.append(buf[s:e] if delta == d else restamp_record(buf[s:e], delta))
    max_ts = base_ts + max(d for _, _, d in spans) if fixed is None else fixed
    return _seal(header, plan, b"".join(parts), max_ts, len(spans)), max_ts


def _seal(header: BatchHeader, plan: RebuildPlan, payload: bytes, max_ts: int, count: int) -> bytes:
    """The survivors' bytes compressed with the batch's codec (one codec call for both cores)
    under the rebuilt header."""
    codec = header.attributes & 0x07
    if codec:
        payload = compress(codec, payload)
    return assemble_batch(header.base_offset, header.partition_leader_epoch, plan.attributes, header.last_offset_delta,
                          plan.base_timestamp, max_ts, header.producer_id, header.producer_epoch, header.base_sequence,
                          count, payload)


def rebuild_legacy_batch(header: BatchHeader, kept: list[Record]) -> bytes:
    """The surviving messages of a magic 0/1 batch, each written on its own (uncompressed: this
    engine writes no legacy compressed wrapper) with its offset and timestamp."""
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    return b"".join(encode_legacy_message(r.offset, header.magic, log_append, r.timestamp, r.key, r.value)
                    for r in kept)


def empty_batch_of(header: BatchHeader) -> bytes:
    """Kafka's ``writeEmptyHeader`` for a batch whose records all went but whose offsets and
    producer state must stay."""
    return encode_empty_batch(
        base_offset=header.base_offset,
        last_offset_delta=header.last_offset_delta,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        timestamp_type=header.timestamp_type,
    )


def encode_legacy_message(offset: int, magic: int, log_append_time: bool, timestamp: int,
                          key: bytes | None, value: bytes | None) -> bytes:
    """One uncompressed magic 0/1 message (``offset | size | crc | magic | attributes | [timestamp]
    | key | value``, CRC-32 over magic..end)."""
    attributes = 0x08 if (magic == 1 and log_append_time) else 0
    parts = [bytes((magic, attributes))]
    if magic == 1:
        parts.append(struct.pack(">q", timestamp))
    for blob in (key, value):
        if blob is None:
            parts.append(struct.pack(">i", -1))
        else:
            parts.append(struct.pack(">i", len(blob)))
            parts.append(blob)
    body = b"".join(parts)
    message = struct.pack(">I", zlib.crc32(body)) + body
    return OFFSET_AND_LENGTH.pack(offset, len(message)) + message
