"""Candidacy from file metadata alone, without opening the log (what the sensors and
``LogCleanerManager``'s choice of the filthiest log need), and the sweep of ``.deleted`` files."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from .plan import LONG_MAX, LogToClean, SegmentFacts, log_to_clean
from ..config import LogConfig
from ..index import OffsetIndex
from ..naming import INDEX_SUFFIX, LOG_SUFFIX, segment_file
from ..nofollow import open_nofollow
from ..record.v2 import RECORD_BATCH_OVERHEAD


def first_batch_max_timestamp(log_path: Path) -> int:
    """maxTimestamp of a segment's first batch from its first bytes; LONG_MAX when empty."""
    try:
        fd = open_nofollow(log_path, os.O_RDONLY)
    except FileNotFoundError:
        return LONG_MAX
    try:
        head = os.pread(fd, RECORD_BATCH_OVERHEAD, 0)
    finally:
        os.close(fd)
    if len(head) < 26:
        return LONG_MAX
    magic = head[16]
    if magic == 2 and len(head) >= 43:
        return struct.unpack_from(">q", head, 35)[0]
    if magic == 1:
        return struct.unpack_from(">q", head, 18)[0]
    return -1


def log_end_offset_on_disk(directory: Path, active_base: int) -> int:
    """Next offset of the active segment, scanning headers after its last index entry."""
    index = segment_file(directory, active_base, INDEX_SUFFIX)
    start = 0
    if index.exists():
        start = OffsetIndex.read_last_entry_only(index, active_base).position
    nxt = active_base
    try:
        fd = open_nofollow(segment_file(directory, active_base, LOG_SUFFIX), os.O_RDONLY)
    except FileNotFoundError:
        return nxt
    try:
        pos, size = start, os.fstat(fd).st_size
        while pos + 17 <= size:
            head = os.pread(fd, 17, pos)
            base, length, _, magic = struct.unpack(">qiib", head)
            if length < 14 or pos + 12 + length > size:
                break
            if magic == 2:
                delta = struct.unpack(">i", os.pread(fd, 4, pos + 23))[0]
                nxt = base + delta + 1
            else:
                nxt = base + 1
            pos += 12 + length
    finally:
        os.close(fd)
    return nxt


def candidacy_from_stats(stats, config: LogConfig, now_ms: int) -> LogToClean | None:
    """A partition's :class:`LogToClean` from ``stats.read_partition_stats`` (file metadata, the
    time index tails and the first 61 bytes of dirty segments): what ``logctl compact`` uses to
    pick and order partitions. Open transactions are not seen here (the last stable offset is
    taken as the log end offset); the cleaning pass itself scans for them."""
    if not stats.segments:
        return None
    directory = Path(stats.directory)
    facts = [
        SegmentFacts(
            s.base_offset,
            s.size_bytes,
            s.mtime_ms,
            s.is_active,
            largest_timestamp_loader=lambda s=s: s.max_record_timestamp,
            first_batch_timestamp_loader=lambda s=s: first_batch_max_timestamp(
                segment_file(directory, s.base_offset, LOG_SUFFIX)
            ),
        )
        for s in stats.segments
    ]
    leo = log_end_offset_on_disk(directory, facts[-1].base_offset)
    return log_to_clean(stats.topic, stats.partition, facts, checkpoint=stats.cleaner_checkpoint,
                        log_start_offset=stats.log_start_offset, log_end_offset=leo, now_ms=now_ms, config=config)

