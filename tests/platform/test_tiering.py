"""Tiered topics in the platform, on a real Dagster instance and the real S3 server: the tiering
sensor asks once per state, from the partition's stats and its remembered remote version; the
run tiers and its materialization records the version and the requests; an untiered topic is
left alone."""

from __future__ import annotations

import json
import time
from pathlib import Path

import dagster as dg
import pytest

from platform_assets.logic.tiering import tiering_need
from platform_assets.logic.units import megabytes
from platform_assets.tools.workload import TopicWorkload, produce
from storage_engine.config.topic import LogConfig
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.log.stats import PartitionStats, SegmentStat
from storage_engine.logdir.manager import LogManager
from storage_engine.record import CompressionType
from storage_engine.remote.access import open_store
from storage_engine.remote.local_state import RemoteTierState
from storage_engine.remote.partition import RemotePartition
from storage_engine.remote.stats import TierFacts, tiered_stats
from storage_engine.remote.tier_runs import tier_partitions
from tests.helpers.cli import run_logctl
from tests.helpers.platform import COMPACTED, definitions_for, resources_with_test_session, state_tick, tick

NOW = int(time.time() * 1000)
#: A tiered compacted topic: partition 0 spans several 4 KB segments, partition 1 only its active one.
TIERED = TopicWorkload(
    "ledger", 2, {"cleanup.policy": "compact", "segment.bytes": "4096", "remote.storage.enable": "true"},
    records=300, keys=30, value_bytes=40, compression=CompressionType.NONE, batch_records=10,
    partition_records={1: 5},
)
SENSOR = "tiering_sensor"


@pytest.fixture
def logs(tmp_path, remote_env):
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        produce(manager, [TIERED, COMPACTED], now_ms=NOW)
    return root


def _requests(data) -> dict[tuple[str, str], dg.RunRequest]:
    assert all(r.partition_key is not None for r in data.run_requests or ())
    return {(r.tags["logplat/topic"], r.partition_key): r for r in data.run_requests or ()}


def _run(defs, instance, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
    """The request launched as the daemon would, its sensor's name among its tags."""
    job = defs.resolve_job_def(request.job_name)
    return job.execute_in_process(instance=instance, run_config=request.run_config,
                                  tags={**request.tags, "dagster/sensor_name": SENSOR}, raise_on_error=False)


def _latest_materialization(instance, topic: str, key: str) -> dict:
    record = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=dg.AssetKey(["logs", topic]),
                                                                   asset_partitions=[key]), limit=1).records[0]
    return {k: v.value for k, v in record.asset_materialization.metadata.items()}


def test_the_sensor_asks_once_per_state_and_the_run_records_the_version_and_requests(logs, instance, remote_env):
    defs, settings = definitions_for(logs)
    state_tick(defs, settings, instance)
    first = _requests(tick(defs, settings, instance, SENSOR))
    # only the tiered topic's partition with rolled segments; the untiered topic is left alone
    assert set(first) == {("ledger", "0")}
    request = first[("ledger", "0")]
    assert request.run_key.startswith("tier/ledger/0/")
    assert request.run_config["ops"]["logs__ledger"]["config"]["operation"] == "tier"
    assert "to tier" in request.tags["logplat/reason"]
    # the same state gives the same run key: Dagster launches it once
    assert _requests(tick(defs, settings, instance, SENSOR))[("ledger", "0")].run_key == request.run_key

    result = _run(defs, instance, request)
    assert result.success
    meta = _latest_materialization(instance, "ledger", "0")
    latest = RemotePartition(open_store(), "ledger", 0).latest()
    assert latest is not None and meta["remote_version"] == latest.version >= 1
    assert meta["status"] == "tiered" and meta["segments_tiered"] == len(latest.segments) > 0
    assert meta["remote_end_offset"] == latest.end_offset and meta["remote_log_start_offset"] == 0
    # the run's own requests: one PUT per object it wrote, one commit among them
    assert meta["requests_put"] >= 3 * meta["segments_tiered"] + 1
    assert meta["mb_uploaded"] > 0 and "requests_delete" in meta

    # tiered in this state: not asked again
    again = tick(defs, settings, instance, SENSOR)
    assert not again.run_requests and "0 need work" in again.skip_message
    # the state sensor's observation shows the remembered version
    observed = [e for e in state_tick(defs, settings, instance).asset_events or ()
                if isinstance(e, dg.AssetObservation) and e.partition == "0" and e.asset_key.path[1] == "ledger"]
    assert observed and observed[0].metadata["remote_version"].value == latest.version

    # new rolled segments are new work, under a new key
    with LogManager([logs]) as manager:
        log = manager.get_log("ledger", 0)
        for i in range(200):
            log.append([ProducerRecord(f"k{i % 9}".encode(), b"v" * 40, NOW + i)])
    later = _requests(tick(defs, settings, instance, SENSOR))[("ledger", "0")]
    assert later.run_key != request.run_key
    assert _run(defs, instance, later).success
    assert _latest_materialization(instance, "ledger", "0")["remote_version"] == latest.version + 1


def test_a_run_without_a_remote_location_is_refused_in_one_line(logs, instance, monkeypatch):
    defs, settings = definitions_for(logs)
    state_tick(defs, settings, instance)
    request = _requests(tick(defs, settings, instance, SENSOR))[("ledger", "0")]
    monkeypatch.delenv("LOGPLAT_REMOTE_STORAGE")
    result = _run(defs, instance, request)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert "LOGPLAT_REMOTE_STORAGE is not set" in failure.step_failure_data.error.message
    assert not instance.fetch_materializations(dg.AssetKey(["logs", "ledger"]), limit=1).records


def _tier_state(end: int, version: int = 3) -> TierFacts:
    state = RemoteTierState("s3://b/p", version, 0, 10, end, 40, ((10, 50, 1000, 5, 5), (50, end, 2000, 7, 7)))
    return TierFacts.remembered("t", 0, state)


def _local(bases: list[int]) -> PartitionStats:
    segments = [SegmentStat.of(b, 100, NOW, i == len(bases) - 1, NOW) for i, b in enumerate(bases)]
    return PartitionStats("t", 0, Path("/nonexistent/t-0"), segments, bases[0])


def test_tierable_segments_are_the_rolled_ones_past_the_remembered_end():
    config = LogConfig(remote_storage_enable=True)
    need = tiering_need(_local([50, 80, 120, 150]), config, _tier_state(80), now_ms=NOW, state_hash="h")
    assert [b for b, _, _ in need.tierable] == [80, 120] and need.remote_version == 3
    # the active segment is never tierable; nothing remembered: from the local log start
    assert [b for b, _, _ in tiering_need(_local([50, 80]), config, None, now_ms=NOW, state_hash="h").tierable] == [50]
    assert not tiering_need(_local([80]), config, _tier_state(80), now_ms=NOW, state_hash="h").needed
    # another remembered version is another token
    other = tiering_need(_local([50, 80, 120, 150]), config, _tier_state(80, 4), now_ms=NOW, state_hash="h")
    assert other.token != need.token


def test_a_tiered_partition_is_judged_on_its_remote_tier_then_the_local_log_above_it():
    stats = tiered_stats(_local([50, 80, 120]), _tier_state(80))
    assert [s.base_offset for s in stats.segments] == [10, 50, 80, 120]
    assert stats.log_start_offset == 10 and stats.cleaner_checkpoint == 40
    assert [s.size_bytes for s in stats.segments[:2]] == [1000, 2000]
    # a local log that does not reach the tier's end is judged as it is (tiering reports the gap)
    short = _local([20, 60])
    assert tiered_stats(short, _tier_state(80)) is short


# --------------------------------------------------------------------------- cleaning runs and logctl

HOUR_MS = 3_600_000
#: tiered, compact,delete, records from 3 h ago to now: both a dirty ratio and remote segments past retention.ms
AGED = TopicWorkload(
    "audit", 1, {"cleanup.policy": "compact,delete", "segment.bytes": "4096", "remote.storage.enable": "true",
                 "retention.ms": str(HOUR_MS)},
    records=300, keys=30, value_bytes=40, compression=CompressionType.NONE, batch_records=10, age_ms=3 * HOUR_MS,
)
#: tiered, delete only: a retention run (the Spark retention job's tiered path)
EXPIRING = TopicWorkload(
    "clicks.tiered", 1, {"cleanup.policy": "delete", "segment.bytes": "4096", "remote.storage.enable": "true",
                         "retention.ms": str(HOUR_MS)},
    records=300, keys=1000, value_bytes=40, compression=CompressionType.NONE, batch_records=10, age_ms=3 * HOUR_MS,
)


@pytest.fixture
def tiered_logs(tmp_path, remote_env):
    """Each topic produced and tiered once by the engine, so every partition remembers a version."""
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        produce(manager, [TIERED, AGED, EXPIRING], now_ms=NOW)
        tiered = tier_partitions(manager, now_ms=NOW)
    assert all(r.version == 1 for r in tiered if r.uploaded_segments), [r.reason for r in tiered]
    return root


def _materialize(root: Path, instance, topic: str, partition: str) -> dict:
    """The topic's cleaning run of ``partition`` with its checks, as a sensor launches it; the
    checks must pass (they read the partition across its tiers)."""
    defs, settings = definitions_for(root)
    state_tick(defs, settings, instance)
    asset = next(a for a in defs.assets if a.key == dg.AssetKey(["logs", topic]))
    checks = [c for c in defs.asset_checks if any(k.asset_key == asset.key for k in c.check_keys)]
    result = dg.materialize([asset, *checks], instance=instance, partition_key=partition,
                            resources=resources_with_test_session(settings))
    assert result.success
    failed = {e.check_name: e.metadata for e in result.get_asset_check_evaluations() if not e.passed}
    assert not failed, failed
    return _latest_materialization(instance, topic, partition)


def test_a_compaction_run_of_a_tiered_topic_records_its_version_and_requests(tiered_logs, instance, spark):
    meta = _materialize(tiered_logs, instance, "ledger", "0")
    latest = RemotePartition(open_store(), "ledger", 0).latest()
    assert latest is not None and latest.operation == "compact" and latest.version == 2
    assert meta["status"] == "compacted" and meta["remote_version"] == latest.version
    assert meta["remote_end_offset"] == latest.end_offset and meta["log_start_offset"] == latest.log_start_offset
    # the remote compaction's own requests by type: it read the version and its segments, uploaded what it wrote
    assert meta["requests_get"] > 0 and meta["requests_put"] > 0 and meta["requests_list"] > 0
    assert meta["mb_uploaded"] > 0 and meta["mb_downloaded"] > 0


def test_a_retention_run_of_a_tiered_topic_records_the_retention_version(tiered_logs, instance, spark):
    before = RemotePartition(open_store(), "clicks.tiered", 0).latest()
    meta = _materialize(tiered_logs, instance, "clicks.tiered", "0")
    latest = RemotePartition(open_store(), "clicks.tiered", 0).latest()
    assert before is not None and latest is not None and latest.operation == "retention"
    dropped = len(before.segments) - len(latest.segments)
    assert meta["status"] == "deleted" and meta["remote_version"] == latest.version == before.version + 1
    assert meta["segments_deleted"] >= dropped > 0 and "retention.ms" in meta["retention_rules"]
    assert meta["remote_log_start_offset"] == latest.log_start_offset > 0
    assert meta["requests_put"] == 1 and meta["requests_get"] >= 1  # one commit; the latest version read


def test_the_platform_shows_a_tiered_partition_as_logctl_does(tiered_logs, instance, monkeypatch, capsys):
    defs, settings = definitions_for(tiered_logs)
    observed = {e.asset_key.path[1]: {k: v.value for k, v in e.metadata.items()}
                for e in state_tick(defs, settings, instance).asset_events or ()
                if isinstance(e, dg.AssetObservation) and e.partition == "0"}["audit"]
    args = ("--topic", "audit", "--now-ms", str(NOW), "--dry-run", "--json")
    code, out, _ = run_logctl(tiered_logs, monkeypatch, capsys, "compact", *args)
    (candidacy,) = json.loads(out)["partitions"]
    code2, out2, _ = run_logctl(tiered_logs, monkeypatch, capsys, "retention", *args)
    remote, local = json.loads(out2)["partitions"]
    code3, out3, _ = run_logctl(tiered_logs, monkeypatch, capsys, "topic", "describe", "audit", "--json")
    (described,) = json.loads(out3)["partitions"]
    assert code == code2 == code3 == 0 and (remote["tier"], local["tier"]) == ("remote", "local")
    # the dirty ratio and its verdict over the whole log (the remote tier, then the local log above it)
    assert observed["dirty_ratio"] == candidacy["dirty_ratio"] and observed["compaction_due"] == candidacy["due"]
    assert observed["why"] == candidacy["why"] and observed["cleaner_checkpoint"] == candidacy["first_dirty_offset"]
    # retention: the remote tier's plan (its local copies are tiering's)
    assert remote["segments_to_delete"] and observed["deletable_segments"] == len(remote["segments_to_delete"])
    assert observed["deletable_mb"] == megabytes(remote["bytes_to_free"])
    # the log's offsets and remote tier, as describe shows them
    assert observed["log_start_offset"] == described["log_start_offset"] == candidacy["log_start_offset"]
    assert observed["remote_version"] == described["remote"]["version"] == remote["remote_version"]
    assert observed["remote_end_offset"] == described["remote"]["end_offset"]
    assert observed["remote_segments"] == described["remote"]["segments"]
