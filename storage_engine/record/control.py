"""Control records: the one record of a control batch, parsed once for every reader.

A control batch (attribute bit 5) carries one record whose key is Kafka's
``ControlRecordType`` (``version int16 | type int16``) and, for a transaction's end, whose value
is Kafka's ``EndTransactionMarker`` (``version int16 | coordinatorEpoch int32``). The cleaner
needs the type (an ABORT marker aborts its producer's open transaction, a COMMIT commits it);
producer state needs the whole marker (Kafka's ``ProducerAppendInfo.append``). A control batch
the cleaner emptied has no record left: both readers see ``None`` and skip it, as Kafka does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from ..errors import CorruptRecordError
from .records import RawBatch, Record
from .scan import decode_batch

#: the key: version, type (Kafka's ``ControlRecordType.parse``)
CONTROL_KEY = struct.Struct(">hh")
#: an end-transaction marker's value: version, coordinator epoch (Kafka's ``EndTransactionMarker``)
END_TXN_MARKER_VALUE = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    """The control record types the engine acts on (Kafka's ``ControlRecordType``). Other types
    (KRaft's leader-change and snapshot records) are read as their number and left alone."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True)
class EndTransactionMarker:
    """A transaction's end as its control record states it (Kafka's ``EndTransactionMarker``)."""

    control_type: int
    coordinator_epoch: int
    timestamp: int


def _control_record(raw: RawBatch, path: str | None) -> tuple[Record, int] | None:
    """The control batch's record and its type; None for a batch the cleaner emptied."""
    if raw.header.records_count == 0:
        return None
    records = decode_batch(raw, verify=False, path=path)
    if not records:
        return None
    rec = records[0]
    if rec.key is None or len(rec.key) < CONTROL_KEY.size:
        raise CorruptRecordError("control record key is shorter than 4 bytes", path=path,
                                 position=raw.position, offset=raw.header.base_offset)
    return rec, CONTROL_KEY.unpack_from(rec.key)[1]


def control_type_of(raw: RawBatch, path: str | None = None) -> int | None:
    """The control record type of a control batch (0 ABORT, 1 COMMIT, ...), None when empty."""
    found = _control_record(raw, path)
    return None if found is None else found[1]


def read_end_txn_marker(raw: RawBatch, path: str | None = None) -> EndTransactionMarker | None:
    """The marker of a control batch; None for an empty one (compaction removed its record) or a
    control type that is not ABORT/COMMIT (Kafka's ``ProducerAppendInfo.append`` skips both)."""
    found = _control_record(raw, path)
    if found is None or found[1] not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    rec, control_type = found
    if rec.value is None or len(rec.value) < END_TXN_MARKER_VALUE.size:
        raise CorruptRecordError("end transaction marker value is shorter than 6 bytes", path=path,
                                 position=raw.position, offset=raw.header.base_offset)
    return EndTransactionMarker(control_type, END_TXN_MARKER_VALUE.unpack_from(rec.value)[1], rec.timestamp)
