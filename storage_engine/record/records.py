"""The value types of the record codec: records, batch headers and raw batches.

``Record`` is what a consumer sees: absolute offset and timestamp, key, value, headers. It is
immutable (frozen) because records are shared between readers, compaction plans and Arrow
conversion, and slotted because a segment holds millions of them.

``BatchHeader`` is the fixed part of a batch, parsed without touching the records so that
scanning a segment (recovery, index rebuild, offset lookup, retention stats) stays cheap. It is
the same type for v2 batches and for legacy v0/v1 messages, filled with what applies, so callers
that only need offsets, sizes and timestamps never branch on the magic byte.

``RawBatch`` is one complete batch's bytes plus where it sits in its file: the unit scanning
yields and the unit compaction copies verbatim when nothing in it changes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, fields
from enum import IntEnum
from itertools import repeat

from .compression import CompressionType

__all__ = ["Record", "TimestampType", "BatchHeader", "RawBatch", "Header"]

Header = tuple[str, "bytes | None"]


class TimestampType(IntEnum):
    """Attribute bit 3 of a v2 batch or v1 message.

    ``NO_TIMESTAMP_TYPE`` (-1) is Kafka's value for magic-0 messages, which carry no timestamp;
    it is never written, only reported.
    """

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True)
class Record:
    """One record as a consumer sees it.

    ``offset`` and ``timestamp`` are absolute (batch base plus delta; with LogAppendTime the
    batch's maxTimestamp). ``value is None`` is a tombstone. Header keys are str (Kafka's
    header keys are UTF-8 strings), header values bytes or None.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


# A frozen dataclass's generated __init__ sets each field with ``object.__setattr__`` (looked up
# through a global, then by name), about 1.5 us per record; setting the slots through their
# member descriptors is the same operation without the lookups, about 2.5x faster. The class
# stays an ordinary frozen dataclass (fields, replace, eq, hash, pickling all unchanged).
_slot = vars(Record)  # the member descriptors (``Record.offset`` reads as the field's type to a checker)
_set_offset = _slot["offset"].__set__
_set_timestamp = _slot["timestamp"].__set__
_set_key = _slot["key"].__set__
_set_value = _slot["value"].__set__
_set_headers = _slot["headers"].__set__


def _record_init(
    self: Record,
    offset: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...] = (),
) -> None:
    _set_offset(self, offset)
    _set_timestamp(self, timestamp)
    _set_key(self, key)
    _set_value(self, value)
    _set_headers(self, headers)


_record_init.__qualname__ = "Record.__init__"
_record_init.__doc__ = "Initialize a Record (fields as in the class docstring)."
Record.__init__ = _record_init  # type: ignore[method-assign]


class _RecordDraft:
    """Decoder-internal twin of :class:`Record` with the same slot layout but plain attribute
    stores, which the interpreter executes far faster than calls to slot descriptors.

    The v2 decoder fills drafts and then gives each one the class ``Record`` by assigning
    ``__class__`` (:func:`_publish`), which Python allows between classes with identical slot
    layouts; callers only ever see genuine, frozen ``Record`` objects. Together about a third
    cheaper than setting a frozen instance's five slots through their descriptors.
    """

    __slots__ = Record.__slots__

    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[tuple[str, bytes | None], ...],
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers


assert _RecordDraft.__slots__ == tuple(f.name for f in fields(Record)), "keep _RecordDraft in step with Record"


def _publish(drafts: list) -> list[Record]:
    """Turn a list of :class:`_RecordDraft` into ``Record`` objects in place (a C-level loop)."""
    deque(map(setattr, drafts, repeat("__class__"), repeat(Record)), 0)
    return drafts


@dataclass(slots=True)
class BatchHeader:
    """Fixed header of a v2 batch (``DefaultRecordBatch`` layout) or of one legacy message.

    For a legacy (magic 0/1) message the fields that exist are filled from it: ``base_offset``
    is the message offset, ``partition_leader_epoch`` -1, ``crc`` the message CRC, ``attributes``
    the message attributes (codec in bits 0-2, timestamp type in bit 3 for v1), ``base_timestamp``
    and ``max_timestamp`` the message timestamp (-1 for v0), producer fields -1 and
    ``records_count`` 1. A compressed legacy wrapper's inner messages are only known after
    decompression, so for those ``base_offset`` is the wrapper offset (which Kafka sets to the
    last inner offset, making ``last_offset`` right) and ``records_count`` is -1 (unknown).
    """

    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        """Whole batch size on disk: the batchLength field plus the 12 bytes of offset+length."""
        return self.length + 12

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> CompressionType:
        """Codec of attribute bits 0-2; ids 5..7 raise ``UnknownCompressionError``."""
        return CompressionType.from_id(self.attributes & 0x07)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return TimestampType.LOG_APPEND_TIME if self.attributes & 0x08 else TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & 0x20)

    @property
    def has_delete_horizon(self) -> bool:
        """Attribute bit 6 (KIP-534): ``base_timestamp`` holds the tombstone delete horizon."""
        return self.magic >= 2 and bool(self.attributes & 0x40)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > -1

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wraps after Int.MAX like Kafka), -1 without a producer."""
        base, delta = self.base_sequence, self.last_offset_delta
        if base == -1:
            return -1
        return delta - (0x7FFFFFFF - base) - 1 if base > 0x7FFFFFFF - delta else base + delta


@dataclass(slots=True)
class RawBatch:
    """One complete batch: its parsed header, its byte position in the file (or buffer) and its
    bytes (``header.size_in_bytes`` long; a memoryview when scanned from a large buffer, so
    scanning copies nothing)."""

    header: BatchHeader
    position: int
    data: memoryview | bytes
