"""Byte-level reads of an index file that do not trust its length: the valid prefix of entries,
the check that nothing but zeros follows it, and the last entry read without loading the index.

A preallocated index (Kafka's ``AbstractIndex.resize`` to ``segment.index.bytes``) is a sparse
file whose entries are followed by a zero tail; these readers stop at that tail, skip its holes
with ``SEEK_DATA``/``SEEK_HOLE`` where the filesystem supports them, and never read it whole.
They know entries only as fixed-size byte slots; ``AbstractIndex`` gives them meaning.
"""

from __future__ import annotations

import errno
import os
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..files.nofollow import open_nofollow

READ_CHUNK = 1 << 16  # bytes read per step when loading, so a zero tail is never read whole
_CHECK_CHUNK = 1 << 20  # bytes read per step when checking a zero tail
_TAIL_BLOCK = 4096  # first block read backwards when looking for the last entry
_TAIL_BLOCK_MAX = 1 << 20

Unpack = Callable[[bytes], Iterator[tuple[int, int]]]
Follows = Callable[[int, int, int, int], bool]


def round_down(n: int, unit: int) -> int:
    """``n`` rounded down to a multiple of ``unit`` (Kafka's ``roundDownToExactMultiple``)."""
    return n - n % unit


@dataclass(frozen=True)
class IndexTail:
    """An index file's last entry as bytes (None: no entry) and whether the file is trimmed to
    its entries (no zero tail: a rolled segment's file, or a missing or empty one)."""

    last: bytes | None
    trimmed: bool


def read_valid_entries(read: Callable[[int, int], bytes], length: int, entry_size: int, unpack: Unpack,
                       follows: Follows, rels: array, vals: array) -> None:
    """Append to ``rels``/``vals`` the entries of the valid prefix of an index of ``length``
    bytes, read in chunks by ``read(size, position)`` (a file's ``pread``, or a slice of an
    index downloaded from the remote tier).

    The prefix ends at the first slot that cannot follow the one before it, or at once when the
    first slot and the second are all zero (an empty preallocated file).
    """
    usable = round_down(length, entry_size)
    chunk_bytes = round_down(READ_CHUNK, entry_size)
    prev: tuple[int, int] | None = None
    pos = 0
    while pos < usable:
        data = read(min(chunk_bytes, usable - pos), pos)
        if not data:
            break
        data = data[: round_down(len(data), entry_size)]
        for rel, val in unpack(data):
            if prev is None:
                if rel == 0 and val == 0 and _next_slot_is_zero(read, usable, entry_size):
                    return
            elif not follows(prev[0], prev[1], rel, val):
                return
            rels.append(rel)
            vals.append(val)
            prev = (rel, val)
        pos += len(data)


def _next_slot_is_zero(read: Callable[[int, int], bytes], usable: int, entry_size: int) -> bool:
    if usable < 2 * entry_size:
        return False  # a trimmed one-entry file: the all-zero entry is real
    return read(entry_size, entry_size) == bytes(entry_size)


def first_nonzero_slot(path: Path, start: int, length: int, entry_size: int) -> int | None:
    """Position of the first slot at or after ``start`` (below ``length``) holding a non-zero
    byte, or None when the rest of the file reads as zeros (holes are skipped, not read)."""
    if start >= length:
        return None
    fd = open_nofollow(path, os.O_RDONLY)
    try:
        end = _end_of_data(fd, length, entry_size)
        pos = start
        while pos < end:
            data = os.pread(fd, min(_CHECK_CHUNK, end - pos), pos)
            if not data:
                break
            if data.count(0) != len(data):
                return round_down(pos + next(i for i, b in enumerate(data) if b), entry_size)
            pos += len(data)
    finally:
        os.close(fd)
    return None


def read_tail_bytes(path: Path | str, entry_size: int) -> IndexTail:
    """The file's last entry and whether it is trimmed, without reading its entries: one
    ``pread`` for a trimmed file; for an untrimmed one (another process's active segment) the
    zero tail is skipped backwards, jumping holes and reading blocks that double in size."""
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except FileNotFoundError:
        return IndexTail(None, True)
    try:
        while True:  # again when the file shrank under the reads: its writer's close trimmed it
            try:
                return _tail_of(fd, entry_size)
            except _Shrank:
                continue
    finally:
        os.close(fd)


def _tail_of(fd: int, entry_size: int) -> IndexTail:
    """``read_tail_bytes`` of an open file; ``_Shrank`` when a read finds it shorter than its
    ``fstat`` said a moment before."""
    usable = round_down(os.fstat(fd).st_size, entry_size)
    if usable == 0:
        return IndexTail(None, True)
    last = _pread_exactly(fd, entry_size, usable - entry_size)
    if last != bytes(entry_size):
        return IndexTail(last, True)
    return IndexTail(_last_entry_before_zeros(fd, entry_size, usable), usable == entry_size)


def _last_entry_before_zeros(fd: int, entry_size: int, usable: int) -> bytes | None:
    """The last entry of a file with a zero tail (preallocated, not trimmed)."""
    end = _end_of_data(fd, usable, entry_size)
    block = round_down(_TAIL_BLOCK, entry_size)
    while end > 0:
        start = max(0, round_down(end - block, entry_size))
        stripped = _pread_exactly(fd, end - start, start).rstrip(b"\0")
        if stripped:
            slot = start + round_down(len(stripped) - 1, entry_size)
            return _pread_exactly(fd, entry_size, slot)
        end = start
        block = min(block * 2, round_down(_TAIL_BLOCK_MAX, entry_size))
    # Nothing but zeros: a real all-zero entry only in a trimmed one-entry file.
    return bytes(entry_size) if usable == entry_size else None


class _Shrank(Exception):
    """A read of an index file ended before the length its ``fstat`` gave (a trim meanwhile)."""


def _pread_exactly(fd: int, n: int, offset: int) -> bytes:
    data = os.pread(fd, n, offset)
    if len(data) < n:
        raise _Shrank()
    return data


def _end_of_data(fd: int, limit: int, entry_size: int) -> int:
    """End (rounded up to an entry) of the last data region below ``limit``, skipping holes.

    Preallocated index files are sparse, so this finds the written part of a 10 MiB file
    without reading its zeros. Without ``SEEK_DATA`` support the whole file counts as data.
    """
    if not hasattr(os, "SEEK_DATA"):
        return limit
    end = 0
    pos = 0
    while pos < limit:
        try:
            data_start = os.lseek(fd, pos, os.SEEK_DATA)
            hole = os.lseek(fd, data_start, os.SEEK_HOLE)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data at or after pos
                break
            return limit
        if data_start >= limit:
            break
        end = min(hole, limit)
        pos = hole
    return min(end + (-end) % entry_size, limit)
