"""Sensors: the platform's eyes on the log dirs.

* ``log_state_sensor`` keeps every topic's partition set equal to the partitions on disk (in
  numeric order, without a reload) and records an ``AssetObservation`` of a partition only when
  its state changed since the last one it recorded (the cursor holds a 12-digit digest per
  partition), so the event log does not grow with every tick. It is the only writer of
  dynamic partitions: Dagster's partition table has no uniqueness constraint, so two sensors
  adding the same key at once would list it twice.
* ``compaction_sensor`` requests a run for each compacted partition Kafka's cleaner would pick
  (dirty ratio above ``min.cleanable.dirty.ratio``, or ``max.compaction.lag.ms`` overdue),
  dirtiest first, at most ``LOGPLAT_MAX_RUNS_PER_TICK`` per tick.
* ``retention_sensor`` requests a run for each partition with deletable segments, most bytes
  first, with the same bound.

All three read only the engine's cheap stats (file metadata, checkpoints, index tails, batch
headers: never record bytes) through a read-only ``LogManager``. Run keys come from the log's
state (``log_state``), and a partition is skipped while a run for it is queued or in flight, or
when its current key already ran (a run that failed keeps its key until the log changes; Dagster
would drop the request anyway, and skipping it leaves its slot in the tick to the next partition).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

import dagster as dg

from .assets import cleanup_run_config
from .catalog import Topic
from .jobs import PARTITION_TAG, REASON_TAG, TOPIC_TAG, TRIGGER_TAG, cleanup_job_name
from .log_state import (
    PartitionState,
    TopicPartition,
    compaction_choices,
    compaction_run_key,
    read_states,
    retention_choices,
    retention_run_key,
)
from .metadata import observation_metadata
from .partitions import (
    key_update_requests,
    partition_key,
    partition_number,
    partitions_def_name,
    plan_key_update,
)
from .resources import LogStoreResource
from .settings import PlatformSettings

# Dagster's own run tags (dagster._core.storage.tags), read from runs the platform did not tag.
RUN_KEY_TAG = "dagster/run_key"
SENSOR_NAME_TAG = "dagster/sensor_name"
PARTITION_NAME_TAG = "dagster/partition"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
             dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
RECENT_RUNS = 500  # how far back a sensor looks for run keys it already used
MAX_REASON = 200


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def default_status(settings: PlatformSettings) -> dg.DefaultSensorStatus:
    return dg.DefaultSensorStatus.RUNNING if settings.automation == "running" else dg.DefaultSensorStatus.STOPPED


# ------------------------------------------------------------------------------- the cursor


@dataclass
class ObservationCursor:
    """The digest of each partition's last recorded state, by topic (JSON in the sensor cursor)."""

    seen: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str | None) -> "ObservationCursor":
        if not text:
            return cls()
        try:
            body = json.loads(text)
            return cls({t: dict(parts) for t, parts in body.get("seen", {}).items()})
        except (ValueError, AttributeError, TypeError):
            return cls()  # an unreadable cursor only costs one round of observations

    def changed(self, state: PartitionState) -> bool:
        return self.seen.get(state.topic, {}).get(partition_key(state.partition)) != state.observation_digest()

    def record(self, state: PartitionState) -> None:
        self.seen.setdefault(state.topic, {})[partition_key(state.partition)] = state.observation_digest()

    def keep_only(self, present: Iterable[TopicPartition]) -> None:
        """Forget partitions that are gone, so the cursor never grows past the log dirs."""
        alive: dict[str, set[str]] = defaultdict(set)
        for topic, partition in present:
            alive[topic].add(partition_key(partition))
        self.seen = {t: {k: v for k, v in parts.items() if k in alive[t]} for t, parts in self.seen.items() if t in alive}

    def dump(self) -> str:
        return json.dumps({"v": 1, "seen": self.seen}, separators=(",", ":"), sort_keys=True)


# ------------------------------------------------------------------------------- runs in flight


@dataclass(frozen=True)
class BusyLogs:
    """Partitions (or whole topics) that a queued or running run is about to clean."""

    partitions: frozenset[TopicPartition] = frozenset()
    topics: frozenset[str] = frozenset()

    def __contains__(self, tp: object) -> bool:
        return tp in self.partitions or (isinstance(tp, tuple) and tp[0] in self.topics)


def _run_topics(run: dg.DagsterRun) -> list[str]:
    if TOPIC_TAG in run.tags:
        return [run.tags[TOPIC_TAG]]
    return [k.path[1] for k in (run.asset_selection or ()) if len(k.path) == 2 and k.path[0] == "logs"]


def busy_logs(runs: Iterable[dg.DagsterRun]) -> BusyLogs:
    """Which logs ``runs`` (queued or in flight) cover, from their tags and asset selection: a
    partition tag, a partition range (keys are numbers in numeric order), else the whole topic."""
    partitions: set[TopicPartition] = set()
    topics: set[str] = set()
    for run in runs:
        tags = run.tags
        try:
            if PARTITION_NAME_TAG in tags:
                numbers = [partition_number(tags[PARTITION_NAME_TAG])]
            elif RANGE_START_TAG in tags and RANGE_END_TAG in tags:
                lo, hi = partition_number(tags[RANGE_START_TAG]), partition_number(tags[RANGE_END_TAG])
                numbers = list(range(lo, hi + 1))
            else:
                numbers = None
        except ValueError:
            numbers = None
        for topic in _run_topics(run):
            if numbers is None:
                topics.add(topic)
            else:
                partitions.update((topic, n) for n in numbers)
    return BusyLogs(frozenset(partitions), frozenset(topics))


def _in_flight(instance: dg.DagsterInstance) -> BusyLogs:
    return busy_logs(r.dagster_run for r in instance.get_run_records(dg.RunsFilter(statuses=IN_FLIGHT)))


def _used_run_keys(instance: dg.DagsterInstance, sensor_name: str) -> set[str]:
    records = instance.get_run_records(dg.RunsFilter(tags={SENSOR_NAME_TAG: sensor_name}), limit=RECENT_RUNS)
    return {r.dagster_run.tags[RUN_KEY_TAG] for r in records if RUN_KEY_TAG in r.dagster_run.tags}


def _existing_keys(instance: dg.DagsterInstance, topics: Iterable[str]) -> dict[str, set[str]]:
    return {t: set(instance.get_dynamic_partitions(partitions_def_name(t))) for t in topics}


# ------------------------------------------------------------------------------- the sensors


def build_state_sensor(topics: Sequence[Topic], settings: PlatformSettings) -> dg.SensorDefinition:
    known = {t.name for t in topics}

    @dg.sensor(
        name="log_state_sensor",
        minimum_interval_seconds=settings.sensor_interval_s,
        default_status=default_status(settings),
        description="Adds partition keys for new partitions (numeric order) and records each partition's "
        "state as an observation when it changed.",
    )
    def log_state_sensor(context: dg.SensorEvaluationContext, log_store: LogStoreResource):
        cursor = ObservationCursor.parse(context.cursor)
        with log_store.manager() as manager:
            states = read_states(manager, now_ms=wall_clock_ms())
        by_topic: dict[str, list[PartitionState]] = defaultdict(list)
        for s in states:
            by_topic[s.topic].append(s)
        unknown = sorted(set(by_topic) - known)
        if unknown:
            context.log.info(f"topics not in this code location yet (reload it to add them): {', '.join(unknown)}")
        requests, events = [], []
        for topic, topic_states in sorted(by_topic.items()):
            if topic not in known:
                continue
            update = plan_key_update(
                context.instance.get_dynamic_partitions(partitions_def_name(topic)), [s.partition for s in topic_states]
            )
            requests.extend(key_update_requests(topic, update))
            for s in topic_states:
                if len(events) >= settings.max_observations_per_tick:
                    break  # the rest stay "changed" in the cursor and go out next tick
                if cursor.changed(s):
                    events.append(dg.AssetObservation(asset_key=["logs", topic], partition=partition_key(s.partition),
                                                      metadata=observation_metadata(s)))
                    cursor.record(s)
        cursor.keep_only(s.tp for s in states if s.topic in known)
        if not requests and not events:
            return dg.SensorResult(skip_reason=f"{len(states)} partition(s), none changed", cursor=cursor.dump())
        return dg.SensorResult(dynamic_partitions_requests=requests, asset_events=events, cursor=cursor.dump())

    return log_state_sensor


@dataclass(frozen=True)
class _RunSensorSpec:
    name: str
    trigger: str
    description: str
    topics: tuple[Topic, ...]
    compaction: bool  # which verdicts the sensor needs
    retention: bool
    choose: Callable[..., list[PartitionState]]
    run_key: Callable[[PartitionState], str]
    reason: Callable[[PartitionState], str]


def _build_run_sensor(spec: _RunSensorSpec, jobs: Mapping[str, dg.UnresolvedAssetJobDefinition],
                      settings: PlatformSettings) -> dg.SensorDefinition:
    by_name = {t.name: t for t in spec.topics}

    @dg.sensor(
        name=spec.name,
        jobs=[jobs[t.name] for t in spec.topics],
        minimum_interval_seconds=settings.sensor_interval_s,
        default_status=default_status(settings),
        description=spec.description,
    )
    def _sensor(context: dg.SensorEvaluationContext, log_store: LogStoreResource):
        with log_store.manager() as manager:
            states = read_states(manager, now_ms=wall_clock_ms(), topics=list(by_name),
                                 compaction=spec.compaction, retention=spec.retention)
        existing = _existing_keys(context.instance, by_name)
        keyed = [s for s in states if partition_key(s.partition) in existing.get(s.topic, ())]
        used = _used_run_keys(context.instance, spec.name)
        busy = _in_flight(context.instance)
        candidates = spec.choose(keyed, limit=len(keyed), busy=busy)
        chosen = [s for s in candidates if spec.run_key(s) not in used][: settings.max_runs_per_tick]
        if not chosen:
            waiting = len(states) - len(keyed)
            note = f"; {waiting} partition(s) wait for log_state_sensor to add their keys" if waiting else ""
            return dg.SkipReason(f"{len(candidates)} partition(s) need work, none new for this sensor "
                                 f"({len(keyed)} checked{note})" if candidates else
                                 f"nothing to do in {len(keyed)} partition(s){note}")
        return dg.SensorResult(run_requests=[
            dg.RunRequest(
                job_name=cleanup_job_name(by_name[s.topic]),
                partition_key=partition_key(s.partition),
                run_key=spec.run_key(s),
                run_config=cleanup_run_config(by_name[s.topic], force_compaction=False),
                tags={PARTITION_TAG: partition_key(s.partition), TRIGGER_TAG: spec.trigger,
                      REASON_TAG: spec.reason(s)[:MAX_REASON]},
            )
            for s in chosen
        ])

    return _sensor


def _retention_reason(s: PartitionState) -> str:
    return f"{s.deletable_segments} segment(s), {s.deletable_bytes} bytes deletable"


def build_sensors(topics: Sequence[Topic], jobs: Mapping[str, dg.UnresolvedAssetJobDefinition],
                  settings: PlatformSettings) -> list[dg.SensorDefinition]:
    """The state sensor, and the run sensors of the topics that have work of their kind."""
    sensors = [build_state_sensor(topics, settings)]
    compacted = tuple(t for t in topics if t.compact)
    if compacted:
        sensors.append(_build_run_sensor(_RunSensorSpec(
            "compaction_sensor", "compaction-sensor",
            "Requests a compaction of each partition whose dirty ratio exceeds min.cleanable.dirty.ratio or whose "
            "max.compaction.lag.ms is overdue, dirtiest first.",
            compacted, True, False, compaction_choices, compaction_run_key, lambda s: s.candidacy.why if s.candidacy else "",
        ), jobs, settings))
    if topics:
        sensors.append(_build_run_sensor(_RunSensorSpec(
            "retention_sensor", "retention-sensor",
            "Requests retention for each partition with deletable segments (retention.ms, retention.bytes, "
            "log start offset), most bytes first.",
            # the compaction verdict too: a compact,delete partition due for compaction is left to that run
            tuple(topics), True, True, retention_choices, retention_run_key, _retention_reason,
        ), jobs, settings))
    return sensors
