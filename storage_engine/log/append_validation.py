"""What an append must pass before it reaches a segment: Kafka's ``LogValidator``, leader side.

Pure functions: they take records or a producer-built batch plus the topic's configuration and
return the exact bytes to write with the offsets assigned. Nothing here touches a file, so a
rejected append changes nothing on disk.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ..config.topic import LogConfig
from ..errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError, RecordTooLargeError
from ..limits import LONG_MAX, LONG_MIN
from ..record import (
    CompressionType,
    Record,
    TimestampType,
    decode_batch,
    encode_batch,
    scan_batches,
    set_base_offset,
    verify_batch,
)
from ..record.control import CONTROL_KEY, END_TXN_MARKER_VALUE, ControlRecordType

_BASE_OFFSET = struct.Struct(">q")


@dataclass(frozen=True)
class ProducerRecord:
    """A record as a producer hands it over: no offset yet, timestamp optional (defaults to now)."""

    key: bytes | None
    value: bytes | None
    timestamp: int | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True)
class ValidatedBatch:
    """A batch ready to append: its bytes, with offsets already assigned."""

    data: bytes | bytearray
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int


def target_compression(config: LogConfig, producer_codec: int) -> CompressionType:
    """``compression.type=producer`` keeps the producer's codec; any other value recompresses (Kafka's ``LogValidator``)."""
    if config.compression_type == "producer":
        return CompressionType(producer_codec)
    return CompressionType.from_name(config.compression_type)


def _compression_level(config: LogConfig, codec: CompressionType) -> int | None:
    if codec == CompressionType.GZIP and config.compression_gzip_level != -1:
        return config.compression_gzip_level
    if codec == CompressionType.LZ4:
        return config.compression_lz4_level
    if codec == CompressionType.ZSTD:
        return config.compression_zstd_level
    return None


def timestamp_out_of_range(timestamp: int, offset: int, now_ms: int, config: LogConfig) -> str | None:
    """Why a ``CreateTime`` record timestamp is refused, in Kafka's ``LogValidator`` words, or
    None: more than ``message.timestamp.before.max.ms`` before ``now_ms`` or more than
    ``message.timestamp.after.max.ms`` (KIP-937: an hour by default) after it. ``offset`` is the
    record's offset in the batch as the producer sent it, as the broker names it. The bounds
    stop at a long's range where Java's sum wraps (``docs/decisions.md``)."""
    if config.message_timestamp_type != "CreateTime" or timestamp < 0:
        return None
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    if now_ms - timestamp <= before and timestamp - now_ms <= after:
        return None
    lower, upper = max(now_ms - before, LONG_MIN), min(now_ms + after, LONG_MAX)
    return (f"Timestamp {timestamp} of message with offset {offset} is out of range. "
            f"The timestamp should be within [{lower}, {upper}]")


def _check_record(record: ProducerRecord | Record, index: int, config: LogConfig, tp: str, now_ms: int) -> None:
    if config.compact and record.key is None:
        raise InvalidRecordError(
            f"Compacted topic cannot accept message without key in topic partition {tp} (record {index})."
        )
    if record.timestamp is not None:
        offset = record.offset if isinstance(record, Record) else index
        if (why := timestamp_out_of_range(record.timestamp, offset, now_ms, config)) is not None:
            raise InvalidTimestampError(f"{why} in topic partition {tp}")


def _check_size(size: int, config: LogConfig, tp: str) -> None:
    if size > config.segment_bytes:
        raise RecordTooLargeError(
            f"Message batch size is {size} bytes in append to partition {tp}, which exceeds the maximum "
            f"configured segment size of {config.segment_bytes}."
        )
    if size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"The batch of {size} bytes in append to partition {tp} is larger than max.message.bytes="
            f"{config.max_message_bytes}."
        )


def _encode(
    records: Sequence[Record], base_offset: int, config: LogConfig, codec: CompressionType, now_ms: int, **producer
) -> ValidatedBatch:
    log_append = config.message_timestamp_type == "LogAppendTime"
    if log_append:
        records = [Record(r.offset, now_ms, r.key, r.value, r.headers) for r in records]
    data = encode_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        compression_level=_compression_level(config, codec),
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
        **producer,
    )
    max_ts, offset_of_max = -1, base_offset
    for r in records:
        if r.timestamp > max_ts:
            max_ts, offset_of_max = r.timestamp, r.offset
    return ValidatedBatch(data, base_offset, records[-1].offset, max_ts, offset_of_max, len(records))


def build_batch(
    records: Sequence[ProducerRecord],
    *,
    base_offset: int,
    config: LogConfig,
    compression: CompressionType,
    now_ms: int,
    tp: str,
) -> ValidatedBatch:
    """Validate producer records and encode them as one batch starting at ``base_offset``."""
    if not records:
        raise InvalidRecordError(f"an append to {tp} needs at least one record")
    for i, r in enumerate(records):
        _check_record(r, i, config, tp, now_ms)
    encoded = [
        Record(base_offset + i, now_ms if r.timestamp is None else r.timestamp, r.key, r.value, tuple(r.headers))
        for i, r in enumerate(records)
    ]
    batch = _encode(encoded, base_offset, config, target_compression(config, compression), now_ms)
    _check_size(len(batch.data), config, tp)
    return batch


def build_end_txn_marker(producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int,
                         base_offset: int, config: LogConfig, now_ms: int) -> ValidatedBatch:
    """A transaction's COMMIT or ABORT marker as Kafka's coordinator has the leader append it
    (``MemoryRecords.withEndTransactionMarker``: one control record, key ``version 0 | type``,
    value ``version 0 | coordinator epoch``, timestamp now, a transactional control batch of
    the producer's id and epoch, no sequence)."""
    if producer_id < 0 or producer_epoch < 0:
        raise InvalidRecordError(f"an end transaction marker needs a producer id and epoch, got {producer_id} and "
                                 f"{producer_epoch}")
    control_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    record = Record(base_offset, now_ms, CONTROL_KEY.pack(0, control_type), END_TXN_MARKER_VALUE.pack(0, coordinator_epoch))
    return _encode([record], base_offset, config, CompressionType.NONE, now_ms, producer_id=producer_id,
                   producer_epoch=producer_epoch, is_transactional=True, is_control=True)


def _can_skip_record_checks(header, codec: CompressionType, config: LogConfig, now_ms: int) -> bool:
    """No rule needs a record of this batch: with no ``message.timestamp.before.max.ms`` bound,
    the batch's max timestamp within ``message.timestamp.after.max.ms`` bounds every record's
    (KIP-937's default hour kept this path the common one)."""
    return (
        header.magic == 2
        and codec == header.attributes & 0x07
        and header.records_count > 0
        and not config.compact
        and config.message_timestamp_type == "CreateTime"
        and config.message_timestamp_before_max_ms == LONG_MAX
        and header.max_timestamp - now_ms <= config.message_timestamp_after_max_ms
    )


def validate_producer_batch(data: bytes, *, base_offset: int, config: LogConfig, now_ms: int, tp: str) -> ValidatedBatch:
    """Accept one producer-built batch (any magic, any codec) and assign offsets from ``base_offset``.

    Like Kafka, a v2 batch whose codec already matches the target and needs no timestamp
    rewrite is kept byte for byte; only its base offset is patched, which the CRC does not
    cover. Anything else is decoded and re-encoded as v2.
    """
    batches = list(scan_batches(data, path=f"<append to {tp}>"))
    consumed = sum(b.header.size_in_bytes for b in batches)
    if len(batches) != 1 or consumed != len(data):
        raise CorruptRecordError(
            f"an append must hold exactly one complete record batch, got {len(batches)} batch(es) "
            f"covering {consumed} of {len(data)} bytes",
            path=f"<append to {tp}>",
            position=0,
        )
    raw = batches[0]
    header = raw.header
    verify_batch(raw, path=f"<append to {tp}>")
    if header.is_control:
        raise InvalidRecordError(f"Clients are not allowed to write control records in topic partition {tp}.")
    if header.magic == 2 and header.base_offset != 0:
        raise InvalidRecordError(
            f"The baseOffset of the record batch in the append to {tp} should be 0, but it is {header.base_offset}"
        )
    _check_size(header.size_in_bytes, config, tp)
    codec = target_compression(config, header.attributes & 0x07)
    if _can_skip_record_checks(header, codec, config, now_ms):
        # The fast path for the common case: the CRC is verified, and no rule needs to look at a
        # record (no key check, no timestamp bounds, no recompression). Kafka also walks the
        # records here to validate their structure; a batch a buggy producer built with a valid
        # CRC but malformed records would be refused by a broker and fails later reads here.
        out = bytearray(data)  # the one copy: offsets are assigned in place, as a broker does
        _BASE_OFFSET.pack_into(out, 0, base_offset)
        return ValidatedBatch(
            out,
            base_offset,
            base_offset + header.last_offset_delta,
            header.max_timestamp,
            base_offset + header.last_offset_delta,  # v2: Kafka indexes the batch's last offset
            header.records_count,
        )
    records = decode_batch(raw, path=f"<append to {tp}>")
    if not records:
        raise InvalidRecordError(f"an append to {tp} needs at least one record")
    for i, r in enumerate(records):
        _check_record(r, i, config, tp, now_ms)
    in_place = (
        header.magic == 2
        and codec == header.compression
        and config.message_timestamp_type == "CreateTime"
        and records[-1].offset == header.last_offset
    )
    if in_place:
        shift = base_offset - header.base_offset
        max_ts, offset_of_max = -1, base_offset
        for r in records:
            if r.timestamp > max_ts:
                max_ts, offset_of_max = r.timestamp, r.offset + shift
        return ValidatedBatch(
            set_base_offset(bytes(data), base_offset),
            base_offset,
            header.last_offset + shift,
            max_ts,
            offset_of_max,
            len(records),
        )
    first = records[0].offset
    shifted = [Record(r.offset - first + base_offset, r.timestamp, r.key, r.value, r.headers) for r in records]
    producer = {}
    if header.magic == 2:
        producer = dict(
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            is_transactional=header.is_transactional,
        )
    batch = _encode(shifted, base_offset, config, codec, now_ms, **producer)
    _check_size(len(batch.data), config, tp)
    return batch
