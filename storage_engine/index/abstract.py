"""What both sparse indexes share (Kafka's ``AbstractIndex``): lazy opening, the preallocated
file and its trim, loading that stops at a zero tail, binary search, append and truncation.
The byte-level reads of the file (valid prefix, zero tail, last entry) live in ``scan``."""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

from ..errors import CorruptIndexError, IndexSizeError, LogError
from ..files.nofollow import open_nofollow
from ..limits import INT_MAX
from .scan import first_nonzero_slot, read_tail_bytes, read_valid_entries, round_down

DEFAULT_MAX_INDEX_SIZE = 10485760
LITTLE_ENDIAN = sys.byteorder == "little"


@dataclass(frozen=True)
class IndexMark:
    """An index's entry count and file length (None: no file yet) at some moment."""

    entries: int
    length: int | None

class InvalidOffsetError(LogError):
    """An index append that would break the strictly increasing order (Kafka's InvalidOffsetException)."""


class IndexOffsetOverflowError(LogError):
    """An offset too far from the segment's base offset to be stored as a relative int32."""


@dataclass(frozen=True)
class OffsetPosition:
    """An offset and the byte position in the ``.log`` of the batch append that holds it."""

    offset: int
    position: int


@dataclass(frozen=True)
class TimestampOffset:
    """The largest timestamp seen up to and including ``offset``."""

    timestamp: int
    offset: int


class AbstractIndex:
    """File handling shared by both indexes: lazy load, preallocation, pwrite appends, resizing.

    An entry is stored as two columns: ``_rel`` (offset minus base offset, int32) and ``_val``
    (the position or the timestamp). Subclasses say how an entry is laid out in bytes, which
    slot sequences are valid, and what their lookups mean.
    """

    ENTRY_SIZE: ClassVar[int]
    _STRUCT: ClassVar[struct.Struct]
    _VAL_TYPECODE: ClassVar[str]
    _FULL_RESERVE: ClassVar[int] = 0  # slots kept free by is_full (the time index keeps one)
    _KIND: ClassVar[str] = "index"

    def __init__(self, path: Path, base_offset: int, max_index_size: int = DEFAULT_MAX_INDEX_SIZE, *,
                 writable: bool = True) -> None:
        if max_index_size < self.ENTRY_SIZE:
            raise LogError(f"Invalid max index size: {max_index_size}")
        self._path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        self._loaded = False
        self._rel = array("i")
        self._val = array(self._VAL_TYPECODE)
        self._length: int | None = None  # file length in bytes; None while the file is absent
        self._create_length = round_down(max_index_size, self.ENTRY_SIZE)
        self._fd = -1  # write descriptor, opened on the first write
        self._dirty = False

    # ------------------------------------------------------------------ subclass hooks

    @classmethod
    def _pack(cls, rel: int, val: int) -> bytes:
        """The entry's bytes as Kafka lays them out."""
        raise NotImplementedError

    @classmethod
    def _unpack(cls, data: bytes) -> Iterator[tuple[int, int]]:
        """Yield ``(relative offset, value)`` for every whole entry in ``data``."""
        raise NotImplementedError

    @staticmethod
    def _follows(prev_rel: int, prev_val: int, rel: int, val: int) -> bool:
        """Whether an entry can come right after another in a valid index."""
        raise NotImplementedError

    @staticmethod
    def _make_entry(base_offset: int, rel: int, val: int) -> Any:
        """The public entry type for a stored ``(relative offset, value)``."""
        raise NotImplementedError

    @staticmethod
    def _empty_entry(base_offset: int) -> Any:
        """What ``last_entry`` and ``lookup`` answer when no entry applies."""
        raise NotImplementedError

    # ------------------------------------------------------------------ state

    @property
    def path(self) -> Path:
        return self._path

    def exists(self) -> bool:
        return self._path.exists()

    @property
    def entries(self) -> int:
        self._ensure_loaded()
        return len(self._rel)

    @property
    def max_entries(self) -> int:
        self._ensure_loaded()
        length = self._create_length if self._length is None else self._length
        return length // self.ENTRY_SIZE

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries - self._FULL_RESERVE

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.ENTRY_SIZE

    def __repr__(self) -> str:
        state = f"{len(self._rel)} entries" if self._loaded else "not loaded"
        return f"{type(self).__name__}({str(self._path)!r}, base_offset={self.base_offset}, {state})"

    # ------------------------------------------------------------------ loading

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self._load()

    def _load(self) -> None:
        """Read the valid prefix of the file in chunks, stopping at the zero tail."""
        self._rel = array("i")
        self._val = array(self._VAL_TYPECODE)
        try:
            fd = open_nofollow(self._path, os.O_RDONLY)
        except FileNotFoundError:
            self._length = None
            self._loaded = True
            return
        try:
            self._length = os.fstat(fd).st_size
            read_valid_entries(lambda size, pos: os.pread(fd, size, pos), self._length, self.ENTRY_SIZE,
                               self._unpack, self._follows, self._rel, self._val)
        finally:
            os.close(fd)
        self._loaded = True

    @classmethod
    def from_bytes(cls, data: bytes, name: str, base_offset: int) -> Self:
        """A read-only index over ``data``, an index file's bytes that were never a local file
        (an object of the remote tier, named ``name`` in errors): the same valid-prefix rule
        as a file's, so ``lookup`` answers as it would for the file."""
        index = cls(Path(name), base_offset, max(len(data), cls.ENTRY_SIZE), writable=False)
        read_valid_entries(lambda size, pos: data[pos:pos + size], len(data), cls.ENTRY_SIZE, cls._unpack,
                           cls._follows, index._rel, index._val)
        index._length = len(data)
        index._loaded = True
        return index

    # ------------------------------------------------------------------ writing

    def _require_writable(self) -> None:
        if not self.writable:
            raise LogError(f"{self._KIND} {self._path} is open read-only")

    def _write_fd(self) -> int:
        """The write descriptor, creating the (preallocated) file on first use."""
        self._ensure_loaded()
        if self._fd < 0:
            self._require_writable()
            fd = open_nofollow(self._path, os.O_RDWR | os.O_CREAT)
            if self._length is None:
                try:
                    self._set_length(fd, self._create_length)
                except BaseException:
                    os.close(fd)
                    raise
                self._length = self._create_length
            self._fd = fd
        return self._fd

    def _append_entry(self, rel: int, val: int) -> None:
        self._pwrite(self._pack(rel, val), len(self._rel) * self.ENTRY_SIZE)
        self._rel.append(rel)
        self._val.append(val)
        self._dirty = True

    def _relative(self, offset: int) -> int:
        rel = offset - self.base_offset
        if not 0 <= rel <= INT_MAX:
            raise IndexOffsetOverflowError(
                f"Integer overflow for offset: {offset} ({self._path}): relative to base offset "
                f"{self.base_offset} it must be 0..{INT_MAX}"
            )
        return rel

    def _full_error(self) -> LogError:
        return LogError(f"Attempt to append to a full {self._KIND} (size = {len(self._rel)}).")

    def _truncate_to_entries(self, n: int) -> None:
        """Keep the first ``n`` entries and zero the dropped slots on disk.

        Zeroing keeps the invariant that everything after the last entry reads as zero tail;
        Kafka leaves stale slots because it never rereads an untrimmed file without rebuilding
        it. Overwriting in place needs no free space and no room under a file size limit (which
        cutting the file and growing it back would), so the undo of a failed append or roll
        (``rollback``) works on the full disk or under the limit that made it fail.
        """
        old = len(self._rel)
        if n >= old:
            return
        del self._rel[n:]
        del self._val[n:]
        if self._length is not None:
            self._pwrite(bytes((old - n) * self.ENTRY_SIZE), n * self.ENTRY_SIZE)
            self._dirty = True

    def _pwrite(self, data: bytes, position: int) -> None:
        """Write at ``position``; an error names the file, which a bare errno does not."""
        try:
            os.pwrite(self._write_fd(), data, position)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(self._path)) from None

    def mark(self) -> IndexMark:
        """Where the index stands, so that appends after it can be undone (``rollback``)."""
        self._ensure_loaded()
        return IndexMark(len(self._rel), self._length)

    def rollback(self, mark: IndexMark) -> None:
        """Drop the entries added since ``mark`` and give the file back its length, or remove it
        when it was created since (a failed produce leaves no new file behind)."""
        self._require_writable()
        self._ensure_loaded()
        self._truncate_to_entries(mark.entries)
        if mark.length is None and self._length is not None:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._path.unlink(missing_ok=True)
            self._length = None
            self._dirty = False
        elif mark.length is not None and mark.length != self._length:
            os.ftruncate(self._write_fd(), mark.length)
            self._length = mark.length

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ``>= offset``."""
        self._require_writable()
        self._ensure_loaded()
        self._truncate_to_entries(bisect_left(self._rel, offset - self.base_offset))

    def reset(self) -> None:
        """No entries, file back at its maximum size (used before rebuilding from the log)."""
        self._require_writable()
        self._ensure_loaded()
        self._truncate_to_entries(0)
        self.resize(self.max_index_size)

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``roundDown(new_size, entry size)``; True if it changed.

        The loader re-extends the active segment's indexes with this after loading them
        trimmed. A missing file is not created: the new length applies when it is. Never below
        the entries it holds (and the slot ``is_full`` reserves): a ``segment.index.bytes``
        lowered under an active segment makes the index full instead, so the segment rolls at
        its next append (``LogSegment.should_roll``) rather than refusing it.
        """
        self._require_writable()
        self._ensure_loaded()
        return self._resize_to(max(round_down(new_size, self.ENTRY_SIZE),
                                   (len(self._rel) + self._FULL_RESERVE) * self.ENTRY_SIZE))

    def _resize_to(self, length: int) -> bool:
        """Set the file length to ``length``, a multiple of the entry size; True if it changed."""
        if self._length is None:
            changed = length != self._create_length
            self._create_length = length
            return changed
        if length == self._length:
            return False
        self._set_length(self._write_fd(), length)
        self._length = length
        self._dirty = True
        return True

    def _set_length(self, fd: int, length: int) -> None:
        """Preallocate (or trim) the file to ``length`` bytes, as Kafka's ``AbstractIndex.resize``
        does; a refusal (``EFBIG`` under a file size limit below ``segment.index.bytes``) names
        the file and the length instead of a bare errno."""
        try:
            os.ftruncate(fd, length)
        except OSError as exc:
            raise IndexSizeError(f"cannot make {self._KIND} {self._path} {length} bytes long (an active segment's "
                                 f"indexes are preallocated to segment.index.bytes): {exc.strerror}") from None

    def create_file(self) -> None:
        """Create the (preallocated) file now rather than at the first entry, for a segment
        just created for appends (``LogSegment``): Kafka's first append to a segment creates
        both indexes; here a live writer's segment has them from the start, so a reader
        loading it never finds a new segment without them and reports one to rebuild."""
        self._write_fd()

    def trim_to_valid_size(self) -> None:
        """Shrink the file to its entries (on roll and close), creating it if still absent.

        Creating it matches Kafka, whose inactive segments always have their index files; a
        loader that finds one missing rebuilds it from the log.
        """
        self._require_writable()
        self._ensure_loaded()
        if self._length is None:
            self._create_length = len(self._rel) * self.ENTRY_SIZE
        self._resize_to(len(self._rel) * self.ENTRY_SIZE)  # no reserved slot: no more entries come
        self._write_fd()

    def flush(self) -> None:
        """fsync what was written since the last flush."""
        if self._fd >= 0 and self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    def close(self) -> None:
        """Trim (if this object wrote or could write the file) and release the descriptor."""
        if self._loaded and self.writable and self._length is not None:
            self.trim_to_valid_size()
        self._close_fd()

    def release(self) -> None:
        """Close the descriptor without trimming: another process may own the file's tail now."""
        self._close_fd()

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self._dirty = False

    def forget(self) -> None:
        """Hold no entries and no file, leaving the file as it is: a read-only view of a segment
        whose index a writable open would rebuild scans the ``.log`` instead of trusting it."""
        self._close_fd()
        self._rel = array("i")
        self._val = array(self._VAL_TYPECODE)
        self._length = None
        self._loaded = True

    def delete(self) -> bool:
        """Remove the file; True if there was one. The object is empty afterwards."""
        self.forget()
        try:
            self._path.unlink()
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, new_path: Path) -> None:
        """Point the index at ``new_path``, moving the file if it is still at the old path.

        A caller that already renamed the file itself (a segment renaming all its files)
        just gets the path updated; an open descriptor follows the inode either way.
        """
        new_path = Path(new_path)
        try:
            os.replace(self._path, new_path)
        except FileNotFoundError:
            pass
        self._path = new_path

    # ------------------------------------------------------------------ checks

    def _sanity_common(self) -> None:
        self._ensure_loaded()
        length = self._length or 0
        if length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"{self._KIND} file {self._path} is corrupt, found {length} bytes which is "
                f"neither positive nor a multiple of {self.ENTRY_SIZE}."
            )
        if self._rel and self._rel[-1] < 0:
            raise CorruptIndexError(
                f"Corrupt {self._KIND} found, index file ({self._path}) has non-zero size but the "
                f"last offset is {self.base_offset + self._rel[-1]} which is less than the base "
                f"offset {self.base_offset}."
            )
        # Everything after the valid entries must be zero; anything else is garbage, not a tail.
        bad = first_nonzero_slot(self._path, len(self._rel) * self.ENTRY_SIZE, length, self.ENTRY_SIZE)
        if bad is not None:
            raise CorruptIndexError(
                f"Corrupt {self._KIND} found, index file ({self._path}) has "
                f"{len(self._rel)} valid entries but a non-zero byte in the entry at "
                f"position {bad} after them."
            )

    # ------------------------------------------------------------------ entries

    def entry(self, n: int) -> Any:
        """The ``n``-th entry (an ``OffsetPosition`` or a ``TimestampOffset``)."""
        self._check_slot(n)
        return self._make_entry(self.base_offset, self._rel[n], self._val[n])

    def last_entry(self) -> Any:
        """The last entry, or the empty index's answer (``(base, 0)`` / ``(-1, base)``)."""
        self._ensure_loaded()
        return self._entry_or_empty(len(self._rel) - 1)

    def _entry_or_empty(self, slot: int) -> Any:
        if slot < 0:
            return self._empty_entry(self.base_offset)
        return self._make_entry(self.base_offset, self._rel[slot], self._val[slot])

    @classmethod
    def read_last_entry_only(cls, path: Path | str, base_offset: int) -> Any:
        """The file's last entry without loading the index (see ``read_tail``)."""
        return cls.read_tail(path, base_offset)[0]

    @classmethod
    def read_tail(cls, path: Path | str, base_offset: int) -> tuple[Any, bool]:
        """The file's last entry without loading the index, and whether the file is trimmed to
        its entries, which the stats use to tell a roll that finished from one a kill cut short.

        Cheap enough for stats over thousands of partitions (``scan.read_tail_bytes``); agrees
        with ``last_entry()`` of a loaded index for every valid file.
        """
        tail = read_tail_bytes(path, cls.ENTRY_SIZE)
        if tail.last is None:
            return cls._empty_entry(base_offset), tail.trimmed
        ((rel, val),) = cls._unpack(tail.last)
        return cls._make_entry(base_offset, rel, val), tail.trimmed

    # ------------------------------------------------------------------ search helpers

    def _check_slot(self, n: int) -> None:
        self._ensure_loaded()
        if not 0 <= n < len(self._rel):
            raise IndexError(
                f"Attempt to fetch entry {n} from {self._path} which has {len(self._rel)} entries"
            )

    def _floor_by_rel(self, target_offset: int) -> int:
        """Slot of the largest entry with offset <= target, or -1."""
        return bisect_right(self._rel, target_offset - self.base_offset) - 1
