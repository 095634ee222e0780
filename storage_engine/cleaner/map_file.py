"""An exact key -> offset table as a file: how a distributed map build hands each segment's
share of the offset map to the driver, and the merged map to the recopy tasks, through the
partition's staging directory (which every host of a job sees: the jobs need the log dirs on a
shared POSIX mount) rather than through Spark's RPC, which moved these tables at tens of MB/s.

Layout: ``LPKM1``, the entry count (uint64), each key's length (uint32), each offset (int64),
then the keys back to back. Nothing is executed on load (unlike pickle), and a file that does
not add up is refused.
"""

from __future__ import annotations

import os
import struct
from array import array
from itertools import accumulate
from pathlib import Path

from ..errors import CorruptRecordError
from ..files.nofollow import open_nofollow

MAGIC = b"LPKM1"
_COUNT = struct.Struct(">Q")


def write_map(path: Path, table: dict[bytes, int]) -> None:
    """Write ``table`` to ``path`` (a new file: nothing is overwritten in place)."""
    keys = list(table)
    lengths = array("I", (len(k) for k in keys))
    offsets = array("q", table.values())
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(MAGIC + _COUNT.pack(len(keys)))
        f.write(lengths.tobytes())
        f.write(offsets.tobytes())
        f.write(b"".join(keys))


def read_map(path: Path) -> dict[bytes, int]:
    """The table :func:`write_map` wrote to ``path``."""
    fd = open_nofollow(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        data = f.read()
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
