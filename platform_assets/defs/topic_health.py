"""``topic_health`` read from the instance: which topics have new ``log_health`` results, and each
topic's rollup (``logic/topic_health.py``) over its partitions' current results as Dagster holds
them.

Cheap at 1,000 topics: one query on the event log's index for the check evaluations since the
last one seen (``idx_event_type``: event type, id), then the partition info
(``get_asset_check_partition_info``, the query behind the check's Partitions view) and the
latest evaluations only of the topics that have new ``log_health`` results. Check evaluations
are mirrored in the index of every SQL event log (the SQLite one keeps the rest per run), so
the read goes there: ``SqlEventLogStorage._get_event_records``, as Dagster's own
``get_latest_planned_materialization_info`` does; ``SqliteEventLogStorage.get_event_records``
would instead open every run's database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import dagster as dg
from dagster._core.storage.asset_check_execution_record import (  # not re-exported by dagster
    AssetCheckExecutionRecordStatus,
    AssetCheckPartitionInfo,
)
from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage  # not re-exported by dagster

from ..logic.check_outcomes import HEALTH_CHECK, TOPIC_HEALTH
from ..logic.observation_cursor import ObservationCursor
from ..logic.topic_health import MISSING, PENDING, PartitionVerdict, TopicHealth, topic_health, verdict_of
from .checks import log_asset_key

#: Check evaluations read per tick; more wait for the next tick (the cursor stops at the last read).
MAX_EVENTS_PER_TICK = 20_000
#: Topics rolled up per tick (~14 ms each on SQLite, so ~0.35 s): a first tick over 1,000 topics took 14.7 s;
#: the others wait in the cursor for the next ticks.
MAX_ROLLUPS_PER_TICK = 25


class EventLogNotIndexedError(Exception):
    """The instance's event log is not a SQL one: it has no index to read check results from."""


@dataclass(frozen=True)
class NewResults:
    """The topics with ``log_health`` results after a storage id, and the last id read."""

    topics: frozenset[str]
    last_id: int


def _storage(instance: dg.DagsterInstance) -> SqlEventLogStorage:
    storage = instance.event_log_storage
    if not isinstance(storage, SqlEventLogStorage):
        raise EventLogNotIndexedError(f"topic_health needs a SQL event log, not {type(storage).__name__}")
    return storage


def latest_event_id(instance: dg.DagsterInstance) -> int:
    """The newest storage id of the event log's index (0 when empty): where reading starts."""
    return _storage(instance).get_maximum_record_id() or 0


def new_health_results(instance: dg.DagsterInstance, after_id: int) -> NewResults:
    """The topics with ``log_health`` results (of the sensor, a cleaning run or an audit) stored
    after ``after_id``, at most ``MAX_EVENTS_PER_TICK`` evaluations read."""
    records = _storage(instance)._get_event_records(  # noqa: SLF001 -- the index, see the module docstring
        dg.EventRecordsFilter(dg.DagsterEventType.ASSET_CHECK_EVALUATION, after_cursor=after_id),
        limit=MAX_EVENTS_PER_TICK, ascending=True)
    topics = set()
    for r in records:
        evaluation = r.event_log_entry.dagster_event.event_specific_data if r.event_log_entry.dagster_event else None
        key = getattr(evaluation, "asset_key", None)
        if getattr(evaluation, "check_name", None) == HEALTH_CHECK and key is not None and key.path[0] == "logs":
            topics.add(key.path[-1])
    return NewResults(frozenset(topics), records[-1].storage_id if records else after_id)


def _verdict(info: AssetCheckPartitionInfo, evaluations: dict[int, dg.AssetCheckEvaluation]) -> PartitionVerdict:
    """A partition as the check's Partitions view holds it (``AssetCheckState``): planned and not
    evaluated yet, not current (materialized since its result), or its current result."""
    partition = info.partition_key or ""
    if info.latest_execution_status is AssetCheckExecutionRecordStatus.PLANNED:
        return PartitionVerdict(partition, PENDING, f"planned by run {info.latest_planned_run_id[:8]}, no result yet")
    evaluation = evaluations.get(info.latest_check_event_storage_id)
    if not info.is_current or evaluation is None:
        return PartitionVerdict(partition, MISSING, "materialized since its last log_health result")
    status = evaluation.metadata.get("status")
    return verdict_of(partition, passed=evaluation.passed, severity=evaluation.severity,
                      description=evaluation.description or "",
                      status=getattr(status, "value", None))


def topic_healths(instance: dg.DagsterInstance, partitions: Mapping[str, Sequence[str]]) -> dict[str, TopicHealth]:
    """Each topic's rollup over the current ``log_health`` of ``partitions[topic]`` (its
    partitions: results of keys deleted since are not the topic's any more)."""
    storage = _storage(instance)
    infos: dict[str, Sequence[AssetCheckPartitionInfo]] = {}
    for topic, keys in sorted(partitions.items()):
        infos[topic] = storage.get_asset_check_partition_info(
            [dg.AssetCheckKey(log_asset_key(topic), HEALTH_CHECK)], partition_keys=list(keys)) if keys else []
    ids = [i.latest_check_event_storage_id for found in infos.values() for i in found]
    evaluations: dict[int, dg.AssetCheckEvaluation] = {}
    if ids:
        for r in storage._get_event_records(dg.EventRecordsFilter(  # noqa: SLF001 -- see the module docstring
                dg.DagsterEventType.ASSET_CHECK_EVALUATION, storage_ids=ids), limit=len(ids)):
            event = r.event_log_entry.dagster_event
            if event is not None and isinstance(event.event_specific_data, dg.AssetCheckEvaluation):
                evaluations[r.storage_id] = event.event_specific_data
    return {topic: topic_health(_verdict(i, evaluations) for i in found) for topic, found in infos.items()}


def topic_health_evaluation(topic: str, health: TopicHealth) -> dg.AssetCheckEvaluation:
    """A topic's rollup as ``topic_health``'s result (no partition: one per topic)."""
    return dg.AssetCheckEvaluation(asset_key=log_asset_key(topic), check_name=TOPIC_HEALTH, passed=health.passed,
                                   description=health.description(), metadata=health.metadata(),
                                   severity=health.severity)


def changed_rollups(instance: dg.DagsterInstance, cursor: ObservationCursor,
                    partitions: Mapping[str, Sequence[str]]) -> list[dg.AssetCheckEvaluation]:
    """The ``topic_health`` results to record: of the topics with new ``log_health`` results since
    the cursor's ``health_after`` (every topic of ``partitions`` when the cursor has none), those
    whose rollup differs from the one last recorded, at most ``MAX_ROLLUPS_PER_TICK`` topics (the
    others, with those left by earlier ticks, stay due in the cursor). Moves the cursor past what
    it read."""
    if cursor.health_after is None:
        after, topics = latest_event_id(instance), set(partitions)
    else:
        new = new_health_results(instance, cursor.health_after)
        after, topics = new.last_id, set(new.topics)
    due = sorted((topics | set(cursor.rollups_due)) & set(partitions))
    now, cursor.rollups_due = due[:MAX_ROLLUPS_PER_TICK], due[MAX_ROLLUPS_PER_TICK:]
    out = []
    for topic, health in topic_healths(instance, {t: partitions[t] for t in now}).items():
        if cursor.rollup_changed(topic, digest := health.digest()):
            out.append(topic_health_evaluation(topic, health))
            cursor.record_rollup(topic, digest)
    cursor.health_after = after
    return out
