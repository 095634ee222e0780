"""Distributed log compaction: the engine's cleaner, with Spark doing the heavy middle.

Every decision is the engine's (``storage_engine.cleaner``); Spark only spreads the work:

1. **Plan** (driver, per partition, under the partition's cleaner lock): the engine's
   ``Cleaner.prepare_pass`` snapshots the segments (inode and size of each), scans batch headers
   for producer state and computes the cleanable range; ``plan_round`` groups the segments to
   recopy. The key map is exact here, so a round always reaches the first uncleanable offset
   (the local cleaner may need several passes when its bounded map fills).
2. **Keys** (one task per segment): each task rereads its segment by path, checks it is the
   same file the plan saw, and emits ``(partition, group, key, offset, mapped)`` for every keyed
   record; ``mapped`` follows the engine's map-building walk (dirty range, CRC-checked, aborted
   transactions excluded). A last row without a key carries the task's seconds (``index_s``), which
   travel to the group's recopy, so each partition's report counts its own work.
3. **Latest offset per key** (Spark SQL): ``max(offset)`` of mapped rows grouped by
   ``(partition, key)``: exact keys, no hash collisions, and Spark's aggregation spills to disk
   when the key set outgrows memory. Each group then receives the latest offsets of just the
   keys that occur in it (a join), so no task ever holds a whole partition's key set.
4. **Recopy** (one task per group): the engine's ``BatchFilter`` and ``recopy_group`` with that
   group's keys and the transaction state the header replay computed for the group's start,
   writing the replacement segment under a per-attempt staging directory
   (``staging.remote_staging_dir``), so retried or speculative attempts never collide.
5. **Commit** (driver, per partition): the winning attempts' files are moved in as
   ``.cleaning`` and the engine's ``commit_round`` swaps them in after checking that every input
   segment is unchanged; a partition that changed is reported ``changed`` and nothing of it is
   swapped. Other partitions of the same job are unaffected.

Crash safety is the engine's: staged output that never reached the swap is removed by the next
cleaner or writable load of the partition (``staging.remove_staging_if_idle``), and the swap
itself follows Kafka's ``.cleaned``/``.swap`` protocol with the loader's recovery rules.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import pyarrow as pa

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
    batch_keys,
    dirty_start_position,
    discard_staged,
    map_walk,
    recopy_group,
    transaction_states,
)
from storage_engine.cleaner.plan import CleaningRound
from storage_engine.config import LogConfig
from storage_engine.errors import LogChangedError, LogError
from storage_engine.faults import crash_point
from storage_engine.manager import LogManager
from storage_engine.cleaner.offset_map import OffsetMap
from storage_engine.retention import apply_retention, sweep_deleted_files
from storage_engine.segment import LogSegment
from storage_engine.segment import now_ms as wall_clock_ms
from storage_engine.cleaner.staging import STAGING_SUFFIX, CleanerLock, remote_staging_dir, remove_stale_staging

from .errors import SparkJobError

KEYS_SCHEMA = "tp int, grp int, key binary, offset long, mapped boolean, index_s double"
RESULT_SCHEMA = "tp int, grp int, status string, detail string, staging string, stats string, keys long"
_KEYS_ARROW = pa.schema(
    [("tp", pa.int32()), ("grp", pa.int32()), ("key", pa.binary()), ("offset", pa.int64()), ("mapped", pa.bool_()),
     ("index_s", pa.float64())]
)
_RESULT_ARROW = pa.schema(
    [("tp", pa.int32()), ("grp", pa.int32()), ("status", pa.string()), ("detail", pa.string()),
     ("staging", pa.string()), ("stats", pa.string()), ("keys", pa.int64())]
)
_ROWS_PER_BATCH = 65_536

# Statuses of a partition in a job's result.
COMPACTED = "compacted"
SKIPPED = "skipped"  # nothing to clean, not due, or another cleaner is at work
CHANGED = "changed"  # its segments changed under the job: nothing swapped
FAILED = "failed"  # a task could not read or write it (corrupt input, I/O error): nothing swapped


# ------------------------------------------------------------------------------------------
# the work items (small and picklable: they travel to executors)


@dataclass(frozen=True)
class ScanTask:
    """Stage 2: read one segment's keys."""

    tp: int
    grp: int
    segment: SegmentRef
    dirty_from: int
    dirty_to: int
    aborted: tuple[AbortedTxn, ...]  # aborted transactions reaching into this segment's dirty part
    chunk: int  # the cleaner's I/O buffer (log.cleaner.io.buffer.size)


@dataclass
class GroupTask:
    """Stage 4: recopy one group of segments into one replacement segment."""

    tp: int
    grp: int
    directory: str
    staging_dir: str
    config: LogConfig
    segments: tuple[SegmentRef, ...]
    key_range: tuple[int, int]  # offsets whose latest record this group holds (for counting keys)
    legacy_delete_horizon_ms: int
    tracker: TransactionTracker
    last_records: dict[int, LastRecord]
    now_ms: int
    map_latest_offset: int
    last_batch_base_offset: int | None
    chunk: int  # read and write chunk: the local cleaner's, so index entries fall where its do


# ------------------------------------------------------------------------------------------
# executor side


def scan_segment_keys(task: ScanTask) -> Iterator[pa.RecordBatch]:
    """Every keyed record of the segment as ``(tp, grp, key, offset, mapped)`` rows, then one row
    without a key whose ``index_s`` is the seconds the scan took.

    The clean part only says which keys occur (the recopy looks them up); the dirty part is read
    with the engine's map-building walk, so exactly the records the local cleaner would put into
    its map are ``mapped``. A segment that is gone or replaced yields nothing: its group's recopy
    (or the commit) notices the change and the partition is skipped.
    """
    started = time.monotonic()
    try:
        seg = InputSegment.from_ref(task.segment, task.chunk)
    except LogChangedError:
        return
    path = str(seg.path)
    keys: list[bytes] = []
    offsets: list[int] = []
    mapped: list[bool] = []

    def flush() -> pa.RecordBatch:
        n = len(keys)
        batch = pa.RecordBatch.from_arrays(
            [pa.array([task.tp] * n, pa.int32()), pa.array([task.grp] * n, pa.int32()),
             pa.array(keys, pa.binary()), pa.array(offsets, pa.int64()), pa.array(mapped, pa.bool_()),
             pa.nulls(n, pa.float64())],
            schema=_KEYS_ARROW,
        )
        keys.clear()
        offsets.clear()
        mapped.clear()
        return batch

    try:
        dirty_pos = seg.size
        if task.dirty_to > seg.base_offset:
            dirty_pos = dirty_start_position(seg, task.dirty_from)
        for raw, chunk, chunk_offset in seg.batches_in_chunks(0):
            if raw.position >= dirty_pos:
                break
            if raw.header.magic >= 2 and raw.header.is_control:
                continue
            for off, key in batch_keys(raw, chunk, chunk_offset, path):
                if key is not None:
                    keys.append(key)
                    offsets.append(off)
                    mapped.append(False)
            if len(keys) >= _ROWS_PER_BATCH:
                yield flush()
        if dirty_pos < seg.size:
            tracker = TransactionTracker(task.aborted)
            for raw, chunk, chunk_offset, is_mapped in map_walk(seg, dirty_pos, tracker, CleanerStats()):
                if not is_mapped:
                    continue
                for off, key in batch_keys(raw, chunk, chunk_offset, path):
                    if key is not None:
                        keys.append(key)
                        offsets.append(off)
                        mapped.append(task.dirty_from <= off < task.dirty_to)
                if len(keys) >= _ROWS_PER_BATCH:
                    yield flush()
        if keys:
            yield flush()
    except LogError:
        return  # the recopy reads the same bytes and reports the problem for its partition
    finally:
        seg.close()
    yield pa.RecordBatch.from_pylist([{"tp": task.tp, "grp": task.grp, "key": None, "offset": None, "mapped": False,
                                       "index_s": time.monotonic() - started}], schema=_KEYS_ARROW)


def recopy_task(task: GroupTask, latest: Mapping[bytes, int], attempt: str, index_s: float = 0.0) -> dict:
    """Recopy one group with the engine's rules; a result row for the driver (never raises for a
    problem of this partition's files: the driver reports it and skips the partition).
    ``index_s``: the seconds the keys stage spent on the group's segments, counted in its stats."""
    result = {"tp": task.tp, "grp": task.grp, "status": COMPACTED, "detail": None, "staging": None,
              "stats": None, "keys": 0}
    lo, hi = task.key_range
    result["keys"] = sum(1 for off in latest.values() if lo <= off < hi)
    omap = OffsetMap(1 << 62)
    omap.exact_table().update(latest)
    omap.update_latest_offset(task.map_latest_offset)
    stats = CleanerStats(index_seconds=index_s)
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
        staging.mkdir(parents=True, exist_ok=True)
        cleaned = recopy_group(staging, task.config, inputs, task.legacy_delete_horizon_ms, bfilter,
                               chunk_limit=task.chunk)
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
    result.update(staging=str(staging), stats=json.dumps(asdict(stats)))
    return result


def _keys_stage(tasks_bc):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        tasks = tasks_bc.value
        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                yield from scan_segment_keys(tasks[task_id])

    return run


def _recopy_stage(tasks_bc):
    def run(key: tuple[pa.Scalar, ...], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        tp, grp = key[0].as_py(), key[1].as_py()
        latest: dict[bytes, int] = {}
        index_s = 0.0
        for batch in batches:
            for k, off, seconds in zip(batch.column("key").to_pylist(), batch.column("latest").to_pylist(),
                                       batch.column("index_s").to_pylist()):
                if k is not None:
                    latest[k] = off
                elif seconds is not None:
                    index_s += seconds
        ctx = TaskContext.get()
        attempt = f"{ctx.taskAttemptId()}" if ctx is not None else uuid.uuid4().hex
        row = recopy_task(tasks_bc.value[(tp, grp)], latest, attempt, index_s)
        yield pa.RecordBatch.from_pylist([row], schema=_RESULT_ARROW)

    return run


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

    def to_dict(self) -> dict:
        return {"now_ms": self.now_ms, "duration_s": round(self.duration_s, 6),
                "partitions": [o.to_dict() for o in self.outcomes]}


@dataclass
class _Planned:
    """A partition the driver planned: everything the commit needs, and the lock it holds."""

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


def _select(manager: LogManager, partitions: Sequence[tuple[str, int]] | None) -> list[tuple[str, int]]:
    """The partitions to clean, validated before anything is touched."""
    if partitions is None:
        return [(t, p) for t in manager.topics() if manager.topic_config(t).compact for p in manager.partitions(t)]
    out = []
    for topic, partition in partitions:
        if partition not in manager.partitions(topic):
            raise LogError(f"partition {topic}-{partition} does not exist in {manager._dir_list()}")
        config = manager.topic_config(topic)
        if not config.compact:
            raise LogError(
                f"topic {topic} has cleanup.policy={','.join(config.cleanup_policy)}: only compacted topics are cleaned"
            )
        out.append((topic, partition))
    return sorted(set(out))


class CompactionJob:
    """One distributed compaction, in the three steps of the module docstring: :meth:`plan`
    (driver; takes each partition's cleaner lock), :meth:`execute` (the Spark action),
    :meth:`commit` (driver, partition by partition). :meth:`close` releases everything; use it
    as a context manager. Between the steps other processes may append, roll or apply
    retention: the commit notices and skips what changed."""

    def __init__(self, spark, manager: LogManager, *, now_ms: int, force: bool = False) -> None:
        self.spark = spark
        self.manager = manager
        self.now_ms = now_ms
        self.force = force
        self.cleaner = Cleaner(manager.cleaner_config())
        self.job_id = f"{int(time.time())}-{uuid.uuid4().hex[:8]}"
        self.result = CompactionJobResult(now_ms)
        self.planned: list[_Planned] = []
        self._rows: dict[int, dict[int, dict]] = {}
        self._started = time.monotonic()

    def plan(self, partitions: Sequence[tuple[str, int]] | None = None) -> None:
        for topic, partition in _select(self.manager, partitions):
            outcome, plan = _plan_partition(self.manager, self.cleaner, topic, partition, self.now_ms, self.force)
            if plan is not None:
                self.planned.append(plan)
            elif outcome is not None:
                self.result.outcomes.append(outcome)

    def execute(self) -> None:
        if self.planned:
            self._rows = _run_tasks(self.spark, self.planned, self.job_id, self.now_ms, self.cleaner.chunk)
        crash_point("spark-compaction.after-tasks")

    def commit(self) -> CompactionJobResult:
        for tp_index, plan in enumerate(self.planned):
            self.result.outcomes.append(
                _commit_partition(self.manager, self.cleaner, plan, self._rows.get(tp_index, {}), self.now_ms)
            )
        self.result.outcomes.sort(key=lambda o: (o.topic, o.partition))
        self.result.duration_s = time.monotonic() - self._started
        return self.result

    def close(self) -> None:
        for plan in self.planned:
            plan.prepared.close()
            _remove_tree(remote_staging_dir(plan.log.dir, self.job_id))
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
        with CompactionJob(spark, manager, now_ms=now_ms, force=force) as job:
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
        _after(manager, cleaner, log, report, now_ms)
        report.duration_s = time.monotonic() - t0
        return PartitionOutcome(topic, partition, SKIPPED, report.skipped, report), None
    rnd = cleaner.plan_round(log, prepared, prepared.ltc.first_uncleanable_offset, now_ms)
    groups = prepared.groups(rnd)
    plan = _Planned(topic, partition, log, lock, report, prepared, rnd, [s for g in groups for s in g], len(groups),
                    time.monotonic() - t0)
    return None, plan


def _tasks_for(plans: list[_Planned], job_id: str, now_ms: int, chunk: int) -> tuple[list[ScanTask], dict]:
    scans: list[ScanTask] = []
    groups: dict[tuple[int, int], GroupTask] = {}
    for tp, plan in enumerate(plans):
        prepared, rnd, log = plan.prepared, plan.round, plan.log
        ltc, producers = prepared.ltc, prepared.producers
        by_group = prepared.groups(rnd)
        starts = [g[0].base_offset for g in by_group]
        trackers = transaction_states(prepared.snap.segments, producers.aborted, starts)
        last_base = by_group[-1][-1].last_batch_base
        staging = remote_staging_dir(log.dir, job_id)
        for grp, group in enumerate(by_group):
            for seg in group:
                seg_end = seg.base_offset  # aborted transactions from this segment's dirty part on
                lo = max(seg_end, ltc.first_dirty_offset)
                scans.append(ScanTask(tp, grp, seg.ref, ltc.first_dirty_offset, rnd.end_offset,
                                      tuple(producers.aborted_overlapping(lo, rnd.end_offset)), chunk))
            hi = starts[grp + 1] if grp + 1 < len(starts) else rnd.end_offset
            groups[(tp, grp)] = GroupTask(
                tp, grp, str(log.dir), str(staging), log.config, tuple(s.ref for s in group),
                (group[0].base_offset, hi), rnd.legacy_delete_horizon_ms, trackers[group[0].base_offset],
                producers.last_records, now_ms, rnd.end_offset - 1, last_base, chunk,
            )
    return scans, groups


def _run_tasks(spark, plans: list[_Planned], job_id: str, now_ms: int, chunk: int) -> dict[int, dict[int, dict]]:
    """Stages 2-4 as one Spark action; result rows by partition index and group."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    scans, groups = _tasks_for(plans, job_id, now_ms, chunk)
    sc = spark.sparkContext
    scans_bc = sc.broadcast(scans)
    groups_bc = sc.broadcast(groups)
    keys = None
    try:
        # read once: both the aggregation and the lookup below use the keys (spills to disk if large)
        keys = (spark.range(0, len(scans), 1, len(scans)).mapInArrow(_keys_stage(scans_bc), KEYS_SCHEMA)
                .persist(StorageLevel.MEMORY_AND_DISK))
        latest = keys.where("mapped").groupBy("tp", "key").agg(F.max("offset").alias("latest"))
        needed = keys.where("key is not null").select("tp", "grp", "key").distinct()
        looked_up = (needed.join(latest, ["tp", "key"], "inner")
                     .select("tp", "grp", "key", "latest", F.lit(None).cast("double").alias("index_s")))
        index_times = keys.where("key is null").select("tp", "grp", "key", F.col("offset").alias("latest"), "index_s")
        # every group gets a task, even one whose keys are all unknown to the map
        every_group = spark.createDataFrame(
            [(tp, grp, None, None, None) for tp, grp in groups], "tp int, grp int, key binary, latest long, index_s double"
        )
        # one shuffle partition per group, so the recopies spread over every core (the SQL default
        # would size them by key bytes, not by the segment bytes each group rewrites)
        rows = (looked_up.unionByName(index_times).unionByName(every_group)
                .repartition(len(groups), "tp", "grp").groupBy("tp", "grp")
                .applyInArrow(_recopy_stage(groups_bc), RESULT_SCHEMA).collect())
    except Exception as exc:  # a task died for good (after Spark's retries): nothing was committed
        raise SparkJobError(f"compaction job {job_id} failed; nothing was swapped: {exc}") from exc
    finally:
        if keys is not None:
            keys.unpersist()
        scans_bc.unpersist()
        groups_bc.unpersist()
    out: dict[int, dict[int, dict]] = {}
    for row in rows:
        out.setdefault(row["tp"], {})[row["grp"]] = row.asDict()
    return out


def _commit_partition(manager: LogManager, cleaner: Cleaner, plan: _Planned, rows: dict[int, dict],
                      now_ms: int) -> PartitionOutcome:
    """Swap in one partition's groups, or report why not. Its ``duration_s`` is its own work
    (planning, its tasks' seconds, the commit), not the job's wall time, which other partitions
    share: the job's total is :attr:`CompactionJobResult.duration_s`."""
    started = time.monotonic()
    report, log = plan.report, plan.log
    problems = [r for r in rows.values() if r["status"] != COMPACTED]
    missing = plan.groups - len(rows)
    if problems or missing:
        status = FAILED if any(r["status"] == FAILED for r in problems) or missing else CHANGED
        reason = "; ".join(r["detail"] for r in problems) or f"{missing} group(s) produced no result"
        report.skipped = f"nothing swapped: {reason}"
        return PartitionOutcome(plan.topic, plan.partition, status, reason, report)
    cleaned: list[LogSegment] = []
    stats = plan.prepared.stats
    task_s = 0.0
    try:
        for grp in range(plan.groups):
            row = rows[grp]
            group_stats = CleanerStats(**json.loads(row["stats"]))
            task_s += group_stats.index_seconds + group_stats.clean_seconds
            stats.add(group_stats)
            report.distinct_keys += row["keys"]
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
    report.passes = 1
    report.stats.add(stats)
    report.map_entries = report.map_entries_max = report.distinct_keys
    report.new_checkpoint = plan.round.end_offset
    report.segments_recopied = len(plan.round.recopied_bases)
    report.segments_written = len(cleaned)
    report.rounds.append(plan.round.to_dict() | {"partial": False})
    _after(manager, cleaner, log, report, now_ms, plan.prepared.producers.last_stable_offset)
    report.duration_s = plan.plan_s + task_s + time.monotonic() - started
    return PartitionOutcome(plan.topic, plan.partition, COMPACTED, None, report)


def _adopt(staging: Path, directory: Path, base: int, config: LogConfig) -> LogSegment:
    """Move one task's replacement segment into the partition directory, still staged."""
    for entry in sorted(os.scandir(staging), key=lambda e: e.name):
        if entry.name.endswith(STAGING_SUFFIX):
            os.replace(entry.path, Path(directory) / entry.name)
    return LogSegment(directory, base, config, file_suffix=STAGING_SUFFIX, writable=True)


def _after(manager: LogManager, cleaner: Cleaner, log, report: CompactionReport, now_ms: int,
           last_stable_offset: int | None = None) -> None:
    """What Kafka's cleaner thread does after a partition: ``compact,delete`` retention, then
    the delayed removal of ``.deleted`` files; and the dirty ratio that is left."""
    if log.config.delete:
        report.retention = apply_retention(log, None, now_ms).to_dict()
    sweep_deleted_files(log.dir, wall_clock_ms(), log.config.file_delete_delay_ms)  # ctimes are wall-clock
    report.segments_after = len(log.segments)
    report.dirty_ratio_after = cleaner.dirty_ratio_now(log, now_ms, last_stable_offset)


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
