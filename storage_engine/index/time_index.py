"""``.timeindex``: timestamp -> offset (Kafka's ``TimeIndex``), 12-byte entries."""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterator

from ..errors import CorruptIndexError, LogError
from ..limits import TIME_INDEX_ENTRY_SIZE
from .abstract import AbstractIndex, InvalidOffsetError, TimestampOffset


class TimeIndex(AbstractIndex):
    """``.timeindex``: the largest timestamp seen up to each indexed offset."""

    ENTRY_SIZE = TIME_INDEX_ENTRY_SIZE
    _STRUCT = struct.Struct(">qi")
    _VAL_TYPECODE = "q"
    _FULL_RESERVE = 1  # the roll/close entry is appended with the full check skipped
    _KIND = "time index"

    @classmethod
    def _pack(cls, rel: int, val: int) -> bytes:
        return cls._STRUCT.pack(val, rel)

    @classmethod
    def _unpack(cls, data: bytes) -> Iterator[tuple[int, int]]:
        return ((rel, ts) for ts, rel in cls._STRUCT.iter_unpack(data))

    @staticmethod
    def _follows(prev_rel: int, prev_val: int, rel: int, val: int) -> bool:
        return val > prev_val and rel >= prev_rel

    @staticmethod
    def _make_entry(base_offset: int, rel: int, val: int) -> TimestampOffset:
        return TimestampOffset(val, base_offset + rel)

    @staticmethod
    def _empty_entry(base_offset: int) -> TimestampOffset:
        return TimestampOffset(-1, base_offset)

    @property
    def last_offset(self) -> int:
        return self.last_entry().offset

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The largest entry with timestamp <= target, else ``(-1, base_offset)``."""
        self._ensure_loaded()
        return self._entry_or_empty(bisect_right(self._val, target_timestamp) - 1)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Record ``timestamp`` at ``offset`` if it is larger than the last one.

        Equal timestamps are ignored; going backwards in offset or time is an error.
        ``skip_full_check`` lets the final roll/close entry use the reserved slot.
        """
        self._require_writable()
        self._ensure_loaded()
        n = len(self._rel)
        if not skip_full_check and self.is_full:
            raise self._full_error()
        last = self.last_entry()
        if n > 0 and offset < last.offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to slot {n} no larger than the last "
                f"offset appended ({last.offset}) to {self._path}."
            )
        if n > 0 and timestamp < last.timestamp:
            raise LogError(
                f"Attempt to append a timestamp ({timestamp}) to slot {n} no larger than the "
                f"last timestamp appended ({last.timestamp}) to {self._path}."
            )
        if timestamp > last.timestamp:
            if n >= self.max_entries:  # not before: a roll asks twice, and the second adds nothing
                raise self._full_error()
            self._append_entry(self._relative(offset), timestamp)

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` for a file that cannot be this segment's time index."""
        self._ensure_loaded()
        if self._rel and self._val[-1] < self._val[0]:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self._path}) has non-zero size "
                f"but the last timestamp is {self._val[-1]} which is less than the first "
                f"timestamp {self._val[0]}"
            )
        self._sanity_common()
