"""What the Spark jobs need of the remote tier: where it is, said once by the driver, and the
objects read on executors that see no log dir.

The jobs run where no filesystem is shared (issue 35): a tiered partition's executor reads and
writes its objects in the bucket itself. The driver resolves the location once
(:func:`job_location`: ``LOGPLAT_REMOTE_STORAGE`` and the ``AWS_*`` settings of its own
environment, or a read's ``remoteStorage`` option) and every work item carries the parsed
:class:`~storage_engine.remote.location.RemoteLocation`, as Spark's S3A connector carries its
``fs.s3a.*`` settings inside the job's Hadoop configuration. So an executor needs neither the
log dirs nor any environment of its own: Spark starts executors (and the Python workers of a
session) with the environment of *their* JVM, not the driver's, and a variable set after the
JVM started reaches no worker at all.
"""

from __future__ import annotations

from collections.abc import Iterator

from storage_engine.log.log import Log
from storage_engine.log.segment_time import first_record_at
from storage_engine.record import RawBatch, scan_batches
from storage_engine.remote.access import open_store
from storage_engine.remote.errors import RemoteStorageError
from storage_engine.remote.location import ENV_REMOTE_STORAGE, RemoteLocation, location_from_env, parse_location
from storage_engine.remote.partition import RemotePartition
from storage_engine.remote.version import PartitionVersion, RemoteSegment

__all__ = ["job_location", "executor_partition", "remote_segment_batches", "tiered_offset_for_timestamp"]


def job_location(url: str | None = None) -> RemoteLocation:
    """The remote tier a job works on: ``url`` (a read's ``remoteStorage``) or
    ``$LOGPLAT_REMOTE_STORAGE``, with the S3 endpoint and credentials of this process's
    environment; opened once here, so a wrong endpoint or key fails on the driver, before any
    task starts."""
    location = parse_location(url) if url else location_from_env()
    if location is None:
        raise RemoteStorageError(f"{ENV_REMOTE_STORAGE} is not set: a tiered topic's objects cannot be found "
                                 "(s3://bucket/prefix, with AWS_ENDPOINT_URL and the AWS credentials)")
    open_store(location)
    return location


def executor_partition(location: RemoteLocation, topic: str, partition: int, *, own_store: bool = False
                       ) -> RemotePartition:
    """``topic``-``partition``'s remote tier at ``location``, from a Spark task. ``own_store``: a
    store of the task's own (one LIST to open it), so its request counters are this task's alone
    (a Python worker runs many tasks, and the shared store counts them all)."""
    store = location.open() if own_store else open_store(location)
    return RemotePartition(store, topic, partition)


def object_path(rp: RemotePartition, name: str) -> str:
    """How errors name an object: its full URL."""
    return f"{rp.store.url}/{rp.name(name)}"


def remote_segment_batches(rp: RemotePartition, segment: RemoteSegment, start_offset: int | None = None
                           ) -> Iterator[RawBatch]:
    """The batches of one remote segment's ``.log`` object holding offsets at or above
    ``start_offset``, headers parsed by the record layer (CRCs are checked where they are
    decoded). An object shorter or longer than its version says, or one whose last batch is
    cut, is damage (a rolled segment has no torn tail): a one-line error naming the object."""
    path = object_path(rp, segment.log)
    data = rp.read(segment.log)
    if len(data) != segment.size_bytes:
        raise RemoteStorageError(f"{path}: {len(data)} bytes, but its version records {segment.size_bytes}")
    reached = 0
    for raw in scan_batches(data, path=path):
        reached = raw.position + raw.header.size_in_bytes
        if start_offset is None or raw.header.last_offset >= start_offset:
            yield raw
    if reached != len(data):
        raise RemoteStorageError(f"{path}: the batches end at byte {reached} of {len(data)} (a cut or damaged batch)")



def tiered_offset_for_timestamp(log: Log, rp: RemotePartition, version: PartitionVersion, timestamp: int
                                ) -> int | None:
    """Kafka's ``ListOffsets`` by timestamp over the logical log of a tiered partition: the first
    offset at or after the log start whose record's timestamp is at or after ``timestamp``,
    searched in the remote segments (each whose largest timestamp reaches it, downloaded), then
    in the local segments from the tier's end (the local copies below it are shadowed: the
    remote tier may have compacted records they still hold)."""
    start = version.log_start_offset
    for seg in version.segments:
        if seg.end_offset > start and seg.max_timestamp >= timestamp:
            found = first_record_at(remote_segment_batches(rp, seg, start), timestamp, start, object_path(rp, seg.log))
            if found is not None:
                return found[1]
    local_start = max(version.end_offset, log.log_start_offset)
    segments = log.segments
    for i, seg in enumerate(segments):
        if i + 1 < len(segments) and segments[i + 1].base_offset <= local_start:
            continue
        if seg.largest_timestamp >= timestamp:
            found = seg.find_offset_by_timestamp(timestamp, local_start)
            if found is not None:
                return found[1]
    return None
