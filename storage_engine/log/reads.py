"""How a :class:`~storage_engine.log.log.Log` answers reads (Kafka's ``LocalLog.read`` and
``UnifiedLog.fetchOffsetByTimestamp``), apart from the log's writes.

Reads take no lock: they notice a changed segment list through the generation counter, and a
read that meets a segment swapped or deleted underneath it reloads the log and starts again.
They refuse to step over offsets that go backwards or vanish where no cleaner has been, but
return what comes before such a problem first. A ``Log`` holds one ``LogReader(log)`` and answers
its reads through it; the log owns the segments, the lock and the loading these methods use.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from ..errors import CorruptRecordError, LogChangedError, LogGapError, OffsetOutOfRangeError
from ..record import RawBatch, Record, decode_batch
from ..record.records import BatchHeader
from .isolation import FetchIsolation, committed_batches, fetch_isolation

if TYPE_CHECKING:
    from .log import Log

#: ``ListOffsets``' special timestamps.
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
_READ_RETRIES = 20


def offset_order_error(expected: int, base_offset: int, where: str, *, first: bool,
                       cleaned: bool) -> CorruptRecordError | LogGapError | None:
    """The rule of :meth:`LogReader.offset_order_error`, for any reader of batches in offset
    order (the local log's, the remote tier's): ``cleaned`` says a cleaner may have removed
    offsets at ``expected`` (a compacted topic, or below the cleaner checkpoint)."""
    if base_offset < expected and not first:
        return CorruptRecordError(f"{where}: offsets go backwards: base offset {base_offset} after offset {expected - 1}")
    if base_offset <= expected or cleaned:
        return None
    return LogGapError(f"{where}: offsets {expected} to {base_offset - 1} are missing: no batch holds them "
                       f"(a lost segment, or a damaged batch header)")


class LogReader:
    """The read half of a ``Log``, composed into it (see the module docstring)."""

    def __init__(self, log: Log) -> None:
        self.log = log

    def _with_retries(self, fn):
        """Run a read; when a segment was swapped or deleted underneath, reload and try again."""
        last: Exception | None = None
        for _ in range(_READ_RETRIES):
            try:
                self.log.refresh()
                return fn()
            except (LogChangedError, FileNotFoundError) as exc:
                last = exc
                self.log._reload_changed()
        raise LogChangedError(f"{self.log.tp} kept changing while it was read: {last}")

    def _check_range(self, offset: int) -> None:
        if offset < self.log.log_start_offset or offset > self.log._leo:
            raise OffsetOutOfRangeError(
                f"Received request for offset {offset} for partition {self.log.tp}, but we only have log segments "
                f"in the range {self.log.log_start_offset} to {self.log._leo}."
            )

    def batches_from(self, start_offset: int, skip: Callable[[BatchHeader], bool] | None = None
                     ) -> Iterator[RawBatch]:
        """Batches holding offsets at or after ``start_offset``, across segments, up to the LEO.
        ``skip``: large batches it accepts come with their header only (``LogSegment.batches``)."""
        log = self.log
        i = log._segment_index(start_offset)
        first = True
        expected = start_offset  # the offset the next batch should hold
        for seg in log.segments[i:]:
            if first:
                raw = seg.translate_offset(start_offset)
                if raw is None:
                    continue
                start_pos = raw.position
            else:
                start_pos = 0
            end = log._tail_position if seg is log.active_segment else None
            for raw in seg.batches(start_pos, end, skip):
                # the order first: a damaged base offset past the log end is a gap, not the end
                problem = self.offset_order_error(expected, raw.header.base_offset,
                                                  f"{seg.log_path} at position {raw.position}", first=first)
                if problem:
                    raise problem
                if raw.header.base_offset >= log._leo:
                    return
                first = False
                expected = raw.header.next_offset
                yield raw
        # past the last batch short of the log end: offsets lost at the end of the log, which
        # appends continue past (``LogLoader._log_end_offset``)
        problem = self.offset_order_error(expected, log._leo, f"{log.dir} after its last batch", first=first)
        if problem:
            raise problem

    def offset_order_error(self, expected: int, base_offset: int, where: str, *,
                           first: bool = False) -> CorruptRecordError | LogGapError | None:
        """What is wrong with a batch at ``base_offset`` read where offset ``expected`` comes next
        (after the previous batch, or the read's start offset when ``first``), or None.

        Offsets never go backwards. They vanish legitimately only where a cleaner has been (a
        compacted topic, or below the partition's cleaner checkpoint after a policy change); any
        other gap is a lost segment or a damaged batch header (the base offset lies outside the
        CRC), and readers refuse to step over it rather than silently skip offsets.
        """
        return offset_order_error(expected, base_offset, where, first=first,
                                  cleaned=self.log.config.compact or expected < self.log._cleaned_to)

    def read_batches(self, start_offset: int, *, max_bytes: int = 1 << 20, max_batches: int | None = None) -> list[RawBatch]:
        """Whole batches from the one holding ``start_offset`` (at least one, then up to ``max_bytes``)."""

        def run() -> list[RawBatch]:
            self._check_range(start_offset)
            out: list[RawBatch] = []
            total = 0
            try:
                for raw in self.batches_from(start_offset):
                    size = raw.header.size_in_bytes
                    if out and (total + size > max_bytes or (max_batches is not None and len(out) >= max_batches)):
                        break
                    out.append(RawBatch(raw.header, raw.position, bytes(raw.data)))
                    total += size
            except (LogGapError, CorruptRecordError):
                if not out:
                    raise
                # return what comes before the problem; the next read starts there and raises
            return out

        return self._with_retries(run)

    def read(
        self,
        start_offset: int,
        *,
        max_records: int | None = None,
        max_bytes: int = 1 << 20,
        include_control: bool = False,
        isolation_level: str | FetchIsolation = FetchIsolation.READ_UNCOMMITTED,
    ) -> list[Record]:
        """Records at or after ``start_offset``, limited by count and (batch-granular) bytes:
        without ``max_records``, those of the first window of ``max_bytes`` of batches (at least
        one batch). ``read_committed`` reads below the last stable offset, leaves out aborted
        transactions (``isolation.py``) and reads past windows it leaves out whole, all in one
        pass over the batches, so a read costs the range it covers."""
        windows = _Windows(max_bytes)
        if fetch_isolation(isolation_level) is FetchIsolation.READ_UNCOMMITTED:
            return self._records(windows.count(self._chunked(start_offset, max_bytes)), windows, start_offset,
                                 max_records, include_control, read_past_empty=False)
        end = self.log.last_stable_offset()

        def committed() -> list[Record]:
            self._check_range(start_offset)
            windows.reset()
            batches = committed_batches(windows.count(self.batches_from(start_offset)), end, self.log.segment_path)
            return self._records(batches, windows, start_offset, max_records, include_control, read_past_empty=True)

        return self._with_retries(committed)

    def _chunked(self, start_offset: int, max_bytes: int) -> Iterator[RawBatch]:
        """The batches from ``start_offset`` to the log end, read ``max_bytes`` at a time (each
        read retried on its own when the log changes underneath)."""
        offset = start_offset
        while offset < self.log.log_end_offset or offset == start_offset:
            chunk = self.read_batches(offset, max_bytes=max_bytes)
            if not chunk:
                return
            yield from chunk
            offset = chunk[-1].header.next_offset

    def _records(self, batches: Iterator[RawBatch], windows: _Windows, start_offset: int, max_records: int | None,
                 include_control: bool, *, read_past_empty: bool) -> list[Record]:
        """The records at or after ``start_offset`` of ``batches``, decoded: up to ``max_records``,
        or, without it, those of the first window (the first that has any when
        ``read_past_empty``). A damaged batch, or a gap, after some records ends the list there
        (the next read starts there and raises); before any, it raises."""
        out: list[Record] = []
        last_window = None if read_past_empty else 0
        try:
            for raw in batches:
                window = windows.of(raw.header.base_offset)
                if max_records is None and last_window is not None and window > last_window:
                    break
                if raw.header.is_control and not include_control:
                    continue
                for rec in decode_batch(raw, path=self.log.segment_path(raw.header.base_offset)):
                    if rec.offset >= start_offset:
                        out.append(rec)
                        last_window = window if last_window is None else last_window
                        if max_records is not None and len(out) >= max_records:
                            return out
        except (LogGapError, CorruptRecordError):
            if out:
                return out
            raise
        return out

    def iter_batches(self, start_offset: int | None = None) -> Iterator[RawBatch]:
        """Every batch from ``start_offset`` (default: the log start) to the end, for scans and dumps."""
        offset = self.log.log_start_offset if start_offset is None else start_offset
        while True:
            self.log.refresh()
            if offset >= self.log._leo:
                return
            batches = self.read_batches(offset, max_bytes=8 << 20)
            if not batches:
                return
            yield from batches
            offset = batches[-1].header.next_offset

    def offset_for_timestamp(self, timestamp: int, *, from_offset: int | None = None) -> tuple[int, int] | None:
        """(timestamp, offset) as ListOffsets answers it; -2 earliest, -1 latest, -3 max timestamp.
        ``from_offset``: only offsets at or above it count (a tiered log's local part starts at
        the remote tier's end; the copies below it are shadowed)."""

        def run() -> tuple[int, int] | None:
            if timestamp == EARLIEST_TIMESTAMP:
                return -1, self.log.log_start_offset
            if timestamp == LATEST_TIMESTAMP:
                return -1, self.log._leo
            floor = max(self.log.log_start_offset, from_offset or 0)
            segments = self.log.segments[self.log._segment_index(floor):]
            if timestamp == MAX_TIMESTAMP:
                best = max(segments, key=lambda s: s.max_timestamp_so_far)
                ts = best.max_timestamp_so_far
                if ts < 0:
                    return None
                return best.find_offset_by_timestamp(ts, floor)
            for seg in segments:
                if seg.largest_timestamp >= timestamp:
                    found = seg.find_offset_by_timestamp(timestamp, floor)
                    if found is not None:
                        return found
            return None

        return self._with_retries(run)


class _Windows:
    """Which ``max_bytes`` window of a read each batch falls in, as the batches stream past: a
    window takes at least one batch, then batches while their bytes fit (``read_batches``)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.reset()

    def reset(self) -> None:
        self._starts: list[int] = []  # base offset of each window's first batch
        self._filled = 0

    def count(self, batches: Iterable[RawBatch]) -> Iterator[RawBatch]:
        for raw in batches:
            size = raw.header.size_in_bytes
            if not self._starts or self._filled + size > self.max_bytes:
                self._starts.append(raw.header.base_offset)
                self._filled = 0
            self._filled += size
            yield raw

    def of(self, offset: int) -> int:
        """The window of the batch at base offset ``offset`` (one already counted)."""
        return bisect_right(self._starts, offset) - 1
