"""Sensors: the platform's eyes on the log dirs.

* ``log_state_sensor`` keeps every topic's partition set equal to the partitions on disk (in
  numeric order, without a reload) and records an ``AssetObservation`` of a partition only when
  its state changed since the last one it recorded (the cursor holds a 12-digit digest per
  partition), so the event log does not grow with every tick. It is the only writer of
  dynamic partitions: Dagster's partition table has no uniqueness constraint, so two sensors
  adding the same key at once would list it twice.
  It then records each topic's ``topic_health`` (``defs/topic_health.py``), the rollup of its
  partitions' current ``log_health``, when it changed: only topics with new ``log_health``
  results since the last tick are rolled up again.
* ``compaction_sensor`` requests compaction earliest deadline first: the compacted partitions
  whose erasure deadline (``max.compaction.lag.ms`` after their oldest uncleaned record) is
  half used or missed, least time left first, in runs that clean them even where Kafka's rule
  would still wait (so the deadline holds when the machine keeps up); then those Kafka's
  cleaner would pick by dirty ratio (above ``min.cleanable.dirty.ratio``), dirtiest first; at
  most ``LOGPLAT_MAX_PARTITIONS_PER_TICK`` partitions per tick.
* ``retention_sensor`` requests retention of the partitions with deletable segments, most bytes
  first, with the same bound.
* ``tiering_sensor`` requests tiering runs (``defs/tiering.py``) for the partitions of tiered
  topics (``remote.storage.enable``) with rolled segments past the remote tier's end or local
  copies past ``local.retention.*``, most bytes first, with the same bound. It never asks the
  bucket: the remote tier is the version each partition remembers (``logic/tiering.py``), and
  the run key names it with the local segments, so the same work is asked for once.
* ``deleted_files_sensor`` removes ``.deleted`` files once ``file.delete.delay.ms`` has passed,
  as Kafka's scheduler does, and records what it freed as observations.

The chosen partitions of a topic that are consecutive share one run (a single-run range: one
process, one Spark session, one Spark job), since runs of one topic never overlap anyway
(``dagster_home/dagster.yaml``); a lone partition gets a partitioned run of its own.

The three that decide read only the engine's cheap stats (file metadata, checkpoints, index tails, batch
headers: never record bytes) through a read-only ``LogManager``, and recompute a partition's state
only when its files changed or it aged past the retention check interval (``state_cache``). Run keys come from the state of
the partitions they cover (``log_state``), and each run records its partitions' states in the
``logplat/states`` tag; a partition is skipped while a run covering it is queued or in flight, or
when a recent run of the sensor already covered it in its current state (a run that failed is
not asked again until the log changes; skipping it leaves its slot in the tick to the next one).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import dagster as dg

from storage_engine.errors import LogError
from storage_engine.files.naming import parse_partition_number
from storage_engine.log.segment import now_ms as wall_clock_ms

from ..logic.catalog import Catalog, Topic
from ..logic.check_outcomes import CheckOutcome
from ..logic.cleaning_failures import FailureVerdicts, failures_of_run, judge_failures
from ..logic.health import health_outcome, unreadable_outcome
from ..logic.log_state import (
    PartitionState,
    TopicPartition,
    compaction_token,
    contiguous_runs,
    deadline_urgent,
    due_for_compaction,
    due_for_retention,
    due_for_tiering,
    forced_by_deadline,
    retention_token,
    run_key,
    tiering_token,
)
from ..logic.metadata import deleted_files_metadata, observation_metadata
from ..logic.observation_cursor import ObservationCursor
from ..logic.partition_keys import keys_not_on_disk, partition_key, plan_key_update
from ..logic.recording import Recording, worst_first
from ..logic.run_tags import MAX_REASON, SENSOR_NAME_TAG
from ..logic.runs_in_flight import RANGE_END_TAG, RANGE_START_TAG, BusyLogs, logs_covered
from ..logic.settings import PlatformSettings
from ..logic.state_cache import STATE_CACHE
from ..logic.tiering import remote_tier_in_use
from ..logic.units import size_text
from .assets import cleanup_run_config, report_materialization
from .checks import evaluations, latest_materializations, log_asset_key, record_sensor_results, verdict_metadata
from .cleanup import CLEAN, TIER
from .errors import tick_refusals_first
from .jobs import (
    FAILED_PARTITIONS_TAG,
    PARTITION_TAG,
    REASON_TAG,
    STATES_TAG,
    TOPIC_TAG,
    TRIGGER_TAG,
    cleanup_job_name,
    run_topics,
)
from .partitions import dynamic_partition_keys, key_update_requests
from .pause import read_switch
from .resources import LogStoreResource
from .topic_health import changed_rollups

IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
             dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
RECENT_RUNS = 500  # how many of its latest runs a sensor reads for the partition states they covered
MAX_KEYS_PER_TICK = 10_000


def current_states(log_store: LogStoreResource, settings: PlatformSettings, topics: Iterable[str] | None = None,
                   unreadable: dict[TopicPartition, str] | None = None,
                   pending: set[TopicPartition] | None = None) -> list[PartitionState]:
    """Every readable partition's state now, through the process's state cache (``state_cache``);
    why each other one cannot be read goes into ``unreadable``. Given ``pending``, the read
    computes states for at most ``LOGPLAT_STATE_READ_BUDGET_MS`` and the partitions it had no
    time for go there, with no state: a tick does not act on them, the next one reads them."""
    with log_store.manager() as manager:
        return STATE_CACHE.read(manager, now_ms=wall_clock_ms(), ttl_ms=settings.state_ttl_ms,
                                refresh_share=min(1.0, settings.sensor_interval_s * 1000 / settings.state_ttl_ms),
                                topics=None if topics is None else list(topics), unreadable=unreadable,
                                budget_s=None if pending is None else settings.state_read_budget_ms / 1000,
                                pending=pending)


def pending_note(pending: Collection[TopicPartition]) -> str:
    """A tick's note on the partitions whose state its time budget left unread."""
    return f"{len(pending)} partition(s) not read yet, next tick"


def unreadable_note(unreadable: Mapping[TopicPartition, str]) -> str:
    """A tick's note on the partitions it could not read (their ``log_health`` says why)."""
    named = "; ".join(f"{t}-{p}: {why}" for (t, p), why in sorted(unreadable.items())[:3])
    more = f"; and {len(unreadable) - 3} more" if len(unreadable) > 3 else ""
    return f"{len(unreadable)} partition(s) cannot be read and get no run until repaired ({named}{more})"


def default_status(settings: PlatformSettings) -> dg.DefaultSensorStatus:
    return dg.DefaultSensorStatus.RUNNING if settings.automation == "running" else dg.DefaultSensorStatus.STOPPED


def platform_sensor(name: str, description: str, settings: PlatformSettings, **kwargs: object):
    """``dg.sensor`` with the platform's tick interval and default status, whose tick fails on an
    engine refusal with the engine's sentence first (``tick_refusals_first``)."""
    sensor = dg.sensor(name=name, minimum_interval_seconds=settings.sensor_interval_s,
                       default_status=default_status(settings), description=description, **kwargs)
    return lambda evaluate: sensor(tick_refusals_first(evaluate))


# ------------------------------------------------------------------------------- runs in flight


def busy_logs(runs: Iterable[dg.DagsterRun]) -> BusyLogs:
    """Which logs ``runs`` (queued or in flight) cover, from their tags and asset selection."""
    return logs_covered((run.tags, run_topics(run)) for run in runs)


def in_flight(instance: dg.DagsterInstance) -> BusyLogs:
    """The logs that queued and running runs cover: no sensor or sweep asks for them again."""
    return busy_logs(r.dagster_run for r in instance.get_run_records(dg.RunsFilter(statuses=IN_FLIGHT)))


def _existing_keys(instance: dg.DagsterInstance, topics: Iterable[str]) -> dict[str, set[str]]:
    return {t: set(keys) for t, keys in dynamic_partition_keys(instance, list(topics)).items()}


# ------------------------------------------------------------------------------- the sensors


def _still_refused(log_store: LogStoreResource, refused: Mapping[str, str]) -> dict[str, str]:
    """Of the topics the code location could not build, those whose config is refused now, and why."""
    still: dict[str, LogError] = {}
    if refused:
        with log_store.manager() as manager:
            manager.topic_configs(refused, still)
    return {name: str(exc) for name, exc in still.items()}


def build_state_sensor(catalog: Catalog, settings: PlatformSettings) -> dg.SensorDefinition:
    known = {t.name for t in catalog.topics}

    @platform_sensor("log_state_sensor", "Adds partition keys for new partitions (numeric order) and records each "
                     "partition's state and log_health when it changed.", settings)
    def log_state_sensor(context: dg.SensorEvaluationContext, log_store: LogStoreResource):
        cursor = ObservationCursor.parse(context.cursor)
        unreadable: dict[TopicPartition, str] = {}
        pending: set[TopicPartition] = set()  # on disk, but not read this tick: keys and digests kept
        states = current_states(log_store, settings, unreadable=unreadable, pending=pending)
        # a partition held back after a failed cleaning says so whenever its verdict is recorded
        # again (a deadline passing), not only in the failed run's own log_health
        failed = {tp: hold.text for tp, hold in failure_verdicts(context.instance, states, settings).held.items()}
        by_topic: dict[str, list[PartitionState]] = defaultdict(list)
        for s in states:
            by_topic[s.topic].append(s)
        unreadable_by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in sorted(unreadable):
            unreadable_by_topic[topic].append(partition)
        pending_by_topic: dict[str, set[int]] = defaultdict(set)
        for topic, partition in pending:
            pending_by_topic[topic].add(partition)
        on_disk = set(by_topic) | set(unreadable_by_topic) | set(pending_by_topic)
        # a topic the code location could not build whose config is still refused: a reload does
        # not help until it is repaired, so the tick says why; repaired, it is a topic to reload
        # for like a new one
        still_refused = _still_refused(log_store, catalog.refused)
        not_built = [f"topic {name} is not in this code location: {why}" for name, why in sorted(still_refused.items())]
        # the code location knows the topics of its last load: a topic created or deleted since
        # shows in the tick's reason, which the UI shows, until the location is reloaded
        reload_notes = [f"topics {what} (reload the code location): {', '.join(names)}" for what, names in (
            ("not in this code location yet", sorted(on_disk - known - set(still_refused))),
            ("gone from the log dirs", sorted(known - on_disk))) if names]
        for note in reload_notes:
            context.log.info(note)
        for note in not_built:
            context.log.error(note)
        if unreadable:
            context.log.error(unreadable_note(unreadable))
        requests, events = [], []
        to_record: list[Recording] = []
        gone_tps: list[TopicPartition] = []
        partitions_of: dict[str, list[str]] = {}  # each topic's partitions, for its topic_health
        keys_added = 0
        keys_by_topic = dynamic_partition_keys(context.instance, on_disk & known)
        for topic in sorted(on_disk & known):
            topic_states = by_topic.get(topic, [])
            existing = keys_by_topic[topic]
            on_disk_here = ({s.partition for s in topic_states} | set(unreadable_by_topic.get(topic, ()))
                            | pending_by_topic.get(topic, set()))
            # the history is read only when some key names no partition on disk (rare)
            strays = keys_not_on_disk(existing, on_disk_here)
            history = context.instance.get_materialized_partitions(log_asset_key(topic)) if strays else set()
            update = plan_key_update(existing, on_disk_here, history)
            # a key kept for its history whose partition is gone (the topic deleted and created
            # again with fewer partitions) kept its last, green log_health for ever
            lost = {n: f"partition {n} of topic {topic} is no longer in the log dirs (the topic was deleted and "
                       "created again with fewer partitions?); its key stays for its history"
                    for n in (parse_partition_number(k) for k in strays if k in history)
                    if n is not None}
            gone_tps.extend((topic, n) for n in lost)
            partitions_of[topic] = [partition_key(n) for n in sorted(on_disk_here | set(lost))]
            # the first keys in order, the rest at the next tick (Dagster asks for at most 25k per evaluation)
            update = replace(update, add=update.add[:max(0, MAX_KEYS_PER_TICK - keys_added)])
            keys_added += len(update.add)
            requests.extend(key_update_requests(topic, update))
            to_record.extend(Recording(topic, health_outcome(s, cleaning_failed=failed.get(s.tp)), s)
                             for s in topic_states if cursor.changed(s))
            failing = {**{p: unreadable[(topic, p)] for p in unreadable_by_topic.get(topic, ())}, **lost}
            to_record.extend(Recording(topic, unreadable_outcome(partition, why), unreadable=why)
                             for partition, why in sorted(failing.items())
                             if cursor.changed_unreadable((topic, partition), why))
        # the rest stay "changed" in the cursor and go out at the next ticks
        recordings, left = worst_first(to_record, settings.max_observations_per_tick)
        verdicts: dict[str, list[CheckOutcome]] = defaultdict(list)  # recorded by the sensor itself, below
        for r in recordings:
            if r.state is not None:  # the verdict on the observation too: every change stays in the history
                events.append(dg.AssetObservation(asset_key=log_asset_key(r.topic),
                                                  partition=partition_key(r.state.partition),
                                                  metadata={**observation_metadata(r.state),
                                                            **verdict_metadata(r.outcome)}))
                cursor.record(r.state)
            else:
                cursor.record_unreadable((r.topic, r.outcome.partition), r.unreadable or "")
            verdicts[r.topic].append(r.outcome)
        # a partition's state or verdict changed: the report across topics with it, once every
        # partition was read (a report missing the pending ones would show a fleet that is not there)
        if recordings and not pending:
            events.append(report_materialization(states, unreadable, failed))
        cursor.keep_only([s.tp for s in states if s.topic in known] + [tp for tp in unreadable if tp[0] in known]
                         + [tp for tp in pending if tp[0] in known] + gone_tps)
        record_sensor_results(context.instance, [
            e for topic, outcomes in verdicts.items()
            for e in evaluations(log_asset_key(topic), outcomes, latest_materializations(
                context.instance, log_asset_key(topic), [partition_key(o.partition) for o in outcomes]))])
        # then each topic's rollup of what is now every partition's current log_health, when it changed
        rollups = changed_rollups(context.instance, cursor, partitions_of)
        record_sensor_results(context.instance, rollups)
        later = [*([f"{left} more changed, recorded next tick (at most {settings.max_observations_per_tick} a tick, "
                    "worst verdicts first)"] if left else []),
                 *([pending_note(pending)] if pending else [])]
        rolled = [f"topic_health recorded for {len(rollups)} topic(s)"] if rollups else []
        if not requests and not events and not recordings and not rollups:
            return dg.SensorResult(skip_reason="; ".join([f"{len(states)} partition(s), none changed", *later,
                                                          *reload_notes, *not_built]), cursor=cursor.dump())
        # a tick that requests no run is "skipped" in the UI; its reason says what it recorded
        done = "; ".join([f"{len(states)} partition(s) checked, {len(recordings)} changed (state and log_health "
                          f"recorded), {sum(len(r.partition_keys or ()) for r in requests)} partition key(s) added "
                          "or removed", *rolled, *later, *reload_notes, *not_built])
        return dg.SensorResult(dynamic_partitions_requests=requests, asset_events=events, cursor=cursor.dump(),
                               skip_reason=done)

    return log_state_sensor


@dataclass(frozen=True)
class _RunSensorSpec:
    name: str
    kind: str  # the run key's first word
    trigger: str
    description: str
    topics: tuple[Topic, ...]
    choose: Callable[[Sequence[PartitionState]], list[PartitionState]]
    token: Callable[[PartitionState], str]
    reason: Callable[[Sequence[PartitionState]], str]
    #: whether a run must clean its partitions even where the engine would not (not ``due``)
    forced: Callable[[Sequence[PartitionState]], bool] = lambda run: False
    operation: str = CLEAN  # the runs' ``operation`` (``cleanup.CLEANUP_CONFIG_SCHEMA``)


def encode_tokens(run: Sequence[PartitionState], tokens: Mapping[TopicPartition, str]) -> str:
    """A run's ``logplat/states`` tag: each partition's token (``<partition>:<token>``)."""
    return ",".join(f"{s.partition}:{tokens[s.tp]}" for s in run)


def _used_tokens(instance: dg.DagsterInstance, sensor_name: str) -> set[tuple[str, int, str]]:
    """(topic, partition, token) of every partition a recent run of the sensor covered that did
    not fail (queued, running, succeeded or canceled): a partition whose token is among them
    already had its run in its current state. A failed run's partitions are judged by
    ``cleaning_failures`` instead (held back, or retried after a backoff)."""
    statuses = [s for s in dg.DagsterRunStatus if s != dg.DagsterRunStatus.FAILURE]
    found = set()
    for record in instance.get_run_records(dg.RunsFilter(tags={SENSOR_NAME_TAG: sensor_name}, statuses=statuses),
                                           limit=RECENT_RUNS):
        tags = record.dagster_run.tags
        for item in filter(None, tags.get(STATES_TAG, "").split(",")):
            key, _, token = item.partition(":")
            if (partition := parse_partition_number(key)) is not None:
                found.add((tags.get(TOPIC_TAG, ""), partition, token))
    return found


def failure_verdicts(instance: dg.DagsterInstance, states: Sequence[PartitionState],
                     settings: PlatformSettings) -> FailureVerdicts:
    """Which of ``states`` a recent failed run (whoever launched it) failed on in their current
    state, and so are held back or retried after a backoff (``cleaning_failures``)."""
    topics = {s.topic for s in states}
    failures = []
    records = instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]), limit=RECENT_RUNS)
    for record in records:
        tags = record.dagster_run.tags
        if tags.get(TOPIC_TAG) in topics:
            ended = record.end_time or record.update_timestamp.timestamp()
            failures += failures_of_run(tags[TOPIC_TAG], tags, STATES_TAG, FAILED_PARTITIONS_TAG, ended)
    return judge_failures(failures, {s.tp: s.state_hash for s in states}, now_s=wall_clock_ms() / 1000,
                          base_s=settings.sensor_interval_s)


def _run_request(spec: _RunSensorSpec, topic: Topic, run: Sequence[PartitionState],
                 tokens: Mapping[TopicPartition, str], attempts: Mapping[TopicPartition, int]) -> dg.RunRequest:
    """One partition: a partitioned run; consecutive partitions: a single-run range (one Spark job).
    A retry after transient failures carries their count in its run key (Dagster launches a
    sensor's run key once)."""
    tags = {TOPIC_TAG: topic.name, TRIGGER_TAG: spec.trigger, STATES_TAG: encode_tokens(run, tokens),
            REASON_TAG: spec.reason(run)[:MAX_REASON]}
    first, last = partition_key(run[0].partition), partition_key(run[-1].partition)
    if first == last:
        tags[PARTITION_TAG] = first
    else:
        tags.update({RANGE_START_TAG: first, RANGE_END_TAG: last})
    return dg.RunRequest(
        job_name=cleanup_job_name(topic),
        partition_key=first if first == last else None,
        run_key=run_key(spec.kind, run, [tokens[s.tp] for s in run])
        + "".join(f"/retry-{s.partition}-{attempts[s.tp]}" for s in run if s.tp in attempts),
        run_config=cleanup_run_config(topic, force_compaction=spec.forced(run), operation=spec.operation),
        tags=tags,
    )


def _build_run_sensor(spec: _RunSensorSpec, jobs: Mapping[str, dg.UnresolvedAssetJobDefinition],
                      settings: PlatformSettings) -> dg.SensorDefinition:
    by_name = {t.name: t for t in spec.topics}

    @platform_sensor(spec.name, spec.description, settings, jobs=[jobs[t.name] for t in spec.topics])
    def _sensor(context: dg.SensorEvaluationContext, log_store: LogStoreResource):
        switch = read_switch(context.instance, settings)
        if switch.paused:  # the tick's reason (its status tag's tooltip), and its logs
            context.log.info(switch.skip_reason())
            return dg.SkipReason(switch.skip_reason())
        unreadable: dict[TopicPartition, str] = {}
        pending: set[TopicPartition] = set()
        states = current_states(log_store, settings, by_name, unreadable, pending)
        existing = _existing_keys(context.instance, by_name)
        keyed = [s for s in states if partition_key(s.partition) in existing.get(s.topic, ())]
        candidates = spec.choose(keyed)
        tokens = {s.tp: spec.token(s) for s in candidates}
        used = _used_tokens(context.instance, spec.name)
        busy = in_flight(context.instance)
        verdicts = failure_verdicts(context.instance, candidates, settings)
        fresh = [s for s in candidates if s.tp not in busy and s.tp not in verdicts.held
                 and (s.topic, s.partition, tokens[s.tp]) not in used]
        chosen = fresh[: settings.max_partitions_per_tick]
        covered = sum(1 for s in candidates if s.tp in busy)
        held = sum(1 for s in candidates if s.tp in verdicts.held and s.tp not in busy)
        held_back = {  # why partitions that need work are not requested now; only the reasons that apply
            "of them have a run queued or running": covered,
            "already ran in their current state": len(candidates) - covered - held - len(fresh),
            f"left for the next tick (at most {settings.max_partitions_per_tick} a tick)": len(fresh) - len(chosen),
            "wait for log_state_sensor to add their keys": len(states) - len(keyed),
        }
        notes = [f"{len(keyed)} partition(s) checked", f"{len(candidates)} need work",
                 *(f"{count} {why}" for why, count in held_back.items() if count)]
        if (failed_note := verdicts.note()) is not None:
            notes.append(failed_note)
        if unreadable:
            notes.append(unreadable_note(unreadable))
        if pending:
            notes.append(pending_note(pending))
        if not chosen:
            return dg.SkipReason("nothing new to request: " + "; ".join(notes))
        runs = contiguous_runs(chosen)
        context.log.info(f"{len(chosen)} partition(s) requested in {len(runs)} run(s): " + "; ".join(notes))
        return dg.SensorResult(run_requests=[_run_request(spec, by_name[run[0].topic], run, tokens, verdicts.attempts)
                                             for run in runs])

    return _sensor


def _compaction_reason(run: Sequence[PartitionState]) -> str:
    if len(run) == 1 and run[0].candidacy is not None:
        c = run[0].candidacy
        if deadline_urgent(run[0]) and not c.need_compaction_now:
            return (f"erasure deadline in {c.deadline.time_left_ms} ms (offset {c.deadline.oldest_offset}, "  # type: ignore[union-attr]
                    f"max.compaction.lag.ms {c.deadline.lag_ms}); {c.why}")  # type: ignore[union-attr]
        return c.why
    ratio = max(s.dirty_ratio or 0.0 for s in run)
    return f"{len(run)} partitions due, dirtiest at {ratio:.3f}"


def _retention_reason(run: Sequence[PartitionState]) -> str:
    segments, size = sum(s.deletable_segments for s in run), sum(s.deletable_bytes for s in run)
    return f"{segments} segment(s), {size} bytes deletable" + (f" in {len(run)} partitions" if len(run) > 1 else "")


def _tiering_reason(run: Sequence[PartitionState]) -> str:
    if len(run) == 1:
        return run[0].tiering.reason()  # type: ignore[union-attr]
    return f"{len(run)} partitions to tier, {sum(s.tiering.tierable_bytes for s in run)} bytes"  # type: ignore[union-attr]


def build_deleted_files_sensor(topics: Sequence[Topic], settings: PlatformSettings) -> dg.SensorDefinition:
    """Removes ``.deleted`` segment files once ``file.delete.delay.ms`` has passed since retention
    or compaction renamed them, as Kafka's scheduler does, so what a run reported as reclaimed
    is freed on disk on time whether or not a later run touches the partition. Each partition
    that freed something gets an observation (files and bytes freed); no run is launched."""
    known = {t.name for t in topics}

    @platform_sensor("deleted_files_sensor", "Removes .deleted segment files once file.delete.delay.ms has passed, "
                     "and records what each partition freed.", settings)
    def deleted_files_sensor(context: dg.SensorEvaluationContext, log_store: LogStoreResource):
        unreadable: dict[str, str] = {}  # one topic that cannot be read does not stop the others' sweep
        with log_store.manager() as manager:
            removed = manager.retention.delete_expired_files(unreadable=unreadable)
        refused = [f"topic {topic} not swept: {why}" for topic, why in sorted(unreadable.items())]
        for note in refused:
            context.log.error(note)
        if not removed:
            return dg.SkipReason("; ".join(["no .deleted file is past its topic's file.delete.delay.ms", *refused]))
        events = [
            dg.AssetObservation(asset_key=log_asset_key(topic), partition=partition_key(partition),
                                metadata=deleted_files_metadata(topic, partition, (size for _, size in files)))
            for (topic, partition), files in removed.items() if topic in known
        ]
        total = sum(size for files in removed.values() for _, size in files)
        done = f"removed {sum(map(len, removed.values()))} .deleted file(s), {size_text(total)}, from {len(removed)} partition(s)"
        # the tick's reason in the UI, not "empty result"
        return dg.SensorResult(asset_events=events, skip_reason="; ".join([done, *refused]))

    return deleted_files_sensor


def build_sensors(catalog: Catalog, jobs: Mapping[str, dg.UnresolvedAssetJobDefinition],
                  settings: PlatformSettings) -> list[dg.SensorDefinition]:
    """The state sensor, the sweeper of ``.deleted`` files, and the run sensors of the topics:
    compaction and retention, and tiering where a remote location is configured
    (``LOGPLAT_REMOTE_STORAGE``) or a topic is tiered."""
    topics = catalog.topics
    sensors = [build_state_sensor(catalog, settings)]
    if topics:
        sensors.append(build_deleted_files_sensor(topics, settings))
        # every topic, not only those compacted when the code location loaded: the states it
        # judges carry the policy on disk, so a topic altered to cleanup.policy=compact is
        # cleaned without a reload (and one altered away from it is left alone)
        sensors.append(_build_run_sensor(_RunSensorSpec(
            "compaction_sensor", "compact", "compaction-sensor",
            "Requests compaction of the partitions whose erasure deadline (max.compaction.lag.ms) is half used or "
            "missed, earliest deadline first, then those whose dirty ratio exceeds min.cleanable.dirty.ratio, dirtiest "
            "first; consecutive partitions of a topic share a run.",
            tuple(topics), due_for_compaction, compaction_token, _compaction_reason, forced_by_deadline,
        ), jobs, settings))
        sensors.append(_build_run_sensor(_RunSensorSpec(
            "retention_sensor", "retention", "retention-sensor",
            "Requests retention for the partitions with deletable segments (retention.ms, retention.bytes, "
            "log start offset), most bytes first; consecutive partitions of a topic share a run.",
            tuple(topics), due_for_retention, retention_token, _retention_reason,
        ), jobs, settings))
    if topics and remote_tier_in_use(t.config for t in topics):
        sensors.append(_build_run_sensor(_RunSensorSpec(
            "tiering_sensor", "tier", "tiering-sensor",
            "Requests tiering of the tiered topics' partitions (remote.storage.enable) with rolled segments past the "
            "remote tier's end or local copies past local.retention.*, judged from the partition's stats and its "
            "remembered remote version (no request to the object store), most bytes first.",
            tuple(topics), due_for_tiering, tiering_token, _tiering_reason, operation=TIER,
        ), jobs, settings))
    return sensors
