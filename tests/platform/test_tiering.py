"""Tiered topics in the platform, on a real Dagster instance and the real S3 server: the tiering
sensor asks once per state, from the partition's stats and its remembered remote version; the
run tiers and its materialization records the version and the requests; an untiered topic is
left alone."""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
import pytest

from platform_assets.logic.tiering import tiering_need
from platform_assets.tools.workload import TopicWorkload, produce
from storage_engine.config.topic import LogConfig
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.log.stats import PartitionStats, SegmentStat
from storage_engine.logdir.manager import LogManager
from storage_engine.record import CompressionType
from storage_engine.remote.access import open_store
from storage_engine.remote.local_state import RemoteTierState
from storage_engine.remote.stats import TierFacts, tiered_stats
from storage_engine.remote.partition import RemotePartition
from tests.helpers.platform import COMPACTED, definitions_for, state_tick, tick

NOW = int(time.time() * 1000)
#: A tiered compacted topic: partition 0 spans several 4 KB segments, partition 1 only its active one.
TIERED = TopicWorkload(
    "ledger", 2, {"cleanup.policy": "compact", "segment.bytes": "4096", "remote.storage.enable": "true"},
    records=300, keys=30, value_bytes=40, compression=CompressionType.NONE, batch_records=10,
    partition_records={1: 5},
)
SENSOR = "tiering_sensor"


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


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
