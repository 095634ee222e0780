"""``.index``: offset -> byte position (Kafka's ``OffsetIndex``), 8-byte entries."""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left
from collections.abc import Iterator

from ..errors import CorruptIndexError, LogError
from ..limits import INT_MAX
from .abstract import LITTLE_ENDIAN, AbstractIndex, InvalidOffsetError, OffsetPosition


class OffsetIndex(AbstractIndex):
    """``.index``: maps an offset to the byte position of the append that holds it."""

    ENTRY_SIZE = 8
    _STRUCT = struct.Struct(">ii")
    _VAL_TYPECODE = "i"
    _KIND = "index"

    @classmethod
    def _pack(cls, rel: int, val: int) -> bytes:
        return cls._STRUCT.pack(rel, val)

    @classmethod
    def _unpack(cls, data: bytes) -> Iterator[tuple[int, int]]:
        words = array("i", data)
        if LITTLE_ENDIAN:
            words.byteswap()
        return zip(words[0::2], words[1::2], strict=False)  # equal halves: whole entries only; a check costs ~10%

    @staticmethod
    def _follows(prev_rel: int, prev_val: int, rel: int, val: int) -> bool:
        return rel > prev_rel and val != 0

    @staticmethod
    def _make_entry(base_offset: int, rel: int, val: int) -> OffsetPosition:
        return OffsetPosition(base_offset + rel, val)

    @staticmethod
    def _empty_entry(base_offset: int) -> OffsetPosition:
        return OffsetPosition(base_offset, 0)

    @property
    def last_offset(self) -> int:
        return self.last_entry().offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The largest entry with offset <= target, else ``(base_offset, 0)``."""
        self._ensure_loaded()
        return self._entry_or_empty(self._floor_by_rel(target_offset))

    def fetch_upper_bound_offset(self, start_position: int, size: int) -> OffsetPosition | None:
        """The first entry at or beyond ``start_position + size`` bytes, if any."""
        self._ensure_loaded()
        slot = bisect_left(self._val, start_position + size)
        return self.entry(slot) if slot < len(self._val) else None

    def append(self, offset: int, position: int) -> None:
        """Add ``(offset, position)``; offsets must strictly increase."""
        self._require_writable()
        self._ensure_loaded()
        if self.is_full:
            raise self._full_error()
        if self._rel and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset {offset} to position {len(self._rel)} no larger "
                f"than the last offset appended ({self.last_offset}) to {self._path}."
            )
        rel = self._relative(offset)
        if not 0 <= position <= INT_MAX:
            raise LogError(f"Position {position} does not fit an index entry of {self._path}")
        self._append_entry(rel, position)

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` for a file that cannot be this segment's index.

        Kafka's ``OffsetIndex.sanityCheck`` checks the length and the last offset only; a
        negative position (garbage bytes) then made every read of the segment a ``pread`` at a
        negative offset, failing with a bare "[Errno 22] Invalid argument".
        """
        self._sanity_common()
        if self._val and min(self._val) < 0:
            slot = next(n for n, position in enumerate(self._val) if position < 0)
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self._path}) has entry {slot} at position "
                f"{self._val[slot]}, which is negative."
            )
