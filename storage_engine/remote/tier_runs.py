"""Runs over the tiered partitions of a log manager: tiering and retention, one partition at a
time, each partition's failure its own row (Kafka's ``RemoteLogManager`` runs a task per
partition). ``logctl``, the Spark retention job and the platform call these; the decisions stay
in :mod:`.tiering` and :mod:`.retention`.

A run opens the store once, before it changes anything (``access.open_store``): an unset or
unreachable location is one error and nothing written. A partition whose tiers do not meet
(``TieringGapError``), whose version does not parse (``RemoteMetadataError``) or that another
writer committed first (``VersionConflictError``: ``changed``) is reported and the run goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import LogChangedError
from ..log.retention import RetentionResult, sweep_deleted_files
from ..log.stats import PartitionStats
from ..outcomes import CHANGED, FAILED, NOTHING, PLANNED
from .access import open_store, remote_partition
from .errors import RemoteMetadataError
from .partition import RemotePartition
from .retention import NO_REMOTE_TIER, RemoteRetentionResult, apply_remote_retention, plan_remote_retention
from .tiering import TieringGapError, TierResult, plan_local_release, release_local_copies, tier_partition
from .version import PartitionVersion

if TYPE_CHECKING:
    from ..config.topic import LogConfig
    from ..log.log import Log
    from ..logdir.manager import LogManager, PartitionFacts

#: what one partition's run reports and the run goes on past
_PARTITION_ERRORS = (TieringGapError, RemoteMetadataError, LogChangedError)


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
    results = []
    for f in facts:
        rp = remote_partition(f.stats.topic, f.stats.partition, f.config, store, directory=f.stats.directory)
        before = rp.store.counters()
        try:
            result = tier_partition(manager.get_log(f.stats.topic, f.stats.partition), rp, now_ms)
        except _PARTITION_ERRORS as exc:
            result = TierResult(f.stats.topic, f.stats.partition, _status(exc), str(exc))
        result.requests = rp.store.counters_since(before)
        results.append(result)
    return results


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
    except RemoteMetadataError as exc:
        return [RemoteRetentionResult(rp.topic, rp.partition, FAILED, str(exc))]
    if latest is None:
        return [RemoteRetentionResult(rp.topic, rp.partition, NOTHING, NO_REMOTE_TIER),
                RetentionResult(rp.topic, rp.partition, NOTHING, NO_REMOTE_TIER)]
    above = sum(s.size_bytes for s in stats.segments if s.base_offset >= latest.end_offset)
    if log is None:
        return _planned(rp, latest, config, stats, now_ms, above)
    try:
        remote = apply_remote_retention(rp, config, now_ms, local_bytes_above_end=above, partition_dir=log.dir)
    except LogChangedError as exc:
        return [RemoteRetentionResult(rp.topic, rp.partition, CHANGED, str(exc), remote_version=latest.version)]
    start = latest.log_start_offset if remote.remote_log_start_offset is None else remote.remote_log_start_offset
    try:
        local = release_local_copies(log, latest.end_offset, now_ms, remote_log_start=start)
    except LogChangedError as exc:
        local = RetentionResult(rp.topic, rp.partition, CHANGED, str(exc))
    sweep_deleted_files(log.dir, config.file_delete_delay_ms)
    return [remote, local]


def _planned(rp: RemotePartition, latest: PartitionVersion, config: LogConfig, stats: PartitionStats, now_ms: int,
             above: int) -> list[RetentionResult]:
    plan = plan_remote_retention(latest, config, now_ms, local_bytes_above_end=above)
    remote = RemoteRetentionResult(rp.topic, rp.partition, PLANNED if plan.deletions else NOTHING, None, plan,
                                   remote_version=latest.version, remote_log_start_offset=latest.log_start_offset,
                                   remote_end_offset=latest.end_offset)
    local_plan = plan_local_release(stats, config, latest.end_offset, now_ms,
                                    remote_log_start=plan.new_log_start_offset or latest.log_start_offset)
    return [remote, RetentionResult.of(local_plan, PLANNED if local_plan.deletions else NOTHING)]


def _status(exc: Exception) -> str:
    return CHANGED if isinstance(exc, LogChangedError) else FAILED
