"""One log segment: a ``.log`` file, its sparse ``.index`` and ``.timeindex``, and its
``.txnindex`` of aborted transactions.

Mirrors Kafka's ``LogSegment``: appends go to the end of the ``.log`` and add an index entry
once more than ``index.interval.bytes`` were written since the last one; reads translate an
offset to a file position through the offset index and then scan batch headers forward;
``recover()`` rebuilds the indexes from the file and truncates a torn or corrupt tail. The
transaction index is apart from the pair (Kafka's too): it takes an entry per aborted
transaction, not per ``index.interval.bytes``, and is created by its first entry.

The ``.log`` file descriptor is opened when the segment object is created, so a segment that
another process renames or deletes afterwards stays readable through it (POSIX keeps the
inode alive). A segment created for appends creates both index files with its ``.log``
(``_create_index_files``); a loaded segment's are opened lazily. The two indexes are one
``SegmentIndexes``, changed together; the recovery walk and the loader's checks of one segment
are in ``segment_recovery.py``. Before an index is trusted the segment checks
that its ``.log`` path still names the inode it holds, because an index that belongs to a
swapped-in replacement would point into the wrong file (``LogChangedError`` then makes the
log reload and retry).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..config.topic import LogConfig
from ..errors import LogChangedError, LogError
from ..files.naming import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, segment_file
from ..files.nofollow import open_nofollow
from ..index import IndexMark, TransactionIndex, TxnIndexMark
from ..limits import INT_MAX, LONG_MAX
from ..record import RawBatch
from ..record.file_records import read_batches, read_batches_skipping
from ..record.records import BatchHeader
from .aborted_txns import AbortedTxnTracker
from .segment_indexes import SegmentIndexes
from .segment_recovery import IndexRebuild, TxnIndexRebuild, read_end, valid_prefix
from .segment_time import first_record_at, largest_timestamp, segment_ms_roll_at

_READ_CHUNK = 1 << 20


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class FetchSlice:
    """Bytes of whole batches (Kafka reads are batch-granular) starting at ``position``."""

    position: int
    data: bytes
    first_batch_base_offset: int


@dataclass(frozen=True)
class AppendMark:
    """A segment's length, index marks and cached facts before a produce call (``rollback``)."""

    size: int
    max_ts: tuple[int, int] | None
    rolling_based_timestamp: int | None
    bytes_since_last_index_entry: int | None
    offset_index: IndexMark
    time_index: IndexMark
    txn_index: TxnIndexMark


@dataclass(frozen=True)
class RollDecision:
    """Why a segment must roll before an append, or ``reason=None`` when it need not."""

    reason: str | None

    def __bool__(self) -> bool:
        return self.reason is not None


class LogSegment:
    """A segment of one partition; see the module docstring for the concurrency rules."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        *,
        file_suffix: str = "",
        create: bool = False,
        writable: bool = True,
        created_ms: int | None = None,
    ) -> None:
        self.dir = Path(directory)
        self.base_offset = base_offset
        self.config = config
        self.file_suffix = file_suffix
        self.writable = writable
        self.log_path = segment_file(self.dir, base_offset, LOG_SUFFIX + file_suffix)
        flags = os.O_RDWR if writable else os.O_RDONLY
        if create:
            flags |= os.O_CREAT
        self._fd = open_nofollow(self.log_path, flags)
        self._inode = os.fstat(self._fd).st_ino
        self._size = os.fstat(self._fd).st_size
        self.indexes = SegmentIndexes.open(self.dir, base_offset, file_suffix, config.segment_index_bytes,
                                           writable=writable)
        self.offset_index, self.time_index = self.indexes.both  # the pair's members, as callers name them
        self.txn_index = TransactionIndex(segment_file(self.dir, base_offset, TXN_INDEX_SUFFIX + file_suffix),
                                          base_offset, writable=writable)
        self._indexes_checked = False
        self._max_ts: tuple[int, int] | None = None  # (max timestamp so far, offset of it)
        self.indexes_forgotten = False  # see ``forget_indexes``
        self._view_limit: int | None = None  # see ``limit_view``
        self._rolling_based_timestamp: int | None = None
        self._bytes_since_last_index_entry: int | None = None  # known after the first append
        self.created_ms = now_ms() if created_ms is None else created_ms
        jitter = config.segment_jitter_ms
        self.roll_jitter_ms = 0 if jitter == 0 else random.randrange(min(jitter, config.segment_ms))
        if create and writable:
            self._create_index_files()

    def _create_index_files(self) -> None:
        """Both indexes of a segment created for appends, beside its ``.log``: a reader never
        finds a live writer's new segment without them (``AbstractIndex.create_file``). When one
        cannot be created (a full disk, a file size limit below ``segment.index.bytes``), the
        segment's files go again, so the refused roll or load leaves nothing behind."""
        try:
            self.indexes.create_files()
        except BaseException:
            self.close(trim_indexes=False)
            self.delete_files()
            raise

    # ------------------------------------------------------------------ basic facts

    @property
    def size(self) -> int:
        """Bytes in the ``.log`` as this process knows them; ``refresh_size`` re-reads the file."""
        return self._size

    def refresh_size(self) -> int:
        self._size = os.fstat(self._fd).st_size
        if self._view_limit is not None:
            self._size = min(self._size, self._view_limit)
        return self._size

    @property
    def file_size(self) -> int:
        """Bytes in the ``.log`` file itself, whatever this object's view (``limit_view``)."""
        return os.fstat(self._fd).st_size

    @property
    def inode(self) -> int:
        return self._inode

    def still_on_disk(self) -> bool:
        """True while the ``.log`` path still names the file this object reads."""
        try:
            return os.stat(self.log_path).st_ino == self._inode
        except FileNotFoundError:
            return False

    def check_indexes(self) -> None:
        """Before an index is trusted: ``LogChangedError`` unless the ``.log`` path still names
        this object's file (see the module docstring); checked once per segment object."""
        if not self._indexes_checked:
            if not self.still_on_disk():
                raise LogChangedError(f"segment {self.log_path} was replaced or deleted")
            self._indexes_checked = True

    @property
    def last_modified_ms(self) -> int:
        return int(os.fstat(self._fd).st_mtime * 1000)

    def set_last_modified(self, ms: int) -> None:
        seconds = ms / 1000.0
        for path in self.existing_files():
            os.utime(path, (seconds, seconds))

    # ------------------------------------------------------------------ reading

    def batches(self, start_position: int = 0, end_position: int | None = None,
                skip: Callable[[BatchHeader], bool] | None = None) -> Iterator[RawBatch]:
        """Batches from ``start_position`` on, read in chunks; stops silently at a partial tail.
        ``skip``: large batches it accepts come with their header only (``read_batches_skipping``)."""
        end = self.size if end_position is None else end_position
        path = str(self.log_path)
        read: Iterator[tuple[RawBatch, bytes | None, int]]
        if skip is None:
            read = read_batches(self._fd, start=start_position, end=end, chunk=_READ_CHUNK, path=path)
        else:
            read = read_batches_skipping(self._fd, start=start_position, end=end, chunk=_READ_CHUNK, skip=skip,
                                         path=path)
        for raw, _, _ in read:
            yield raw

    def translate_offset(self, offset: int, starting_position: int = 0) -> RawBatch | None:
        """The first batch whose last offset is at or above ``offset``, or None if beyond this segment."""
        self.check_indexes()
        start = max(self.offset_index.lookup(offset).position, starting_position)
        for raw in self.batches(start):
            if raw.header.last_offset >= offset:
                return raw
        return None

    def read(self, start_offset: int, max_size: int, min_one_batch: bool = True) -> FetchSlice | None:
        """Whole batches from the one holding ``start_offset``, up to ``max_size`` bytes."""
        first = self.translate_offset(start_offset)
        if first is None:
            return None
        limit = max(max_size, first.header.size_in_bytes) if min_one_batch else max_size
        end = first.position
        for raw in self.batches(first.position):
            if end + raw.header.size_in_bytes - first.position > limit:
                break
            end = raw.position + raw.header.size_in_bytes
        data = os.pread(self._fd, end - first.position, first.position) if end > first.position else b""
        return FetchSlice(first.position, data, first.header.base_offset)

    def read_next_offset(self) -> int:
        """The offset after the last complete batch (the base offset for an empty segment)."""
        return read_end(self).next_offset

    @property
    def last_indexed_position(self) -> int:
        """The file position of the offset index's last entry (0 without one): only the batches
        from there on need reading to find where the segment ends, as Kafka's
        ``LogSegment.readNextOffset`` does."""
        return self.offset_index.lookup(LONG_MAX).position if self.offset_index.entries else 0

    def first_batch(self) -> RawBatch | None:
        return next(iter(self.batches(0)), None)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or after ``timestamp`` and ``starting_offset``."""
        self.check_indexes()
        entry = self.time_index.lookup(timestamp)
        start = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        return first_record_at(self.batches(start), timestamp, starting_offset, str(self.log_path))

    # ------------------------------------------------------------------ timestamps

    def _load_max_timestamp(self) -> tuple[int, int]:
        if self._max_ts is None:
            self._max_ts = self.read_max_timestamp()
        return self._max_ts

    def read_max_timestamp(self) -> tuple[int, int]:
        """Largest timestamp so far and its offset, found as Kafka's ``LogSegment`` finds it
        (``maxTimestampSoFar``): the time index's last entry, then the batches from the offset
        index's last entry on, which the time index may not cover yet. Retention judges the
        segment by it (the planning stats read the files so, but trust the final entry of a roll
        that trimmed the time index, ``stats.py``);
        ``verify`` compares what they read with every batch's, as a time index whose last entry
        understates the batches it covers would get the segment deleted early."""
        self.check_indexes()
        last = self.time_index.last_entry()
        best = (last.timestamp, last.offset)
        for raw in self.batches(self.last_indexed_position):
            if raw.header.max_timestamp > best[0]:
                best = (raw.header.max_timestamp, raw.header.last_offset)
        return best

    @property
    def max_timestamp_so_far(self) -> int:
        return self._load_max_timestamp()[0]

    @property
    def largest_timestamp(self) -> int:
        """What retention judges: the max record timestamp, or the file mtime when there is none."""
        return largest_timestamp(self.max_timestamp_so_far, self.last_modified_ms)

    def _rolling_timestamp(self) -> int:
        if self._rolling_based_timestamp is None:
            first = self.first_batch()
            self._rolling_based_timestamp = first.header.max_timestamp if first is not None else -1
        return self._rolling_based_timestamp

    # ------------------------------------------------------------------ writing

    def should_roll(
        self, incoming_bytes: int, max_timestamp_in_messages: int, max_offset_in_messages: int, now: int
    ) -> RollDecision:
        """Kafka's roll rules, checked before every non-empty append (``LogSegment.shouldRoll``)."""
        size = self.size
        if size > self.config.segment_bytes - incoming_bytes:
            return RollDecision("segment.bytes")
        if size > 0:
            rbt = self._rolling_timestamp()
            when, since = (max_timestamp_in_messages, rbt) if rbt >= 0 else (now, self.created_ms)
            if when >= segment_ms_roll_at(since, self.config.max_segment_ms, self.roll_jitter_ms):
                return RollDecision("segment.ms")
        self.check_indexes()
        if self.offset_index.is_full:
            return RollDecision("offset index full")
        if self.time_index.is_full:
            return RollDecision("time index full")
        if not 0 <= max_offset_in_messages - self.base_offset <= INT_MAX:
            return RollDecision("relative offset overflow")
        return RollDecision(None)

    def append(self, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int,
               data: bytes | bytearray) -> None:
        """Write already validated batches at the end; index them per ``index.interval.bytes``."""
        if not data:
            return
        position = self._size
        if position == 0:
            self._rolling_based_timestamp = largest_timestamp
        if not 0 <= largest_offset - self.base_offset <= INT_MAX:
            raise LogError(
                f"offset {largest_offset} cannot be stored relative to base offset {self.base_offset} in {self.log_path}"
            )
        view = memoryview(data)
        written = 0
        while written < len(data):
            written += os.pwrite(self._fd, view[written:], position + written)
        self._size = position + len(data)
        max_ts, _ = self._load_max_timestamp()
        if largest_timestamp > max_ts:
            self._max_ts = (largest_timestamp, offset_of_max_timestamp)
        if self._bytes_since_last_index_entry is None:
            # Kafka counts from 0 when it opens a segment, which is right for a broker that
            # lives for weeks; a short-lived producer process would then never index. Count
            # the bytes already written since the last entry instead: the result is what a
            # single long-lived writer would have produced.
            self.check_indexes()
            last = self.last_indexed_position
            self._bytes_since_last_index_entry = position - last
        if self._bytes_since_last_index_entry > self.config.index_interval_bytes and self.indexes.add_entry(
                largest_offset, position, *self._load_max_timestamp()):
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += len(data)

    def append_mark(self) -> AppendMark:
        """Where the segment stands before a produce call, so ``rollback`` can undo the call."""
        self.check_indexes()
        return AppendMark(self._size, self._max_ts, self._rolling_based_timestamp, self._bytes_since_last_index_entry,
                          *self.indexes.mark(), self.txn_index.mark())

    def rollback(self, mark: AppendMark) -> None:
        """Undo every append since ``mark``: the ``.log`` cut back to its old length (a torn batch
        included) and the indexes as they were. Shrinking needs no free space, so this works on
        the full disk that made the append fail."""
        os.ftruncate(self._fd, mark.size)
        self._size = mark.size
        self.indexes.rollback(mark.offset_index, mark.time_index)
        self.txn_index.rollback(mark.txn_index)
        self._max_ts = mark.max_ts
        self._rolling_based_timestamp = mark.rolling_based_timestamp
        self._bytes_since_last_index_entry = mark.bytes_since_last_index_entry

    def recover(self, transactions: AbortedTxnTracker | None = None) -> int:
        """Revalidate every batch, rebuild the three indexes, truncate at the end of the valid
        prefix (``segment_recovery.valid_prefix``): a torn write, a batch failing its CRC or
        structure checks and everything after either are cut, as Kafka's ``LogSegment.recover``
        does. Returns the number of bytes truncated. An index that fills before the segment ends
        takes no more entries (``SegmentIndexes.have_room``; the time index keeps its reserved
        slot for the last entry): a segment written under a larger ``segment.index.bytes`` or a
        smaller ``index.interval.bytes`` than its topic has now still recovers.

        ``transactions``: the transactions open at the segment's base offset (the loader
        rebuilds them from producer state, as Kafka's ``LogLoader.recoverSegment`` does; none
        when not given); it follows the segment's batches, so it is then the state at the next
        segment's base."""
        self.indexes.reset()
        self.txn_index.reset()
        rebuild = IndexRebuild(self.indexes, self.base_offset, self.config.index_interval_bytes)
        txn_rebuild = TxnIndexRebuild(self.txn_index, AbortedTxnTracker() if transactions is None else transactions,
                                      str(self.log_path))

        def visit(raw: RawBatch) -> None:
            rebuild(raw)
            txn_rebuild(raw)

        valid_bytes = valid_prefix(self, visit).size
        truncated = self.file_size - valid_bytes
        if truncated:
            os.ftruncate(self._fd, valid_bytes)
        self._size = valid_bytes
        max_ts, offset_of_max = rebuild.max_timestamp, rebuild.offset_of_max_timestamp
        self.time_index.maybe_append(max_ts, offset_of_max, skip_full_check=True)
        self.indexes.trim_to_valid_size()
        self._max_ts = (max_ts, offset_of_max)
        self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._indexes_checked = True
        return truncated

    def limit_view(self, size: int) -> None:
        """Read-only: read the segment as recovery will leave it, its first ``size`` bytes, with
        its indexes left out (recovery rebuilds them). A writer appends to the file only after
        that recovery, which the reader's next load sees, and that load sets no limit."""
        self._view_limit = size
        self._size = min(self._size, size)
        self.forget_indexes()

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding ``offset`` and everything after it; returns bytes removed."""
        first = self.translate_offset(offset)
        self.indexes.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.indexes.resize(self.config.segment_index_bytes)
        if first is None:
            return 0
        removed = self._size - first.position
        os.ftruncate(self._fd, first.position)
        self._size = first.position
        if self._size == 0:
            self.created_ms = now_ms()
            self._rolling_based_timestamp = None
        self._max_ts = None
        self._bytes_since_last_index_entry = 0
        return removed

    def append_final_time_index_entry(self) -> None:
        """The largest timestamp so far as a time-index entry (Kafka's ``onBecomeInactiveSegment``
        and ``close``), so the index answers for every batch: a roll writes it before it
        creates the next segment, since a segment left without it past the recovery point is
        one no recovery revisits."""
        max_ts, offset_of_max = self._load_max_timestamp()
        self.time_index.maybe_append(max_ts, offset_of_max, skip_full_check=True)

    def on_become_inactive(self) -> None:
        """On roll, once the next segment exists: the final time-index entry (already there,
        see ``append_final_time_index_entry``), then both indexes trimmed to their entries."""
        self.append_final_time_index_entry()
        self.indexes.trim_to_valid_size()

    def resize_indexes(self, size: int) -> None:
        self.indexes.resize(size)

    def forget_indexes(self) -> None:
        """Read without either index (see ``AbstractIndex.forget``): lookups start at position 0.
        A read-only view does so for indexes a writable open rebuilds (``indexes_forgotten``)."""
        self.indexes.forget()
        self.indexes_forgotten = True

    def flush(self) -> None:
        os.fsync(self._fd)
        self.indexes.flush()
        self.txn_index.flush()

    def close(self, trim_indexes: bool = True) -> None:
        """Close the files; trimming is skipped when another process may have appended since."""
        if self._fd >= 0:
            if self.writable and trim_indexes:
                self.indexes.close()  # trimming creates the files if never used
            else:
                self.indexes.release()
            os.close(self._fd)
            self._fd = -1

    # ------------------------------------------------------------------ files

    def index_paths(self, suffix: str | None = None) -> list[Path]:
        sfx = self.file_suffix if suffix is None else suffix
        return [
            segment_file(self.dir, self.base_offset, INDEX_SUFFIX + sfx),
            segment_file(self.dir, self.base_offset, TIME_INDEX_SUFFIX + sfx),
            segment_file(self.dir, self.base_offset, TXN_INDEX_SUFFIX + sfx),
        ]

    def existing_files(self) -> list[Path]:
        """The segment's files that exist, ``.log`` first (renames go in this order)."""
        return [p for p in [self.log_path, *self.index_paths()] if p.exists()]

    def change_file_suffix(self, new_suffix: str) -> None:
        """Rename every file of the segment; the ``.log`` goes first (see the module docstring)."""
        old_suffix = self.file_suffix
        for path in self.existing_files():
            name = path.name
            stem = name[: len(name) - len(old_suffix)] if old_suffix else name
            os.replace(path, path.with_name(stem + new_suffix))
        self.file_suffix = new_suffix
        self.log_path = segment_file(self.dir, self.base_offset, LOG_SUFFIX + new_suffix)
        self.indexes.rename(self.dir, self.base_offset, new_suffix)
        self.txn_index.rename_to(segment_file(self.dir, self.base_offset, TXN_INDEX_SUFFIX + new_suffix))

    def delete_files(self) -> None:
        for path in self.existing_files():
            path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path.name}, size={self._size})"
