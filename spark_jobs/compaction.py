"""Distributed log compaction: the engine's cleaner, with Spark spreading the work.

Every decision and every byte is the engine's (``storage_engine.cleaner``); Spark supplies only
the distribution (``distribute.py``). A job moves work, not keys:

* **Whole partitions.** A partition no larger than one task's share of the job (the job's bytes
  over its task slots, at least ``MIN_SPLIT_BYTES``) is cleaned whole inside one task by the
  engine's own lifecycle, ``LogManager.compact``: prepare, plan, clean (pass after pass while
  the offset map fills), commit under the lock, account, then the after-steps (retention for
  ``compact,delete``, the sweep of ``.deleted`` files). Many such partitions are packed per
  task, largest first. The output is the local cleaner's because it is the local cleaner.
* **Split partitions.** A larger partition is planned on the driver, under its cleaner lock
  (the engine's ``Cleaner.prepare_pass`` and ``plan_round``). Its groups are cut into *spans*,
  runs of consecutive groups of about equal size, one per task slot, and it is cleaned in two
  stages:

  1. *Keys* (one task per span): the engine's map-building walk over the span's part of the
     dirty range, reduced inside the task to the latest offset of each key, so a task hands
     back one small map, never a row per record.
  2. *Recopy* (one task per span): the engine's ``BatchFilter`` and ``recopy_group`` over the
     span's groups, with the transaction state the header replay computed for each group's
     start, and the map merged from the span's own keys and every later span's, in offset order.
     A record can only be superseded by a later one, so that map decides each record of the
     span as the partition's whole map would; the last span needs only its own keys, and no
     merge waits on the driver. (One round reaches the first uncleanable offset, where the local
     cleaner's bounded map may need several passes to get there.) Output goes to the job's
     staging directory (``staging.remote_staging_dir``), a subdirectory per task attempt, so
     retried or speculative attempts never collide.

  The maps travel as files in the partition's staging directory (``cleaner.map_file``), which
  every host sees (the jobs need the log dirs on a shared mount), not through Spark's RPC.

  The driver then moves the winning attempts' files in as ``.cleaning`` and the engine's
  ``commit_round`` swaps them in after checking that every input segment is unchanged; a
  partition that changed is reported ``changed`` and nothing of it is swapped.

  A topic with a version compaction strategy (``compaction.strategy`` ``timestamp`` or
  ``header``, KIP-280) is never split: its recopy must run in offset order, so each of its
  partitions is cleaned whole, whatever its size.

Crash safety is the engine's: staged output that never reached the swap is removed by the next
cleaner or writable load of the partition (``staging.remove_staging_if_idle``), and the swap
itself follows Kafka's ``.cleaned``/``.swap`` protocol with the loader's recovery rules. Each
partition's report times its own work (its task, or its planning, tasks and commit); the job's
wall time is :attr:`CompactionJobResult.duration_s`.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Mapping, Sequence

from storage_engine.cleaner import (
    AbortedTxn,
    BatchFilter,
    Cleaner,
    CleanerStats,
    CompactionReport,
    InputSegment,
    LastRecord,
    SegmentRef,
    TransactionTracker,
    discard_staged,
    recopy_group,
    segment_latest_offsets,
    transaction_states,
)
from storage_engine.cleaner.cleaner import PassResult
from storage_engine.cleaner.map_file import read_map, write_map
from storage_engine.cleaner.offset_map import OffsetMap
from storage_engine.cleaner.plan import CleaningRound
from storage_engine.cleaner.strategy import CompactionStrategy
from storage_engine.cleaner.staging import (STAGING_SUFFIX, CleanerBusyError, CleanerLock, make_remote_staging,
                                            remote_staging_dir, remove_stale_staging)
from storage_engine.config.topic import LogConfig
from storage_engine.errors import LogChangedError, LogError
from storage_engine.faults import crash_point
from storage_engine.logdir.manager import LogManager
from storage_engine.files.naming import partition_dir_name
from storage_engine.outcomes import CHANGED, COMPACTED, FAILED, SKIPPED
from storage_engine.log.segment import LogSegment

from .distribute import attempt_id, contiguous_parts, each, pack, run_tasks, task_slots
from .errors import SparkJobError

#: A partition is split over several tasks only above this size, whatever the job's share per
#: task: below it the split's extra stage costs more than the parallelism saves.
MIN_SPLIT_BYTES = 256 * 1024 * 1024


# ------------------------------------------------------------------------------------------
# the work items (small and picklable: they travel to executors)


@dataclass(frozen=True)
class WholeTask:
    """A partition cleaned whole, inside one task, by the engine."""

    topic: str
    partition: int
    log_dir: str
    size_bytes: int
    broker_props: tuple[tuple[str, str], ...]
    configs: Mapping[str, LogConfig]  # every topic's, resolved over every log dir (``LogManager.topic_configs``)


@dataclass(frozen=True)
class KeysTask:
    """Split stage 1: the latest offset of each key in one span's part of the dirty range."""

    tp: int
    span: int  # the span's place in its partition (spans run in offset order)
    segments: tuple[tuple[SegmentRef, tuple[AbortedTxn, ...]], ...]  # each with the aborted
    # transactions reaching into its dirty part, in offset order
    dirty_from: int
    dirty_to: int
    chunk: int  # the cleaner's I/O buffer (log.cleaner.io.buffer.size)
    staging_dir: str  # where the task leaves its map (``map_file``)

    @property
    def size(self) -> int:
        return sum(ref.size for ref, _ in self.segments)


@dataclass
class GroupTask:
    """Split stage 2: recopy one group of segments into one replacement segment."""

    tp: int
    grp: int
    directory: str
    staging_dir: str
    config: LogConfig
    segments: tuple[SegmentRef, ...]
    legacy_delete_horizon_ms: int
    tracker: TransactionTracker
    last_records: dict[int, LastRecord]
    now_ms: int
    map_latest_offset: int
    last_batch_base_offset: int | None
    chunk: int  # read and write chunk: the local cleaner's, so index entries fall where its do


@dataclass
class SpanTask:
    """Split stage 2: the groups of one span, recopied with one map: the keys of this span and
    of every later one (``map_paths``, the stage 1 maps in offset order). A record's later
    copies can only be in its own span or a later one, so that map decides every record of the
    span as the whole partition's map would, at a fraction of its size for all but the first."""

    tp: int
    span: int
    map_paths: tuple[str, ...]
    groups: tuple[GroupTask, ...]

    @property
    def size(self) -> int:
        return sum(ref.size for g in self.groups for ref in g.segments)


# ------------------------------------------------------------------------------------------
# executor side


def clean_whole_tasks(tasks: Sequence[WholeTask], now_ms: int, force: bool) -> list["PartitionOutcome"]:
    """One Spark task's whole partitions, through one ``LogManager`` per log dir, as the local
    cleaner's ``compact_due`` does: a manager per partition reopened and closed the log dir's
    state (checkpoints written back) for every one of a task's partitions."""
    out: list[PartitionOutcome] = []
    for (log_dir, props), group in groupby(sorted(tasks, key=lambda t: (t.log_dir, t.broker_props)),
                                           key=lambda t: (t.log_dir, t.broker_props)):
        group = list(group)
        with LogManager([Path(log_dir)], dict(props), topic_configs=group[0].configs) as manager:
            out.extend(clean_whole(manager, task, now_ms, force) for task in group)
    return out


def clean_whole(manager: LogManager, task: WholeTask, now_ms: int, force: bool) -> "PartitionOutcome":
    """One partition through the engine's whole compaction lifecycle; a problem of its files
    becomes its outcome (the other partitions of the job go on)."""
    started = time.monotonic()
    report = CompactionReport(task.topic, task.partition, now_ms)
    try:
        report = manager.compact(task.topic, task.partition, now_ms=now_ms, force=force)
        status, reason = (COMPACTED, None) if report.skipped is None else (SKIPPED, report.skipped)
    except CleanerBusyError as exc:
        status, reason = SKIPPED, str(exc)
    except LogChangedError as exc:
        status, reason = CHANGED, str(exc)
    except (LogError, OSError) as exc:
        status, reason = FAILED, f"{type(exc).__name__}: {exc}"
    if status != COMPACTED:
        if status == FAILED:
            report.failed = reason
        else:
            report.skipped = reason
        report.duration_s = time.monotonic() - started
    report.engine = "spark"
    return PartitionOutcome(task.topic, task.partition, status, reason, report)


def scan_span_keys(task: KeysTask) -> tuple[int, int, str, float]:
    """``(tp, span, map file, seconds)``: the engine's share of the offset map from this span's
    segments (:func:`~storage_engine.cleaner.segment_latest_offsets`, one table for all of them),
    written to a file in the partition's staging directory. A segment that is gone or replaced,
    or that cannot be read, adds nothing: its group's recopy (or the commit) notices the change
    or the damage and the partition is not swapped."""
    started = time.monotonic()
    latest: dict[bytes, int] = {}
    for ref, aborted in task.segments:
        try:
            seg = InputSegment.from_ref(ref, task.chunk)
        except LogChangedError:
            continue
        try:
            segment_latest_offsets(seg, task.dirty_from, task.dirty_to, aborted, into=latest)
        except LogError:
            pass
        finally:
            seg.close()
    staging = make_remote_staging(Path(task.staging_dir))
    path = staging / f"keys-{task.tp}-{task.span}-attempt-{attempt_id()}.map"
    write_map(path, latest)
    return task.tp, task.span, str(path), time.monotonic() - started


def recopy_spans(spans: Sequence[SpanTask]) -> list[dict]:
    """One Spark task's spans, each recopied with the merge of its maps (later spans' offsets
    replace earlier ones); each row also says how many keys that map held."""
    attempt = attempt_id()
    rows = []
    for span in spans:
        latest: dict[bytes, int] = {}
        for path in span.map_paths:
            table = read_map(Path(path))
            if latest:
                latest.update(table)
            else:
                latest = table
        for group in span.groups:
            rows.append(recopy_task(group, latest, attempt) | {"map_keys": len(latest)})
    return rows


def recopy_task(task: GroupTask, latest: dict[bytes, int], attempt: str) -> dict:
    """Recopy one group with the engine's rules; a result row for the driver (never raises for a
    problem of this partition's files: the driver reports it and skips the partition)."""
    result = {"tp": task.tp, "grp": task.grp, "status": COMPACTED, "detail": None, "staging": None, "stats": None}
    omap = OffsetMap.exact(latest, task.map_latest_offset)
    stats = CleanerStats()
    bfilter = BatchFilter(
        omap,
        task.tracker,
        task.last_records,
        now_ms=task.now_ms,
        delete_retention_ms=task.config.delete_retention_ms,
        last_batch_base_offset=task.last_batch_base_offset,
        stats=stats,
        path=task.directory,
    )
    inputs: list[InputSegment] = []
    staging = Path(task.staging_dir) / f"group-{task.grp}-attempt-{attempt}"
    t0 = time.monotonic()
    try:
        inputs = [InputSegment.from_ref(ref, task.chunk) for ref in task.segments]
        make_remote_staging(staging)
        cleaned = recopy_group(staging, task.config, inputs, task.legacy_delete_horizon_ms, bfilter,
                               tp=Path(task.directory).name, chunk_limit=task.chunk)
        cleaned.close(trim_indexes=False)
    except LogChangedError as exc:
        result.update(status=CHANGED, detail=str(exc))
        return result
    except (LogError, OSError) as exc:
        result.update(status=FAILED, detail=f"{type(exc).__name__}: {exc}")
        return result
    finally:
        for seg in inputs:
            seg.close()
    stats.clean_seconds = time.monotonic() - t0
    result.update(staging=str(staging), stats=stats)
    return result


# ------------------------------------------------------------------------------------------
# driver side


@dataclass
class PartitionOutcome:
    topic: str
    partition: int
    status: str
    reason: str | None
    report: CompactionReport

    def to_dict(self) -> dict:
        return {"status": self.status, "reason": self.reason, **self.report.to_dict()}


@dataclass
class CompactionJobResult:
    now_ms: int
    duration_s: float = 0.0
    outcomes: list[PartitionOutcome] = field(default_factory=list)


@dataclass
class _Planned:
    """A split partition the driver planned: everything the commit needs, and the lock it holds."""

    topic: str
    partition: int
    log: object
    lock: CleanerLock
    report: CompactionReport
    prepared: object  # storage_engine.cleaner.PreparedPass
    round: CleaningRound
    inputs: list[InputSegment]
    groups: int
    plan_s: float  # the driver's seconds planning it


def split_threshold(total_bytes: int, slots: int) -> int:
    """The size above which a partition is split: one task's share of the job, at least
    :data:`MIN_SPLIT_BYTES`."""
    return max(MIN_SPLIT_BYTES, -(-total_bytes // max(1, slots)))


class CompactionJob:
    """One distributed compaction: :meth:`plan` (driver: which partitions go whole, and the split
    ones planned under their cleaner locks), :meth:`execute` (the Spark tasks), :meth:`commit`
    (driver, split partition by partition). :meth:`close` releases everything; use it as a
    context manager. Between the steps other processes may append, roll or apply retention: the
    commit notices and skips what changed. ``split_bytes`` overrides :func:`split_threshold`
    (0 splits every partition with anything to clean); ``spans`` how many spans a split
    partition is cut into (default: the task slots)."""

    def __init__(self, spark, manager: LogManager, *, now_ms: int, force: bool = False,
                 split_bytes: int | None = None, spans: int | None = None) -> None:
        self.spark = spark
        self.manager = manager
        self.now_ms = now_ms
        self.force = force
        self.split_bytes = split_bytes
        self.spans = spans
        self.cleaner = Cleaner(manager.cleaner_config())
        self.job_id = f"{int(time.time())}-{uuid.uuid4().hex[:8]}"
        self.result = CompactionJobResult(now_ms)
        self.whole: list[WholeTask] = []
        self.planned: list[_Planned] = []
        self._rows: dict[int, dict[int, dict]] = {}
        self._index_s: dict[int, float] = {}  # each split partition's key tasks' seconds
        self._keys: dict[int, int] = {}  # and the keys of its merged map
        self._started = time.monotonic()

    def plan(self, partitions: Sequence[tuple[str, int]] | None = None) -> None:
        chosen = set(self.manager.compacted_partitions(partitions))
        stats = {(s.topic, s.partition): s for s in self.manager.partition_stats({t for t, _ in chosen}, chosen)}
        slots = task_slots(self.spark)
        threshold = (split_threshold(sum(s.size_bytes for s in stats.values()), slots)
                     if self.split_bytes is None else self.split_bytes)
        props = tuple(sorted(self.manager.broker_props.items()))
        configs = self.manager.topic_configs()
        for topic, partition in sorted(chosen):
            s = stats.get((topic, partition))
            if s is None:  # counted by the topic's metadata, no directory on disk: nothing to clean, as locally
                if partitions is not None:  # named: said as a reader's open says it (a log dir not given?)
                    meta = self.manager.metadata.topic(topic)
                    why = (str(self.manager.placement.missing_partition_error(meta, partition)) if meta is not None else
                           f"its directory {partition_dir_name(topic, partition)} is in none of the log dirs")
                    self.result.outcomes.append(PartitionOutcome(topic, partition, SKIPPED, why, CompactionReport(
                        topic, partition, self.now_ms, engine="spark", skipped=why)))
                continue
            if (s.size_bytes <= threshold and self.split_bytes != 0) or self._needs_order(topic):
                self.whole.append(WholeTask(topic, partition, str(Path(s.directory).parent), s.size_bytes, props,
                                            configs))
                continue
            outcome, plan = _plan_partition(self.manager, self.cleaner, topic, partition, self.now_ms, self.force)
            if plan is not None:
                self.planned.append(plan)
            elif outcome is not None:
                self.result.outcomes.append(outcome)

    def _needs_order(self, topic: str) -> bool:
        """A version compaction strategy (KIP-280) recopies in offset order: a clean record may
        displace the dirty section's winner of its key, which a later group then drops. Split
        groups run in parallel, so such a partition is always cleaned whole, in one task."""
        return self.manager.topic_config(topic).compaction_strategy != CompactionStrategy.OFFSET

    def execute(self) -> None:
        now_ms, force = self.now_ms, self.force
        try:
            if self.whole:
                tasks = pack(self.whole, lambda t: t.size_bytes, task_slots(self.spark))
                self.result.outcomes.extend(run_tasks(self.spark, tasks, lambda ts: clean_whole_tasks(ts, now_ms, force)))
            if self.planned:
                self._rows = self._run_split()
        except Exception as exc:  # a task died for good (after Spark's retries)
            raise SparkJobError(f"compaction job {self.job_id} failed; no split partition was swapped "
                                f"(whole partitions commit as their tasks finish): {exc}") from exc
        crash_point("spark-compaction.after-tasks")

    def _run_split(self) -> dict[int, dict[int, dict]]:
        """The split partitions' two stages; result rows by partition index and group."""
        slots = task_slots(self.spark)
        keys, spans = _tasks_for(self.planned, self.job_id, self.now_ms, self.cleaner.chunk, self.spans or slots)
        # packed per task slot, largest first: a task costs Spark tens of milliseconds of its own
        maps: dict[tuple[int, int], str] = {}
        for tp, span, path, seconds in run_tasks(self.spark, pack(keys, lambda t: t.size, slots), each(scan_span_keys)):
            maps[(tp, span)] = path
            self._index_s[tp] = self._index_s.get(tp, 0.0) + seconds
        for task in spans:
            task.map_paths = tuple(path for (tp, span), path in sorted(maps.items()) if tp == task.tp and span >= task.span)
        rows = run_tasks(self.spark, pack(spans, lambda t: t.size, slots), recopy_spans)
        out: dict[int, dict[int, dict]] = {}
        for row in rows:
            out.setdefault(row["tp"], {})[row["grp"]] = row
            self._keys[row["tp"]] = max(self._keys.get(row["tp"], 0), row["map_keys"])
        return out

    def commit(self) -> CompactionJobResult:
        for tp_index, plan in enumerate(self.planned):
            self.result.outcomes.append(_commit_partition(self.manager, self.cleaner, plan, self._rows.get(tp_index, {}),
                                                          self._index_s.get(tp_index, 0.0), self._keys.get(tp_index, 0),
                                                          self.now_ms))
        self.result.outcomes.sort(key=lambda o: (o.topic, o.partition))
        self.result.duration_s = time.monotonic() - self._started
        return self.result

    def close(self) -> None:
        for plan in self.planned:
            plan.prepared.close()
            shutil.rmtree(remote_staging_dir(plan.log.dir, self.job_id), ignore_errors=True)
            plan.lock.release()
        self.planned = []

    def __enter__(self) -> "CompactionJob":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def compact_partitions(
    spark,
    log_dirs: Sequence[str | Path] | None = None,
    partitions: Sequence[tuple[str, int]] | None = None,
    *,
    now_ms: int,
    force: bool = False,
    broker_props: Mapping[str, str] | None = None,
    manager: LogManager | None = None,
    split_bytes: int | None = None,
    spans: int | None = None,
) -> CompactionJobResult:
    """Compact many partitions in one Spark job (see the module docstring).

    ``partitions`` defaults to every partition of every compacted topic. ``force=False`` cleans
    only partitions Kafka's cleaner would pick (dirty ratio or ``max.compaction.lag.ms``);
    ``force=True`` cleans each that has anything cleanable. ``compact,delete`` topics also get
    retention afterwards, as Kafka's cleaner thread does. Log dirs come from ``manager`` when given.
    """
    own = manager is None
    manager = manager or LogManager([Path(d) for d in (log_dirs or [])], broker_props)
    try:
        with CompactionJob(spark, manager, now_ms=now_ms, force=force, split_bytes=split_bytes,
                           spans=spans) as job:
            job.plan(partitions)
            job.execute()
            return job.commit()
    finally:
        if own:
            manager.close()


def _plan_partition(manager: LogManager, cleaner: Cleaner, topic: str, partition: int, now_ms: int,
                    force: bool) -> tuple[PartitionOutcome | None, _Planned | None]:
    log = manager.get_log(topic, partition)
    report = CompactionReport(topic, partition, now_ms, engine="spark")
    lock = CleanerLock(log.dir)
    if not lock.acquire():
        report.skipped = f"{topic}-{partition} is being cleaned by another process"
        return PartitionOutcome(topic, partition, SKIPPED, report.skipped, report), None
    t0 = time.monotonic()
    try:
        remove_stale_staging(log.dir)
        prepared = cleaner.prepare_pass(log, now_ms, force=force, report=report)
    except BaseException:
        lock.release()
        raise
    if prepared is None:
        lock.release()
        manager.after_cleaning(log, report, now_ms, cleaner)
        report.duration_s = time.monotonic() - t0
        return PartitionOutcome(topic, partition, SKIPPED, report.skipped, report), None
    try:
        rnd = cleaner.plan_round(log, prepared, prepared.ltc.first_uncleanable_offset, now_ms)
        groups = prepared.groups(rnd)
    except BaseException:  # the job's close() only knows the partitions planned
        prepared.close()
        lock.release()
        raise
    plan = _Planned(topic, partition, log, lock, report, prepared, rnd, [s for g in groups for s in g], len(groups),
                    time.monotonic() - t0)
    return None, plan


def _tasks_for(plans: list[_Planned], job_id: str, now_ms: int, chunk: int,
               span_count: int) -> tuple[list[KeysTask], list[SpanTask]]:
    """Each split partition's groups cut into up to ``span_count`` spans of consecutive groups (about
    equal bytes): one key task per span that reaches into the dirty range, one recopy task per
    span (its map paths are filled in once the key tasks have run)."""
    keys: list[KeysTask] = []
    spans: list[SpanTask] = []
    for tp, plan in enumerate(plans):
        prepared, rnd, log = plan.prepared, plan.round, plan.log
        ltc, producers = prepared.ltc, prepared.producers
        by_group = prepared.groups(rnd)
        starts = [g[0].base_offset for g in by_group]
        trackers = transaction_states(prepared.snap.segments, producers.aborted, starts)
        last_base = by_group[-1][-1].last_batch_base
        staging = str(remote_staging_dir(log.dir, job_id))
        segments = [seg for group in by_group for seg in group]
        ends = dict(zip([s.base_offset for s in segments], [s.base_offset for s in segments[1:]] + [rnd.end_offset]))
        dirty_parts = {seg.base_offset: (seg.ref, tuple(producers.aborted_overlapping(
            max(seg.base_offset, ltc.first_dirty_offset), rnd.end_offset)))  # aborted from its dirty part on
            for seg in segments if ends[seg.base_offset] > ltc.first_dirty_offset and seg.base_offset < rnd.end_offset}
        for span, grps in enumerate(contiguous_parts([sum(s.size for s in g) for g in by_group], span_count)):
            dirty = tuple(dirty_parts[seg.base_offset] for grp in grps for seg in by_group[grp]
                          if seg.base_offset in dirty_parts)
            if dirty:
                keys.append(KeysTask(tp, span, dirty, ltc.first_dirty_offset, rnd.end_offset, chunk, staging))
            spans.append(SpanTask(tp, span, (), tuple(GroupTask(
                tp, grp, str(log.dir), staging, log.config, tuple(s.ref for s in by_group[grp]),
                rnd.legacy_delete_horizon_ms, trackers[by_group[grp][0].base_offset],
                producers.last_records, now_ms, rnd.end_offset - 1, last_base, chunk,
            ) for grp in grps)))
    return keys, spans


def _commit_partition(manager: LogManager, cleaner: Cleaner, plan: _Planned, rows: dict[int, dict],
                      index_s: float, keys: int, now_ms: int) -> PartitionOutcome:
    """Swap in one split partition's groups, or report why not. Its ``duration_s`` is its own
    work (planning, its tasks' seconds, the commit), not the job's wall time."""
    started = time.monotonic()
    report, log = plan.report, plan.log
    problems = [r for r in rows.values() if r["status"] != COMPACTED]
    missing = plan.groups - len(rows)
    if problems or missing:
        status = FAILED if any(r["status"] == FAILED for r in problems) or missing else CHANGED
        reason = "; ".join(r["detail"] for r in problems) or f"{missing} group(s) produced no result"
        if status == FAILED:
            report.failed = f"nothing swapped: {reason}"
        else:
            report.skipped = f"nothing swapped: {reason}"
        return PartitionOutcome(plan.topic, plan.partition, status, reason, report)
    cleaned: list[LogSegment] = []
    stats = plan.prepared.stats
    stats.index_seconds += index_s
    try:
        for grp in range(plan.groups):
            row = rows[grp]
            stats.add(row["stats"])
            cleaned.append(_adopt(Path(row["staging"]), log.dir, plan.round.groups[grp][0], log.config))
        crash_point("spark-compaction.after-staged-moved")
        t0 = time.monotonic()
        cleaner.commit_round(log, plan.inputs, cleaned, plan.round)
        stats.swap_seconds = time.monotonic() - t0
    except LogChangedError as exc:
        discard_staged(cleaned)
        report.skipped = str(exc)
        return PartitionOutcome(plan.topic, plan.partition, CHANGED, str(exc), report)
    except BaseException:
        discard_staged(cleaned)
        raise
    cleaner.account(report, PassResult(plan.prepared.ltc, plan.round, stats, map_entries=keys,
                                       segments_written=len(cleaned),
                                       last_stable_offset=plan.prepared.producers.last_stable_offset))
    report.map_capacity_bytes = 0  # an exact map: no capacity of its own
    manager.after_cleaning(log, report, now_ms, cleaner, plan.prepared.producers.last_stable_offset)
    report.duration_s = plan.plan_s + index_s + stats.clean_seconds + time.monotonic() - started
    return PartitionOutcome(plan.topic, plan.partition, COMPACTED, None, report)


def _adopt(staging: Path, directory: Path, base: int, config: LogConfig) -> LogSegment:
    """Move one task's replacement segment into the partition directory, still staged."""
    for entry in sorted(os.scandir(staging), key=lambda e: e.name):
        if entry.name.endswith(STAGING_SUFFIX):
            os.replace(entry.path, Path(directory) / entry.name)
    return LogSegment(directory, base, config, file_suffix=STAGING_SUFFIX, writable=True)
