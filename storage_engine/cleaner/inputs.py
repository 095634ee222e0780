"""The segments a pass reads: each opened read-only with its own file descriptor
(:class:`InputSegment`), identified by inode and size (:class:`SegmentRef`) so the swap can
check nothing changed, and the log as it was when the pass began (:class:`LogSnapshot`).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .plan import LONG_MAX, SegmentFacts
from ..errors import CorruptRecordError, LogChangedError
from ..naming import INDEX_SUFFIX, TIME_INDEX_SUFFIX, segment_file
from ..nofollow import open_nofollow
from ..record import RawBatch, scan_batches
from ..record.records import BatchHeader
from ..record.rewrite import OFFSET_AND_LENGTH
from ..record.v2 import HEADER_STRUCT, RECORD_BATCH_OVERHEAD
from ..segment import LogSegment


MIN_READ_CHUNK = 64 * 1024
HEADER_HOP_READ = 16 * 1024


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
        self.facts = SegmentFacts(
            seg.base_offset,
            self.size,
            self.mtime_ms,
            is_active,
            index_bytes,
            time_bytes,
            largest_timestamp_loader=lambda s=seg: s.max_timestamp_so_far,
            first_batch_timestamp_loader=lambda: self.first_batch_max_ts,
        )

    @property
    def ref(self) -> SegmentRef:
        return SegmentRef(str(self.path), self.base_offset, self.inode, self.size, self.mtime_ms)

    @classmethod
    def from_ref(cls, ref: SegmentRef, chunk: int = MIN_READ_CHUNK) -> "InputSegment":
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
        self.facts = None
        return self

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def batches_in_chunks(self, start: int = 0) -> Iterator[tuple[RawBatch, bytes, int]]:
        """Complete batches from ``start`` to the size seen at the snapshot, read in chunks, each with
        the chunk it was read in and its offset there (so its records can be read in place)."""
        pos, end, chunk, path = start, self.size, self.chunk, str(self.path)
        while pos < end:
            buf = os.pread(self.fd, min(chunk, end - pos), pos)
            if not buf:
                return
            consumed = 0
            for raw in scan_batches(buf, path=path, base_position=pos):
                offset = raw.position - pos
                consumed = offset + raw.header.size_in_bytes
                yield raw, buf, offset
            if consumed == 0:
                if len(buf) < 12:
                    return
                _, length = OFFSET_AND_LENGTH.unpack_from(buf, 0)
                needed = length + 12
                if pos + needed > end or needed <= len(buf):
                    return
                # Kafka doubles its buffers until a batch fits and keeps them for the rest of the
                # segment; so do we (batches of one segment tend to be alike).
                chunk = max(needed, 2 * chunk)
                continue
            pos += consumed

    def headers(self) -> Iterator[tuple[BatchHeader, int]]:
        """Every batch header with its position, reading only the headers of large batches."""
        pos, end, path = 0, self.size, str(self.path)
        buf = b""
        buf_pos = 0
        while pos + 17 <= end:
            if pos + RECORD_BATCH_OVERHEAD > buf_pos + len(buf):
                buf = os.pread(self.fd, min(HEADER_HOP_READ, end - pos), pos)
                buf_pos = pos
            i = pos - buf_pos
            base, length, _, magic = struct.unpack_from(">qiib", buf, i)
            if length < 14 or pos + 12 + length > end:
                return  # torn tail (only possible in the active segment)
            if magic == 2:
                if len(buf) - i < RECORD_BATCH_OVERHEAD:
                    return
                header = BatchHeader(*HEADER_STRUCT.unpack_from(buf, i))
            else:
                raw = self.read_batch(pos, length + 12)
                header = raw.header
            yield header, pos
            pos += 12 + length

    def read_batch(self, position: int, size: int) -> RawBatch:
        data = os.pread(self.fd, size, position)
        raws = list(scan_batches(data, path=str(self.path), base_position=position))
        if len(raws) != 1:
            raise CorruptRecordError("batch could not be re-read", path=str(self.path), position=position)
        return raws[0]


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
        return [s.facts for s in self.segments]

    def close(self) -> None:
        for s in self.segments:
            s.close()
