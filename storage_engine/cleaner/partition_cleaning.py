"""One partition's cleaning from lock to report, when its round is cleaned outside this process
(the Spark job's split partitions): Kafka's ``LogCleanerManager`` holds a partition "in
progress" from ``grabFilthiestCompactedLog`` to ``doneCleaning``; here that is
:class:`PartitionCleaning`, holding the cleaner lock from :meth:`PartitionCleaning.start` to
:meth:`PartitionCleaning.close`.

The steps: lock, stale staging removed, the pass prepared and its round planned (``start``);
the round's groups recopied elsewhere (``split``), each into a staging directory; their output
adopted into the partition directory, still staged (``adopt``); the swap under the partition
lock and the report's accounting (``commit``); the after-steps (:func:`finish`), which the
local cleaner (``LogCleaner``) runs too.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.topic import LogConfig
from ..errors import LogChangedError
from ..faults import crash_point
from ..log.retention import RetentionResult, apply_retention, sweep_deleted_files
from ..log.segment import LogSegment
from ..outcomes import CHANGED, COMPACTED, FAILED, SKIPPED
from .cleaner import Cleaner, PassResult, PreparedPass
from .inputs import InputSegment
from .outcome import outcome_of
from .plan import CleaningRound
from .recopy import discard_staged
from .report import CompactionReport
from .staging import STAGING_SUFFIX, CleanerLock, remote_staging_dir, remove_stale_staging

if TYPE_CHECKING:
    from ..log.log import Log


def after_steps(log: Log, now_ms: int) -> RetentionResult | None:
    """The cleaner thread's steps after each partition, cleaned or not due: retention for
    ``compact,delete`` topics (``deleteOldSegments``; None for others), then the delayed
    removal of ``.deleted`` files."""
    retention = apply_retention(log, None, now_ms) if log.config.delete else None
    sweep_deleted_files(log.dir, log.config.file_delete_delay_ms)
    return retention


def finish(log: Log, report: CompactionReport, now_ms: int, cleaner: Cleaner,
           last_stable_offset: int | None = None) -> None:
    """What Kafka's cleaner thread does after cleaning a partition (or finding it not due): the
    after-steps (:func:`after_steps`); the report's segment count and dirty ratio are what is
    left. The local cleaner and the Spark job both end a partition here."""
    retention = after_steps(log, now_ms)
    if retention is not None:
        report.retention = retention.to_dict()
    report.segments_after = len(log.segments)
    report.dirty_ratio_after = cleaner.dirty_ratio_now(log, now_ms, last_stable_offset)


def adopt(staging: Path, directory: Path, base: int, config: LogConfig) -> LogSegment:
    """Move one task's replacement segment into the partition directory, still staged."""
    for entry in sorted(os.scandir(staging), key=lambda e: e.name):
        if entry.name.endswith(STAGING_SUFFIX):
            os.replace(entry.path, Path(directory) / entry.name)
    return LogSegment(directory, base, config, file_suffix=STAGING_SUFFIX, writable=True)


@dataclass
class PartitionCleaning:
    """A partition held for a cleaning whose round is recopied elsewhere: everything the commit
    needs, and the cleaner lock it holds until :meth:`close`."""

    log: Log
    cleaner: Cleaner
    lock: CleanerLock
    report: CompactionReport
    prepared: PreparedPass
    round: CleaningRound
    inputs: list[InputSegment]
    groups: int
    plan_s: float  # the seconds spent preparing and planning it

    @classmethod
    def start(cls, log: Log, cleaner: Cleaner, *, now_ms: int, force: bool,
              engine: str) -> PartitionCleaning | CompactionReport:
        """Lock, remove stale staging, prepare the pass and plan its round up to the first
        uncleanable offset; or the report of why not (another cleaner holds it, nothing to
        clean, not due: the after-steps ran then)."""
        report = CompactionReport(log.topic, log.partition, now_ms, engine=engine)
        lock = CleanerLock(log.dir)
        if not lock.acquire():
            report.settle(SKIPPED, f"{log.topic}-{log.partition} is being cleaned by another process")
            return report
        t0 = time.monotonic()
        try:
            remove_stale_staging(log.dir)
            prepared = cleaner.prepare_pass(log, now_ms, force=force, report=report)
        except BaseException:
            lock.release()
            raise
        if prepared is None:
            lock.release()
            finish(log, report, now_ms, cleaner)
            report.duration_s = time.monotonic() - t0
            report.settle(SKIPPED, report.skipped)
            return report
        try:
            rnd = cleaner.plan_round(log, prepared, prepared.ltc.first_uncleanable_offset, now_ms)
            groups = prepared.groups(rnd)
        except BaseException:  # the caller only knows the partitions started
            prepared.close()
            lock.release()
            raise
        return cls(log, cleaner, lock, report, prepared, rnd, [s for g in groups for s in g], len(groups),
                   time.monotonic() - t0)

    def commit(self, rows: Mapping[int, dict], index_s: float, keys: int, now_ms: int) -> CompactionReport:
        """Adopt the groups' staged output (``rows``: each group's result, by group) and swap it in,
        or report why not: a group that failed or is missing fails the partition, one that saw a
        change makes it ``changed``. ``duration_s`` is the partition's own work (planning, its
        tasks' seconds, the commit), not a job's wall time."""
        started = time.monotonic()
        report, log = self.report, self.log
        problems = [r for r in rows.values() if r["status"] != COMPACTED]
        missing = self.groups - len(rows)
        if problems or missing:
            status = FAILED if any(r["status"] == FAILED for r in problems) or missing else CHANGED
            reason = "; ".join(r["detail"] for r in problems) or f"{missing} group(s) produced no result"
            report.settle(status, reason, said=f"nothing swapped: {reason}")
            return report
        cleaned: list[LogSegment] = []
        stats = self.prepared.stats
        stats.index_seconds += index_s
        try:
            for grp in range(self.groups):
                row = rows[grp]
                stats.add(row["stats"])
                cleaned.append(adopt(Path(row["staging"]), log.dir, self.round.groups[grp][0], log.config))
            crash_point("spark-compaction.after-staged-moved")
            t0 = time.monotonic()
            self.cleaner.commit_round(log, self.inputs, cleaned, self.round)
            stats.swap_seconds = time.monotonic() - t0
        except LogChangedError as exc:
            discard_staged(cleaned)
            report.settle(*outcome_of(exc))
            return report
        except BaseException:
            discard_staged(cleaned)
            raise
        lso = self.prepared.producers.last_stable_offset
        self.cleaner.account(report, PassResult(self.prepared.ltc, self.round, stats, map_entries=keys,
                                                segments_written=len(cleaned), last_stable_offset=lso))
        report.map_capacity_bytes = 0  # an exact map: no capacity of its own
        finish(log, report, now_ms, self.cleaner, lso)
        report.duration_s = self.plan_s + index_s + stats.clean_seconds + time.monotonic() - started
        return report

    def close(self, job_id: str) -> None:
        """Release the partition: the pass's descriptors, the job's staging directory, the lock."""
        self.prepared.close()
        shutil.rmtree(remote_staging_dir(self.log.dir, job_id), ignore_errors=True)
        self.lock.release()
