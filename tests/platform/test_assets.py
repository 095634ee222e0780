"""Materializing topic assets on real logs through real Spark (the session-wide ``spark`` fixture):
one partition, a range (one run), each cleanup policy, the checks, and a sweep's range request."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import replace

import dagster as dg
import pytest
from dagster._core.event_api import PartitionKeyFilter  # not re-exported by dagster
from dagster._core.storage.partition_status_cache import AssetPartitionStatus  # not re-exported by dagster

from platform_assets.defs.checks import SENSOR_RESULTS_RUN_ID
from platform_assets.defs.cleanup import CHECK_READ_SECONDS_TAG, SPARK_JOB_SECONDS_TAG, SPARK_SESSION_SECONDS_TAG
from platform_assets.logic.check_outcomes import (
    HEALTH_CHECK,
    INDEXES_AGREE,
    KEYS_UNIQUE,
    LATEST_VALUES,
    OFFSETS_INCREASE,
    TOPIC_HEALTH,
)
from platform_assets.logic.metadata import GLOSSARY
from platform_assets.tools.workload import produce
from storage_engine import native
from storage_engine.errors import NeedsRecoveryError
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from tests.helpers.crash import crash_env
from tests.helpers.engine import append_each
from tests.helpers.platform import (
    COMPACT_DELETE,
    COMPACTED,
    DELETE,
    apply_partition_requests,
    definitions_for,
    resources_with_test_session,
    state_tick,
    tick,
)

NOW = int(time.time() * 1000)
CHECKS = {KEYS_UNIQUE, OFFSETS_INCREASE, INDEXES_AGREE, LATEST_VALUES, HEALTH_CHECK}
RANGE = ("dagster/asset_partition_range_start", "dagster/asset_partition_range_end")
#: Every materialization carries these (the issue's list: checkpoints and dirty ratio before and
#: after, offsets, size, what was reclaimed and removed, timings).
COMMON = {"log_start_offset", "log_end_offset", "size_mb", "segments", "status", "segments_deleted",
          "mb_reclaimed", "duration_s", "log_state_version", "log_start_offset_before", "size_mb_before",
          "offset_span", "topic", "partition", "dagster/uri"}
COMPACTION = COMMON | {"cleaner_checkpoint", "cleaner_checkpoint_before", "dirty_ratio", "dirty_ratio_before",
                       "records_removed", "duplicates_removed", "tombstones_removed", "throughput_mb_per_s",
                       "throughput_records_per_s", "dagster/row_count"}
TEXT = {"status", "log_state_version", "topic", "partition", "dagster/uri"}


@pytest.fixture
def platform(tmp_path, spark):
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        produce(manager, [COMPACTED, COMPACT_DELETE, DELETE], now_ms=NOW)
    defs, settings = definitions_for(root)
    with dg.instance_for_test() as instance:
        data = tick(defs, settings, instance, "log_state_sensor")
        apply_partition_requests(instance, data.dynamic_partitions_requests)
        yield root, defs, settings, instance


def _asset(defs: dg.Definitions, topic: str) -> dg.AssetsDefinition:
    return next(a for a in defs.assets if a.key == dg.AssetKey(["logs", topic]))


def _materialize(platform, topic: str, *, partition: str | None = None, tags=None, run_config=None):
    _, defs, settings, instance = platform
    result = dg.materialize([_asset(defs, topic)], instance=instance, partition_key=partition, tags=tags,
                            run_config=run_config, resources=resources_with_test_session(settings))
    assert result.success
    events = result.asset_materializations_for_node(_asset(defs, topic).op.name)
    return result, {e.partition: {k: v.value for k, v in e.metadata.items()} for e in events}, events


def _numbers_only(metadata: dict) -> None:
    """Figures are plain ints and floats (what the UI plots), never None or text."""
    for key in COMPACTION - TEXT:
        if key in metadata:
            assert isinstance(metadata[key], (int, float)) and not isinstance(metadata[key], bool), key


def test_one_partition_is_compacted_with_its_metadata_checks_and_data_version(platform):
    root, _, _, instance = platform
    result, by_partition, events = _materialize(platform, "orders", partition="0")
    assert list(by_partition) == ["0"]
    m = by_partition["0"]
    assert COMPACTION <= set(m), COMPACTION - set(m)
    _numbers_only(m)
    assert m["status"] == "compacted"
    assert m["cleaner_checkpoint_before"] == 0  # never cleaned: the log start offset, as Kafka reads it
    assert m["dirty_ratio_before"] == 1.0 and m["dirty_ratio"] < 0.5
    assert m["cleaner_checkpoint"] > 0 and m["log_end_offset"] == m["log_end_offset_before"] == 400
    assert m["duplicates_removed"] > 0 and m["records_removed"] >= m["duplicates_removed"]
    assert m["mb_reclaimed"] > 0 and m["size_mb"] < m["size_mb_before"]
    # what the catalog reads: the partition named, its log dir, the records the checks counted
    assert (m["topic"], m["partition"]) == ("orders", "0") and m["dagster/uri"] == (root / "orders-0").resolve().as_uri()
    assert 0 < m["dagster/row_count"] <= m["offset_span"] == 400 - m["log_start_offset"]
    assert {k.removesuffix("_before") for k in m} <= set(GLOSSARY), set(m) - set(GLOSSARY)
    # the Spark jobs' wall time is recorded once, on the run; the partition's own time is its metadata
    tags = instance.get_run_by_id(result.run_id).tags
    assert 0 < m["duration_s"] <= float(tags[SPARK_JOB_SECONDS_TAG]) + 0.001
    # and where the rest of the run's time went: the session (this test process's, already up:
    # the resource takes it over, it does not start one) and the checks' reads around the job
    assert float(tags[SPARK_SESSION_SECONDS_TAG]) < 1.0 and float(tags[CHECK_READ_SECONDS_TAG]) > 0
    # the data version names the log's state after the run, and equals the partition's own
    assert events[0].tags["dagster/data_version"] == m["log_state_version"]
    # the record core the Spark workers ran: this process's LOGPLAT_CORE, which they inherit
    assert m["record core"] == native.status().describe()

    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert set(checks) == CHECKS and all(e.passed for e in checks.values()), checks
    assert all(e.partition == "0" and e.metadata["partition"].value == "0" and e.metadata["topic"].value == "orders"
               for e in checks.values())
    assert checks[LATEST_VALUES].metadata["live_keys_before"].value > 0

    # a second cleaning right after: nothing cleanable is left, tombstones past their horizon go
    _, again, _ = _materialize(platform, "orders", partition="0")
    assert again["0"]["cleaner_checkpoint_before"] == m["cleaner_checkpoint"]
    with LogManager([root], read_only=True) as manager:
        assert manager.get_log("orders", 0).log_end_offset == 400


def test_a_range_is_one_run_with_metadata_and_checks_per_partition(platform):
    _, _, _, instance = platform
    result, by_partition, _ = _materialize(platform, "profiles.v1", tags=dict(zip(RANGE, ("0", "1"), strict=False)))
    assert set(by_partition) == {"0", "1"}
    [run] = instance.get_run_records()
    job_seconds = float(run.dagster_run.tags[SPARK_JOB_SECONDS_TAG])
    for p, m in by_partition.items():
        assert COMPACTION <= set(m), (p, COMPACTION - set(m))
        _numbers_only(m)
        assert m["status"] == "compacted" and 0 < m["duration_s"] < job_seconds
        # compact,delete: retention ran after the compaction and moved the log start
        assert m["log_start_offset"] > m["log_start_offset_before"] and m["segments_deleted"] > 0
    assert by_partition["0"]["log_state_version"] != by_partition["1"]["log_state_version"]
    # range runs record each partition's checks as their own evaluations
    for check in CHECKS:
        key = dg.AssetCheckKey(dg.AssetKey(["logs", "profiles.v1"]), check)
        records = instance.event_log_storage.get_asset_check_execution_history(key, limit=10)
        records = [r for r in records if r.run_id == run.dagster_run.run_id]  # not the state sensor's
        assert {(r.partition, r.status.value) for r in records} == {("0", "SUCCEEDED"),
                                                                                   ("1", "SUCCEEDED")}, check
        # each tied to its own partition's materialization of this run (the UI's "Target materialization")
        materialized = {m.partition_key: m.storage_id for m in instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key.asset_key, asset_partitions=["0", "1"]), limit=10).records}
        for r in records:
            target = r.event.dagster_event.event_specific_data.target_materialization_data
            assert target is not None and target.storage_id == materialized[r.partition], (check, r.partition)


def test_retention_of_a_delete_topic_and_a_partition_with_nothing_to_do(platform):
    root, _, _, instance = platform
    result, by_partition, _ = _materialize(platform, "clicks", tags=dict(zip(RANGE, ("0", "1"), strict=False)))
    assert {m["status"] for m in by_partition.values()} == {"deleted"}
    for m in by_partition.values():
        assert COMMON <= set(m), COMMON - set(m)
        assert "cleaner_checkpoint" not in m and "dirty_ratio" not in m  # a delete topic has neither
        assert "dagster/row_count" not in m  # no run read its records to count them: offset_span only
        assert {k.removesuffix("_before") for k in m} <= set(GLOSSARY), set(m) - set(GLOSSARY)
        assert m["segments_deleted"] > 0 and m["mb_reclaimed"] > 0
        assert m["retention_rules"] == f"retention.ms: {m['segments_deleted']}"  # which rule fired
        assert m["log_dir"].startswith(str(root)) and m["log_dir"].endswith(("clicks-0", "clicks-1"))
    # nothing was compacted: only the health check, which passes now that retention ran
    assert {(e.check_name, e.passed) for e in result.get_asset_check_evaluations()} == {(HEALTH_CHECK, True)}

    _, again, _ = _materialize(platform, "clicks", partition="1")
    assert again["1"]["status"] == "nothing" and again["1"]["segments_deleted"] == 0


def test_the_sensors_run_config_leaves_a_partition_that_is_not_due_alone(platform):
    _, defs, settings, instance = platform
    config = {"ops": {"logs__orders": {"config": {"force_compaction": False}}}}
    result, by_partition, _ = _materialize(platform, "orders", partition="1", run_config=config)
    assert by_partition["1"]["status"] == "skipped"
    health = result.get_asset_check_evaluations()
    assert [(e.check_name, e.passed, e.partition) for e in health] == [(HEALTH_CHECK, True, "1")]
    assert health[0].description.startswith("partition 1: nothing due")


def test_a_sweep_request_runs_as_one_range(platform):
    _, defs, settings, instance = platform
    schedule = defs.get_repository_def().get_schedule_def("sweep__orders")
    from platform_assets.defs.resources import build_resources

    request = schedule.evaluate_tick(dg.build_schedule_context(instance=instance, resources=build_resources(settings))
                                     ).run_requests[0]
    tags = {k: v for k, v in request.tags.items() if k in RANGE}
    assert tags == dict(zip(RANGE, ("0", "2"), strict=False))
    _, by_partition, _ = _materialize(platform, "orders", tags=tags, run_config=request.run_config)
    assert {p: m["status"] for p, m in by_partition.items()} == {"0": "compacted", "1": "skipped", "2": "compacted"}


def _audit_job(defs: dg.Definitions, settings, asset: dg.AssetsDefinition) -> dg.JobDefinition:
    """The topic's checks alone, as the UI's "Execute" on them runs them."""
    checks = next(c for c in defs.asset_checks if any(k.asset_key == asset.key for k in c.check_keys))
    return dg.Definitions(
        assets=[asset], asset_checks=[checks], resources=resources_with_test_session(settings),
        jobs=[dg.define_asset_job("audit", selection=dg.AssetSelection.checks_for_assets(asset))],
    ).resolve_job_def("audit")


def _audited_health(platform, topic: str) -> dict[str, dg.AssetCheckEvaluation]:
    """Run the topic's checks alone (an audit), then each partition's latest log_health."""
    _, defs, settings, instance = platform
    asset = _asset(defs, topic)
    assert _audit_job(defs, settings, asset).execute_in_process(instance=instance).success
    return {r.partition: r.event.dagster_event.event_specific_data
            for r in reversed(instance.event_log_storage.get_asset_check_execution_history(
                dg.AssetCheckKey(asset.key, HEALTH_CHECK), limit=10))}


def test_an_audit_that_meets_a_damaged_batch_says_so_in_log_health(platform):
    """The cheap state cannot see a damaged batch: an audit's log_health said "cleaning due"
    (WARN) and replaced the ERROR the failed cleaning had recorded, while the damage showed only
    in another check's details. The audit's read of the records now tells log_health."""
    root = platform[0]
    first = sorted((root / "orders-0").glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    data[100] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    first.write_bytes(bytes(data))
    latest = _audited_health(platform, "orders")
    assert not latest["0"].passed and latest["0"].severity == dg.AssetCheckSeverity.ERROR
    assert latest["0"].description.startswith("partition 0: its records cannot be read: ")
    assert "CRC" in latest["0"].description.upper()
    assert "cannot be read" not in latest["2"].description


def test_checks_run_alone_audit_the_logs_as_they_are(platform):
    """After any materialization of the topic, the audit's one result per check for the run
    failed the step ("Cannot access partition_key for a non-partitioned run"): Dagster looked
    for the partitioned asset's materialization to tie it to. Only per-partition results are
    recorded now; the run log says how many passed."""
    _, defs, settings, instance = platform
    _materialize(platform, "orders", partition="1")  # partition 1 is empty: nothing to compact
    asset = _asset(defs, "orders")
    # Dagster runs checks selected without their partitioned asset as an unpartitioned run: the
    # audit covers every partition of the topic, each recorded as its own evaluation
    result = _audit_job(defs, settings, asset).execute_in_process(instance=instance)
    assert result.success
    assert not result.asset_materializations_for_node(asset.op.name)  # the log was not touched
    def evaluated(check: str) -> set[tuple[str, str]]:
        records = instance.event_log_storage.get_asset_check_execution_history(dg.AssetCheckKey(asset.key, check),
                                                                               limit=10)
        return {(r.partition, r.status.value) for r in records if r.partition is not None}

    for check in CHECKS - {LATEST_VALUES, HEALTH_CHECK}:
        assert evaluated(check) == {("0", "SUCCEEDED"), ("1", "SUCCEEDED"), ("2", "SUCCEEDED")}, check
    # partitions 0 and 2 are due for compaction (WARN), partition 1 is empty
    assert evaluated(HEALTH_CHECK) == {("0", "FAILED"), ("1", "SUCCEEDED"), ("2", "FAILED")}
    assert not evaluated(LATEST_VALUES)  # nothing to compare latest values with
    # no result of a per-partition check for the audit as a whole: the run log says it; the one
    # unpartitioned result is topic_health, the rollup of the log_health just recorded, every
    # partition's current (tied to its latest materialization, as the sensor's are)
    (rollup,) = [e for e in result.get_asset_check_evaluations() if e.partition is None]
    assert rollup.check_name == TOPIC_HEALTH and rollup.severity == dg.AssetCheckSeverity.WARN
    assert rollup.description.startswith("2 of 3 partition(s) need attention: WARN 2 (0: cleaning due"), rollup
    logged = [e.message for e in instance.all_logs(result.run_id) if e.is_dagster_event is False]
    assert f"{HEALTH_CHECK}: 1 of 3 partition(s) passed; failing: 0, 2" in logged
    assert f"{KEYS_UNIQUE}: 3 of 3 partition(s) passed" in logged
    assert any(m.startswith(f"{LATEST_VALUES}: not evaluated by an audit") for m in logged)


@pytest.mark.parametrize("now_ms, why", [(-1, "Value must be at least 0"),
                                         (10**20, "Value must be no more than 253402300799999")])
def test_a_now_ms_out_of_range_is_refused_by_run_config_validation_and_changes_nothing(platform, now_ms, why):
    root, defs, settings, instance = platform
    before = {p: p.stat().st_size for p in root.rglob("*.log")}
    asset = _asset(defs, COMPACTED.name)
    run_config = {"ops": {asset.op.name: {"config": {"now_ms": now_ms}}}}
    expected = f"(?s)config:now_ms .*Invalid value {now_ms} for configuration now_ms: {why}"
    with pytest.raises(dg.DagsterInvalidConfigError, match=expected):
        dg.validate_run_config(defs.resolve_job_def(f"cleanup__{COMPACTED.name}"), run_config)
    with pytest.raises(dg.DagsterInvalidConfigError, match=expected):
        dg.materialize([asset], instance=instance, partition_key="0", run_config=run_config,
                       resources=resources_with_test_session(settings))
    assert not instance.get_run_records()  # refused before a run existed
    assert {p: p.stat().st_size for p in root.rglob("*.log")} == before


def test_a_run_failing_on_an_engine_refusal_shows_the_engines_sentence_first(platform):
    """The step failure is the engine's sentence (a ``dg.Failure``'s description), not Dagster's
    "Error occurred while executing op" with the sentence as its cause."""
    root, defs, settings, instance = platform
    root.rename(root.with_name("unmounted"))
    result = dg.materialize([_asset(defs, COMPACTED.name)], instance=instance, partition_key="0",
                            resources=resources_with_test_session(settings), raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_failure_data.user_failure_data.description.startswith(f"log dir {root} does not exist")
    assert failure.step_failure_data.error.message.startswith(f"dagster._core.definitions.events.Failure: log dir {root}")


def test_a_launched_run_cannot_clean_another_log_dir_with_other_broker_settings(platform, tmp_path):
    """A 7-day-retention topic in a dir the platform was never given keeps every record when a
    run's config names that dir and a 1 ms broker retention: the run is refused before it starts."""
    _, defs, settings, instance = platform
    elsewhere = tmp_path / "elsewhere"
    kept = replace(DELETE, configs={"cleanup.policy": "delete", "segment.bytes": "4096"}, age_ms=0)
    with LogManager([elsewhere]) as manager:
        produce(manager, [kept], now_ms=NOW)
    before = {p: p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()}
    run_config = {"resources": {"log_store": {"config": {"log_dirs": [str(elsewhere)],
                                                         "broker_properties": {"log.retention.ms": "1"}}}}}
    with pytest.raises(dg.DagsterInvalidConfigError, match='unexpected config entr'):
        dg.materialize([_asset(defs, DELETE.name)], instance=instance, partition_key="0", run_config=run_config,
                       resources=resources_with_test_session(settings))
    assert {p: p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()} == before


def test_a_run_with_nothing_to_do_leaves_the_earlier_check_results_as_the_latest(platform):
    """The checks are not outputs of the asset's op, so a run that compacted nothing records no
    check at all: no "skipped" execution hides the last real result."""
    _, _, _, instance = platform
    _materialize(platform, "orders", partition="0")  # compacts: every check is evaluated
    not_forced = {"ops": {"logs__orders": {"config": {"force_compaction": False}}}}
    _, again, _ = _materialize(platform, "orders", partition="0", run_config=not_forced)
    assert again["0"]["status"] == "skipped"  # nothing was due any more
    for check in CHECKS - {HEALTH_CHECK}:
        records = instance.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(dg.AssetKey(["logs", "orders"]), check), limit=10)
        assert [(r.partition, r.status.value) for r in records] == [("0", "SUCCEEDED")], check


def test_a_ui_run_with_the_checks_gives_every_partition_a_real_result(platform):
    """A UI click or a backfill selects the asset with its checks, and Dagster plans every check
    for every partition of the run. A partition the run did not compact is audited as it is,
    tied to this run's materialization, rather than left "Skipped" over its earlier results."""
    _, defs, settings, instance = platform
    asset = _asset(defs, "orders")
    checks = next(c for c in defs.asset_checks if any(k.asset_key == asset.key for k in c.check_keys))
    job = dg.Definitions(
        assets=[asset], asset_checks=[checks], resources=resources_with_test_session(settings),
        jobs=[dg.define_asset_job("click", selection=dg.AssetSelection.assets(asset) | dg.AssetSelection.checks_for_assets(asset))],
    ).resolve_job_def("click")
    assert job.execute_in_process(instance=instance, partition_key="0").success  # compacts orders-0
    result = job.execute_in_process(instance=instance, tags=dict(zip(RANGE, ("0", "2"), strict=False)))
    assert result.success
    materialized = {m.partition_key: m.storage_id for m in instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset.key, asset_partitions=["0", "1", "2"]), limit=20).records
        if m.run_id == result.run_id}
    for check in CHECKS:
        records = instance.event_log_storage.get_asset_check_execution_history(dg.AssetCheckKey(asset.key, check),
                                                                               limit=20)
        latest = {}
        for r in records:  # newest first
            if r.partition is not None:
                latest.setdefault(r.partition, r)
        assert set(latest) == {"0", "1", "2"}, check
        for p, r in latest.items():
            assert r.run_id == result.run_id and r.status.value != "SKIPPED", (check, p, r.status)
            target = r.event.dagster_event.event_specific_data.target_materialization_data
            assert target is not None and target.storage_id == materialized[p], (check, p)
    descriptions = {e.partition: e.description for e in result.get_asset_check_evaluations()
                    if e.check_name == LATEST_VALUES}
    assert descriptions["0"].startswith("partition 0: not compacted by this run")  # cleaned by the first run
    assert descriptions["2"].startswith("partition 2: latest values before")  # compacted now, compared


def _corrupt_first_batch(root, partition_dir: str) -> None:
    first = max((root / partition_dir).glob("*.log"), key=lambda f: f.stat().st_size)
    data = bytearray(first.read_bytes())
    data[100] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    first.write_bytes(bytes(data))


def test_a_cleaning_that_fails_is_a_failed_partition_with_its_reason_first(platform):
    """A damaged batch in orders-0, which an earlier run had cleaned: the range run over 0..2
    fails, orders-0 turns "failed" in Dagster's partition status (its badge said
    "Materialized" above the red banner, and the reason was row 15 of a merged table), while
    orders-1 and orders-2 keep this run's materializations. The failure opens with the
    partition and the engine's one-line reason, is not retried (a data error), tags the run
    with the partition and the error class, and log_health says so as an ERROR."""
    root, defs, settings, instance = platform
    asset = _asset(defs, "orders")
    _materialize(platform, "orders", tags=dict(zip(RANGE, ("0", "2"), strict=False)))
    _corrupt_first_batch(root, "orders-0")  # in the cleaned section, which the next compaction copies
    with LogManager([root]) as manager:  # something new to clean
        append_each(manager.get_log("orders", 0),
                    [ProducerRecord(f"orders-k{i % 7}".encode(), b"v" * 40, NOW + i) for i in range(200)])
    result = dg.materialize([asset], instance=instance, raise_on_error=False,
                            tags=dict(zip(RANGE, ("0", "2"), strict=False)),
                            resources=resources_with_test_session(settings))
    assert not result.success
    status = instance.get_status_by_partition(asset.key, ["0", "1", "2"], asset.partitions_def)
    assert status == {"0": AssetPartitionStatus.FAILED, "1": AssetPartitionStatus.MATERIALIZED,
                      "2": AssetPartitionStatus.MATERIALIZED}
    records = instance.fetch_materializations(asset.key, limit=20).records
    assert {r.partition_key for r in records if r.run_id == result.run_id} == {"1", "2"}
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    data = failure.step_failure_data
    assert data.user_failure_data.description.startswith("partition 0 of orders: CorruptRecordError: ")
    assert data.error.message.startswith("dagster._core.definitions.events.Failure: partition 0 of orders: "
                                         "CorruptRecordError")
    assert "CorruptRecordError" in data.user_failure_data.metadata["error"].value
    assert "permanent" in data.user_failure_data.metadata["kind"].value
    assert data.error.cause is None and data.error.context is None  # no engine traceback chained under it
    tags = instance.get_run_by_id(result.run_id).tags
    assert tags["logplat/failed_partitions"] == "0:CorruptRecordError"  # what the sensors and sweeps hold back
    assert tags["logplat/trigger"] == "manual" and tags["logplat/topic"] == "orders"
    assert tags["logplat/reason"].startswith("materialized by hand") and tags["logplat/states"].startswith("0:")
    latest = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(asset.key, HEALTH_CHECK), limit=3)
    health = next(r for r in latest if r.partition == "0").event.dagster_event.event_specific_data
    assert not health.passed and health.severity == dg.AssetCheckSeverity.ERROR
    assert health.description.startswith("partition 0: last cleaning failed: CorruptRecordError")


STRATEGY = {"compaction.strategy": "header", "compaction.strategy.header": "ver"}


@pytest.mark.parametrize("topic_configs, broker_props", [
    (STRATEGY, {}),
    ({}, {f"log.cleaner.{k}": v for k, v in STRATEGY.items()}),
], ids=["topic-config", "broker-default"])
def test_a_topic_with_a_version_strategy_is_compacted_by_it_and_its_checks_follow_it(tmp_path, spark, topic_configs,
                                                                                    broker_props):
    """``compaction.strategy=header`` (KIP-280), set on the topic or as the broker's default:
    the asset shows the strategy, the run keeps each key's highest version, counts records
    without one, and the checks judge by versions (the key's winner is its latest value; the
    newest record kept below the checkpoint is no duplicate). The checks used to read the logs
    without the broker's defaults, and judged a broker-wide strategy's run by offsets."""
    import struct


    root = tmp_path / "logs"
    with LogManager([root], broker_props) as manager:
        manager.admin.create_topic("prices", 1, {"cleanup.policy": "compact", "segment.bytes": "400", **topic_configs})
        versions = [5, 9, 2, None, 7, 1, 3, 8, 4, 6] * 4
        append_each(manager.get_log("prices", 0),
                    [ProducerRecord(f"sku{i % 3}".encode(), f"p{i}".encode(), NOW + i,
                                    () if v is None else (("ver", struct.pack(">q", v)),))
                     for i, v in enumerate(versions)], now=NOW)
    defs, settings = definitions_for(root, broker_props=broker_props)
    with dg.instance_for_test() as instance:
        data = tick(defs, settings, instance, "log_state_sensor")
        apply_partition_requests(instance, data.dynamic_partitions_requests)
        asset = _asset(defs, "prices")
        shown = asset.specs_by_key[asset.key].metadata
        assert (shown["compaction.strategy"], shown["compaction.strategy.header"]) == ("header", "ver")
        result = dg.materialize([asset], instance=instance, partition_key="0",
                                resources=resources_with_test_session(settings))
        assert result.success
        (event,) = result.asset_materializations_for_node(asset.op.name)
        assert event.metadata["status"].value == "compacted" and event.metadata["records_without_version"].value > 0
        checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
        assert set(checks) == CHECKS and all(e.passed for e in checks.values()), checks
    checkpoint = event.metadata["cleaner_checkpoint"].value
    best: dict[bytes, tuple[int, int]] = {}  # the input's winner of each key below the checkpoint
    for i, v in enumerate(versions[:checkpoint]):
        key = f"sku{i % 3}".encode()
        best[key] = max(best.get(key, (-(2**64), -1)), (-(2**64) if v is None else v, i))
    with LogManager([root], broker_props, read_only=True) as manager:
        kept = [r.offset for r in manager.get_log("prices", 0).read(0, max_records=100) if r.offset < checkpoint - 1]
    assert kept == sorted(o for _, o in best.values() if o < checkpoint - 1)


def _tree(root) -> dict:
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("tags, said", [
    ({}, "needs a partition or a partition range"),
    ({RANGE[0]: "2", RANGE[1]: "0"}, "the partition range 2..0 of topic orders holds no partition"),
    ({"dagster/partition": "01"}, "partition key '01' is not a partition number"),
], ids=["no-partition", "reversed-range", "bad-key"])
def test_a_cleaning_run_that_names_no_partition_is_refused_before_it_cleans_anything(platform, tags, said):
    """A run of the cleanup job launched without partition tags cleaned every partition of the
    topic and then failed with nothing recorded (Dagster had no partition to record the
    materializations under); a reversed range "succeeded" with an empty materialization; a key
    that is not a partition number failed with a traceback. Each is now refused in one line
    before anything is read or written."""
    root, defs, _, instance = platform
    instance.add_dynamic_partitions("partitions__orders", ["01"])
    before = _tree(root)
    job = defs.resolve_job_def("cleanup__orders")
    result = job.execute_in_process(instance=instance, tags=tags, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message
    assert said in message and message.count("\n") <= 1, message
    assert not result.asset_materializations_for_node(_asset(defs, "orders").op.name)
    assert _tree(root) == before


def test_one_topics_bad_file_or_config_does_not_stop_the_others(tmp_path, spark):
    """A symlink in one partition dir (orders-0) and a refused config in another topic's metadata
    (profiles.v1) made the code location fail to load, so every run of every topic failed, and
    the ``.deleted`` sweeper failed every tick. Now the location loads: orders keeps its asset
    and its bad partition shows as unreadable in log_health, profiles.v1 is left out with the
    reason on every state tick, and another topic is cleaned and swept as before."""
    root = tmp_path / "logs"
    clicks = replace(DELETE, configs={**DELETE.configs, "file.delete.delay.ms": "0"})
    with LogManager([root]) as manager:
        produce(manager, [COMPACTED, COMPACT_DELETE, clicks], now_ms=NOW)
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"outside the log dir")
    link = root / "orders-0" / "00000000000000099999.log"
    link.symlink_to(victim)
    meta = root / ".logplat-topics" / "profiles.v1.json"
    body = json.loads(meta.read_text())
    body["configs"]["min.cleanable.dirty.ratio"] = "banana"
    meta.write_text(json.dumps(body))
    expired = root / "clicks-0" / "00000000000000000000.log.deleted"
    expired.write_bytes(b"x")

    defs, settings = definitions_for(root)
    assert {a.key.path[1] for a in defs.assets if a.key.path[0] == "logs"} == {"orders", "clicks"}
    with dg.instance_for_test() as instance:
        data = state_tick(defs, settings, instance)
        assert ("topic profiles.v1 is not in this code location: the config of topic profiles.v1 in "
                f"{meta} is refused: Invalid value 'banana'") in data.skip_message
        assert "not in this code location yet" not in data.skip_message  # a reload would not help
        health = data.health
        assert not health[("orders", "0")].passed and "symbolic link" in health[("orders", "0")].description
        assert health[("orders", "1")].passed and "cleaning due: retention" in health[("clicks", "0")].description
        swept = tick(defs, settings, instance, "deleted_files_sensor")
        assert not expired.exists()
        assert "topic orders not swept" in swept.skip_message and "topic profiles.v1 not swept" in swept.skip_message
        result = dg.materialize([_asset(defs, "clicks")], instance=instance, partition_key="0",
                                resources=resources_with_test_session(settings))
        assert result.success
        body["configs"]["min.cleanable.dirty.ratio"] = "0.5"  # repaired: now a reload brings it in
        meta.write_text(json.dumps(body))
        repaired = tick(defs, settings, instance, "log_state_sensor")
        assert "not in this code location: " not in repaired.skip_message
        assert "topics not in this code location yet (reload the code location): profiles.v1" in repaired.skip_message
    assert victim.read_bytes() == b"outside the log dir"


def test_a_run_reads_only_its_partitions_and_an_audit_names_the_one_it_cannot_read(platform):
    """A run of orders-0 read the state of every partition of the topic and failed on orders-1's
    misnamed file, as every sweep of the topic then did; an audit of the topic failed as a whole
    with no result for any partition. Now the run cleans its partition, and the audit fails
    orders-1's log_health saying why and checks the others."""
    root, defs, _, instance = platform
    (root / "orders-1" / "5.log").write_bytes(b"")  # the engine refuses to open orders-1
    _, by_partition, _ = _materialize(platform, "orders", partition="0")
    assert by_partition["0"]["status"] == "compacted"
    latest = _audited_health(platform, "orders")
    asset = _asset(defs, "orders")
    assert not latest["1"].passed and latest["1"].severity == dg.AssetCheckSeverity.ERROR
    assert f"cannot be read: {root / 'orders-1' / '5.log'}: not a segment file name" in latest["1"].description
    assert "cannot be read" not in latest["0"].description and "cannot be read" not in latest["2"].description
    for check in CHECKS - {LATEST_VALUES, HEALTH_CHECK}:
        records = instance.event_log_storage.get_asset_check_execution_history(dg.AssetCheckKey(asset.key, check),
                                                                               limit=10)
        assert {r.partition for r in records} >= {"0", "2"}, check


def test_a_run_recovers_a_partition_left_mid_swap_by_a_killed_cleaner(platform):
    """A cleaner killed between its swap's renames leaves files only a writable open resolves.
    The run read them first, read-only, and failed; so did its retry and every later run, until
    another writer opened the log dir. The run now recovers its partitions, then cleans."""
    root, _, _, _ = platform
    env = crash_env("compaction.after-swap-prepared")
    killed = subprocess.run([sys.executable, "-m", "storage_engine.tools.logctl", "--log-dirs", str(root), "compact",
                             "--topic", "orders", "--partition", "0"], env=env, capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL
    assert any(p.name.endswith(".swap") for p in (root / "orders-0").iterdir())
    with pytest.raises(NeedsRecoveryError):
        with LogManager([root], read_only=True) as manager:
            manager.get_log("orders", 0)
    _, by_partition, _ = _materialize(platform, "orders", partition="0")
    assert by_partition["0"]["status"] in ("compacted", "skipped")
    assert not any(p.name.endswith(".swap") for p in (root / "orders-0").iterdir())


def test_a_sensor_verdict_after_a_cleaning_is_the_partitions_current_log_health(platform):
    """The check's Partitions view takes a partition's result from its newest index row, and
    counts it only while it targets the partition's latest materialization. The state sensor's
    verdict after a cleaning updated its older row in place and targeted nothing, so the view kept
    the cleaning run's "passed" (or showed grey "Missing") while the sensor said WARN. Now the
    sensor's verdict is the partition's latest and current result."""
    root, defs, settings, instance = platform
    result, _, _ = _materialize(platform, "orders", partition="0")
    key = dg.AssetCheckKey(dg.AssetKey(["logs", "orders"]), HEALTH_CHECK)

    def latest() -> tuple:
        (info,) = instance.event_log_storage.get_asset_check_partition_info([key], partition_keys=["0"])
        return info.latest_execution_status.value, info.is_current

    assert latest() == ("SUCCEEDED", True)  # the run's own verdict: just cleaned
    with LogManager([root]) as manager:  # dirty again: the sensor says so
        append_each(manager.get_log("orders", 0), [ProducerRecord(f"k{i % 3}".encode(), b"v" * 40, None)
                                                   for i in range(300)])
    state_tick(defs, settings, instance)
    assert latest() == ("FAILED", True)
    (newest,) = instance.event_log_storage.get_asset_check_execution_history(
        key, limit=1, partition_filter=PartitionKeyFilter(key="0"))
    assert newest.run_id == SENSOR_RESULTS_RUN_ID != result.run_id
    assert newest.event.dagster_event.event_specific_data.severity == dg.AssetCheckSeverity.WARN


def test_topic_health_is_the_rollup_of_the_current_log_health_and_follows_a_cleaning(platform):
    """The asset's Checks list showed log_health "Failed" (its rollup over the partitions) beside
    a detail pane and an Overview showing whichever partition was checked last ("Passed").
    topic_health is one unpartitioned result, the rollup of every partition's current
    log_health as Dagster holds it, recorded by the state sensor when it changes."""
    _, defs, settings, instance = platform
    key = dg.AssetCheckKey(dg.AssetKey(["logs", "orders"]), TOPIC_HEALTH)

    def latest() -> dg.AssetCheckEvaluation:
        (record,) = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)
        return record.event.dagster_event.event_specific_data

    first = state_tick(defs, settings, instance)  # orders-0 and orders-2 due (WARN), orders-1 passed
    health = latest()
    assert not health.passed and health.severity == dg.AssetCheckSeverity.WARN and health.partition is None
    assert health.description.startswith("2 of 3 partition(s) need attention: WARN 2 (0: cleaning due: "), health
    assert "; 2: cleaning due: " in health.description and "1: " not in health.description
    assert (health.metadata["partitions_warn"].value, health.metadata["partitions_passed"].value) == (2, 1)
    assert health.metadata["failing_partitions"].value == "0, 2"
    second = state_tick(defs, settings, instance, first.cursor)  # nothing changed: nothing recorded
    assert len(instance.event_log_storage.get_asset_check_execution_history(key, limit=10)) == 1
    assert second.skip_message == "7 partition(s), none changed"

    _materialize(platform, "orders", tags=dict(zip(RANGE, ("0", "2"), strict=False)))  # cleans 0 and 2
    state_tick(defs, settings, instance, second.cursor)
    health = latest()
    assert health.passed and health.description == "3 of 3 partition(s) passed", health.description
    # the sensor's one result replaced its earlier row (partition NULL): the newest is the latest
    rows = instance.event_log_storage.get_asset_check_execution_history(key, limit=10)
    assert [(r.run_id, r.status.value) for r in rows] == [(SENSOR_RESULTS_RUN_ID, "SUCCEEDED")]
