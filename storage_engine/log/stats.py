"""Cheap per-partition facts read from file metadata, never from record bytes.

Retention planning, the dirty-ratio check and the platform's sensors run over thousands of
partitions on every tick, so they must not open logs: a directory listing, one ``stat`` per
segment, the checkpoint files (read once per log dir) and, only when a decision needs it, the
tail of a time index (for some segments also the batch headers after the offset index's tail,
below). Each segment's largest timestamp is therefore computed lazily.

A rolled segment's largest timestamp is its time index's last entry, the final one its roll
wrote before trimming the file (Kafka's rule). The active segment's time index lags behind the
batches appended since its last entry, and a time index still untrimmed (a zero tail) or
without any entry may be one whose roll a kill cut short, in a version before the roll wrote
that entry first: for those, the last entry is completed by the batch headers after the last
offset-index entry (at most ``index.interval.bytes`` plus the newest batch), as
``LogSegment.read_max_timestamp`` does for every segment. Headers are 61 bytes of each batch;
record payloads are still never read.

A reader of a log dir whose recovery is pending plans from the read-only view instead
(``LogManager.planning_stats``, ``live_stats``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..files.naming import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    check_partition_entry,
    parse_partition_dir,
)
from ..files.nofollow import check_not_symlink, open_nofollow
from ..index import OffsetIndex, TimeIndex
from ..record import BatchHeader
from ..record.file_records import read_headers
from .checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_checkpoint,
)
from .segment_time import largest_timestamp

if TYPE_CHECKING:
    from .log import Log


@dataclass
class SegmentStat:
    """One segment as the planners see it. ``largest_timestamp`` is read on first use."""

    base_offset: int
    size_bytes: int
    mtime_ms: int
    is_active: bool
    _timestamp_loader: Callable[[], int] | None = field(default=None, repr=False, compare=False)
    _largest: int | None = field(default=None, repr=False, compare=False)

    @property
    def max_record_timestamp(self) -> int:
        """The largest record timestamp in the segment, -1 when its records carry none."""
        if self._largest is None:
            self._largest = self._timestamp_loader() if self._timestamp_loader else -1
        return self._largest

    @property
    def largest_timestamp(self) -> int:
        """What time retention judges (Kafka's rule): the max record timestamp, else the file mtime."""
        return largest_timestamp(self.max_record_timestamp, self.mtime_ms)

    @classmethod
    def of(cls, base_offset: int, size_bytes: int, mtime_ms: int, is_active: bool, largest: int) -> SegmentStat:
        """A stat with a known timestamp (from a live segment, or built by a test)."""
        return cls(base_offset, size_bytes, mtime_ms, is_active, None, largest)


@dataclass
class PartitionStats:
    topic: str
    partition: int
    directory: Path
    segments: list[SegmentStat]
    log_start_offset: int
    cleaner_checkpoint: int | None = None
    log_end_offset: int | None = None  # known for an open log's stats; else read when needed (``segment_next_offset``)
    swap_left: bool = False  # a ``.swap`` file is there: a load may complete it, so the files alone do not say the log

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self.segments)

    def fingerprint(self) -> tuple[tuple[int, int], ...]:
        """Base offset and size of every non-active segment: what a plan was computed from."""
        return tuple((s.base_offset, s.size_bytes) for s in self.segments if not s.is_active)


def _max_over_headers(log_path: str, start: int, value: Callable[[BatchHeader], int], default: int) -> int:
    """Max of ``value`` over the batch headers from ``start`` to the end of the file (headers
    only, never records); ``default`` for none, or no file."""
    try:
        fd = open_nofollow(log_path, os.O_RDONLY)
    except FileNotFoundError:
        return default
    try:
        headers = read_headers(fd, start=start, end=os.fstat(fd).st_size, path=log_path)
        return max((value(header) for header, _ in headers), default=default)
    finally:
        os.close(fd)


def _header_max_timestamp(log_path: str, start: int) -> int:
    """Max of the batch headers' max timestamps from ``start`` to the end of the file."""
    return _max_over_headers(log_path, start, lambda header: header.max_timestamp, -1)


def _segment_max_timestamp(directory: str, base: int, is_active: bool, has_time_index: bool) -> Callable[[], int]:
    # Plain strings, not pathlib: building Path objects cost more than the reads themselves
    # when planning ten thousand partitions.
    prefix = f"{directory}/{base:020d}"

    def load() -> int:
        time_index = prefix + TIME_INDEX_SUFFIX
        log_path = prefix + LOG_SUFFIX
        if not has_time_index:
            return _header_max_timestamp(log_path, 0)
        last, trimmed = TimeIndex.read_tail(time_index, base)
        indexed = last.timestamp
        if indexed >= 0 and trimmed and not is_active:  # a finished roll's final entry covers every batch
            return indexed
        tail_start = OffsetIndex.read_last_entry_only(prefix + INDEX_SUFFIX, base).position
        return max(indexed, _header_max_timestamp(log_path, tail_start))

    return load


def read_partition_stats(
    directory: Path,
    *,
    log_start_offset_checkpoint: int | None = None,
    cleaner_checkpoint: int | None = None,
    topic_partition: tuple[str, int] | None = None,
) -> PartitionStats:
    """Stats of one partition directory (``<topic>-<n>``), from metadata (and, lazily, index tails
    and batch headers; see the module docstring). What every engine
    command refuses in it is refused here too, naming it: a symbolic link (the directory or in
    it), a FIFO, socket or device, a misnamed segment file, a directory where a segment's file
    belongs. Skipping them would show a log other than the one a run meets."""
    directory = directory if isinstance(directory, Path) else Path(directory)
    parsed = topic_partition or parse_partition_dir(directory.name)
    if parsed is None:
        raise ValueError(f"{directory} is not a partition directory (<topic>-<partition>)")
    entries = []
    time_indexes = set()
    swap_left = False
    check_not_symlink(directory)  # raises, naming the link: nothing is read through it
    with os.scandir(directory) as it:
        for entry in it:
            name = entry.name
            if not check_partition_entry(directory, entry):  # refuses what a load refuses, naming it
                continue
            if len(name) == 24 and name.endswith(LOG_SUFFIX):
                st = entry.stat(follow_symlinks=False)
                entries.append((int(name[:20]), st.st_size, int(st.st_mtime * 1000)))
            elif len(name) == 30 and name.endswith(TIME_INDEX_SUFFIX):
                time_indexes.add(name[:20])
            elif name.endswith(SWAP_SUFFIX):
                swap_left = True
    entries.sort()
    dir_str = str(directory)
    entries = _without_empty_strays(dir_str, entries)
    last = len(entries) - 1
    segments = [
        SegmentStat(base, size, mtime, i == last,
                    _segment_max_timestamp(dir_str, base, i == last, f"{base:020d}" in time_indexes))
        for i, (base, size, mtime) in enumerate(entries)
    ]
    first_base = segments[0].base_offset if segments else 0
    checkpoint = log_start_offset_checkpoint or 0
    if segments and checkpoint > segments[-1].base_offset and checkpoint > segment_next_offset(dir_str, segments[-1].base_offset):
        checkpoint = first_base  # damage, which the loader ignores (``_ignore_log_start_beyond_end``)
    return PartitionStats(parsed[0], parsed[1], directory, segments, max(checkpoint, first_base), cleaner_checkpoint,
                          swap_left=swap_left)


def _without_empty_strays(directory: str, entries: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The segments ``(base, size, mtime)`` without an empty one that starts inside the offsets
    of the segment before it, which a writable load removes (``LogLoader._without_strays``):
    counted, it would be planned for as a segment the run then does not find."""
    kept: list[tuple[int, int, int]] = []
    for entry in entries:
        if kept and entry[1] == 0 and entry[0] < segment_next_offset(directory, kept[-1][0]):
            continue
        kept.append(entry)
    return kept


def segment_next_offset(directory: str, base: int) -> int:
    """A segment's next offset, from the batch headers after its last index entry (never the
    records): the log end offset when it is the active segment (the cleaner's candidacy), and
    what tells damage from a log (a log start checkpoint past the last segment's base, an empty
    segment after another)."""
    prefix = f"{directory}/{base:020d}"
    start = OffsetIndex.read_last_entry_only(prefix + INDEX_SUFFIX, base).position
    return _max_over_headers(prefix + LOG_SUFFIX, start, lambda header: header.next_offset, base)


def live_stats(log: Log) -> PartitionStats:
    """Exact stats of an open log, max timestamps from the segments themselves: what retention
    re-plans from under the lock, the erasure report's deadline, and what a reader plans from
    while recovery is pending (the segments as the view cuts them, ``LogManager.planning_stats``)."""
    segments = [
        SegmentStat.of(s.base_offset, s.size, s.last_modified_ms, s is log.active_segment, s.max_timestamp_so_far)
        for s in log.segments
    ]
    return PartitionStats(log.topic, log.partition, log.dir, segments, log.log_start_offset,
                          log.log_dir.cleaner_offsets.get((log.topic, log.partition)), log.log_end_offset)


def log_dir_checkpoints(log_dir: Path) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """The log dir's log-start-offset and cleaner-offset checkpoints. A missing file is empty; a
    malformed one raises ``CheckpointError`` naming it, as every engine command that opens the
    dir refuses it: a view that took it for empty planned runs that would then be refused. The
    recovery-point checkpoint is read for the same reason, though no plan needs its entries
    (dry runs planned deletions that the run then refused over it)."""
    log_dir = Path(log_dir)
    read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
    return read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT), read_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT)
