"""Sensors and the sweep schedule against real logs and a real Dagster instance, evaluated the way
the daemon evaluates them (partition keys resolved against the instance)."""

from __future__ import annotations

import re
import shutil
import time
import uuid

import dagster as dg
import pytest
from dagster._core.remote_origin import (  # not re-exported by dagster
    InProcessCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin  # not re-exported by dagster
from dagster._grpc.impl import get_external_schedule_execution, get_external_sensor_execution

from platform_assets.defs.errors import PlatformError
from platform_assets.defs.partitions import partitions_def_name
from platform_assets.defs.resources import build_resources
from platform_assets.logic.metadata import GLOSSARY
from platform_assets.tools.workload import produce
from storage_engine.cleaner import LogCleaner
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from tests.helpers.engine import append_each
from tests.helpers.platform import (
    COMPACT_DELETE,
    COMPACTED,
    DELETE,
    StateTick,
    definitions_for,
    sensor_results,
    state_tick,
    tick,
)

NOW = int(time.time() * 1000)
#: 200 records of 7 keys, about 12 KB: enough to roll a 4 KB segment a few times.
MORE_RECORDS = [ProducerRecord(f"orders-k{i % 7}".encode(), b"v" * 40, NOW + i) for i in range(200)]


@pytest.fixture
def logs(tmp_path):
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        produce(manager, [COMPACTED, COMPACT_DELETE, DELETE], now_ms=NOW)
    return root


def discover(defs, settings, instance, cursor=None) -> StateTick:
    """One state-sensor tick with its partition requests applied, as the daemon would."""
    return state_tick(defs, settings, instance, cursor)


def observations(data) -> list[dg.AssetObservation]:
    return [e for e in data.asset_events or () if isinstance(e, dg.AssetObservation)]


def health_results(data: StateTick) -> dict[tuple[str, str], dg.AssetCheckEvaluation]:
    """The tick's ``log_health`` results by (topic, partition key)."""
    return data.health


def requested(data) -> dict[tuple[str, str], dg.RunRequest]:
    """Each partition a tick asked for, with its request (a range request covers several)."""
    out = {}
    for r in data.run_requests:
        if r.partition_key is not None:
            keys = [r.partition_key]
        else:
            first, last = (int(r.tags[f"dagster/asset_partition_range_{e}"]) for e in ("start", "end"))
            keys = [str(p) for p in range(first, last + 1)]
        out.update({(r.tags["logplat/topic"], k): r for k in keys})
    return out


def test_due_partitions_get_runs_and_clean_ones_do_not(logs, instance):
    defs, settings = definitions_for(logs)
    discover(defs, settings, instance)
    runs = requested(tick(defs, settings, instance, "compaction_sensor"))
    # orders-1 holds only an active segment: nothing is cleanable, whatever its dirty ratio
    assert set(runs) == {("orders", "0"), ("orders", "2"), ("profiles.v1", "0"), ("profiles.v1", "1")}
    # consecutive due partitions of a topic share one single-run range; 0 and 2 are not consecutive
    profiles = runs[("profiles.v1", "0")]
    assert profiles is runs[("profiles.v1", "1")] and profiles.partition_key is None
    assert runs[("orders", "0")] is not runs[("orders", "2")]
    run = runs[("orders", "0")]
    assert run.job_name == "cleanup__orders"
    assert run.tags["logplat/trigger"] == "compaction-sensor"
    assert run.tags["dagster/partition"] == "0" and run.tags["logplat/partition"] == "0"
    assert "dirty ratio" in run.tags["logplat/reason"]
    assert run.run_config["ops"]["logs__orders"]["config"]["force_compaction"] is False
    assert run.tags["logplat/states"].startswith("0:") and run.run_key.startswith("compact/orders/0/")
    assert profiles.run_key.startswith("compact/profiles.v1/0-1/")

    retention = requested(tick(defs, settings, instance, "retention_sensor"))
    # clicks-0 has expired segments; clicks-1 too (same workload) -- but profiles.v1 partitions,
    # due for compaction, are left to the compaction run, which applies retention after it
    assert ("clicks", "0") in retention
    assert not any(topic == "profiles.v1" for topic, _ in retention)
    assert "deletable" in retention[("clicks", "0")].tags["logplat/reason"]


def store(instance: dg.DagsterInstance, data) -> None:
    """A tick's asset events written to the instance, as the daemon writes them."""
    for event in data.asset_events or ():
        instance.report_runless_asset_event(event)


def test_every_log_health_verdict_stays_readable_and_the_latest_is_the_newest(tmp_path, instance):
    """Dagster 1.13 stores a run-less check result under a unique index on (asset, check, run id
    "", partition), so a partition's second one failed the tick; the sensor used to delete the
    previous one first, which lost the history. Three successive verdicts of one partition
    (passed, WARN, ERROR, each after a config change) are now all in the instance: as results
    in the event log, and as the verdict of the observation of each change; the check's latest
    result is the newest, and the ticks do not fail."""
    root = _users_log(tmp_path, written_ms=NOW, ratio="1", lag_ms=30 * 24 * 3_600_000)
    defs, settings = definitions_for(root)
    cursor = None
    for configs in ({}, {"min.cleanable.dirty.ratio": "0.01"}, {"max.compaction.lag.ms": "1"}):
        if configs:
            with LogManager([root]) as manager:
                manager.admin.alter_topic("users", configs)
        data = discover(defs, settings, instance, cursor)
        store(instance, data)
        cursor = data.cursor
    results = [e for e in sensor_results(instance) if e.partition == "0"]
    assert [(e.passed, e.severity) for e in results] == [
        (True, dg.AssetCheckSeverity.WARN), (False, dg.AssetCheckSeverity.WARN), (False, dg.AssetCheckSeverity.ERROR)]
    verdicts = [r.asset_observation.metadata["log_health"].value for r in reversed(instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(["logs", "users"]), asset_partitions=["0"]), limit=10).records)]
    assert [v.split(":")[0] for v in verdicts] == ["passed", "warn", "error"]
    assert "min.cleanable.dirty.ratio" in verdicts[1] and "max.compaction.lag.ms" in verdicts[2]
    key = dg.AssetCheckKey(dg.AssetKey(["logs", "users"]), "log_health")
    (latest,) = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)
    assert latest.partition == "0" and latest.event.dagster_event.event_specific_data == results[-1]


def test_a_partition_that_cannot_be_read_fails_its_health_and_the_others_still_get_runs(logs, instance):
    """One misnamed segment file failed every sensor tick, so no partition anywhere was cleaned.
    Now that partition's log_health fails saying why (once per reason), its key stays, no run
    covers it, and the other partitions are observed and requested as before."""
    defs, settings = definitions_for(logs)
    discover(defs, settings, instance)
    (logs / "orders-1" / "5.log").write_bytes(b"")  # the engine refuses to open orders-1
    data = discover(defs, settings, instance)
    health = health_results(data)
    failed = health[("orders", "1")]
    assert not failed.passed and failed.severity == dg.AssetCheckSeverity.ERROR
    assert f"cannot be read: {logs / 'orders-1' / '5.log'}: not a segment file name" in failed.description
    assert "1" in instance.get_dynamic_partitions(partitions_def_name("orders"))  # its key stays
    assert ("orders", "1") not in health_results(discover(defs, settings, instance, data.cursor))  # said once
    runs = requested(tick(defs, settings, instance, "compaction_sensor"))
    assert set(runs) == {("orders", "0"), ("orders", "2"), ("profiles.v1", "0"), ("profiles.v1", "1")}
    assert runs[("orders", "0")] is not runs[("orders", "2")]  # no range over orders-1
    (logs / "orders-1" / "5.log").unlink()
    assert health_results(discover(defs, settings, instance, data.cursor))[("orders", "1")].passed


def test_a_cleaned_partition_is_not_due_and_run_keys_follow_the_log(logs, instance):
    defs, settings = definitions_for(logs)
    discover(defs, settings, instance)

    def key() -> str:
        return requested(tick(defs, settings, instance, "compaction_sensor"))[("orders", "0")].run_key

    with LogManager([logs]) as manager:
        manager.get_log("orders", 0).roll()
    rolled = key()
    assert key() == rolled  # same state, same key: Dagster launches it once

    with LogManager([logs]) as manager:
        append_each(manager.get_log("orders", 0), MORE_RECORDS[:1])
    assert key() == rolled  # an append to the active segment leaves nothing new to clean

    with LogManager([logs]) as manager:
        append_each(manager.get_log("orders", 0), MORE_RECORDS)  # rolls: more to clean, a new key
    assert key() != rolled

    with LogManager([logs]) as manager:
        LogCleaner(manager).compact("orders", 0, now_ms=NOW)
    after = requested(tick(defs, settings, instance, "compaction_sensor"))
    assert ("orders", "0") not in after and ("orders", "2") in after


def test_partitions_with_a_run_in_flight_or_an_used_key_are_skipped(logs, instance):
    defs, settings = definitions_for(logs)
    discover(defs, settings, instance)
    runs = requested(tick(defs, settings, instance, "compaction_sensor"))
    instance.add_run(dg.DagsterRun(job_name="cleanup__orders", run_id=str(uuid.uuid4()),
                                   status=dg.DagsterRunStatus.STARTED,
                                   tags={"logplat/topic": "orders", "dagster/partition": "0"}))
    instance.add_run(dg.DagsterRun(job_name="cleanup__orders", run_id=str(uuid.uuid4()),
                                   status=dg.DagsterRunStatus.FAILURE,
                                   tags={"dagster/sensor_name": "compaction_sensor", "logplat/topic": "orders",
                                         "logplat/states": runs[("orders", "2")].tags["logplat/states"]}))
    now = requested(tick(defs, settings, instance, "compaction_sensor"))
    assert ("orders", "0") not in now and ("orders", "2") not in now and ("profiles.v1", "0") in now


def test_runs_per_tick_are_bounded(logs, instance):
    defs, settings = definitions_for(logs, max_partitions_per_tick=1)
    discover(defs, settings, instance)
    assert len(requested(tick(defs, settings, instance, "compaction_sensor"))) == 1


def test_partitions_wait_for_their_keys(logs, instance):
    defs, settings = definitions_for(logs)
    data = tick(defs, settings, instance, "compaction_sensor")
    assert not data.run_requests
    assert "wait for log_state_sensor" in data.skip_message
    # only the reasons that apply: no "0 of them have a run queued or running"
    assert not any(note.startswith("0 ") for note in data.skip_message.split("; ")[2:]), data.skip_message


def test_new_partitions_are_added_in_numeric_order_without_a_reload(logs, instance):
    defs, settings = definitions_for(logs)
    discover(defs, settings, instance)
    assert instance.get_dynamic_partitions("partitions__orders") == ["0", "1", "2"]
    assert instance.get_dynamic_partitions("partitions__profiles.v1") == ["0", "1"]
    with LogManager([logs]) as manager:
        manager.admin.add_partitions("orders", 11)  # logctl topic alter orders --partitions 11
    discover(defs, settings, instance)
    assert instance.get_dynamic_partitions("partitions__orders") == [str(p) for p in range(11)]  # not "10" before "2"
    # the same definitions (no reload) now resolve run requests for a new partition
    with LogManager([logs]) as manager:
        log = manager.get_log("orders", 4)
        append_each(log, MORE_RECORDS)
        log.roll()
    assert ("orders", "4") in requested(tick(defs, settings, instance, "compaction_sensor"))


def test_a_partition_found_below_a_newer_one_is_put_back_in_order(logs, instance):
    """A topic without metadata (partition directories copied from a broker) can gain partition
    10 before partition 4: 10 moves behind 4, over two ticks."""
    for p in range(3):
        shutil.copytree(logs / "clicks-0", logs / f"copied-{p}")
    defs, settings = definitions_for(logs)
    cursor = discover(defs, settings, instance).cursor
    assert instance.get_dynamic_partitions("partitions__copied") == ["0", "1", "2"]
    shutil.copytree(logs / "clicks-0", logs / "copied-10")
    cursor = discover(defs, settings, instance, cursor).cursor
    assert instance.get_dynamic_partitions("partitions__copied") == ["0", "1", "2", "10"]
    shutil.copytree(logs / "clicks-0", logs / "copied-4")
    cursor = discover(defs, settings, instance, cursor).cursor
    assert instance.get_dynamic_partitions("partitions__copied") == ["0", "1", "2", "4"]
    discover(defs, settings, instance, cursor)
    assert instance.get_dynamic_partitions("partitions__copied") == ["0", "1", "2", "4", "10"]


def test_topic_health_rolls_up_a_bounded_number_of_topics_a_tick(logs, instance, monkeypatch):
    """A first tick over 1,000 topics rolled up every one of them (14.7 s against the tick's 5 s);
    the topics a tick has no room for wait in the cursor and come next."""
    monkeypatch.setattr("platform_assets.defs.topic_health.MAX_ROLLUPS_PER_TICK", 2)
    defs, settings = definitions_for(logs)
    first = discover(defs, settings, instance)
    assert first.skip_message.endswith("topic_health recorded for 2 topic(s)")
    second = discover(defs, settings, instance, first.cursor)
    assert second.skip_message.endswith("topic_health recorded for 1 topic(s)")
    rolled = {e.asset_key.path[1] for e in sensor_results(instance) if e.check_name == "topic_health"}
    assert rolled == {"orders", "profiles.v1", "clicks"}


def test_observations_only_when_a_partition_changed(logs, instance):
    defs, settings = definitions_for(logs)
    first = discover(defs, settings, instance)
    observed = {(e.asset_key.path[1], e.partition): e for e in observations(first)}
    assert len(observed) == 7  # every partition, once
    # the tick requests no run, so the UI shows it skipped: its reason says what it recorded
    assert first.skip_message == "7 partition(s) checked, 7 changed (state and log_health recorded), " \
                                 "7 partition key(s) added or removed; topic_health recorded for 3 topic(s)"
    orders0 = observed[("orders", "0")].metadata
    assert orders0["dirty_ratio"].value == 1.0 and orders0["compaction_due"].value is True
    assert orders0["segments"].value > 3 and orders0["size_mb"].value > 0
    assert orders0["cleaner_checkpoint"].value == 0  # never cleaned: the log start offset, as Kafka reads it
    # named for the catalog: its topic and partition (text, not plotted), its log dir as dagster/uri
    assert (orders0["topic"].value, orders0["partition"].value) == ("orders", "0")
    assert orders0["dagster/uri"].value == (logs / "orders-0").resolve().as_uri()
    assert orders0["offset_span"].value == 400  # never cleaned: every offset is a record
    assert all(set(e.metadata) <= set(GLOSSARY) for e in observed.values()), \
        {k for e in observed.values() for k in e.metadata} - set(GLOSSARY)
    health = health_results(first)[("orders", "0")].metadata
    assert (health["topic"].value, health["partition"].value) == ("orders", "0")

    second = discover(defs, settings, instance, first.cursor)
    assert not second.asset_events and "none changed" in second.skip_message

    with LogManager([logs]) as manager:
        LogCleaner(manager).compact("orders", 0, now_ms=NOW)
    third = discover(defs, settings, instance, second.cursor)
    assert [(e.asset_key.path[1], e.partition) for e in observations(third)] == [("orders", "0")]
    assert observations(third)[0].metadata["cleaner_checkpoint"].value > 0


def test_observations_per_tick_are_bounded_and_resume(logs, instance):
    defs, settings = definitions_for(logs, max_observations_per_tick=4)
    first = discover(defs, settings, instance)
    second = discover(defs, settings, instance, first.cursor)
    third = discover(defs, settings, instance, second.cursor)
    assert [len(observations(d)) for d in (first, second, third)] == [4, 3, 0]
    assert [len(health_results(d)) for d in (first, second, third)] == [4, 3, 0]


def test_a_tick_records_the_worst_verdicts_first(logs, instance):
    defs, settings = definitions_for(logs, max_observations_per_tick=5)
    (logs / "profiles.v1-1" / "5.log").write_bytes(b"")  # the engine refuses to open profiles.v1-1
    first = discover(defs, settings, instance)
    verdicts = {k: ("unreadable" if e.metadata["status"].value == "unreadable" else e.severity.value if not e.passed
                    else "passed") for k, e in health_results(first).items()}
    # the partition that cannot be read (last in topic order), then WARN (cleaning due) in topic
    # order, before orders-1, which passed; profiles.v1-0 (WARN) and orders-1 are left for the next tick
    assert verdicts == {("profiles.v1", "1"): "unreadable", ("clicks", "0"): "WARN", ("clicks", "1"): "WARN",
                        ("orders", "0"): "WARN", ("orders", "2"): "WARN"}
    assert "2 more changed, recorded next tick (at most 5 a tick, worst verdicts first)" in first.skip_message
    second = health_results(discover(defs, settings, instance, first.cursor))
    assert {k: e.passed for k, e in second.items()} == {("profiles.v1", "0"): False, ("orders", "1"): True}


def test_partitions_a_tick_had_no_time_to_read_keep_their_keys_and_cursor_entries(logs, instance):
    from platform_assets.logic.observation_cursor import ObservationCursor
    from platform_assets.logic.state_cache import STATE_CACHE

    defs, settings = definitions_for(logs)
    first = discover(defs, settings, instance)
    keys = {t: instance.get_dynamic_partitions(partitions_def_name(t)) for t in ("orders", "profiles.v1", "clicks")}
    STATE_CACHE.clear()  # a code server started again: every state is a cold read
    with LogManager([logs]) as manager:  # a change in a partition the next tick has no time to read
        append_each(manager.get_log("orders", 1), MORE_RECORDS)  # rolls segments: a new state
    defs, settings = definitions_for(logs, state_read_budget_ms=0)  # one state computed a read
    second = discover(defs, settings, instance, first.cursor)
    assert not second.dynamic_partitions_requests and not second.asset_events  # nothing deleted, nothing recorded
    assert {t: instance.get_dynamic_partitions(partitions_def_name(t)) for t in keys} == keys
    # every digest kept (the read of check results moved on past the first tick's topic_health)
    assert ObservationCursor.parse(second.cursor).seen == ObservationCursor.parse(first.cursor).seen
    assert ObservationCursor.parse(second.cursor).rollups == ObservationCursor.parse(first.cursor).rollups
    assert second.skip_message == "1 partition(s), none changed; 6 partition(s) not read yet, next tick"
    compaction = tick(defs, settings, instance, "compaction_sensor")
    assert "partition(s) not read yet, next tick" in compaction.skip_message
    third = discover(*definitions_for(logs), instance, second.cursor)  # the budget back: every state read
    assert [(e.asset_key.path[1], e.partition) for e in observations(third)] == [("orders", "1")]


def test_the_sweep_requests_one_range_run_over_the_partitions_with_work(logs, instance):
    defs, settings = definitions_for(logs)
    discover(defs, settings, instance)
    schedule = defs.get_repository_def().get_schedule_def("sweep__clicks")
    assert schedule.cron_schedule == "*/5 * * * *"
    context = dg.build_schedule_context(instance=instance, resources=build_resources(settings))
    request = schedule.evaluate_tick(context).run_requests[0]
    assert request.tags["dagster/asset_partition_range_start"] == "0"
    assert request.tags["dagster/asset_partition_range_end"] == "1"
    assert request.tags["logplat/trigger"] == "sweep"
    assert request.run_config["ops"]["logs__clicks"]["config"]["force_compaction"] is False

    with LogManager([logs]) as manager:
        LogCleaner(manager).compact("orders", 0, now_ms=NOW)
        LogCleaner(manager).compact("orders", 2, now_ms=NOW)
    quiet = defs.get_repository_def().get_schedule_def("sweep__orders").evaluate_tick(context)
    assert not quiet.run_requests and "nothing to sweep" in quiet.skip_message


def test_the_sweep_runs_no_range_over_a_partition_that_cannot_be_read(logs, instance):
    """orders-0 and orders-2 need work; one range over 0..2 would make the run open orders-1,
    which the engine refuses, and fail for all three."""
    defs, settings = definitions_for(logs)
    discover(defs, settings, instance)
    (logs / "orders-1" / "5.log").write_bytes(b"")
    context = dg.build_schedule_context(instance=instance, resources=build_resources(settings))
    requests = defs.get_repository_def().get_schedule_def("sweep__orders").evaluate_tick(context).run_requests
    assert [(r.tags["dagster/asset_partition_range_start"], r.tags["dagster/asset_partition_range_end"])
            for r in requests] == [("0", "0"), ("2", "2")]



def test_the_sweep_asks_for_no_partition_a_run_covers_and_says_what_it_waits_for(logs, instance):
    """The sweep asked again for partitions a sensor's run was about to clean (two runs of one
    partition, the second cleaning nothing), and on a new instance said "nothing to sweep"
    while every partition needed work, its keys not yet added by log_state_sensor."""
    defs, settings = definitions_for(logs)
    sweep = defs.get_repository_def().get_schedule_def("sweep__orders")

    def evaluate():  # the context closed again: it does not stay Dagster's "current" instance
        with dg.build_schedule_context(instance=instance, resources=build_resources(settings)) as context:
            return sweep.evaluate_tick(context)

    discover(defs, settings, instance)
    instance.add_run(dg.DagsterRun(job_name="cleanup__orders", run_id=str(uuid.uuid4()),
                                   status=dg.DagsterRunStatus.STARTED, asset_selection=frozenset(
                                       {dg.AssetKey(["logs", "orders"])}),
                                   tags={"logplat/topic": "orders", "dagster/partition": "0"}))
    (request,) = evaluate().run_requests  # orders-2 alone, no range over orders-0
    assert (request.tags["dagster/asset_partition_range_start"], request.tags["dagster/asset_partition_range_end"]) \
        == ("2", "2")
    instance.add_run(dg.DagsterRun(job_name="cleanup__orders", run_id=str(uuid.uuid4()),
                                   status=dg.DagsterRunStatus.STARTING, asset_selection=frozenset(
                                       {dg.AssetKey(["logs", "orders"])}),
                                   tags={"logplat/topic": "orders", "dagster/partition": "2"}))
    with LogManager([logs]) as manager:
        manager.admin.add_partitions("orders", 4)  # a partition the state sensor has not seen yet
    quiet = evaluate()
    assert not quiet.run_requests and "2 partition(s) that need work have a run queued or running" in quiet.skip_message
    assert "1 partition(s) wait for log_state_sensor to add their keys" in quiet.skip_message


def _failed_run(instance, request, failed: str | None = None, trigger: str = "sweep") -> None:
    """A failed run of ``request``'s partitions, as the op leaves it (``failed``: its failed-partitions tag)."""
    tags = {"logplat/topic": "orders", "logplat/trigger": trigger, "logplat/states": request.tags["logplat/states"]}
    instance.add_run(dg.DagsterRun(job_name="cleanup__orders", run_id=str(uuid.uuid4()),
                                   status=dg.DagsterRunStatus.FAILURE,
                                   tags={**tags, **({"logplat/failed_partitions": failed} if failed else {})}))


def _spans(requests) -> list[tuple[str, str]]:
    return [(r.tags["dagster/asset_partition_range_start"], r.tags["dagster/asset_partition_range_end"])
            for r in requests]


def test_the_sweep_leaves_a_partition_whose_cleaning_failed_in_its_current_state(logs, instance):
    """A partition whose cleaning fails on its data (a corrupt batch) was swept again every
    interval, each run failing the same way. A data error reported by a failed run of the topic
    (a sweep's or a sensor's) now holds the partition back until its state changes, saying so;
    the others are swept."""
    defs, settings = definitions_for(logs)
    discover(defs, settings, instance)
    sweep = defs.get_repository_def().get_schedule_def("sweep__orders")
    context = dg.build_schedule_context(instance=instance, resources=build_resources(settings))
    (first,) = sweep.evaluate_tick(context).run_requests
    tokens = dict(item.split(":") for item in first.tags["logplat/states"].split(","))
    assert set(tokens) == {"0", "2"}  # the partitions with work (orders-1 has none)
    assert "2 partition(s) due for compaction" in first.tags["logplat/reason"]
    _failed_run(instance, first, "0:CorruptRecordError,2:CorruptRecordError")
    quiet = sweep.evaluate_tick(context)
    assert not quiet.run_requests
    assert "2 partition(s) whose cleaning failed in their current state are held back" in quiet.skip_message
    assert "orders-0 (CorruptRecordError: permanent for this state" in quiet.skip_message
    with LogManager([logs]) as manager:  # orders-0 changes: swept again, orders-2 still held
        append_each(manager.get_log("orders", 0), MORE_RECORDS)
    assert _spans(sweep.evaluate_tick(context).run_requests) == [("0", "0")]


def test_a_transient_failure_is_retried_after_a_backoff_that_doubles(logs, instance):
    """A run that failed without naming its partitions (its worker killed, Spark gone) or on an
    I/O error is retried, after the sensor interval, then twice that; a data error is not; a
    config change is a new state, which clears it. (Dagster keeps a run's update time to the
    second, so the waits below leave a second of slack.)"""
    defs, settings = definitions_for(logs, sensor_interval_s=2)
    discover(defs, settings, instance)
    sweep = defs.get_repository_def().get_schedule_def("sweep__orders")
    context = dg.build_schedule_context(instance=instance, resources=build_resources(settings))
    (first,) = sweep.evaluate_tick(context).run_requests
    _failed_run(instance, first)  # the worker died: every partition of the run, transient
    held = sweep.evaluate_tick(context)
    assert not held.run_requests and "orders-0 (RunFailed, 1 failure(s): retry after" in held.skip_message
    time.sleep(2.1)
    (retry,) = sweep.evaluate_tick(context).run_requests
    assert "retrying 0 (after 1 failure(s)), 2 (after 1 failure(s))" in retry.tags["logplat/reason"]
    _failed_run(instance, retry, "0:OSError")  # orders-0 failed on I/O again; orders-2 was cleaned:
    with LogManager([logs]) as manager:
        LogCleaner(manager).compact("orders", 2, now_ms=NOW)
    assert "orders-0 (OSError, 2 failure(s)" in sweep.evaluate_tick(context).skip_message  # for 4 s
    time.sleep(4.1)
    assert _spans(sweep.evaluate_tick(context).run_requests) == [("0", "0")]
    _failed_run(instance, retry, "0:CorruptRecordError")
    assert "permanent for this state" in sweep.evaluate_tick(context).skip_message
    with LogManager([logs]) as manager:
        manager.admin.alter_topic("orders", {"min.cleanable.dirty.ratio": "0.1"})
    assert ("0", "0") in _spans(sweep.evaluate_tick(context).run_requests)


def test_the_run_sensors_hold_back_failed_partitions_and_say_why(logs, instance):
    """The compaction sensor relaunched a cleaning that had failed in the same state when
    another launcher's run had failed on it; now it holds the partition back like the sweep,
    naming it in the tick's reason, and asks for the others."""
    defs, settings = definitions_for(logs)
    discover(defs, settings, instance)
    runs = requested(tick(defs, settings, instance, "compaction_sensor"))
    _failed_run(instance, runs[("orders", "0")], "0:CorruptRecordError", trigger="backfill")
    assert ("orders", "0") not in requested(tick(defs, settings, instance, "compaction_sensor"))
    instance.add_run(dg.DagsterRun(job_name="cleanup__orders", run_id=str(uuid.uuid4()),
                                   status=dg.DagsterRunStatus.FAILURE, tags={
                                       "logplat/topic": "orders", "dagster/sensor_name": "compaction_sensor",
                                       "logplat/states": runs[("orders", "2")].tags["logplat/states"]}))
    # orders-2's own sensor run failed on no partition (transient): retried once its backoff has passed
    data = tick(defs, settings, instance, "compaction_sensor")
    assert not {("orders", "0"), ("orders", "2")} & set(requested(data))
    with LogManager([logs]) as manager:  # the other topics cleaned: the tick requests nothing and says why
        for topic in ("profiles.v1",):
            for p in (0, 1):
                LogCleaner(manager).compact(topic, p, now_ms=NOW)
    quiet = tick(defs, settings, instance, "compaction_sensor")
    assert "orders-0 (CorruptRecordError: permanent for this state" in quiet.skip_message
    assert "orders-2 (RunFailed, 1 failure(s): retry after" in quiet.skip_message


def test_a_held_partitions_verdict_and_report_row_say_its_cleaning_failed(logs, instance):
    """Only the failed run's own log_health said the cleaning failed: the state sensor's next
    verdict of that partition (a deadline passing, or here a cursor reset) said "cleaning due"
    and the report listed it WARN, though no run would ever be asked for it in that state."""
    defs, settings = definitions_for(logs)
    discover(defs, settings, instance)
    runs = requested(tick(defs, settings, instance, "compaction_sensor"))
    _failed_run(instance, runs[("orders", "0")], "0:CorruptRecordError", trigger="compaction-sensor")
    data = discover(defs, settings, instance)  # no cursor: every partition's verdict recorded again
    held = health_results(data)[("orders", "0")]
    assert not held.passed and held.severity == dg.AssetCheckSeverity.ERROR
    assert held.description.startswith("partition 0: last cleaning failed: orders-0 (CorruptRecordError: permanent")
    assert health_results(data)[("orders", "2")].severity == dg.AssetCheckSeverity.WARN  # not held: due
    (report,) = [e for e in data.asset_events if isinstance(e, dg.AssetMaterialization)]
    assert "| orders | 0 | ERROR | last cleaning failed: orders-0 (CorruptRecordError" in report.metadata["report"].value


def test_a_partition_its_metadata_counts_without_a_directory_gets_its_reason_in_log_health(logs, instance):
    """A topic whose create was killed before its partition directories (or one whose directory
    was removed by hand) was told "gone from the log dirs (reload the code location)", which no
    reload helps, and its partitions had no log_health at all. Each missing partition now gets
    an error naming the missing directory, as a reader's open says."""
    with LogManager([logs]) as manager:
        manager.admin.create_topic("half", 2)
    for p in range(2):
        shutil.rmtree(logs / f"half-{p}")
    shutil.rmtree(logs / "clicks-1")
    defs, settings = definitions_for(logs)
    data = discover(defs, settings, instance)
    assert "gone from the log dirs" not in (data.skip_message or "")
    health = health_results(data)
    for tp in (("half", "0"), ("half", "1"), ("clicks", "1")):
        assert not health[tp].passed and health[tp].severity == dg.AssetCheckSeverity.ERROR
        assert f"The directory {tp[0]}-{tp[1]} of partition {tp[1]} of topic {tp[0]} is missing" in health[tp].description
    assert health[("clicks", "0")].description.startswith("partition 0: ")


def test_log_health_says_which_partitions_need_cleaning_and_why_once_per_change(logs, instance):
    defs, settings = definitions_for(logs)
    first = health_results(discover(defs, settings, instance))
    assert len(first) == 7  # every partition
    orders0 = first[("orders", "0")]
    assert not orders0.passed and orders0.severity == dg.AssetCheckSeverity.WARN
    assert "dirty ratio 1.000 > min.cleanable.dirty.ratio" in orders0.description
    assert orders0.metadata["status"].value == "warn"
    clicks = [e for (t, _), e in first.items() if t == "clicks"]
    assert any("retention:" in e.description and "by retention." in e.description for e in clicks), \
        [e.description for e in clicks]
    with LogManager([logs]) as manager:
        LogCleaner(manager).compact("orders", 0, now_ms=NOW)
    data = discover(defs, settings, instance)
    second = health_results(discover(defs, settings, instance, data.cursor))
    assert not second  # nothing changed: nothing recorded again
    after = health_results(data)[("orders", "0")]
    assert after.passed and "nothing due" in after.description


def _users_log(tmp_path, *, written_ms: int, ratio: str, lag_ms: int, partitions: int = 1):
    """A compacted topic ``users`` whose partition 0 holds 120 records of 50 keys written from
    ``written_ms``, in rolled segments, under ``min.cleanable.dirty.ratio`` and
    ``max.compaction.lag.ms``."""
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        manager.admin.create_topic("users", partitions, {"cleanup.policy": "compact", "segment.bytes": "2000",
                                          "min.cleanable.dirty.ratio": ratio, "max.compaction.lag.ms": str(lag_ms)})
        append_each(manager.get_log("users", 0),
                    [ProducerRecord(f"u{i % 50}".encode(), b"x" * 30, written_ms + i) for i in range(120)])
    return root


def test_log_health_is_an_error_when_max_compaction_lag_is_overdue(tmp_path, instance):
    """An erasure deadline at risk: dirty records older than max.compaction.lag.ms, although the
    dirty ratio is below min.cleanable.dirty.ratio."""
    root = _users_log(tmp_path, written_ms=NOW - 3_600_000, ratio="0.99", lag_ms=60_000)
    defs, settings = definitions_for(root)
    result = health_results(discover(defs, settings, instance))[("users", "0")]
    assert not result.passed and result.severity == dg.AssetCheckSeverity.ERROR
    assert result.description.startswith("partition 0: erasure deadline missed: max.compaction.lag.ms: NOT ERASED: "
                                         "70 superseded record(s) still on disk past the bound; the oldest at offset "
                                         "0, superseded by offset 50"), result.description
    assert "the cleaner is behind max.compaction.lag.ms" in result.description


def test_the_sweep_forces_a_run_its_erasure_deadline_alone_asks_for(tmp_path, instance):
    """Two thirds of max.compaction.lag.ms used, the dirty ratio not above min.cleanable.dirty.ratio: the
    engine would skip the partition (a ratio never exceeds 1), so an unforced sweep would clean
    nothing, tick after tick."""
    now = int(time.time() * 1000)
    # partition 0: two thirds of the lag used, not yet missed; 1: nothing to do; 2: segments
    # below its log start offset (retention's work), written just now
    root = _users_log(tmp_path, written_ms=now - 400_000, ratio="1", lag_ms=600_000, partitions=3)
    with LogManager([root]) as manager:
        log = manager.get_log("users", 2)
        append_each(log, [ProducerRecord(f"u{i % 50}".encode(), b"x" * 30, now + i) for i in range(120)])
        log.delete_records(log.segments[2].base_offset)
    defs, settings = definitions_for(root)
    discover(defs, settings, instance)
    context = dg.build_schedule_context(instance=instance, resources=build_resources(settings))
    requests = defs.get_repository_def().get_schedule_def("sweep__users").evaluate_tick(context).run_requests
    # a forced run cleans its whole range: the partition between gets no run, 2 no forcing
    assert [(r.tags["dagster/asset_partition_range_start"], r.tags["dagster/asset_partition_range_end"],
             r.run_config["ops"]["logs__users"]["config"]["force_compaction"]) for r in requests] == [
        ("0", "0", True), ("2", "2", False)]


def test_log_health_can_be_executed_from_the_ui(logs, instance):
    """The check on its own (the UI's "Execute" button; Dagster runs a check selected without its
    asset unpartitioned) records every partition's verdict, as the sensor would."""
    defs, settings = definitions_for(logs)
    discover(defs, settings, instance)
    key = dg.AssetCheckKey(dg.AssetKey(["logs", "orders"]), "log_health")
    asset = next(a for a in defs.assets if a.key == key.asset_key)
    checks = next(c for c in defs.asset_checks if key in c.check_keys)
    result = dg.materialize([asset, checks], selection=dg.AssetSelection.checks(key), instance=instance,
                            resources=build_resources(settings))
    by_partition = {e.partition: e for e in result.get_asset_check_evaluations() if e.partition is not None}
    assert set(by_partition) == {"0", "1", "2"}
    assert not by_partition["0"].passed and "min.cleanable.dirty.ratio" in by_partition["0"].description


def test_a_key_typed_into_the_ui_that_names_no_partition_is_removed_by_the_next_tick(logs, instance):
    defs, settings = definitions_for(logs)
    discover(defs, settings, instance)
    name = partitions_def_name("orders")
    instance.add_dynamic_partitions(name, ["99", "typo"])  # the UI's "Add partition"
    discover(defs, settings, instance)
    assert instance.get_dynamic_partitions(name) == ["0", "1", "2"]


def test_deleted_files_are_removed_once_their_delay_has_passed_without_any_run(tmp_path, instance):
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        manager.admin.create_topic("events", 1, {"segment.bytes": "1000", "retention.bytes": "1500",
                                                 "file.delete.delay.ms": "1500"})
        append_each(manager.get_log("events", 0), MORE_RECORDS)
        manager.retention.apply(manager.retention.plans("events", now_ms=NOW), now_ms=NOW)
    part = root / "events-0"
    pending = {p.name: p.stat().st_size for p in part.iterdir() if p.name.endswith(".deleted")}
    assert pending
    defs, settings = definitions_for(root)
    discover(defs, settings, instance)
    early = tick(defs, settings, instance, "deleted_files_sensor")
    assert "past its topic's file.delete.delay.ms" in early.skip_message
    assert sorted(p.name for p in part.iterdir() if p.name.endswith(".deleted")) == sorted(pending)
    time.sleep(1.6)
    data = tick(defs, settings, instance, "deleted_files_sensor")
    assert not [p for p in part.iterdir() if p.name.endswith(".deleted")]
    [observation] = data.asset_events
    assert data.skip_message.startswith(f"removed {len(pending)} .deleted file(s), ")
    assert data.skip_message.endswith(", from 1 partition(s)")
    assert observation.partition == "0" and observation.metadata["partition"].value == "0"
    assert observation.metadata["topic"].value == "events" and set(observation.metadata) <= set(GLOSSARY)
    assert observation.metadata["deleted_files_removed"].value == len(pending)
    assert observation.metadata["mb_freed"].value == round(sum(pending.values()) / 1e6, 6)


def test_a_topic_created_or_deleted_since_the_code_location_loaded_shows_in_the_ticks_reason(logs, instance):
    """A deleted topic kept its last (healthy) state in the UI, and a new one was named only in
    the tick's log: the reason the UI shows says to reload the code location."""
    defs, settings = definitions_for(logs)
    first = discover(defs, settings, instance)
    assert "reload the code location" not in first.skip_message
    with LogManager([logs]) as manager:
        manager.admin.delete_topic("clicks")
        manager.admin.create_topic("audit.log", 1)
    second = discover(defs, settings, instance, first.cursor)
    assert second.skip_message.endswith("; topics not in this code location yet (reload the code location): "
                                        "audit.log; topics gone from the log dirs (reload the code location): clicks")


def test_a_topic_altered_to_compact_is_compacted_without_a_reload(logs, instance):
    """The compaction sensor covered only the topics compacted when the code location loaded: a
    topic altered to ``cleanup.policy=compact`` showed a WARN "compaction due" that no run
    followed until a reload. It judges the policy on disk now, both ways."""
    defs, settings = definitions_for(logs)  # clicks is cleanup.policy=delete, orders compact
    discover(defs, settings, instance)
    before = requested(tick(defs, settings, instance, "compaction_sensor"))
    assert not [tp for tp in before if tp[0] == "clicks"] and [tp for tp in before if tp[0] == "orders"]
    with LogManager([logs]) as manager:
        manager.admin.alter_topic("clicks", {"cleanup.policy": "compact"})
        manager.admin.alter_topic("orders", {"cleanup.policy": "delete"})
    after = requested(tick(defs, settings, instance, "compaction_sensor"))
    assert {tp for tp in after if tp[0] == "clicks"} == {("clicks", "0"), ("clicks", "1")}
    assert not [tp for tp in after if tp[0] == "orders"]
    assert after[("clicks", "0")].job_name.startswith("cleanup__clicks")


@pytest.mark.parametrize("gone", ["moved away", "a file in its place"])
def test_a_log_dir_that_is_not_there_fails_the_ticks_naming_it(logs, instance, gone):
    """A log dir unmounted or moved read as one without topics: every sensor and the sweep said
    there was nothing to do, and the state sensor advised a reload that would drop every asset.
    A file in its place failed the code location's load with a raw error. The load now reads
    the log dirs that are there, and every tick fails naming the one that is not."""
    defs, settings = definitions_for(logs)
    discover(defs, settings, instance)
    logs.rename(logs.with_name("unmounted"))
    if gone == "a file in its place":
        logs.write_text("not a log dir")
    why = "is not a directory" if gone == "a file in its place" else "does not exist"
    # evaluated as the code server evaluates them for the daemon: what the tick records (and the
    # UI shows) is the platform's sentence, not Dagster's "Error occurred during the execution of
    # evaluation_fn" with ours as its cause
    repo = defs.get_repository_def()
    errors = [get_external_sensor_execution(repo, None, instance.get_ref(), name, None, None, None, None, None).error
              for name in ("log_state_sensor", "compaction_sensor", "retention_sensor", "deleted_files_sensor")]
    errors.append(get_external_schedule_execution(repo, instance.get_ref(), "sweep__orders", None, None, None).error)
    for error in errors:
        assert error.message.startswith(f"{PlatformError.__module__}.PlatformError: log dir {logs} {why}")
        assert error.cause is None
    reloaded, _ = definitions_for(logs)  # the load itself goes on, without the topics
    assert not reloaded.assets


def test_a_partition_gone_with_its_topic_recreated_smaller_fails_its_health_once(logs, instance):
    """orders deleted and created again with 2 partitions: the key of orders-2 stays for its
    history, and its last log_health, green, stayed the latest for ever. It now fails, saying
    the partition is gone, once."""
    defs, settings = definitions_for(logs)
    data = discover(defs, settings, instance)
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=["logs", "orders"], partition="2"))
    with LogManager([logs]) as manager:
        manager.admin.delete_topic("orders")
    with LogManager([logs]) as manager:
        manager.admin.create_topic("orders", 2, {"cleanup.policy": "compact"})
    data = discover(defs, settings, instance, data.cursor)
    gone = health_results(data)[("orders", "2")]
    assert not gone.passed and "partition 2 of topic orders is no longer in the log dirs" in gone.description
    assert "2" in instance.get_dynamic_partitions(partitions_def_name("orders"))
    assert ("orders", "2") not in health_results(discover(defs, settings, instance, data.cursor))


@pytest.mark.parametrize("content", ['{"name": "clicks", "partitions": 0}', "{not json", "null"])
def test_a_topic_whose_metadata_is_refused_is_named_by_the_state_sensor(logs, instance, content):
    """The code location leaves a topic whose metadata file is refused out, and every state
    tick says why in the words ``logctl`` uses, naming the file; the other topics go on."""
    meta = logs / ".logplat-topics" / "clicks.json"
    meta.write_text(content)
    defs, settings = definitions_for(logs)
    data = discover(defs, settings, instance)
    assert f"topic clicks is not in this code location: topic metadata file {meta} is " in data.skip_message
    assert "clicks" not in {k for k, _ in health_results(data)} and ("orders", "0") in health_results(data)


def _launch(defs, instance, job: str, reason: str | None = None):
    config = {"ops": {f"{job}_op": {"config": {"reason": reason}}}} if reason is not None else None
    return defs.get_job_def(job).execute_in_process(instance=instance, run_config=config, raise_on_error=False)


def test_one_switch_pauses_every_run_sensor_and_sweep_and_survives_a_reload(logs, instance):
    """Stopping compaction_sensor did not stop compaction: each topic's sweep kept cleaning, and a
    new topic's sweep started on reload. pause_cleaning sets one switch in the instance that the
    run sensors and every sweep read at each tick; log_state_sensor keeps observing, and
    deleted_files_sensor keeps freeing what committed runs scheduled."""
    defs, settings = definitions_for(logs)
    discover(defs, settings, instance)
    assert not _launch(defs, instance, "pause_cleaning", "  ").success  # a pause says why
    assert _launch(defs, instance, "pause_cleaning", "disk replaced on host 3").success
    with LogManager([logs]) as manager:  # a topic created since: its sweep comes with the reload
        manager.admin.create_topic("audit", 1, {"cleanup.policy": "delete"})
    defs, settings = definitions_for(logs)
    ticks = [tick(defs, settings, instance, name) for name in ("compaction_sensor", "retention_sensor")]
    repo = defs.get_repository_def()
    with dg.build_schedule_context(instance=instance, resources=build_resources(settings)) as context:
        ticks += [repo.get_schedule_def(f"sweep__{t}").evaluate_tick(context) for t in ("orders", "clicks", "audit")]
    for data in ticks:
        assert not data.run_requests
        assert re.fullmatch(r"cleaning paused at \S+Z: disk replaced on host 3 \(launch resume_cleaning to resume\)",
                            data.skip_message), data.skip_message
    with LogManager([logs]) as manager:
        append_each(manager.get_log("orders", 1), MORE_RECORDS)
    assert ("orders", "1") in health_results(discover(defs, settings, instance))  # still observed
    assert _launch(defs, instance, "resume_cleaning").success
    assert requested(tick(defs, settings, instance, "compaction_sensor"))


def test_a_pause_cancels_the_cleaning_runs_still_queued(logs):
    """A pause stopped new requests, but the runs the sensors had requested before it, waiting in
    the run queue (one topic's runs go one at a time), still started and cleaned while every tick
    said "paused". pause_cleaning now cancels the queued cleaning runs; others stay queued."""
    queued_coordinator = {"module": "dagster._core.run_coordinator", "class": "QueuedRunCoordinator"}
    with dg.instance_for_test(overrides={"run_coordinator": queued_coordinator}) as instance:
        defs, _ = definitions_for(logs)
        location = InProcessCodeLocationOrigin(LoadableTargetOrigin(module_name="platform_assets.definitions",
                                                                    attribute="defs"))

        def enqueued(job: str, tags: dict[str, str]) -> dg.DagsterRun:
            """A run the daemon's queue holds, as a sensor's request leaves it."""
            origin = RemoteJobOrigin(RemoteRepositoryOrigin(location, "__repository__"), job)
            return instance.create_run_for_job(defs.resolve_job_def(job), tags=tags, remote_job_origin=origin,
                                               status=dg.DagsterRunStatus.QUEUED)

        cleaning = enqueued("cleanup__orders", {"logplat/topic": "orders"})
        other = enqueued("resume_cleaning", {})
        assert instance.get_run_by_id(cleaning.run_id).status == dg.DagsterRunStatus.QUEUED
        result = _launch(defs, instance, "pause_cleaning", "disk replaced on host 3")
        assert result.success
        assert instance.get_run_by_id(cleaning.run_id).status == dg.DagsterRunStatus.CANCELED
        assert instance.get_run_by_id(other.run_id).status == dg.DagsterRunStatus.QUEUED
        logged = [e.message for e in instance.all_logs(result.run_id) if e.is_dagster_event is False]
        assert f"cancelled 1 queued cleaning run(s): {cleaning.run_id}" in logged


def test_logplat_cleaning_paused_is_the_default_until_the_instance_says_otherwise(logs, instance):
    defs, settings = definitions_for(logs, cleaning="paused")
    discover(defs, settings, instance)
    quiet = tick(defs, settings, instance, "retention_sensor")
    assert quiet.skip_message == ("cleaning paused by the code location's environment, LOGPLAT_CLEANING=paused "
                                  "(launch resume_cleaning to resume)")
    assert _launch(defs, instance, "resume_cleaning").success
    assert requested(tick(defs, settings, instance, "retention_sensor"))
