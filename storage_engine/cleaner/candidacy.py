"""Candidacy from a partition's planning stats (``LogManager.planning_stats``: file metadata, or
a read-only view's while recovery is pending), without a cleaning pass: what the sensors and
``LogCleanerManager``'s choice of the filthiest log need."""

from __future__ import annotations

import os
from pathlib import Path

from ..config.topic import LogConfig
from ..files.naming import LOG_SUFFIX, segment_file
from ..files.nofollow import open_nofollow
from ..log.stats import SegmentStat, segment_next_offset
from ..record.file_records import read_headers
from .plan import LONG_MAX, LogToClean, SegmentFacts, log_to_clean


def first_batch_max_timestamp(log_path: Path) -> int:
    """maxTimestamp of a segment's first batch, from its header alone; LONG_MAX when empty."""
    try:
        fd = open_nofollow(log_path, os.O_RDONLY)
    except FileNotFoundError:
        return LONG_MAX
    try:
        first = next(read_headers(fd, end=os.fstat(fd).st_size, path=str(log_path)), None)
    finally:
        os.close(fd)
    return LONG_MAX if first is None else first[0].max_timestamp


def _segment_facts(directory: Path, segment: SegmentStat) -> SegmentFacts:
    """A segment's planning facts from its cheap stats; its timestamps are read only when a lag
    decision needs them."""
    log_path = segment_file(directory, segment.base_offset, LOG_SUFFIX)
    return SegmentFacts(segment.base_offset, segment.size_bytes, segment.mtime_ms, segment.is_active,
                        largest_timestamp_loader=lambda: segment.max_record_timestamp,
                        first_batch_timestamp_loader=lambda: first_batch_max_timestamp(log_path))


def candidacy_from_stats(stats, config: LogConfig, now_ms: int) -> LogToClean | None:
    """A partition's :class:`LogToClean` from its planning stats (their log end offset when an
    open log's, else read from the active segment's headers; the first 61 bytes of dirty
    segments read here): what ``logctl compact`` uses to
    pick and order partitions. Open transactions are not seen here (the last stable offset is
    taken as the log end offset); the cleaning pass itself scans for them."""
    if not stats.segments:
        return None
    directory = Path(stats.directory)
    facts = [_segment_facts(directory, s) for s in stats.segments]
    leo = stats.log_end_offset
    if leo is None:
        leo = segment_next_offset(str(directory), facts[-1].base_offset)
    return log_to_clean(stats.topic, stats.partition, facts, checkpoint=stats.cleaner_checkpoint,
                        log_start_offset=stats.log_start_offset, log_end_offset=leo, now_ms=now_ms, config=config)

