"""Distributed retention: the engine's plan and apply, many partitions per task.

Retention is cheap per partition (file metadata, a checkpoint write, renames), so the work is
spread as slices of partitions, not one task each: with thousands of partitions the cost is
opening logs, which the slices run in parallel. Each task, for each of its partitions, reads the
engine's planning stats (``LogManager.planning_stats``), computes its
:func:`~storage_engine.log.retention.plan_retention` and, unless ``dry_run``, applies it with
``Retention.apply`` under the partition lock; a partition whose segments changed
between that plan and the apply is reported ``changed`` and left alone (the next run plans
afresh). Deletion itself is the engine's
crash-safe protocol: log start offset checkpoint first, then ``.deleted`` renames.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Mapping, Sequence

from storage_engine.config.topic import LogConfig
from storage_engine.errors import LogError
from storage_engine.logdir.manager import LogManager, PartitionLocation
from storage_engine.files.naming import partition_dir_name
from storage_engine.outcomes import CHANGED, DELETED, FAILED, NOTHING, PLANNED
from storage_engine.log.retention import plan_retention
from storage_engine.log.stats import log_dir_checkpoints

from .distribute import run_tasks
from .errors import SparkJobError



@dataclass(frozen=True)
class RetentionItem:
    """One partition for an executor: where it is and its topic's configuration."""

    topic: str
    partition: int
    log_dir: str
    configs: Mapping[str, LogConfig]  # every topic's, resolved over every log dir (``LogManager.topic_configs``)
    broker_props: tuple[tuple[str, str], ...]

    @property
    def config(self) -> LogConfig:
        return self.configs[self.topic]


@dataclass
class RetentionOutcome:
    topic: str
    partition: int
    status: str
    reason: str | None
    plan: dict
    deleted_segments: list[int] = field(default_factory=list)
    bytes_freed: int = 0
    log_start_offset_after: int | None = None
    duration_s: float = 0.0  # this partition's own seconds in its task, not the job's

    def to_dict(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "status": self.status, "reason": self.reason,
                "plan": self.plan, "deleted_segments": self.deleted_segments, "bytes_freed": self.bytes_freed,
                "log_start_offset_after": self.log_start_offset_after, "duration_s": round(self.duration_s, 6)}


@dataclass
class RetentionJobResult:
    now_ms: int
    dry_run: bool
    duration_s: float = 0.0
    outcomes: list[RetentionOutcome] = field(default_factory=list)

    @property
    def bytes_freed(self) -> int:
        return sum(o.bytes_freed for o in self.outcomes)



# ------------------------------------------------------------------------------------------
# executor side


def retain_slice(items: Sequence[RetentionItem], now_ms: int, dry_run: bool) -> list[RetentionOutcome]:
    """One task's partitions, through one ``LogManager`` per log dir (as ``clean_whole_tasks``),
    each log dir's checkpoints read once for all their plans: a manager per partition reread
    and rewrote the log dir's checkpoints for every one of them (11.9 s against the engine's
    6.8 s for 2,000 partitions)."""
    out: list[RetentionOutcome] = []
    for (log_dir, props), group in groupby(sorted(items, key=_where), key=_where):
        group = list(group)
        checkpoints = log_dir_checkpoints(Path(log_dir))
        with LogManager([Path(log_dir)], dict(props), read_only=dry_run, topic_configs=group[0].configs) as manager:
            out.extend(retain_partition(manager, item, now_ms, checkpoints) for item in group)
    return out


def _where(item: RetentionItem) -> tuple[str, tuple[tuple[str, str], ...]]:
    return item.log_dir, item.broker_props


def retain_partition(manager: LogManager, item: RetentionItem, now_ms: int,
                     checkpoints: tuple[dict, dict]) -> RetentionOutcome:
    """Plan (and, unless ``manager`` is read-only, apply) retention of one partition with the
    engine; problems become outcomes, each with the seconds it took."""
    started = time.monotonic()
    outcome = _retain(manager, item, now_ms, checkpoints)
    outcome.duration_s = time.monotonic() - started
    return outcome


def _retain(manager: LogManager, item: RetentionItem, now_ms: int, checkpoints: tuple[dict, dict]
            ) -> RetentionOutcome:
    try:
        where = PartitionLocation(item.topic, item.partition, manager.log_dirs[0],
                                  Path(item.log_dir) / partition_dir_name(item.topic, item.partition))
        plan = plan_retention(manager.planning_stats(where, checkpoints), item.config, now_ms)
    except (LogError, OSError) as exc:
        return RetentionOutcome(item.topic, item.partition, FAILED, f"{type(exc).__name__}: {exc}", {})
    if manager.read_only:
        return RetentionOutcome(item.topic, item.partition, PLANNED if plan.deletions else NOTHING, None, plan.to_dict())
    try:
        results = manager.retention.apply([plan], now_ms=now_ms)  # the engine's apply, sweep and "changed"
    except (LogError, OSError) as exc:
        return RetentionOutcome(item.topic, item.partition, FAILED, f"{type(exc).__name__}: {exc}", plan.to_dict())
    if not results:  # nothing to delete: swept only
        return RetentionOutcome(item.topic, item.partition, NOTHING, None, plan.to_dict())
    [result] = results
    if result.changed is not None:
        return RetentionOutcome(item.topic, item.partition, CHANGED, result.changed, plan.to_dict())
    return RetentionOutcome(item.topic, item.partition, DELETED, None, plan.to_dict(), result.deleted_segments,
                            result.bytes_freed, result.new_log_start_offset)


# ------------------------------------------------------------------------------------------
# driver side


def retention_partitions(
    spark,
    log_dirs: Sequence[str | Path] | None = None,
    partitions: Sequence[tuple[str, int]] | None = None,
    *,
    now_ms: int,
    dry_run: bool = False,
    broker_props: Mapping[str, str] | None = None,
    manager: LogManager | None = None,
    partitions_per_task: int = 64,
) -> RetentionJobResult:
    """Apply retention to many partitions in one Spark job (default: every partition, as the
    local engine's ``retention`` does: a compacted topic's segments below a log start offset
    that ``delete-records`` moved go too, as Kafka's ``deleteLogStartOffsetBreachedSegments``
    does for every policy); ``dry_run`` only plans."""
    started = time.monotonic()
    own = manager is None
    manager = manager or LogManager([Path(d) for d in (log_dirs or [])], broker_props, read_only=dry_run)
    try:
        items = _items(manager, partitions)
    finally:
        if own:
            manager.close()
    result = RetentionJobResult(now_ms, dry_run)
    tasks = [items[i:i + partitions_per_task] for i in range(0, len(items), partitions_per_task)]
    try:
        result.outcomes = run_tasks(spark, tasks, lambda batch: retain_slice(batch, now_ms, dry_run))
    except Exception as exc:
        raise SparkJobError(f"retention job failed (partitions already done stay done): {exc}") from exc
    result.outcomes.sort(key=lambda o: (o.topic, o.partition))
    result.duration_s = time.monotonic() - started
    return result


def _items(manager: LogManager, partitions: Sequence[tuple[str, int]] | None) -> list[RetentionItem]:
    """Where each chosen partition lives, with its topic's config; validated before any task runs."""
    # only the chosen topics' directories are checked: another topic's bad file is not theirs
    locations = manager.partition_locations(None if partitions is None else {t for t, _ in partitions})
    props = tuple(sorted(manager.broker_props.items()))
    configs = manager.topic_configs()
    if partitions is None:
        chosen = sorted(locations)
    else:
        chosen = sorted(set(partitions))
        for tp in chosen:
            if tp not in locations:
                meta = manager.metadata.topic(tp[0])
                if meta is not None and tp[1] < meta.partitions:  # counted, without a directory here
                    raise manager.placement.missing_partition_error(meta, tp[1])
                raise LogError(f"partition {tp[0]}-{tp[1]} does not exist in {manager.dir_list()}")
    for t in {t for t, _ in chosen} - set(configs):  # a topic being deleted, or one whose config is refused
        configs[t] = manager.topic_config(t)  # (raising, naming it, before any task runs)
    return [RetentionItem(t, p, str(locations[(t, p)].log_dir.path), configs, props) for t, p in chosen]
