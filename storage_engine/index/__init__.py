"""Kafka's segment indexes: the sparse ``.index`` (offset -> position) and ``.timeindex``
(time -> offset), and the ``.txnindex`` of aborted transactions (``txn_index``, its own rules).

Byte format (Kafka's ``OffsetIndex``, ``TimeIndex``, ``TransactionIndex``), big-endian, fixed-size entries:

* ``.index``: ``relative offset int32 | position int32`` (8 bytes), strictly increasing offsets;
* ``.timeindex``: ``timestamp int64 | relative offset int32`` (12 bytes), strictly increasing
  timestamps.

Kafka mmaps these files; we keep the entries in memory as ``array`` columns (binary search is the
same) and write each append with one ``pwrite``. A new file is preallocated to
``roundDown(max_index_size, entry_size)`` with ``ftruncate`` (sparse, zero-filled) and trimmed to
its entries when the segment stops being active, exactly like Kafka's, so a broker can read our
files and we can read its.

Reading a file another process still appends to (or one a crash left untrimmed) means reading a
preallocated file with a zero tail. Kafka assumes every slot is an entry and relies on recovery;
we stop at the first slot that cannot follow the previous entry (offset or timestamp not
increasing, or a zero position after the first entry), and treat an all-zero first slot followed by
another all-zero slot as an empty index. Kafka never indexes position 0 (the first append of a
segment is not indexed), so no real entry is lost by this rule.

Files are opened lazily (Kafka's ``LazyIndex``): constructing an index touches nothing on disk,
so a log with thousands of segments opens cheaply.
"""

from __future__ import annotations

from .abstract import (
    DEFAULT_MAX_INDEX_SIZE,
    AbstractIndex,
    IndexMark,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    OffsetPosition,
    TimestampOffset,
)
from .offset_index import OffsetIndex
from .time_index import TimeIndex
from .txn_index import AbortedTxn, CorruptTxnIndexError, TransactionIndex, TxnIndexMark

__all__ = [
    "AbortedTxn",
    "CorruptTxnIndexError",
    "TransactionIndex",
    "TxnIndexMark",
    "AbstractIndex",
    "DEFAULT_MAX_INDEX_SIZE",
    "IndexMark",
    "IndexOffsetOverflowError",
    "InvalidOffsetError",
    "OffsetIndex",
    "OffsetPosition",
    "TimeIndex",
    "TimestampOffset",
]
