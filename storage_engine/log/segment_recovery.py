"""Where one segment's valid batches end, its recovery as Kafka's ``LogSegment.recover`` walks
it, and the checks by which the loader (``LogLoader``) decides that a segment needs it.

``read_end`` is where a segment ends for readers and appends (Kafka's
``LogSegment.readNextOffset``, from the last index entry on). ``valid_prefix`` is the one rule
for where its valid batches end from position 0: recovery cuts there (``LogSegment.recover``,
which rebuilds both indexes on the way with an ``IndexRebuild``), and a read-only view reads
only up to there; ``TxnIndexRebuild`` refills the ``.txnindex`` on the same walk.
``index_problem`` and ``tail_state`` are the loader's reasons to recover a segment: an index
missing or failing its sanity check (a transaction index only when damaged: Kafka reads a
missing one as "no aborted transaction"), or an active segment whose unindexed tail is torn or
invalid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import CorruptIndexError, CorruptRecordError
from ..index import TransactionIndex
from ..limits import INT_MAX
from ..record import RawBatch, verify_batch
from ..record.control import control_type_of
from .aborted_txns import AbortedTxnTracker
from .segment_indexes import SegmentIndexes

if TYPE_CHECKING:
    from collections.abc import Callable

    from .segment import LogSegment


@dataclass(frozen=True)
class SegmentEnd:
    """``read_end``: the offset after the last valid batch, and what stopped the scan short of
    the end of the file when a header no batch can have did."""

    next_offset: int
    invalid: CorruptRecordError | None


@dataclass(frozen=True)
class ValidPrefix:
    """``valid_prefix``: the batches recovery keeps, from position 0. ``problem`` says what ends
    them short of the file's end (None when they reach it)."""

    size: int
    next_offset: int
    problem: str | None


def read_end(seg: LogSegment) -> SegmentEnd:
    """Where the segment's valid batches end, read from its last index entry on: the offset
    after the last complete batch, and the error of a header no batch can have (a size below
    the minimum, a bad magic: Kafka's ``CorruptRecordException``) if one stops the scan before
    the end. Recovery truncates there (``LogSegment.recover``); until then the batches before
    it are the segment."""
    seg.check_indexes()
    start = seg.last_indexed_position
    nxt, invalid = _last_next_offset(seg, start, None)
    if nxt is None and start > 0:
        # the last indexed batch is torn or invalid: the complete ones before it end the segment
        nxt, earlier = _last_next_offset(seg, 0, start)
        invalid = earlier or invalid
    return SegmentEnd(seg.base_offset if nxt is None else nxt, invalid)


def _last_next_offset(seg: LogSegment, start: int, end: int | None) -> tuple[int | None, CorruptRecordError | None]:
    """The next offset of the last complete batch in ``[start, end)`` (None without one), and
    the error of an invalid header that ended the scan."""
    nxt = None
    try:
        for raw in seg.batches(start, end):
            nxt = raw.header.next_offset
    except CorruptRecordError as exc:
        return nxt, exc
    return nxt, None


def valid_prefix(seg: LogSegment, visit: Callable[[RawBatch], None] | None = None) -> ValidPrefix:
    """Kafka's ``LogSegment.recover`` walk, the one rule for where a segment's valid batches
    end, shared by recovery and by a read-only view of a recovery still to come: from
    position 0 every batch must be whole, parse, pass its CRC and structure checks
    (``verify_batch``), keep its offsets within int32 of the segment's base and start after
    the batch before it ends; the first that does not ends the prefix. ``visit`` sees each
    valid batch in order. The view's limit (``LogSegment.limit_view``) does not apply: this
    reads the file to its end."""
    path = str(seg.log_path)
    total = seg.file_size
    size, next_offset, problem = 0, seg.base_offset, None
    try:
        for raw in seg.batches(0, total):
            verify_batch(raw, path=path)
            header = raw.header
            if not 0 <= header.last_offset - seg.base_offset <= INT_MAX:
                problem = (f"the batch at position {raw.position} of {path} ends at offset {header.last_offset}, "
                           f"outside the segment's int32 range from {seg.base_offset}")
                break
            if size and header.base_offset < next_offset:
                # a damaged base offset (outside the CRC): Kafka's index append would refuse
                # it (``InvalidOffsetException``) and the log would never load
                problem = (f"the batch at position {raw.position} of {path} starts at offset "
                           f"{header.base_offset}, below the end of the batch before it ({next_offset})")
                break
            if visit is not None:
                visit(raw)
            size, next_offset = raw.position + header.size_in_bytes, header.next_offset
    except CorruptRecordError as exc:
        problem = str(exc)
    if problem is None and size < total:
        problem = f"a partial batch (a torn write) at position {size} of {path}"
    return ValidPrefix(size, next_offset, problem)


class IndexRebuild:
    """Recovery's visitor (``valid_prefix``): both indexes refilled from the valid batches, an
    entry after more than ``index.interval.bytes`` since the last one, while they have room
    (``SegmentIndexes.have_room``); it tracks the largest timestamp and its offset on the way."""

    def __init__(self, indexes: SegmentIndexes, base_offset: int, index_interval_bytes: int) -> None:
        self.indexes = indexes
        self.index_interval_bytes = index_interval_bytes
        self.max_timestamp, self.offset_of_max_timestamp = -1, base_offset
        self._last_entry_position = 0

    def __call__(self, raw: RawBatch) -> None:
        header = raw.header
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = header.max_timestamp, header.last_offset
        if raw.position - self._last_entry_position > self.index_interval_bytes and self.indexes.add_entry(
                header.last_offset, raw.position, self.max_timestamp, self.offset_of_max_timestamp):
            self._last_entry_position = raw.position


class TxnIndexRebuild:
    """Recovery's other visitor: the ``.txnindex`` refilled with the entries the batches make
    (``AbortedTxnTracker``, Kafka's ``LogSegment.updateProducerState`` during ``recover``)."""

    def __init__(self, txn_index: TransactionIndex, transactions: AbortedTxnTracker, path: str) -> None:
        self.txn_index = txn_index
        self.transactions = transactions
        self.path = path

    def __call__(self, raw: RawBatch) -> None:
        header = raw.header
        control_type = control_type_of(raw, self.path) if header.is_control and header.magic >= 2 else None
        entry = self.transactions.observe(header, control_type)
        if entry is not None:
            self.txn_index.append(entry)


def index_problem(seg: LogSegment) -> str | None:
    """Why the loader rebuilds the segment's indexes (its step 5), naming the index file first
    (as ``verify``'s problems name their file), or None when both sparse indexes are present
    and pass their sanity check and the transaction index, if any, parses."""
    for index in (seg.offset_index, seg.time_index):
        if not index.path.exists():
            return f"{index.path}: missing"
        try:
            index.sanity_check()
        except CorruptIndexError as exc:
            return f"{index.path}: {str(exc).rstrip('.')}"
    try:
        seg.txn_index.sanity_check()
    except CorruptIndexError as exc:
        return str(exc)
    return None


def tail_state(seg: LogSegment) -> tuple[str, int]:
    """Check the batches after the last index entry: ("ok" | "partial" | "invalid" | "corrupt",
    position). "invalid" is a header no batch can have (a size below the minimum batch
    overhead, a bad magic: not a batch at all, like the zeros a crash can leave), which
    recovery truncates as Kafka's ``LogSegment.recover`` does; "corrupt" is a complete batch
    failing its CRC or structure checks."""
    start = seg.last_indexed_position
    end = start
    try:
        for raw in seg.batches(start, seg.refresh_size()):
            try:
                verify_batch(raw, path=str(seg.log_path))
            except CorruptRecordError:
                return "corrupt", end
            end = raw.position + raw.header.size_in_bytes
    except CorruptRecordError:
        return "invalid", end
    return ("ok" if end == seg.size else "partial"), end
