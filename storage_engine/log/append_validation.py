"""What an append must pass before it reaches a segment: Kafka's ``LogValidator``, leader side.

Pure functions: they take records or a producer-built batch plus the topic's configuration and
return the exact bytes to write with the offsets assigned. Nothing here touches a file, so a
rejected append changes nothing on disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..config.topic import LogConfig
from ..errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError, RecordTooLargeError
from ..limits import LONG_MAX, LONG_MIN
from ..record import (
    CompressionType,
    RawBatch,
    Record,
    TimestampType,
    decode_batch,
    encode_batch,
    scan_batches,
    set_base_offset,
    set_max_timestamp,
    verify_batch,
)
from ..record.control import CONTROL_KEY, END_TXN_MARKER_VALUE, ControlRecordType
from ..record.rewrite import corrupt_batch, record_bytes
from ..record.v2 import timestamp_deltas, walk_records

NO_TIMESTAMP = -1
"""Kafka's ``RecordBatch.NO_TIMESTAMP``: the one timestamp the bounds do not apply to."""



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
    if config.message_timestamp_type != "CreateTime" or timestamp == NO_TIMESTAMP:
        return None
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    if now_ms - timestamp <= before and timestamp - now_ms <= after:
        return None
    lower, upper = max(now_ms - before, LONG_MIN), min(now_ms + after, LONG_MAX)
    return (f"Timestamp {timestamp} of message with offset {offset} is out of range. "
            f"The timestamp should be within [{lower}, {upper}]")


def _keyless_refusal(index: int, tp: str) -> InvalidRecordError:
    return InvalidRecordError(f"Compacted topic cannot accept message without key in topic partition {tp} "
                              f"(record {index}).")


def _check_record(record: ProducerRecord | Record, index: int, config: LogConfig, tp: str, now_ms: int) -> None:
    if config.compact and record.key is None:
        raise _keyless_refusal(index, tp)
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


def _first_out_of_range(base_ts: int, deltas: Sequence[int], now_ms: int, config: LogConfig) -> str | None:
    """:func:`timestamp_out_of_range` for the first record that is, or None (a record's timestamp
    is ``base_ts`` plus its delta). The bounds are one interval, so an in-range minimum and
    maximum (neither the exempt -1) clear every record at C speed; only a batch that fails that
    is checked record by record."""
    lo, hi = base_ts + min(deltas), base_ts + max(deltas)
    if (NO_TIMESTAMP not in (lo, hi) and timestamp_out_of_range(lo, 0, now_ms, config) is None
            and timestamp_out_of_range(hi, 0, now_ms, config) is None):
        return None
    return next((why for i, d in enumerate(deltas)
                 if (why := timestamp_out_of_range(base_ts + d, i, now_ms, config)) is not None), None)


def _validate_in_place(raw: RawBatch, data: bytes, base_offset: int, config: LogConfig, now_ms: int,
                       tp: str) -> ValidatedBatch | None:
    """A CreateTime v2 batch that keeps its codec, validated the way Kafka's
    ``assignOffsetsNonCompressed`` / in-place ``validateMessagesAndAssignOffsetsCompressed`` do:
    every record's timestamp (and, on a compacted topic, key) is read, values and headers are
    not, and the header's maxTimestamp is rewritten to the records' true maximum when the
    producer's under- or overstates it (``setMaxTimestamp``), so ``.timeindex`` and time
    retention never trust the producer's claim. None when the batch must be rebuilt instead:
    its last offset delta is not its last record's (Kafka rebuilds batches whose inner offsets
    are off)."""
    header = raw.header
    path = f"<append to {tp}>"
    buf, start, end = record_bytes(raw, path, data)  # uncompressed: the records read where they are, no copy
    try:
        deltas, last_start = timestamp_deltas(buf, header.records_count, start, end)
        last_record = walk_records(buf, 1, last_start, end) if deltas else []
        walked = walk_records(buf, len(deltas), start, end) if config.compact else []
    except (IndexError, ValueError) as exc:  # a VarintError is a ValueError
        raise corrupt_batch(f"malformed record in the batch: {exc}", raw, path) from exc
    if not deltas:
        raise InvalidRecordError(f"an append to {tp} needs at least one record")
    if last_record[0][2] != header.last_offset_delta:
        return None
    base_ts = header.base_timestamp
    if (why := _first_out_of_range(base_ts, deltas, now_ms, config)) is not None:
        # Kafka's processRecordErrors also names a timestamp refusal before any other
        raise InvalidTimestampError(f"{why} in topic partition {tp}")
    keyless = next((i for i, w in enumerate(walked) if w[4] is None), None)
    if keyless is not None:
        raise _keyless_refusal(keyless, tp)
    max_ts = max(base_ts + max(deltas), NO_TIMESTAMP)  # Kafka's maxBatchTimestamp starts at NO_TIMESTAMP
    out = data if max_ts == header.max_timestamp else set_max_timestamp(data, max_ts)
    last = base_offset + header.last_offset_delta
    return ValidatedBatch(
        set_base_offset(out, base_offset),  # the CRC does not cover it: no recomputation
        base_offset,
        last,
        max_ts,
        last,  # v2: Kafka indexes the batch's last offset (ValidationResult.shallowOffsetOfMaxTimestamp)
        len(deltas),
    )


def validate_producer_batch(data: bytes, *, base_offset: int, config: LogConfig, now_ms: int, tp: str) -> ValidatedBatch:
    """Accept one producer-built batch (any magic, any codec) and assign offsets from ``base_offset``.

    Like Kafka, a CreateTime v2 batch whose codec already matches the target is validated in
    place (:func:`_validate_in_place`: every record's timestamp and key read, the header's max
    timestamp made true) and kept byte for byte but for its base offset, which the CRC does not
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
    if header.magic == 2 and codec == header.compression and config.message_timestamp_type == "CreateTime" \
            and header.timestamp_type == TimestampType.CREATE_TIME:
        in_place = _validate_in_place(raw, data, base_offset, config, now_ms, tp)
        if in_place is not None:
            return in_place
    records = decode_batch(raw, path=f"<append to {tp}>")
    if not records:
        raise InvalidRecordError(f"an append to {tp} needs at least one record")
    for i, r in enumerate(records):
        _check_record(r, i, config, tp, now_ms)
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
