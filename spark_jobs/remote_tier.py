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

from storage_engine.log.log import Log
from storage_engine.remote.access import configured_location, open_store
from storage_engine.remote.location import RemoteLocation, parse_location
from storage_engine.remote.partition import RemotePartition
from storage_engine.remote.reads import TieredLog
from storage_engine.remote.version import PartitionVersion

__all__ = ["job_location", "executor_partition", "tiered_offset_for_timestamp"]


def job_location(url: str | None = None) -> RemoteLocation:
    """The remote tier a job works on: ``url`` (a read's ``remoteStorage``) or
    ``$LOGPLAT_REMOTE_STORAGE``, with the S3 endpoint and credentials of this process's
    environment; opened once here, so a wrong endpoint or key fails on the driver, before any
    task starts."""
    location = parse_location(url) if url else configured_location()
    open_store(location)
    return location


def executor_partition(location: RemoteLocation, topic: str, partition: int, *, own_store: bool = False
                       ) -> RemotePartition:
    """``topic``-``partition``'s remote tier at ``location``, from a Spark task. ``own_store``: a
    store of the task's own (one LIST to open it), so its request counters are this task's alone
    (a Python worker runs many tasks, and the shared store counts them all)."""
    store = location.open() if own_store else open_store(location)
    return RemotePartition(store, topic, partition)


def tiered_offset_for_timestamp(log: Log, rp: RemotePartition, version: PartitionVersion, timestamp: int
                                ) -> int | None:
    """Kafka's ``ListOffsets`` by timestamp over the logical log of a tiered partition
    (``TieredLog.offset_for_timestamp``: the remote segments, then the local log from the
    tier's end)."""
    found = TieredLog(log.topic, log.partition, log, rp, version, log.config.compact).offset_for_timestamp(timestamp)
    return found[1] if found is not None else None
