"""Kafka's producer state snapshot files, ``<20-digit offset>.snapshot``, byte for byte.

A broker writes one at every segment roll and at clean shutdown (``ProducerStateManager.
takeSnapshot``) so that, on the next open, producer state is the snapshot plus a replay of the
log after it instead of a scan of the whole log. That matters for compaction: the cleaner keeps
a producer's last batch header (even an emptied control batch) while it is that producer's
last batch, and only state that outlives cleaning can say so.

The layout is Kafka's ``ProducerSnapshot`` message (version 1), big-endian::

    version int16 | crc uint32 (CRC-32C of everything after it) | count int32 | count x entry
    entry: producer id int64 | epoch int16 | last sequence int32 | last offset int64 |
           offset delta int32 | timestamp int64 | coordinator epoch int32 |
           current txn first offset int64

Entries keep their file order, so reading a broker's file and writing it back gives the same
bytes.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from ..errors import LogError, NotRegularFileError, UnsafePathError
from ..faults import crash_point
from ..files.durable import TMP_SUFFIX, fsync_dir
from ..files.naming import SNAPSHOT_SUFFIX, filename_prefix_from_offset, is_digits
from ..files.nofollow import open_nofollow

SNAPSHOT_VERSION = 1
_HEAD = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
#: Kafka's ``PRODUCER_ENTRIES_OFFSET``: the CRC covers the bytes from here on.
_CRC_START = 6
_TMP = SNAPSHOT_SUFFIX + TMP_SUFFIX


class CorruptSnapshotError(LogError):
    """A ``.snapshot`` file is not a valid producer snapshot (Kafka's ``CorruptSnapshotException``);
    the loader deletes it and rebuilds producer state from the log, as Kafka does."""


@dataclass(frozen=True)
class SnapshotEntry:
    """One producer in a snapshot (Kafka's ``ProducerSnapshot.ProducerEntry``). ``last_offset`` is
    -1 when the producer has no data batch since its epoch began (only markers); then
    ``last_sequence`` and ``offset_delta`` carry no meaning. ``current_txn_first_offset`` is -1
    outside a transaction."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def encode_snapshot(entries: list[SnapshotEntry]) -> bytes:
    """The file's bytes for ``entries`` (in the order given)."""
    body = bytearray(_HEAD.pack(SNAPSHOT_VERSION, 0, len(entries)))
    for e in entries:
        body += _ENTRY.pack(e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset, e.offset_delta,
                            e.timestamp, e.coordinator_epoch, e.current_txn_first_offset)
    struct.pack_into(">I", body, 2, crc32c(memoryview(body)[_CRC_START:]))
    return bytes(body)


def decode_snapshot(data: bytes, path: Path | str = "<memory>") -> list[SnapshotEntry]:
    """The entries of a snapshot file, or :class:`CorruptSnapshotError` naming the file and what is
    wrong (Kafka's ``readSnapshot``: version, schema, then CRC)."""
    if len(data) < _HEAD.size:
        raise CorruptSnapshotError(f"producer snapshot {path}: {len(data)} bytes, shorter than its {_HEAD.size}-byte header")
    version, crc, count = _HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"producer snapshot {path}: unknown file version {version}")
    if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
        raise CorruptSnapshotError(
            f"producer snapshot {path}: {len(data)} bytes do not hold a header and {count} producer entries")
    computed = crc32c(memoryview(data)[_CRC_START:])
    if computed != crc:
        raise CorruptSnapshotError(f"producer snapshot {path}: CRC is no longer valid (stored {crc}, computed {computed})")
    return [SnapshotEntry(*_ENTRY.unpack_from(data, _HEAD.size + i * _ENTRY.size)) for i in range(count)]


def snapshot_path(directory: Path, offset: int) -> Path:
    return Path(directory) / (filename_prefix_from_offset(offset) + SNAPSHOT_SUFFIX)


def list_snapshots(directory: Path) -> dict[int, Path]:
    """Offset -> path of every live ``<20 digits>.snapshot`` regular file (symlinks are not ours)."""
    found: dict[int, Path] = {}
    for entry in os.scandir(directory):
        stem = entry.name[: -len(SNAPSHOT_SUFFIX)]
        if entry.name.endswith(SNAPSHOT_SUFFIX) and len(stem) == 20 and is_digits(stem) and \
                entry.is_file(follow_symlinks=False):
            found[int(stem)] = Path(entry.path)
    return dict(sorted(found.items()))


def read_snapshot(path: Path) -> list[SnapshotEntry]:
    """Read one snapshot file without following a symlink."""
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except OSError as exc:
        raise CorruptSnapshotError(f"producer snapshot {path}: cannot be read: {exc.strerror}") from None
    except (UnsafePathError, NotRegularFileError) as exc:  # not ours: dropped like a corrupt snapshot
        raise CorruptSnapshotError(f"producer snapshot {path}: cannot be read: {exc}") from None
    with os.fdopen(fd, "rb") as f:
        return decode_snapshot(f.read(), path)


def write_snapshot(directory: Path, offset: int, entries: list[SnapshotEntry]) -> Path:
    """Write ``<offset>.snapshot`` beside as ``.snapshot.tmp``, fsync, rename into place, fsync the
    directory: a kill leaves the old file or the new one, never a torn one (Kafka writes in
    place and relies on the CRC instead). Returns the path."""
    final = snapshot_path(directory, offset)
    tmp = final.with_name(final.name + TMP_SUFFIX)
    tmp.unlink(missing_ok=True)
    fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        try:
            view = memoryview(encode_snapshot(entries))
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half-written .tmp behind
        raise
    crash_point("producer-snapshot.before-rename")
    os.replace(tmp, final)
    fsync_dir(final.parent)
    return final


def is_snapshot_temp(name: str) -> bool:
    """A ``.snapshot.tmp`` a killed :func:`write_snapshot` left behind."""
    return name.endswith(_TMP) and is_digits(name[: -len(_TMP)])
