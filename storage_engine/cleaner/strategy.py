"""Which record of a key wins compaction: Kafka's KIP-280 compaction strategies (accepted in
2018, never shipped by Kafka), as the topic config ``compaction.strategy``.

* ``offset`` (the default): the record with the highest offset wins, Kafka's rule. The cleaner
  takes its offset-only path for it, unchanged, so its output is byte-identical to before.
* ``timestamp``: the record with the highest timestamp wins (the batch's ``maxTimestamp`` for
  ``LogAppendTime`` batches, as consumers read it), ties broken by offset.
* ``header``: the record whose header named by ``compaction.strategy.header`` holds the highest
  version wins, ties broken by offset. The version is an **8-byte big-endian signed long** (a
  Java ``long``, as KIP-280 says). A record without that header, or whose value is not exactly
  8 bytes, counts as the lowest version of all (:data:`MISSING_VERSION`) and is counted in the
  cleaner's ``records_without_version``. With several headers of that name the last one counts.

A version is compared as ``(version, offset)``, so "ties broken by offset" is the tuple order.
Tombstones take part in the comparison like any record and go after their delete horizon, as
today. How the cleaner applies it (``rules.retain_versioned_record``):

* The offset map holds each dirty key's best ``(version, offset)``. The recopy runs in offset
  order, so a clean-section record that beats it (an older offset with a higher version) takes
  its place before the dirty section's record of that key is reached, and that one goes.
* The newest record a pass maps (the map's latest offset) is never dropped by a version
  comparison, so the log end never moves (KIP-280). Such a record may lose to an older one of
  its key; so that it never lingers beside its winner (which, once a winning tombstone is past
  its horizon, would bring a superseded value back), the next pass maps from it (one offset
  below the cleaner checkpoint) and it competes again. With that, the clean section holds one
  record per key after every pass, apart from that newest one, and the sequential rule above
  keeps exactly the highest ``(version, offset)`` of each key over the whole cleaned range:
  the property test checks it against that model.

A record's version is read here and nowhere else; :mod:`.rules` decides keep or drop from it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from ..record.records import BatchHeader, Record, TimestampType
from ..record.v2 import record_header_value

#: The version of a record the strategy cannot read a version from: below every long.
MISSING_VERSION = -(1 << 63) - 1

_LONG = struct.Struct(">q")

#: ``version(buf, start, end, timestamp_delta)`` of one v2 record of a given batch.
RecordVersion = Callable[[bytes, int, int, int], int]


class CompactionStrategy(StrEnum):
    """The values of ``compaction.strategy``."""

    OFFSET = "offset"
    TIMESTAMP = "timestamp"
    HEADER = "header"


def header_version(value: bytes | None) -> int:
    """The version a header value holds: an 8-byte big-endian signed long, else missing."""
    if value is None or len(value) != 8:
        return MISSING_VERSION
    return _LONG.unpack(value)[0]


@dataclass(frozen=True)
class VersionRule:
    """How a topic's records get their version (``offset`` has none: the cleaner's offset-only
    path runs instead, see :func:`version_rule`)."""

    strategy: CompactionStrategy
    header: str = ""

    def for_batch(self, header: BatchHeader) -> RecordVersion:
        """The version reader for the records of one v2 batch."""
        if self.strategy is CompactionStrategy.TIMESTAMP:
            if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
                max_ts = header.max_timestamp
                return lambda buf, start, end, tsd: max_ts
            base_ts = header.base_timestamp
            return lambda buf, start, end, tsd: base_ts + tsd
        name = self.header.encode("utf-8")
        return lambda buf, start, end, tsd: header_version(record_header_value(buf, start, end, name))

    def of_record(self, record: Record) -> int:
        """The version of a decoded record (magic 0/1 messages have no headers)."""
        if self.strategy is CompactionStrategy.TIMESTAMP:
            return record.timestamp
        for name, value in reversed(record.headers):
            if name == self.header:
                return header_version(value)
        return MISSING_VERSION


def version_rule(strategy: str, header: str = "") -> VersionRule | None:
    """The rule of a topic's ``compaction.strategy`` (None for ``offset``)."""
    chosen = CompactionStrategy(strategy)
    if chosen is CompactionStrategy.OFFSET:
        return None
    return VersionRule(chosen, header)


class Winners:
    """Each key's winning ``(version, offset)`` so far, for a reader walking a partition's keyed
    records in offset order under a version strategy: the cleaner's rule read back from the
    files (the erasure report, the asset checks)."""

    def __init__(self, rule: VersionRule) -> None:
        self.rule = rule
        self._best: dict[bytes, tuple[int, int]] = {}

    def offer(self, record: Record) -> tuple[int, int] | None:
        """None when ``record`` (keyed) becomes its key's winner; else the ``(version, offset)``
        of the earlier record that beats it (ties go to the later offset, so only a lower
        version loses)."""
        mine = (self.rule.of_record(record), record.offset)
        best = self._best.get(record.key)  # type: ignore[arg-type]
        if best is not None and mine < best:
            return best
        self._best[record.key] = mine  # type: ignore[index]
        return None
