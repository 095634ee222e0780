"""An erasure deadline end to end, on a real clock, real files, real Spark and a real Dagster
instance: a key is tombstoned, ``max.compaction.lag.ms`` passes, ``log_health`` fails with
ERROR naming the oldest uncleaned offset and by how long the deadline was missed, the
compaction sensor asks for the partition (earliest deadline first), the run cleans it, and
``logctl erasure-report --key`` proves that no value of the key is left on disk."""

from __future__ import annotations

import json
import time

import dagster as dg
from tests.helpers.cli import run_logctl
from tests.helpers.engine import append_each
from tests.helpers.platform import apply_partition_requests, definitions_for, resources_with_test_session, tick

from storage_engine.append_validation import ProducerRecord
from storage_engine.manager import LogManager

LAG_MS = 3000


def _now() -> int:
    return int(time.time() * 1000)


def _discover(defs, settings, instance):
    data = tick(defs, settings, instance, "log_state_sensor")
    apply_partition_requests(instance, data.dynamic_partitions_requests)
    return data


def _health(data) -> dg.AssetCheckEvaluation:
    (result,) = [e for e in data.asset_events or ()
                 if isinstance(e, dg.AssetCheckEvaluation) and e.check_name == "log_health"]
    return result


def test_a_tombstoned_key_is_erased_by_the_sensors_run_after_its_deadline_is_missed(tmp_path, spark, monkeypatch,
                                                                                      capsys):
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        # never due by dirtiness (a ratio cannot exceed 1.0): only the deadline can ask for a run
        manager.create_topic("users", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "1.0",
                                          "max.compaction.lag.ms": str(LAG_MS), "delete.retention.ms": "3600000",
                                          "file.delete.delay.ms": "0"})
        written = _now()
        append_each(manager.get_log("users", 0),
                    [ProducerRecord(b"alice", b"alice@example.com", written), ProducerRecord(b"bob", b"b1", written),
                     ProducerRecord(b"alice", None, written)], now=written)
    defs, settings = definitions_for(root)
    with dg.instance_for_test() as instance:
        # within the bound: the records are in the active segment, nothing is due
        before = _health(_discover(defs, settings, instance))
        assert before.passed, before.description
        assert not tick(defs, settings, instance, "compaction_sensor").run_requests

        # the clock passes max.compaction.lag.ms; the next append rolls the segment (a compacted
        # topic rolls at least that often), so the old records are cleanable and overdue
        time.sleep(LAG_MS / 1000 + 0.5)
        with LogManager([root]) as manager:
            append_each(manager.get_log("users", 0), [ProducerRecord(b"carol", b"c1", _now())])
        missed = _health(_discover(defs, settings, instance))
        assert not missed.passed and missed.severity == dg.AssetCheckSeverity.ERROR
        assert missed.description.startswith("partition 0: erasure deadline missed: max.compaction.lag.ms: missed by ")
        assert "the oldest uncleaned record, offset 0, written " in missed.description
        assert missed.metadata["erasure_time_left_s"].value < 0
        code, out, _ = run_logctl(root, monkeypatch, capsys, "erasure-report", "--key", "alice")
        assert code == 1 and "NOT ERASED" in out and "values at [0]" in out

        # the sensor asks for the overdue partition; its run cleans it through Spark
        (request,) = tick(defs, settings, instance, "compaction_sensor").run_requests
        assert request.tags["logplat/partition"] == "0" and "max.compaction.lag.ms overdue" in request.tags["logplat/reason"]
        asset = next(a for a in defs.assets if a.key == dg.AssetKey(["logs", "users"]))
        result = dg.materialize([asset], instance=instance, partition_key="0", run_config=request.run_config,
                                tags=request.tags, resources=resources_with_test_session(settings))
        assert result.success
        (event,) = result.asset_materializations_for_node(asset.op.name)
        assert event.metadata["status"].value == "compacted"

        # proof: no value of alice on disk, in live segments or .deleted files; only her tombstone
        code, out, _ = run_logctl(root, monkeypatch, capsys, "erasure-report", "--key", "alice", "--json")
        (partition,) = json.loads(out)["partitions"]
        assert code == 0 and partition["ok"] and partition["remnants"] == 0
        assert partition["key"] == {"values": [], "tombstones": [2], "in_deleted_files": []}
        assert not list((root / "users-0").glob("*.deleted"))
        after = _health(_discover(defs, settings, instance))
        assert after.passed and "nothing due" in after.description
