"""Runs over the tiered partitions of a log manager: tiering, retention and the sweep of their
objects, one partition at a time, each partition's failure its own row (Kafka's
``RemoteLogManager`` runs a task per partition). ``logctl``, the Spark retention job and the
platform (its tiering run and the sweep) call these; the decisions stay in :mod:`.tiering`, :mod:`.stats` and :mod:`.sweeper`.

A run opens the store once, before it changes anything (``access.open_store``): an unset or
unreachable location is one error and nothing written. A partition's own problem (tiers that
do not meet, a version that does not parse, a request that failed, its files) is its row,
``failed``, or ``changed`` when another writer committed first, and the run goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import LogChangedError, LogError
from ..log.retention import RetentionResult, sweep_deleted_files
from ..log.stats import PartitionStats
from ..logdir.locations import locate
from ..outcomes import CHANGED, FAILED, NOTHING, PLANNED
from .access import open_store, remote_partition
from .errors import RemoteStorageError
from .partition import MAX_UPLOAD_AGE_MS, ORPHAN_MIN_AGE_MS, RemotePartition
from .retention import NO_REMOTE_TIER, RemoteRetentionResult, apply_remote_retention
from .stats import TierFacts, local_bytes_above, plan_tiered_retention
from .store import ObjectStore
from .sweeper import SweepResult, sweep_partition
from .tiering import TierResult, release_local_copies, tier_partition
from .version import PartitionVersion

if TYPE_CHECKING:
    from ..config.topic import LogConfig
    from ..log.log import Log
    from ..logdir.manager import LogManager, PartitionFacts

#: what one partition's run reports and the run goes on past
#: A partition's own problems: its row says so (``changed`` for a lost race, else ``failed``) and
#: the run goes on with the others, as Kafka's cleaner thread goes on past one partition. A
#: location that does not answer at all is refused before the loop (``open_store``).
_PARTITION_ERRORS = (LogError, OSError)


def has_tiered_topic(manager: LogManager, topic: str | None = None) -> bool:
    """Whether ``topic`` (default: any topic) has a remote tier, from the configs alone: what a
    command's precheck asks before it proves the remote storage answers."""
    return any(c.remote_storage_enable for c in manager.topic_configs(None if topic is None else [topic]).values())


def tiered_facts(manager: LogManager, topic: str | None = None) -> list[PartitionFacts]:
    """The facts (stats and config) of every partition of the tiered topics (of ``topic``)."""
    return [f for f in manager.partition_facts(topic) if f.config.remote_storage_enable]


def tier_partitions(manager: LogManager, topic: str | None = None, *, now_ms: int) -> list[TierResult]:
    """Tier every partition of every tiered topic (of ``topic``): copy, commit, release local
    copies (``tiering.tier_partition``); one result each, request counts its own."""
    facts = tiered_facts(manager, topic)
    store = open_store() if facts else None
    return [tier_one(manager, f.stats.topic, f.stats.partition, now_ms=now_ms, store=store) for f in facts]


def tier_one(manager: LogManager, topic: str, partition: int, *, now_ms: int, store: ObjectStore | None) -> TierResult:
    """One partition's tiering (``tiering.tier_partition``), its requests its own even on a store
    shared by the run; its own error is its result (``failed``, or ``changed`` for a lost race).
    A partition tiered at another location is refused (``access.remote_partition``): that is the
    run's configuration, not the partition's problem."""
    log = manager.get_log(topic, partition)
    rp = remote_partition(topic, partition, log.config, store, directory=log.dir)
    before = rp.store.counters()
    try:
        result = tier_partition(log, rp, now_ms)
    except _PARTITION_ERRORS as exc:
        result = TierResult(topic, partition, _status(exc), str(exc))
    result.requests = rp.store.counters_since(before)
    return result


def retain_tiered(manager: LogManager, topic: str | None = None, *, now_ms: int,
                  dry_run: bool = False) -> list[RetentionResult]:
    """Retention of every tiered partition (of ``topic``): :func:`retain_tiered_partition`."""
    facts = tiered_facts(manager, topic)
    store = open_store() if facts else None
    out: list[RetentionResult] = []
    for f in facts:
        rp = remote_partition(f.stats.topic, f.stats.partition, f.config, store, directory=f.stats.directory)
        log = None if dry_run else manager.get_log(f.stats.topic, f.stats.partition)
        out.extend(retain_tiered_partition(rp, f.config, f.stats, now_ms, log=log))
    return out


def retain_tiered_partition(rp: RemotePartition, config: LogConfig, stats: PartitionStats, now_ms: int, *,
                            log: Log | None) -> list[RetentionResult]:
    """One tiered partition's retention: the remote tier's (a ``retention`` version), then the
    local copies' (``local.retention.*``, and every copy below the remote log start). With
    ``log`` None, a dry run: both planned from ``stats``, nothing written. Two results, the
    remote one first."""
    try:
        latest = rp.latest()
    except _PARTITION_ERRORS as exc:
        return [RemoteRetentionResult(rp.topic, rp.partition, _status(exc), str(exc))]
    if latest is None:
        return [RemoteRetentionResult(rp.topic, rp.partition, NOTHING, NO_REMOTE_TIER),
                RetentionResult(rp.topic, rp.partition, NOTHING, NO_REMOTE_TIER)]
    if log is None:
        return _planned(rp, latest, config, stats, now_ms)
    try:
        remote = apply_remote_retention(rp, config, now_ms, local_bytes_above_end=local_bytes_above(
            stats, latest.end_offset), partition_dir=log.dir)
    except _PARTITION_ERRORS as exc:
        return [RemoteRetentionResult(rp.topic, rp.partition, _status(exc), str(exc), remote_version=latest.version)]
    start = latest.log_start_offset if remote.remote_log_start_offset is None else remote.remote_log_start_offset
    try:
        local = release_local_copies(log, latest.end_offset, now_ms, remote_log_start=start)
    except _PARTITION_ERRORS as exc:
        local = RetentionResult(rp.topic, rp.partition, _status(exc), str(exc))
    sweep_deleted_files(log.dir, config.file_delete_delay_ms)
    return [remote, local]


def _planned(rp: RemotePartition, latest: PartitionVersion, config: LogConfig, stats: PartitionStats,
             now_ms: int) -> list[RetentionResult]:
    plans = plan_tiered_retention(stats, TierFacts.of_version(latest), config, now_ms)
    remote = RemoteRetentionResult(rp.topic, rp.partition, PLANNED if plans.remote.deletions else NOTHING, None,
                                   plans.remote, remote_version=latest.version,
                                   remote_log_start_offset=latest.log_start_offset, remote_end_offset=latest.end_offset)
    return [remote, RetentionResult.of(plans.local, PLANNED if plans.local.deletions else NOTHING)]


def sweep_tiered(manager: LogManager, topic: str | None = None, *, now_ms_wall: int,
                 orphan_min_age_ms: int = ORPHAN_MIN_AGE_MS, dry_run: bool = False) -> list[SweepResult]:
    """The sweep (``sweeper.sweep_partition``) of every partition of every tiered topic (of
    ``topic``, refused unless tiered), on the one store the run opens (each result counts its
    own requests). ``now_ms_wall``: the wall clock the ages are judged by (object stores stamp
    wall clock); ``orphan_min_age_ms``: the orphan floor, never below ``ORPHAN_MIN_AGE_MS``:
    a writer commits uploads up to ``MAX_UPLOAD_AGE_MS`` old, so a younger unnamed object may
    still be committed (only ``sweep_partition`` itself takes any floor, for a bucket no writer
    uses)."""
    if orphan_min_age_ms < ORPHAN_MIN_AGE_MS:
        raise RemoteStorageError(
            f"an orphan floor of {orphan_min_age_ms} ms is below {ORPHAN_MIN_AGE_MS} ms: a writer may still commit "
            f"uploads up to {MAX_UPLOAD_AGE_MS} ms old, so a younger object no version names is not an orphan yet")
    results = []
    store: ObjectStore | None = None
    for name in [topic] if topic is not None else manager.topics():
        config = manager.topic_config(name)
        if not config.remote_storage_enable and topic is None:
            continue
        for p in manager.partitions(name):
            loc = locate(manager.log_dirs, name, p)
            # a named topic that is not tiered, or a partition tiered at another location: refused here
            rp = remote_partition(name, p, config, store, directory=loc.path if loc is not None else None)
            store = rp.store
            results.append(sweep_partition(rp, config, now_ms_wall=now_ms_wall, orphan_min_age_ms=orphan_min_age_ms,
                                           dry_run=dry_run))
    return results


def _status(exc: Exception) -> str:
    return CHANGED if isinstance(exc, LogChangedError) else FAILED
