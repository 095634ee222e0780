"""Compaction of a partition's remote tier, with the engine's own cleaner: no local log needed.

Kafka cannot compact a tiered topic (KAFKA-19273); object-storage systems that can all compact
the shared copy once. Here that copy is the latest remote version, and the cleaning is the
local cleaner's, unchanged, on a scratch copy of it:

1. read the latest version (one LIST, one GET);
2. **materialize** it (``remote.materialize``): its segments as a Kafka partition directory in a
   scratch log dir, with their mtimes, the version's cleaner checkpoint and log start offset,
   and an empty active segment at the tier's end;
3. open that with a ``LogManager`` (the topic's config) and run :meth:`Cleaner.clean`: the same
   dirty ratio, lag bounds, strategies, transactions and tombstone horizons as a local log;
4. upload the segments the cleaner wrote under a new writer id (a segment it left alone, known
   by its ``.log``'s base offset, inode and size, keeps its objects);
5. **commit** a ``compact`` version built by ``PartitionVersion.successor`` (the new segment
   list, the checkpoint the cleaner wrote, the log start offset; the tier's end unchanged).
   Another writer that committed first makes it :class:`VersionConflictError`: the report says
   ``changed`` and no reader sees anything of this run (its uploads are orphans, swept later);
6. remove the scratch directory.

A kill at any step leaves the latest version as it was (before the commit) or the new one
(after), both complete: objects are uploaded before the version that names them and never
overwritten. Crash points: ``remote-compaction.after-materialize``, ``.after-upload``,
``.after-commit``.

The Spark job calls :func:`compact_remote` from its executors, with their own scratch
directories, and :func:`settle_tiered_compaction` on its driver with what they return;
``LogCleaner`` calls both for a tiered topic after tiering (:func:`compact_tiered`).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.topic import LogConfig
from ..faults import crash_point
from ..log.retention import sweep_deleted_files
from ..log.segment import LogSegment
from ..logdir.manager import LogManager
from ..outcomes import CHANGED, SKIPPED
from ..remote.access import remote_partition
from ..remote.errors import VersionConflictError
from ..remote.local_state import remember
from ..remote.materialize import materialize, parallel
from ..remote.names import new_writer_id
from ..remote.partition import RemotePartition, close_files, open_segment_files, wall_clock_ms
from ..remote.tiering import TierResult, tier_partition
from ..remote.version import PartitionVersion, RemoteSegment, release_horizon_ms
from .cleaner import Cleaner
from .report import CompactionReport
from .staging import CleanerLock, remote_staging_dir

if TYPE_CHECKING:
    from ..log.log import Log

ENGINE = "remote"


@dataclass
class RemoteCompaction:
    """A remote compaction's report and the version it committed (None: nothing committed)."""

    report: CompactionReport
    committed: PartitionVersion | None = None


def compact_remote(rp: RemotePartition, config: LogConfig, *, now_ms: int, force: bool, scratch_dir: Path | str,
                   cleaner: Cleaner | None = None) -> RemoteCompaction:
    """Compact ``rp``'s latest version (see the module docstring), working in a fresh directory
    inside ``scratch_dir`` that is removed afterwards; the report's ``remote_version`` is the
    version committed, else the version found, and ``committed`` the version itself. It needs no
    local log dir: a Spark executor calls it with its own temporary directory."""
    started = time.monotonic()
    before = rp.store.counters()
    cleaner = cleaner or Cleaner()
    version = rp.latest()
    if version is None or not version.segments:
        report = CompactionReport(rp.topic, rp.partition, now_ms, engine=ENGINE)
        report.settle(SKIPPED, f"{rp.tp} has no remote segments to clean")
        out = RemoteCompaction(report)
    else:
        Path(scratch_dir).mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="remote-clean-", dir=scratch_dir))  # a 249-character topic fits NAME_MAX
        try:
            out = _clean_version(rp, version, config, work, now_ms=now_ms, force=force, cleaner=cleaner)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    out.report.requests = rp.store.counters_since(before)
    out.report.duration_s = time.monotonic() - started
    return out


def _clean_version(rp: RemotePartition, version: PartitionVersion, config: LogConfig, work: Path, *, now_ms: int,
                   force: bool, cleaner: Cleaner) -> RemoteCompaction:
    materialize(rp, version, work)
    crash_point("remote-compaction.after-materialize")
    with LogManager([work], topic_configs={rp.topic: config}) as manager:
        log = manager.get_log(rp.topic, rp.partition)
        found = {s.base_offset: (s.inode, s.file_size) for s in log.segments}
        report = cleaner.clean(log, now_ms=now_ms, force=force)
        report.engine, report.remote_version = ENGINE, version.version
        report.segments_before = len(version.segments)  # the scratch log's active segment is not the tier's
        if report.passes == 0:
            report.settle(SKIPPED, report.skipped)
            return RemoteCompaction(report)
        report.segments_after = len(log.segments) - 1
        report.dirty_ratio_after = cleaner.dirty_ratio_now(log, now_ms)
        segments = log.segments[:-1]
        ends = [s.base_offset for s in log.segments[1:]]
        writer = new_writer_id()
        uploads_since = wall_clock_ms()
        kept = {s.base_offset: s for s in version.segments}
        jobs: list[Callable[[], RemoteSegment]] = []
        for seg, end in zip(segments, ends, strict=True):
            if found.get(seg.base_offset) == (seg.inode, seg.file_size) and seg.base_offset in kept:
                jobs.append(partial(replace, kept[seg.base_offset], end_offset=end))
            else:
                jobs.append(partial(_upload, rp, writer, seg, end))
        new_segments = parallel(jobs)
        report.uploaded_segments = [s.base_offset for s in new_segments
                                    if s.base_offset not in kept or kept[s.base_offset].log != s.log]
        crash_point("remote-compaction.after-upload")
        checkpoint = log.log_dir.cleaner_offsets.get((rp.topic, rp.partition))
        nxt = version.successor(
            writer=writer, operation="compact", committed_ms=wall_clock_ms(),
            release_horizon_ms=release_horizon_ms(config), segments=tuple(new_segments),
            cleaner_checkpoint=checkpoint, log_start_offset=max(version.log_start_offset, log.log_start_offset),
            summary={"segments": report.uploaded_segments, "passes": report.passes,
                     "checkpoint": [version.cleaner_checkpoint, checkpoint],
                     "bytes": [version.size_bytes, sum(s.size_bytes for s in new_segments)]})
    try:
        committed = rp.commit(nxt, uploads_since_ms=uploads_since)
    except VersionConflictError as exc:
        report.settle(CHANGED, str(exc), said=f"nothing committed: {exc}")
        return RemoteCompaction(report)
    crash_point("remote-compaction.after-commit")
    report.remote_version = committed.version
    return RemoteCompaction(report, committed)


def _upload(rp: RemotePartition, writer: str, seg: LogSegment, end: int) -> RemoteSegment:
    files = open_segment_files(seg)
    try:
        return rp.upload_segment(writer, base_offset=seg.base_offset, end_offset=end,
                                 max_timestamp=seg.max_timestamp_so_far, mtime_ms=seg.last_modified_ms, files=files)
    finally:
        close_files(files)


def compact_tiered(log: Log, *, now_ms: int, force: bool, cleaner: Cleaner) -> CompactionReport:
    """A tiered topic's compaction from its local log dir: tier first (every rolled segment
    below the last stable offset goes remote, so the remote tier holds what a local cleaner
    would clean), then :func:`compact_remote`, then :func:`settle_tiered_compaction`. The local
    segments themselves are never cleaned (the remote tier is the one copy that is); the
    cleaner lock is held throughout, so one machine runs one cleaning of the partition and its
    scratch directory (a staging directory) is not removed by a load."""
    rp = remote_partition(log.topic, log.partition, log.config, directory=log.dir)
    before = rp.store.counters()
    scratch = remote_staging_dir(log.dir, "remote-compaction")
    with CleanerLock(log.dir):
        try:
            tiered = tier_partition(log, rp, now_ms)
            out = compact_remote(rp, log.config, now_ms=now_ms, force=force, scratch_dir=scratch, cleaner=cleaner)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    report = settle_tiered_compaction(log, rp.store.url, tiered, out)
    report.requests = rp.store.counters_since(before)
    return report


def settle_tiered_compaction(log: Log, location: str, tiered: TierResult, out: RemoteCompaction) -> CompactionReport:
    """The steps beside a tiered partition's local log once its remote compaction (``out``, of
    this process or of a Spark executor) is over: remember the committed version (every commit
    made where the local log is, ``local_state``), sweep the local ``.deleted`` copies whose
    ``file.delete.delay.ms`` passed, and add to the report what tiering released locally
    (``local.retention.*``). ``LogCleaner`` and the Spark driver both end with this."""
    if out.committed is not None:
        remember(log.dir, location, out.committed)
    sweep_deleted_files(log.dir, log.config.file_delete_delay_ms)
    report = out.report
    if tiered.local_release is not None and tiered.local_release.deleted_segments:
        report.retention = tiered.local_release.to_dict()
    return report
