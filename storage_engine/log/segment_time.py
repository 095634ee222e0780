"""The time Kafka judges a segment by (``LogSegment.largestTimestamp``): one rule for a loaded
segment (``LogSegment``), the cheap stats (``SegmentStat``) and the cleaner's plan
(``SegmentFacts``), so retention, the sensors and the cleaner agree on it."""

from __future__ import annotations


def largest_timestamp(max_record_timestamp: int, mtime_ms: int) -> int:
    """The largest record timestamp, or the file's mtime when no record carries one (-1, as
    magic 0 records): what time retention and the cleaner's horizons judge the segment by."""
    return max_record_timestamp if max_record_timestamp >= 0 else mtime_ms
