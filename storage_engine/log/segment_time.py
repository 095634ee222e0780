"""The times Kafka judges a segment by (``LogSegment.largestTimestamp``, and when ``segment.ms``
rolls it): one rule for a loaded segment (``LogSegment``), the cheap stats (``SegmentStat``) and
the cleaner's plan (``SegmentFacts``), so retention, the roll on append, the idle roll, the
sensors and the cleaner agree on them."""

from __future__ import annotations

from collections.abc import Iterable

from ..record import RawBatch, decode_batch


def largest_timestamp(max_record_timestamp: int, mtime_ms: int) -> int:
    """The largest record timestamp, or the file's mtime when no record carries one (-1, as
    magic 0 records): what time retention and the cleaner's horizons judge the segment by."""
    return max_record_timestamp if max_record_timestamp >= 0 else mtime_ms


def segment_ms_roll_at(rolling_timestamp: int, max_segment_ms: int, jitter_ms: int = 0) -> int:
    """The first moment ``segment.ms`` rolls a segment whose rolling timestamp (its first batch's
    maxTimestamp) is ``rolling_timestamp``: Kafka's ``LogSegment.shouldRoll`` rolls once
    ``time - rollingBasedTimestamp > maxSegmentMs - rollJitterMs``. An append judges it at the
    incoming batch's maxTimestamp, the cleaner's idle roll at its clock."""
    return rolling_timestamp + max_segment_ms - jitter_ms + 1


def first_record_at(batches: Iterable[RawBatch], timestamp: int, starting_offset: int,
                    path: str | None) -> tuple[int, int] | None:
    """(timestamp, offset) of the first record of ``batches`` (a segment's, from its time
    index's floor entry on) with a timestamp at or after ``timestamp`` and an offset at or
    after ``starting_offset``: Kafka's ``LogSegment.findOffsetByTimestamp`` scan, for a local
    segment and a remote one alike."""
    for raw in batches:
        header = raw.header
        if header.is_control or header.max_timestamp < timestamp:
            continue
        for record in decode_batch(raw, path=path):
            if record.timestamp >= timestamp and record.offset >= starting_offset:
                return record.timestamp, record.offset
    return None
