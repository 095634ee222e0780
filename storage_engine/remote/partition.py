"""One partition's remote tier: its versions (read, list, commit) and its objects.

The commit is Delta Lake's: version N+1 is created only if absent (``ObjectStore.put_new``, S3
``If-None-Match: *``), so of two writers that both read version N exactly one commits; the
other gets :class:`~.errors.VersionConflictError` and nothing it uploaded is named by any
version (the orphan sweep removes it later). Readers take the highest version. Objects are
uploaded before the version that names them, so every committed version is complete.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..files.nofollow import open_nofollow
from .errors import RemoteMetadataError, RemoteStorageError, VersionConflictError
from .names import VERSIONS, data_name, partition_prefix, version_name, version_of_name
from .store import ObjectExistsError, ObjectMissingError, ObjectStore
from .version import PartitionVersion, RemoteSegment, decode_version

if TYPE_CHECKING:
    from ..log.segment import LogSegment

#: The orphan sweep never deletes an unnamed object younger than this: an upload of a writer
#: that has not committed yet may still be named by its commit.
ORPHAN_MIN_AGE_MS = 6 * 3600 * 1000
#: ... and a writer never commits uploads older than half of it, so the two cannot meet.
MAX_UPLOAD_AGE_MS = ORPHAN_MIN_AGE_MS // 2


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def open_segment_files(seg: LogSegment) -> dict[str, int | None]:
    """Descriptors of a segment's ``.log`` and indexes for :meth:`RemotePartition.upload_segment`
    (None: an index file that is not there), opened without following a symlink. An open
    descriptor keeps reading the bytes it opened even if the file is renamed or replaced later,
    so a caller may open them under the partition lock and upload after releasing it."""
    index_path, time_index_path, txn_index_path = seg.index_paths()
    files: dict[str, int | None] = {"log": open_nofollow(seg.log_path, os.O_RDONLY)}
    try:
        for kind, path in (("index", index_path), ("timeindex", time_index_path), ("txnindex", txn_index_path)):
            try:
                files[kind] = open_nofollow(path, os.O_RDONLY)
            except FileNotFoundError:
                files[kind] = None
    except BaseException:
        close_files(files)
        raise
    return files


def close_files(files: Mapping[str, int | None]) -> None:
    for fd in files.values():
        if fd is not None:
            os.close(fd)


class RemotePartition:
    """``topic``-``partition``'s folder in ``store`` (``<topic>-<n>/``)."""

    def __init__(self, store: ObjectStore, topic: str, partition: int) -> None:
        self.store = store
        self.topic = topic
        self.partition = partition
        self.prefix = partition_prefix(topic, partition)

    def __repr__(self) -> str:
        return f"RemotePartition({self.store.url}/{self.prefix})"

    @property
    def tp(self) -> str:
        return f"{self.topic}-{self.partition}"

    def name(self, relative: str) -> str:
        """A name of this partition relative to the store's prefix."""
        return self.prefix + relative

    # ------------------------------------------------------------------ versions

    def version_numbers(self, *, after: int | None = None) -> list[int]:
        """The committed version numbers still stored, ascending (one LIST)."""
        start = self.name(version_name(after)) if after is not None else None
        out = []
        for info in self.store.list(self.name(VERSIONS), after=start):
            n = version_of_name(info.name[len(self.prefix):])
            if n is None:
                raise RemoteMetadataError(f"{self.store.url}/{info.name}: not a version object name")
            out.append(n)
        return sorted(out)

    def read_version(self, number: int) -> PartitionVersion:
        name = self.name(version_name(number))
        try:
            data = self.store.get(name)
        except ObjectMissingError:
            raise RemoteStorageError(f"{self.tp} has no version {number} in {self.store.url} "
                                     "(never committed, or expired)") from None
        return decode_version(data, topic=self.topic, partition=self.partition, version=number,
                              where=f"{self.store.url}/{name}")

    def latest(self) -> PartitionVersion | None:
        """The highest committed version, or None when the partition has no remote tier yet."""
        numbers = self.version_numbers()
        return self.read_version(numbers[-1]) if numbers else None

    def commit(self, version: PartitionVersion, *, uploads_since_ms: int | None = None) -> PartitionVersion:
        """Create ``version`` (its number the one after the version it was built on); raises
        :class:`VersionConflictError` if another writer committed that number first.
        ``uploads_since_ms``: when this writer's first upload began (wall clock); a commit of
        uploads older than :data:`MAX_UPLOAD_AGE_MS` is refused, since the orphan sweep may
        have judged them abandoned."""
        if version.version < 1:
            raise RemoteStorageError(f"{self.tp}: version numbers start at 1, not {version.version}")
        if uploads_since_ms is not None and wall_clock_ms() - uploads_since_ms > MAX_UPLOAD_AGE_MS:
            raise RemoteStorageError(f"{self.tp}: not committed: this writer's uploads began more than "
                                     f"{MAX_UPLOAD_AGE_MS // 60000} minutes ago and may have been swept")
        try:
            self.store.put_new(self.name(version_name(version.version)), version.encode())
        except ObjectExistsError:
            raise VersionConflictError(
                f"{self.tp}: another writer committed version {version.version} first; this change was not "
                "committed (its uploads are swept later)") from None
        return version

    # ------------------------------------------------------------------ objects

    def upload_segment(self, writer: str, *, base_offset: int, end_offset: int, max_timestamp: int, mtime_ms: int,
                       files: Mapping[str, int | None]) -> RemoteSegment:
        """Upload one segment's files, open at ``files`` (``log``, ``index``, ``timeindex``,
        ``txnindex`` -> descriptor; None for an index the segment lacks, uploaded empty), as new
        objects: the indexes first, the log last (its object completes the segment). The size
        recorded is the ``.log``'s bytes uploaded. A ``.txnindex`` that is missing or empty is
        not uploaded (Kafka's transaction index is the optional part of a remote segment: no
        object, no aborted transaction), so a segment of a topic without transactions costs
        no extra request. Tiering and remote compaction both upload through here."""
        names: dict[str, str] = {}
        size = 0
        txn_fd = files.get("txnindex")
        kinds = ("index", "timeindex") + (("txnindex",) if txn_fd is not None and os.fstat(txn_fd).st_size else ())
        for kind in (*kinds, "log"):
            names[kind] = data_name(base_offset, writer, kind)
            fd = files.get(kind)
            if fd is None:
                self.store.put_new(self.name(names[kind]), b"")
            else:
                size = self.store.put_fd(self.name(names[kind]), fd)
        return RemoteSegment(base_offset, end_offset, size, max_timestamp, mtime_ms, names["log"], names["index"],
                             names["timeindex"], names.get("txnindex"))

    def read(self, name: str) -> bytes:
        return self.store.get(self.name(name))

    def read_range(self, name: str, start: int, end: int) -> bytes:
        return self.store.get_range(self.name(name), start, end)

    def missing_objects(self, version: PartitionVersion) -> list[str]:
        """The objects ``version`` names that are not in the store (one HEAD each)."""
        missing = []
        for name in sorted(version.objects):
            try:
                self.store.head(self.name(name))
            except ObjectMissingError:
                missing.append(name)
        return missing
