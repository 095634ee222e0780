"""Distributed log compaction: the engine's cleaner, with Spark spreading the work.

Every decision and every byte is the engine's (``storage_engine.cleaner``); Spark supplies only
the distribution (``distribute.py``). A job moves work, not keys:

* **Whole partitions.** A partition no larger than one task's share of the job (the job's bytes
  over its task slots, at least ``MIN_SPLIT_BYTES``) is cleaned whole inside one task by the
  engine's own lifecycle, ``LogCleaner.clean``: prepare, plan, clean (pass after pass while
  the offset map fills), commit under the lock, account, then the after-steps (retention for
  ``compact,delete``, the sweep of ``.deleted`` files), its errors turned into its outcome. Many such partitions are packed per
  task, largest first. The output is the local cleaner's because it is the local cleaner.
* **Split partitions.** A larger partition is planned on the driver, under its cleaner lock
  (the engine's ``PartitionCleaning.start``), and its round becomes the engine's split tasks
  (``storage_engine.cleaner.split``). Its groups are cut into *spans*,
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

  The driver then hands the winning attempts' rows to ``PartitionCleaning.commit``, which moves
  their files in as ``.cleaning`` and swaps them in after checking that every input segment is unchanged; a
  partition that changed is reported ``changed`` and nothing of it is swapped.

  A topic with a version compaction strategy (``compaction.strategy`` ``timestamp`` or
  ``header``, KIP-280) is never split: its recopy must run in offset order, so each of its
  partitions is cleaned whole, whatever its size.

**Tiered partitions** (``remote.storage.enable``) are compacted on their remote tier only, as
the local engine does (``docs/object-storage.md``), and need no shared filesystem: the driver,
where the local tier is, first tiers each (``remote.tiering.tier_partition``: every rolled
segment below the last stable offset goes remote), then one task per partition (packed like
whole ones) runs ``cleaner.remote_cleaning.compact_remote`` on the executor: it downloads the
latest version into the executor's own temporary directory, cleans it with the engine's
cleaner, uploads what the cleaner wrote and commits the next version conditionally, and hands
back its report with the version it committed. A task carries only the topic, partition,
config and the remote location (``spark_jobs.remote_tier``), never a log dir. The driver then
ends each partition as the local engine does (``remote_cleaning.settle_tiered_compaction``:
remember the committed version beside the local log, sweep, report what tiering released).

Crash safety is the engine's: staged output that never reached the swap is removed by the next
cleaner or writable load of the partition (``staging.remove_staging_if_idle``), and the swap
itself follows Kafka's ``.cleaned``/``.swap`` protocol with the loader's recovery rules. Each
partition's report times its own work (its task, or its planning, tasks and commit); the job's
wall time is :attr:`CompactionJobResult.duration_s`.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path

from storage_engine.cleaner import (
    CompactionReport,
    CompactionStrategy,
    KeysTask,
    LogCleaner,
    PartitionCleaning,
    RemoteCompaction,
    SpanTask,
    recopy_spans,
    remote_staging_dir,
    scan_span_keys,
    settle_tiered_compaction,
    split_round,
)
from storage_engine.cleaner.outcome import PARTITION_ERRORS
from storage_engine.cleaner.remote_cleaning import compact_remote
from storage_engine.config.topic import LogConfig
from storage_engine.faults import crash_point
from storage_engine.files.naming import partition_dir_name
from storage_engine.logdir.manager import LogManager
from storage_engine.outcomes import FAILED
from storage_engine.remote.location import RemoteLocation
from storage_engine.remote.tiering import TierResult, tier_partition

from .distribute import attempt_id, contiguous_parts, each, pack, run_tasks, task_slots
from .errors import SparkJobError
from .remote_tier import executor_partition, job_location

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
class RemoteTask:
    """A tiered partition cleaned on its remote tier inside one task: all the executor needs
    (no log dir: its segments come from ``location``)."""

    topic: str
    partition: int
    location: RemoteLocation
    config: LogConfig
    size_bytes: int


# ------------------------------------------------------------------------------------------
# executor side


def clean_whole_tasks(tasks: Sequence[WholeTask], now_ms: int, force: bool) -> list[CompactionReport]:
    """One Spark task's whole partitions, through one ``LogManager`` per log dir, as the local
    cleaner's ``compact_due`` does: a manager per partition reopened and closed the log dir's
    state (checkpoints written back) for every one of a task's partitions."""
    out: list[CompactionReport] = []
    for (log_dir, props), group in groupby(sorted(tasks, key=lambda t: (t.log_dir, t.broker_props)),
                                           key=lambda t: (t.log_dir, t.broker_props)):
        group = list(group)
        with LogManager([Path(log_dir)], dict(props), topic_configs=group[0].configs) as manager:
            cleaner = LogCleaner(manager)
            out.extend(clean_whole(cleaner, task, now_ms, force) for task in group)
    return out


def clean_whole(cleaner: LogCleaner, task: WholeTask, now_ms: int, force: bool) -> CompactionReport:
    """One partition through the engine's whole compaction lifecycle; a problem of its files
    becomes its outcome (the other partitions of the job go on)."""
    report = cleaner.clean(task.topic, task.partition, now_ms=now_ms, force=force)
    report.engine = "spark"
    return report


def clean_remote_task(task: RemoteTask, now_ms: int, force: bool) -> RemoteCompaction:
    """One tiered partition's remote compaction by the engine, in the executor's own temporary
    directory, with a store of the task's own (its report counts this partition's requests);
    the version it committed goes back to the driver with the report."""
    rp = executor_partition(task.location, task.topic, task.partition, own_store=True)
    out = compact_remote(rp, task.config, now_ms=now_ms, force=force, scratch_dir=tempfile.gettempdir())
    out.report.engine = "spark"
    return out


def scan_keys(task: KeysTask) -> tuple[int, int, str, float]:
    """Stage 1 of a split partition in a Spark task (``storage_engine.cleaner.scan_span_keys``)."""
    return scan_span_keys(task, attempt_id())


def recopy(spans: Sequence[SpanTask]) -> list[dict]:
    """Stage 2 of a split partition in a Spark task (``storage_engine.cleaner.recopy_spans``)."""
    return recopy_spans(spans, attempt_id())


# ------------------------------------------------------------------------------------------
# driver side


@dataclass
class CompactionJobResult:
    now_ms: int
    duration_s: float = 0.0
    outcomes: list[CompactionReport] = field(default_factory=list)


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
        self.cleaner = LogCleaner(manager)
        self.job_id = f"{int(time.time())}-{uuid.uuid4().hex[:8]}"
        self.result = CompactionJobResult(now_ms)
        self.whole: list[WholeTask] = []
        self.remote: list[RemoteTask] = []
        self._tiered: dict[tuple[str, int], TierResult] = {}  # each tiered partition's tiering, for its settling
        self._location: RemoteLocation | None = None
        self.planned: list[PartitionCleaning] = []
        self._rows: dict[int, dict[int, dict]] = {}
        self._index_s: dict[int, float] = {}  # each split partition's key tasks' seconds
        self._keys: dict[int, int] = {}  # and the keys of its merged map
        self._started = time.monotonic()

    def plan(self, partitions: Sequence[tuple[str, int]] | None = None) -> None:
        chosen = set(self.cleaner.compacted_partitions(partitions))
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
                    self.result.outcomes.append(CompactionReport(topic, partition, self.now_ms, engine="spark",
                                                                 skipped=why))
                continue
            if self.manager.topic_config(topic).remote_storage_enable:
                self._tier(topic, partition, s.size_bytes)
                continue
            if (s.size_bytes <= threshold and self.split_bytes != 0) or self._needs_order(topic):
                self.whole.append(WholeTask(topic, partition, str(Path(s.directory).parent), s.size_bytes, props,
                                            configs))
                continue
            started = PartitionCleaning.start(self.manager.get_log(topic, partition), self.cleaner.cleaner,
                                              now_ms=self.now_ms, force=self.force, engine="spark")
            if isinstance(started, PartitionCleaning):
                self.planned.append(started)
            else:
                self.result.outcomes.append(started)

    def _tier(self, topic: str, partition: int, size_bytes: int) -> None:
        """Tier a partition here, where its local log is, so its remote tier holds what a local
        cleaner would clean; then it becomes a :class:`RemoteTask`. A partition whose tiering
        fails is reported as the local engine reports it, and not cleaned."""
        log = self.manager.get_log(topic, partition)
        if self._location is None:
            self._location = job_location()
        try:
            tiered = tier_partition(log, executor_partition(self._location, topic, partition), self.now_ms)
        except PARTITION_ERRORS as exc:
            report = CompactionReport(topic, partition, self.now_ms, engine="spark")
            report.settle(FAILED, f"tiering failed: {type(exc).__name__}: {exc}")
            self.result.outcomes.append(report)
            return
        self._tiered[(topic, partition)] = tiered
        self.remote.append(RemoteTask(topic, partition, self._location, log.config, size_bytes))

    def _needs_order(self, topic: str) -> bool:
        """A version compaction strategy (KIP-280) recopies in offset order: a clean record may
        displace the dirty section's winner of its key, which a later group then drops. Split
        groups run in parallel, so such a partition is always cleaned whole, in one task."""
        return self.manager.topic_config(topic).compaction_strategy != CompactionStrategy.OFFSET

    def _tasks(self, span_count: int) -> tuple[list[KeysTask], list[SpanTask]]:
        """Each split partition's groups cut into up to ``span_count`` spans of consecutive groups
        (about equal bytes): one key task per span that reaches into the dirty range, one recopy
        task per span (its map paths are filled in once the key tasks have run)."""
        keys: list[KeysTask] = []
        spans: list[SpanTask] = []
        for tp, cleaning in enumerate(self.planned):
            split = split_round(cleaning, tp, remote_staging_dir(cleaning.log.dir, self.job_id), self.now_ms)
            for span, groups in enumerate(contiguous_parts(split.group_sizes, span_count)):
                if (task := split.keys_task(span, groups)) is not None:
                    keys.append(task)
                spans.append(split.span_task(span, groups))
        return keys, spans

    def execute(self) -> None:
        now_ms, force = self.now_ms, self.force
        try:
            if self.whole:
                tasks = pack(self.whole, lambda t: t.size_bytes, task_slots(self.spark))
                self.result.outcomes.extend(run_tasks(self.spark, tasks, lambda ts: clean_whole_tasks(ts, now_ms, force)))
            if self.remote:
                tasks = pack(self.remote, lambda t: t.size_bytes, task_slots(self.spark))
                done = run_tasks(self.spark, tasks, each(lambda t: clean_remote_task(t, now_ms, force)))
                self.result.outcomes.extend(self._settle_remote(done))
            if self.planned:
                self._rows = self._run_split()
        except Exception as exc:  # a task died for good (after Spark's retries)
            raise SparkJobError(f"compaction job {self.job_id} failed; no split partition was swapped "
                                f"(whole partitions commit as their tasks finish): {exc}") from exc
        crash_point("spark-compaction.after-tasks")

    def _settle_remote(self, done: Sequence[RemoteCompaction]) -> list[CompactionReport]:
        """Each executor's remote compaction ended beside its local log, by the engine's own
        steps (``settle_tiered_compaction``)."""
        url = self._location.url  # set by _tier, which made every remote task
        return [settle_tiered_compaction(self.manager.get_log(out.report.topic, out.report.partition), url,
                                         self._tiered[(out.report.topic, out.report.partition)], out)
                for out in done]

    def _run_split(self) -> dict[int, dict[int, dict]]:
        """The split partitions' two stages; result rows by partition index and group."""
        slots = task_slots(self.spark)
        keys, spans = self._tasks(self.spans or slots)
        # packed per task slot, largest first: a task costs Spark tens of milliseconds of its own
        maps: dict[tuple[int, int], str] = {}
        for tp, span, path, seconds in run_tasks(self.spark, pack(keys, lambda t: t.size, slots), each(scan_keys)):
            maps[(tp, span)] = path
            self._index_s[tp] = self._index_s.get(tp, 0.0) + seconds
        for task in spans:
            task.map_paths = tuple(path for (tp, span), path in sorted(maps.items()) if tp == task.tp and span >= task.span)
        rows = run_tasks(self.spark, pack(spans, lambda t: t.size, slots), recopy)
        out: dict[int, dict[int, dict]] = {}
        for row in rows:
            out.setdefault(row["tp"], {})[row["grp"]] = row
            self._keys[row["tp"]] = max(self._keys.get(row["tp"], 0), row["map_keys"])
        return out

    def commit(self) -> CompactionJobResult:
        for tp, cleaning in enumerate(self.planned):
            self.result.outcomes.append(cleaning.commit(self._rows.get(tp, {}), self._index_s.get(tp, 0.0),
                                                        self._keys.get(tp, 0), self.now_ms))
        self.result.outcomes.sort(key=lambda o: (o.topic, o.partition))
        self.result.duration_s = time.monotonic() - self._started
        return self.result

    def close(self) -> None:
        for cleaning in self.planned:
            cleaning.close(self.job_id)
        self.planned = []

    def __enter__(self) -> CompactionJob:
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
