"""The remote sweep in the platform, on a real Dagster instance and the real S3 server: the
schedule asks for a run unless cleaning is paused; the run deletes what ``logctl sweep --dry-run``
plans (released objects past ``file.delete.delay.ms``, versions no longer retained, orphans past
the floor), records it per partition and in total, and deletes nothing while paused."""

from __future__ import annotations

import time

import dagster as dg
import pytest

from platform_assets.defs.pause import write_switch
from platform_assets.defs.remote_sweep import SWEEP_JOB, SWEEP_SCHEDULE
from platform_assets.defs.resources import build_resources
from platform_assets.logic.cleaning_switch import CleaningSwitch
from platform_assets.tools.workload import TopicWorkload, produce
from storage_engine.cleaner import LogCleaner
from storage_engine.logdir.manager import LogManager
from storage_engine.record import CompressionType
from storage_engine.remote.access import open_store
from storage_engine.remote.names import data_name, new_writer_id
from storage_engine.remote.partition import RemotePartition, wall_clock_ms
from storage_engine.remote.tier_runs import sweep_tiered
from tests.helpers.platform import COMPACTED, definitions_for

NOW = int(time.time() * 1000)
#: tiered and compacted; released objects and superseded versions go at once
TIERED = TopicWorkload(
    "ledger", 1, {"cleanup.policy": "compact", "segment.bytes": "4096", "remote.storage.enable": "true",
                  "file.delete.delay.ms": "0", "logplat.remote.version.retention.ms": "0"},
    records=300, keys=30, value_bytes=40, compression=CompressionType.NONE, batch_records=10,
)
RUN_CONFIG: dict = {}  # the defaults: the orphan floor of the engine (an unnamed upload this young stays)


@pytest.fixture
def logs(tmp_path, remote_env):
    """A tiered partition compacted on its remote tier (version 2 releases version 1's
    segments), and an orphan upload beside its objects."""
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        produce(manager, [TIERED, COMPACTED], now_ms=NOW)
        report = LogCleaner(manager).compact("ledger", 0, now_ms=NOW, force=True)
        assert report.remote_version == 2 and report.uploaded_segments, report.summary()
    rp = RemotePartition(open_store(), "ledger", 0)
    rp.store.put_new(rp.name(data_name(0, new_writer_id(), "log")), b"an upload whose writer died")
    return root


def _tick(defs, settings, instance) -> dg.RunRequest | dg.SkipReason:
    schedule = defs.get_repository_def().get_schedule_def(SWEEP_SCHEDULE)
    with dg.build_schedule_context(instance=instance, resources=build_resources(settings)) as context:
        data = schedule.evaluate_tick(context)
    return data.run_requests[0] if data.run_requests else dg.SkipReason(data.skip_message)


def _objects() -> set[str]:
    store = open_store()
    return {o.name for o in store.list(RemotePartition(store, "ledger", 0).name(""))}


def test_the_sweep_run_deletes_what_logctl_plans_and_records_it(logs, instance):
    defs, settings = definitions_for(logs)
    job = defs.resolve_job_def(SWEEP_JOB)
    with LogManager([logs], read_only=True) as manager:
        (planned,) = sweep_tiered(manager, now_ms_wall=wall_clock_ms(), dry_run=True)
    reasons = {d.reason for d in planned.deleted}
    assert reasons == {"released", "version"} and planned.kept["young_orphans"] == 1, planned.summary()
    before = _objects()

    # paused: the schedule asks for nothing, and a run launched anyway deletes nothing
    write_switch(instance, CleaningSwitch(paused=True, reason="bucket audit", at_ms=NOW))
    skipped = _tick(defs, settings, instance)
    assert isinstance(skipped, dg.SkipReason) and "bucket audit" in skipped.skip_message
    assert job.execute_in_process(instance=instance, run_config=RUN_CONFIG).success
    assert _objects() == before

    write_switch(instance, CleaningSwitch(paused=False, at_ms=NOW))
    request = _tick(defs, settings, instance)
    assert isinstance(request, dg.RunRequest) and request.tags["logplat/trigger"] == "remote-sweep"
    result = job.execute_in_process(instance=instance, run_config=RUN_CONFIG, tags=request.tags)
    assert result.success
    # exactly the planned objects went, and the latest version is complete
    rp = RemotePartition(open_store(), "ledger", 0)
    assert before - _objects() == {rp.name(d.name) for d in planned.deleted}
    latest = rp.latest()
    assert latest is not None and latest.version == 2 and not rp.missing_objects(latest)

    # recorded: an observation of the partition, and the run's totals
    (observation,) = [e.asset_observation_data.asset_observation for e in result.all_events
                      if e.event_type_value == "ASSET_OBSERVATION"]
    meta = {k: v.value for k, v in observation.metadata.items()}
    assert observation.asset_key == dg.AssetKey(["logs", "ledger"]) and observation.partition == "0"
    assert meta["objects_deleted"] == len(planned.deleted) and "deleted_orphan" not in meta
    assert meta["deleted_released"] > 0 and meta["deleted_version"] >= 1 and meta["remote_version"] == 2
    assert meta["status"] == "deleted" and meta["requests_delete"] == len(planned.deleted)
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    totals = {k: v.value for k, v in output.event_specific_data.metadata.items()}
    assert totals["objects_deleted"] == len(planned.deleted) and totals["partitions"] == 1
    assert totals["partitions_failed"] == 0 and totals["requests_delete"] == len(planned.deleted)

    # nothing left to sweep: the next run records no partition
    again = job.execute_in_process(instance=instance, run_config=RUN_CONFIG)
    assert again.success and not [e for e in again.all_events if e.event_type_value == "ASSET_OBSERVATION"]


def test_no_remote_sweep_where_nothing_can_be_tiered(tmp_path, monkeypatch):
    monkeypatch.delenv("LOGPLAT_REMOTE_STORAGE", raising=False)
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        produce(manager, [COMPACTED], now_ms=NOW)
    repo = definitions_for(root)[0].get_repository_def()
    assert not repo.has_schedule_def(SWEEP_SCHEDULE) and not repo.has_job(SWEEP_JOB)
