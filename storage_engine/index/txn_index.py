"""``.txnindex``: the aborted transactions whose ABORT marker is in a segment (Kafka's
``TransactionIndex`` of ``AbortedTxn`` entries).

A broker answers a ``read_committed`` fetch with the aborted transactions that overlap it,
read from these files (``LogSegment.collectAbortedTxns``), and never re-derives them from the
markers: after a clean shutdown it trusts a missing file as "no aborted transaction here". So
a directory we hand to a broker needs these files exactly as its own appender and recovery
would write them, or a ``read_committed`` consumer is served aborted records.

Byte format, big-endian, 34 bytes per entry, no header, no preallocation (unlike the sparse
indexes the file grows by one entry per append and is created by the first one):
``version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 |
lastStableOffset int64``. ``lastOffset`` is the ABORT marker's offset, ``firstOffset`` the
transaction's first data offset, ``lastStableOffset`` the LSO right after the marker
(``ProducerStateManager.lastStableOffset(completedTxn)``: the first offset of the oldest
transaction of another producer still open, else the marker's offset + 1).

Reading is stricter than Kafka's (which only refuses a version above 0 when it iterates and
an entry below the base offset in ``sanityCheck``): a length that is not a whole number of
entries, a version other than 0, a first offset after the last, or last offsets that do not
increase (Kafka's append refuses those) are :class:`CorruptTxnIndexError`, one line naming the
file and the entry, so the loader rebuilds the file instead of serving a wrong answer.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import CorruptIndexError, LogError
from ..files.nofollow import open_nofollow, read_bytes_nofollow

#: ``version int16 | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64``
ABORTED_TXN = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = ABORTED_TXN.size  # 34
ABORTED_TXN_VERSION = 0


class CorruptTxnIndexError(CorruptIndexError):
    """A ``.txnindex`` file that cannot be a segment's transaction index (see the module docstring)."""


@dataclass(frozen=True)
class AbortedTxn:
    """One aborted transaction (Kafka's ``AbortedTxn``): its producer, first data offset, the
    ABORT marker's offset and the last stable offset once the marker was appended."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return ABORTED_TXN.pack(ABORTED_TXN_VERSION, self.producer_id, self.first_offset, self.last_offset,
                                self.last_stable_offset)


@dataclass(frozen=True)
class TxnIndexMark:
    """A transaction index's entry count, and whether its file existed, at some moment (``rollback``)."""

    entries: int
    existed: bool


def parse_txn_index(data: bytes, name: str, base_offset: int) -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file's bytes (``name`` is what errors call it), checked
    as the module docstring says."""
    if len(data) % ABORTED_TXN_SIZE:
        raise CorruptTxnIndexError(f"Corrupt transaction index {name}: {len(data)} bytes is not a whole number of "
                                   f"{ABORTED_TXN_SIZE}-byte entries")
    entries: list[AbortedTxn] = []
    for n, (version, pid, first, last, lso) in enumerate(ABORTED_TXN.iter_unpack(data)):
        where = f"Corrupt transaction index {name}: entry {n} (position {n * ABORTED_TXN_SIZE})"
        if version != ABORTED_TXN_VERSION:
            raise CorruptTxnIndexError(f"{where} has version {version}, expected {ABORTED_TXN_VERSION}")
        if last < base_offset:
            raise CorruptTxnIndexError(f"{where} has last offset {last}, below the segment's base offset {base_offset}")
        if first > last:
            raise CorruptTxnIndexError(f"{where} has first offset {first} after its last offset {last}")
        if entries and last <= entries[-1].last_offset:
            raise CorruptTxnIndexError(f"{where} has last offset {last}, not above the previous entry's "
                                       f"{entries[-1].last_offset}")
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries


class TransactionIndex:
    """A segment's ``.txnindex``: loaded lazily (strictly, ``parse_txn_index``), created by the
    first append, cut by ``truncate_to`` and ``reset`` as Kafka's is."""

    def __init__(self, path: Path, base_offset: int, *, writable: bool = True) -> None:
        self._path = Path(path)
        self.base_offset = base_offset
        self.writable = writable
        self._entries: list[AbortedTxn] | None = None

    @property
    def path(self) -> Path:
        return self._path

    def exists(self) -> bool:
        return self._path.exists()

    @property
    def entries(self) -> list[AbortedTxn]:
        """Every entry, in file order; ``CorruptTxnIndexError`` for a damaged file."""
        if self._entries is None:
            try:
                data = read_bytes_nofollow(self._path)
            except FileNotFoundError:
                data = b""
            self._entries = parse_txn_index(data, str(self._path), self.base_offset)
        return list(self._entries)

    def sanity_check(self) -> None:
        """Raise ``CorruptTxnIndexError`` unless the file (if any) parses (Kafka's ``sanityCheck``, stricter)."""
        self._entries = None
        _ = self.entries

    def overlapping(self, start: int, end: int) -> list[AbortedTxn]:
        """Kafka's ``collectAbortedTxns(fetchOffset, upperBoundOffset)``: the entries whose
        transaction overlaps ``[start, end)``."""
        return [t for t in self.entries if t.last_offset >= start and t.first_offset < end]

    def _require_writable(self) -> None:
        if not self.writable:
            raise LogError(f"transaction index {self._path} is open read-only")

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry at the end, creating the file; last offsets must increase (Kafka's append)."""
        self._require_writable()
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise LogError(f"The last offset of appended transactions must increase sequentially, but "
                           f"{txn.last_offset} is not greater than current last offset {entries[-1].last_offset} "
                           f"of index {self._path}")
        self._write_at(len(entries) * ABORTED_TXN_SIZE, txn.to_bytes(), create=True)
        assert self._entries is not None
        self._entries.append(txn)

    def _write_at(self, position: int, data: bytes, *, create: bool) -> None:
        """Write ``data`` at ``position`` and cut the file there: a write names the file in its error."""
        try:
            fd = open_nofollow(self._path, os.O_WRONLY | (os.O_CREAT if create else 0))
        except FileNotFoundError:
            if create:
                raise
            return
        try:
            os.pwrite(fd, data, position)
            os.ftruncate(fd, position + len(data))
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(self._path)) from None
        finally:
            os.close(fd)

    def _keep(self, n: int) -> None:
        """Keep the first ``n`` entries (an existing file is cut; none is created)."""
        entries = self.entries
        if n < len(entries):
            self._write_at(n * ABORTED_TXN_SIZE, b"", create=False)
        self._entries = entries[:n]

    def truncate_to(self, offset: int) -> None:
        """Kafka's ``truncateTo``: drop the first entry whose marker is at or after ``offset``
        and every later one."""
        self._require_writable()
        entries = self.entries
        self._keep(next((n for n, t in enumerate(entries) if t.last_offset >= offset), len(entries)))

    def reset(self) -> None:
        """No entries (recovery rebuilds them): an existing file is cut to 0 bytes and kept, as
        Kafka's ``reset`` does; a damaged file is cut without being read."""
        self._require_writable()
        self._entries = []
        self._write_at(0, b"", create=False)

    def mark(self) -> TxnIndexMark:
        return TxnIndexMark(len(self.entries), self.exists())

    def rollback(self, mark: TxnIndexMark) -> None:
        """Drop the entries appended since ``mark``, and the file if it was created since."""
        self._require_writable()
        if not mark.existed:
            self._path.unlink(missing_ok=True)
            self._entries = []
        else:
            self._keep(mark.entries)

    def flush(self) -> None:
        """fsync the file when there is one (appends close their descriptor, so open one)."""
        try:
            fd = open_nofollow(self._path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename_to(self, new_path: Path) -> None:
        """Follow a file already renamed (``LogSegment.change_file_suffix``)."""
        self._path = Path(new_path)

    def forget(self) -> None:
        """Drop what was read, so the next read sees the file as it is now."""
        self._entries = None

    def __repr__(self) -> str:
        return f"TransactionIndex({str(self._path)!r}, base_offset={self.base_offset})"
