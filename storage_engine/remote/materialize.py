"""A remote version as a Kafka partition directory ("materialize"): what the engine's own
cleaner (or any tool that reads a log dir) opens when the partition lives in a bucket.

``materialize(rp, version, scratch)`` writes ``scratch/<topic>-<p>/`` holding, for every segment
of the version, its ``.log``, ``.index``, ``.timeindex`` and (when it aborted a transaction)
``.txnindex`` under the 20-digit name of its base offset, with the mtime the version recorded (``mtime_ms``: Kafka's fallback time for segments
without timestamps, which the tombstone horizon and the time rules read); the producer snapshot
at its offset; an *empty* active segment at ``version.end_offset`` (the cleaner never cleans
the active segment, so the last remote segment is cleanable only with one after it); and the
log dir's ``cleaner-offset-checkpoint`` and ``log-start-offset-checkpoint`` holding the
version's. The log dir is left as a broker leaves one after a clean shutdown
(``.kafka_cleanshutdown``): its segments are committed objects, read as the local engine reads
its own cleanly closed segments, so opening it costs no recovery pass; that is also why the
``.txnindex`` must come along: after a clean shutdown a missing one means "no aborted
transaction here" to a broker's ``read_committed`` fetch.

Every local file name comes from an offset of the (strictly decoded) version, never from an
object name or other data; the object names used to fetch are the version's, validated by
``decode_version``. Downloads run on a small thread pool: each is one GET, and a single
stream leaves most of a link idle between requests.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from ..files.naming import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    partition_dir_name,
    segment_file,
)
from ..files.nofollow import open_nofollow
from ..log.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    write_checkpoint,
    write_clean_shutdown_marker,
)
from .errors import RemoteStorageError
from .names import DATA, check_data_name
from .partition import RemotePartition
from .version import PartitionVersion

#: concurrent GETs (and PUTs, for the writers that share it): enough to fill a loopback or a
#: datacenter link with segment-sized objects, few enough for a Spark executor's core
TRANSFER_THREADS = 4

T = TypeVar("T")


class MaterializeError(RemoteStorageError):
    """The scratch directory cannot take the partition (it is there already)."""


def _write_new(path: Path, data: bytes, mtime_ms: int | None = None) -> None:
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    if mtime_ms is not None:
        ns = mtime_ms * 1_000_000
        os.utime(path, ns=(ns, ns))


def snapshot_offset(name: str) -> int:
    """The offset a (validated) producer snapshot object name carries."""
    return int(check_data_name(name, "snapshot")[len(DATA):len(DATA) + 20])


def parallel(jobs: Sequence[Callable[[], T]], threads: int = TRANSFER_THREADS) -> list[T]:
    """Run ``jobs`` on a small pool, in order of results; the first error propagates (the
    others finish first: nothing is left writing behind the caller's back)."""
    if len(jobs) <= 1:
        return [job() for job in jobs]
    with ThreadPoolExecutor(max_workers=min(threads, len(jobs))) as pool:
        futures = [pool.submit(job) for job in jobs]
    return [f.result() for f in futures]


def materialize(rp: RemotePartition, version: PartitionVersion, scratch_dir: Path | str) -> Path:
    """``version`` of ``rp`` as the partition directory ``scratch_dir/<topic>-<p>/`` of the log
    dir ``scratch_dir`` (see the module docstring); returns the partition directory."""
    log_dir = Path(scratch_dir)
    part = log_dir / partition_dir_name(version.topic, version.partition)
    if os.path.lexists(part):
        raise MaterializeError(f"{part} exists already: materialize into a fresh scratch directory")
    log_dir.mkdir(parents=True, exist_ok=True)
    part.mkdir()
    jobs: list[Callable[[], None]] = []
    for seg in version.segments:
        jobs.append(_download(rp, seg.log, segment_file(part, seg.base_offset, LOG_SUFFIX), seg.mtime_ms,
                              size=seg.size_bytes))
        for name, suffix in ((seg.index, INDEX_SUFFIX), (seg.time_index, TIME_INDEX_SUFFIX),
                             (seg.txn_index, TXN_INDEX_SUFFIX)):
            if name is not None:
                jobs.append(_download(rp, name, segment_file(part, seg.base_offset, suffix), None))
    if version.producer_snapshot is not None:
        offset = snapshot_offset(version.producer_snapshot)
        if offset <= version.end_offset:  # a snapshot past the tier's end describes offsets it lacks
            jobs.append(_download(rp, version.producer_snapshot, segment_file(part, offset, SNAPSHOT_SUFFIX), None))
    parallel(jobs)
    _write_new(segment_file(part, version.end_offset, LOG_SUFFIX), b"")
    tp = (version.topic, version.partition)
    write_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT, {tp: version.log_start_offset})
    if version.cleaner_checkpoint is not None:
        write_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, {tp: version.cleaner_checkpoint})
    write_clean_shutdown_marker(log_dir)
    return part


def _download(rp: RemotePartition, name: str, path: Path, mtime_ms: int | None, *,
              size: int | None = None) -> Callable[[], None]:
    """A job fetching ``name`` into ``path``. ``size``: what the version records for it (a
    ``.log``'s); an object of another size (cut short, or replaced) is refused, since the
    cleaner would read a shortened segment as one that simply ends there and commit the loss."""
    def job() -> None:
        data = rp.read(name)
        if size is not None and len(data) != size:
            raise RemoteStorageError(f"{rp.store.url}/{rp.name(name)}: {len(data)} bytes, but the version "
                                     f"records {size}")
        _write_new(path, data, mtime_ms)
    return job
