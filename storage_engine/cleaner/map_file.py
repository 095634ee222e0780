"""An exact key -> offset table as a file: how a distributed map build hands each segment's
share of the offset map to the driver, and the merged map to the recopy tasks, through the
partition's staging directory (which every host of a job sees: the jobs need the log dirs on a
shared POSIX mount) rather than through Spark's RPC, which moved these tables at tens of MB/s.

Layout: ``LPKM1``, the entry count (uint64), each key's length (uint32), each offset (int64),
then the keys back to back. Nothing is executed on load (unlike pickle), and a file that does
not add up is refused.

Under the compiled core the tasks never hold the table as a dict: a span's key scan fills a
compiled ``KeyMap`` and writes it with ``KeyMap.to_map_file`` (the same bytes as
:func:`encode_map` of the same table), and a recopy loads its span maps into one ``KeyMap``
with :func:`load_map`, the core checking each file as strictly as :func:`decode_map`.
"""

from __future__ import annotations

import os
import struct
from array import array
from itertools import accumulate
from pathlib import Path
from typing import Any

from .. import native
from ..errors import CorruptRecordError
from ..files.nofollow import open_nofollow

MAGIC = b"LPKM1"
_COUNT = struct.Struct(">Q")


def encode_map(table: dict[bytes, int]) -> bytes:
    """``table`` in the map file layout (keys in the dict's order)."""
    keys = list(table)
    lengths = array("I", (len(k) for k in keys))
    offsets = array("q", table.values())
    return b"".join((MAGIC, _COUNT.pack(len(keys)), lengths.tobytes(), offsets.tobytes(), *keys))


def decode_map(data: bytes, path: Path) -> dict[bytes, int]:
    """The table of a map file's bytes (read from ``path``, which errors name); refuses bytes
    that do not add up. The compiled ``KeyMap.put_map_file`` accepts exactly these bytes."""
    head = len(MAGIC) + _COUNT.size
    if data[:len(MAGIC)] != MAGIC or len(data) < head:
        raise CorruptRecordError(f"{path} is not a key map file", path=str(path))
    (count,) = _COUNT.unpack_from(data, len(MAGIC))
    lengths, offsets = array("I"), array("q")
    end_lengths = head + 4 * count
    end_offsets = end_lengths + 8 * count
    if end_offsets > len(data):
        raise CorruptRecordError(f"{path} is cut short ({count} entries announced)", path=str(path))
    lengths.frombytes(data[head:end_lengths])
    offsets.frombytes(data[end_lengths:end_offsets])
    if end_offsets + sum(lengths) != len(data):
        raise CorruptRecordError(f"{path}: its keys do not add up to its size", path=str(path))
    starts = list(accumulate(lengths, initial=end_offsets))
    return dict(zip([data[a:b] for a, b in zip(starts, starts[1:], strict=False)], offsets, strict=False))


def write_map_bytes(path: Path, data: bytes) -> None:
    """Write a map file's bytes to ``path`` (a new file: nothing is overwritten in place)."""
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def read_map_bytes(path: Path) -> bytes:
    """A map file's bytes, unchecked (:func:`decode_map` or :func:`load_map` check them)."""
    fd = open_nofollow(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def write_map(path: Path, table: dict[bytes, int]) -> None:
    """Write ``table`` to ``path`` (a new file: nothing is overwritten in place)."""
    write_map_bytes(path, encode_map(table))


def read_map(path: Path) -> dict[bytes, int]:
    """The table :func:`write_map` wrote to ``path``."""
    return decode_map(read_map_bytes(path), path)


def load_map(keymap: Any, path: Path) -> None:
    """Put the entries of the map file at ``path`` into a compiled ``KeyMap`` (unbounded), in
    the file's order: loading span maps one after the other merges them, later offsets
    replacing earlier ones, with no Python object per key. Bytes the core refuses raise the
    reference's error for them (:func:`decode_map`)."""
    data = read_map_bytes(path)
    try:
        keymap.put_map_file(data)
    except native.REJECTIONS:
        raise native.reference_error(lambda: decode_map(data, path), f"the key map file {path}") from None
