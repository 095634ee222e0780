"""The segments a pass reads: each opened read-only with its own file descriptor
(:class:`InputSegment`), identified by inode and size (:class:`SegmentRef`) so the swap can
check nothing changed, and the log as it was when the pass began (:class:`LogSnapshot`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import LogChangedError
from ..files.naming import INDEX_SUFFIX, TIME_INDEX_SUFFIX, segment_file
from ..files.nofollow import open_nofollow
from ..log.segment import LogSegment
from ..record import RawBatch
from ..record.file_records import read_batch_at, read_batches, read_batches_skipping, read_headers
from ..record.records import BatchHeader
from .plan import LONG_MAX, SegmentFacts

MIN_READ_CHUNK = 64 * 1024


@dataclass(frozen=True)
class SegmentRef:
    """A segment as a pass saw it, small and picklable: what a task in another process needs to
    reread exactly the bytes the pass planned with (and to notice when they are gone)."""

    path: str
    base_offset: int
    inode: int
    size: int
    mtime_ms: int


class InputSegment:
    """A segment as one pass reads it: our own read-only descriptor, opened under the partition
    lock, with the inode and size seen then (the commit compares them with the live log)."""

    def __init__(self, seg: LogSegment, is_active: bool, chunk: int) -> None:
        self.base_offset = seg.base_offset
        self.path = seg.log_path
        self.is_active = is_active
        self.fd = open_nofollow(self.path, os.O_RDONLY)
        st = os.fstat(self.fd)
        self.inode = st.st_ino
        self.size = st.st_size if not is_active else min(st.st_size, seg.size)
        self.mtime_ms = int(st.st_mtime * 1000)
        self.chunk = chunk
        self.last_batch_base: int | None = None  # filled by the header scan
        self.first_batch_max_ts: int = LONG_MAX
        index_bytes = 0
        time_bytes = 0
        if not is_active:
            index_bytes = file_size(segment_file(seg.dir, seg.base_offset, INDEX_SUFFIX))
            time_bytes = file_size(segment_file(seg.dir, seg.base_offset, TIME_INDEX_SUFFIX))
        self.facts: SegmentFacts | None = SegmentFacts(
            seg.base_offset,
            self.size,
            self.mtime_ms,
            is_active,
            index_bytes,
            time_bytes,
            largest_timestamp_loader=lambda: seg.max_timestamp_so_far,
            first_batch_timestamp_loader=lambda: self.first_batch_max_ts,
        )

    @property
    def ref(self) -> SegmentRef:
        return SegmentRef(str(self.path), self.base_offset, self.inode, self.size, self.mtime_ms)

    @classmethod
    def from_ref(cls, ref: SegmentRef, chunk: int = MIN_READ_CHUNK) -> InputSegment:
        """Reopen a planned segment in another process; ``LogChangedError`` when the file is gone,
        was replaced or shrank (a retention or another cleaning got there first)."""
        self = cls.__new__(cls)
        self.base_offset = ref.base_offset
        self.path = Path(ref.path)
        self.is_active = False
        try:
            self.fd = open_nofollow(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise LogChangedError(f"segment {ref.path} is gone since the pass was planned") from None
        st = os.fstat(self.fd)
        if st.st_ino != ref.inode or st.st_size < ref.size:
            os.close(self.fd)
            raise LogChangedError(f"segment {ref.path} was replaced or truncated since the pass was planned")
        self.inode, self.size, self.mtime_ms, self.chunk = ref.inode, ref.size, ref.mtime_ms, chunk
        self.last_batch_base = None
        self.first_batch_max_ts = LONG_MAX
        self.facts = None  # planned in the process that made the ref
        return self

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def batches_in_chunks(self, start: int = 0) -> Iterator[tuple[RawBatch, bytes, int]]:
        """Complete batches from ``start`` to the size seen at the snapshot, read in chunks, each with
        the chunk it was read in and its offset there (so its records can be read in place)."""
        return read_batches(self.fd, start=start, end=self.size, chunk=self.chunk, path=str(self.path))

    def batches_skipping(self, skip: Callable[[BatchHeader], bool]) -> Iterator[tuple[RawBatch, bytes | None, int]]:
        """:meth:`batches_in_chunks` from the start, leaving large batches that ``skip`` accepts
        unread (their data empty, their chunk None: see ``read_batches_skipping``)."""
        return read_batches_skipping(self.fd, end=self.size, chunk=self.chunk, skip=skip, path=str(self.path))

    def headers(self) -> Iterator[tuple[BatchHeader, int]]:
        """Every batch header with its position, reading only the headers of large batches."""
        return read_headers(self.fd, end=self.size, path=str(self.path))

    def read_batch(self, position: int, size: int) -> RawBatch:
        return read_batch_at(self.fd, position, size, str(self.path))


def file_size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


@dataclass
class LogSnapshot:
    segments: list[InputSegment]
    log_start_offset: int
    log_end_offset: int
    checkpoint: int | None

    @property
    def facts(self) -> list[SegmentFacts]:
        facts = [s.facts for s in self.segments if s.facts is not None]
        assert len(facts) == len(self.segments), "a snapshot holds segments opened here, each with its facts"
        return facts

    def close(self) -> None:
        for s in self.segments:
            s.close()
