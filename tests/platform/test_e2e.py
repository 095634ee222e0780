"""End to end: a Dagster webserver and daemon started on loopback over real logs; the sensors
(turned on through GraphQL) launch a compaction that completes; a backfill of every partition of
the topic, launched through GraphQL, completes as one run; materializations and their
checkpoints are read back through GraphQL."""

from __future__ import annotations

import shutil
import time

import dagster as dg
import pytest
from dagster._core.scheduler.instigation import InstigatorType, TickData, TickStatus
from dagster._utils.error import SerializableErrorInfo

from platform_assets.tools.devserver import DevServer, wait_for
from platform_assets.tools.workload import TopicWorkload, produce
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from storage_engine.record import CompressionType
from tests.helpers.engine import append_each
from tests.helpers.paths import REPO

TIMEOUT_S = 420  # one run here is ~20-40 s on an idle 2-core box; generous for a busy one
#: orders-0 spans many segments (due); orders-1 only its active segment (nothing to clean yet).
ORDERS = TopicWorkload("orders", 2, {"cleanup.policy": "compact", "segment.bytes": "4096", "file.delete.delay.ms": "2000"},
                       records=400, keys=40,
                       tombstone_ratio=0.1, value_bytes=40, partition_records={1: 5}, batch_records=10,
                       compression=CompressionType.NONE)


def _succeeded(client, **tags):
    def check():
        runs = client.runs(tags=tags)
        failed = [r for r in runs if r["status"] in ("FAILURE", "CANCELED")]
        assert not failed, failed
        return [r for r in runs if r["status"] == "SUCCESS"]
    return check


def _latest_health(client, partitions: set[str]):
    """The newest ``log_health`` execution of each of ``partitions`` of orders, once all have one."""
    def check():
        latest: dict[str, dict] = {}
        for e in client.check_executions(["logs", "orders"], "log_health"):
            latest.setdefault(e["partition"], e)
        return latest if partitions <= set(latest) else None
    return check


def _completed(client, backfill_id):
    def check():
        backfill = client.backfill(backfill_id)
        assert backfill["status"] not in ("FAILED", "CANCELED", "COMPLETED_FAILED"), backfill
        return backfill if backfill["status"].startswith("COMPLETED") else None
    return check


def _record_failed_tick(home, sensor: str, *, timestamp: float) -> None:
    """A failed tick of ``sensor`` at ``timestamp``, stored in the instance as the daemon stores one."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DAGSTER_HOME", str(home))  # dagster.yaml names its storage by it
        with dg.DagsterInstance.from_config(str(home)) as instance:
            state = next(s for s in instance.all_instigator_state() if s.name == sensor)
            instance.create_tick(TickData(
                instigator_origin_id=state.instigator_origin_id, instigator_name=sensor,
                instigator_type=InstigatorType.SENSOR, status=TickStatus.FAILURE, timestamp=timestamp,
                selector_id=state.selector_id, error=SerializableErrorInfo("an earlier failure", [], "Exception")))


@pytest.mark.slow
def test_sensor_compaction_and_a_graphql_backfill_through_the_daemon(tmp_path):
    logs = tmp_path / "logs"
    with LogManager([logs]) as manager:
        produce(manager, [ORDERS], now_ms=int(time.time() * 1000))
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    env = {"LOGPLAT_LOG_DIRS": str(logs), "LOGPLAT_AUTOMATION": "stopped", "LOGPLAT_SENSOR_INTERVAL_S": "5",
           "LOGPLAT_SPARK_MASTER": "local[2]"}

    started = time.time()
    with DevServer(home, REPO / "workspace.yaml", tmp_path / "server-logs", env) as server:
        client = server.client()
        assert client.set_sensor("log_state_sensor", True) == "RUNNING"
        # the state sensor's verdicts, before any run: orders-0 is dirty (WARN, with its reason),
        # orders-1 has nothing to clean (passed)
        health = wait_for("log_health of both partitions", _latest_health(client, {"0", "1"}),
                          timeout_s=TIMEOUT_S, on_timeout=server.logs)
        assert health["0"]["status"] == "FAILED" and health["0"]["evaluation"]["severity"] == "WARN"
        assert "min.cleanable.dirty.ratio" in health["0"]["evaluation"]["description"]
        assert health["1"]["status"] == "SUCCEEDED"
        assert health["1"]["evaluation"]["description"].startswith("partition 1: nothing due")
        assert client.set_sensor("compaction_sensor", True) == "RUNNING"
        runs = wait_for("the sensor's compaction run to succeed", _succeeded(client, **{"logplat/topic": "orders"}),
                        timeout_s=TIMEOUT_S, on_timeout=server.logs)
        client.set_sensor("compaction_sensor", False)
        assert [r["tags"]["dagster/partition"] for r in runs] == ["0"]  # orders-1 had nothing to clean
        assert runs[0]["tags"]["dagster/sensor_name"] == "compaction_sensor"
        assert runs[0]["tags"]["dagster/run_key"].startswith("compact/orders/0/")
        assert not [r for r in client.runs() if r["tags"].get("dagster/partition") == "1"]

        with LogManager([logs]) as manager:  # orders-1 gets rolled segments: something to clean
            append_each(manager.get_log("orders", 1),
                        [ProducerRecord(f"k{i % 9}".encode(), b"v" * 40, None) for i in range(150)])

        backfill_id = client.launch_backfill(["logs", "orders"], ["0", "1"])
        backfill = wait_for("the backfill to complete", _completed(client, backfill_id), timeout_s=TIMEOUT_S,
                            interval_s=2, on_timeout=server.logs)
        assert backfill["status"] in ("COMPLETED", "COMPLETED_SUCCESS") and backfill["isAssetBackfill"]
        assert len(backfill["runs"]) == 1, backfill["runs"]  # BackfillPolicy.single_run(): one run, one Spark job
        run = backfill["runs"][0]
        assert run["status"] == "SUCCESS"
        tags = {t["key"]: t["value"] for t in run["tags"]}
        assert (tags["dagster/asset_partition_range_start"], tags["dagster/asset_partition_range_end"]) == ("0", "1")
        # what a backfill cannot set at launch, the asset's op added when the run started
        assert tags["logplat/topic"] == "orders" and tags["logplat/trigger"] == "backfill"
        assert tags["logplat/reason"] == f"backfill {backfill_id} of orders partitions 0..1"

        # the topic's concurrency pool, which holds back runs without the logplat/topic tag (this backfill's)
        pool = client.query('{ instance { concurrencyLimit(concurrencyKey: "logplat/topic/orders") { limit } } }')
        assert pool["instance"]["concurrencyLimit"]["limit"] == 1
        # .deleted files go once file.delete.delay.ms has passed, by the sensor, with no run
        assert list(logs.glob("orders-*/*.deleted"))  # the backfill's compaction renamed segments
        assert client.set_sensor("deleted_files_sensor", True) == "RUNNING"
        wait_for("the .deleted files to be removed", lambda: not list(logs.glob("orders-*/*.deleted")),
                 timeout_s=TIMEOUT_S, on_timeout=server.logs)
        # every tick of the sensors stored its results: the state sensor recorded log_health again
        # after the runs changed the partitions (Dagster's run-less check rows: checks.record_sensor_results)
        time.sleep(2 * 5)  # two more state-sensor ticks after the last change
        for name in ("log_state_sensor", "compaction_sensor", "deleted_files_sensor"):
            assert client.failed_ticks(name) == [], (name, server.logs())
        # the main job counts the failed ticks since it started (an instance's earlier failures,
        # from a previous run of it, failed every later one)
        _record_failed_tick(home, "compaction_sensor", timestamp=started - 60)
        assert client.failed_ticks("compaction_sensor") == ["an earlier failure"]
        assert client.failed_ticks("compaction_sensor", after=started) == []
        # the backfill found nothing to compact in orders-0: its checks audited it rather than "Skipped"
        latest_values = [e for e in client.check_executions(["logs", "orders"], "latest_values_preserved")
                         if e["partition"] == "0"]
        materializations = client.materializations(["logs", "orders"])
        in_run = [e for e in client.check_executions(["logs", "orders"], "log_health") if e["runId"] == run["runId"]]
        health_after = {e["partition"]: e for e in in_run if e["partition"] is not None}
        # a backfill selects the asset's checks too: no result for the run as a whole
        summaries = [e["evaluation"]["description"] for e in in_run if e["partition"] is None]
    by_run: dict[str, dict[str, dict]] = {}
    for m in materializations:
        by_run.setdefault(m["runId"], {})[m["partition"]] = m["metadata"]
    assert set(by_run) == {runs[0]["runId"], run["runId"]}
    assert [(e["runId"], e["status"]) for e in latest_values[:2]] == [(run["runId"], "SUCCEEDED"),
                                                                       (runs[0]["runId"], "SUCCEEDED")]
    assert latest_values[0]["evaluation"]["description"].startswith("partition 0: not compacted by this run")
    assert latest_values[0]["evaluation"]["targetMaterialization"]["runId"] == run["runId"]
    assert float(tags["logplat/spark_job_seconds"]) > 0  # the run's Spark time, once per run
    sensor_run, backfill_run = by_run[runs[0]["runId"]], by_run[run["runId"]]
    assert list(sensor_run) == ["0"] and set(backfill_run) == {"0", "1"}
    assert sensor_run["0"]["status"] == "compacted" and sensor_run["0"]["cleaner_checkpoint"] > 0
    assert sensor_run["0"]["cleaner_checkpoint_before"] == 0
    # the backfill found orders-0 clean (checkpoint unchanged) and cleaned orders-1
    assert backfill_run["0"]["cleaner_checkpoint"] == sensor_run["0"]["cleaner_checkpoint"]
    assert backfill_run["1"]["status"] == "compacted" and backfill_run["1"]["cleaner_checkpoint"] > 0
    # after the cleaning runs, each partition's health is tied to its own materialization
    assert set(health_after) == {"0", "1"}, health_after
    assert summaries == [], summaries
    for p, execution in health_after.items():
        evaluation = execution["evaluation"]
        assert execution["status"] == "SUCCEEDED" and evaluation["partition"] == p, execution
        assert evaluation["targetMaterialization"]["runId"] == run["runId"], (p, evaluation)
    for metadata in (sensor_run["0"], backfill_run["1"]):
        assert metadata["dirty_ratio_before"] > metadata["dirty_ratio"]
        assert metadata["log_end_offset"] >= metadata["cleaner_checkpoint"]
