"""Erasure deadlines end to end, on a real clock, real files, real Spark and a real Dagster
instance. A key is tombstoned in two topics. In ``users`` half of ``max.compaction.lag.ms``
passes: ``log_health`` warns, the compaction sensor asks for the partition and its run cleans it
before the deadline. In ``late`` the deadline passes first: ``log_health`` fails with ERROR
naming the oldest uncleaned offset and by how long, and the sensor asks for it first (earliest
deadline first). ``logctl erasure-report --key`` then proves that no value of the key is left
on disk in either."""

from __future__ import annotations

import json
import time

import dagster as dg

from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from tests.helpers.cli import run_logctl
from tests.helpers.engine import append_each
from tests.helpers.platform import apply_partition_requests, definitions_for, resources_with_test_session, tick

LAG_MS = 30_000  # "users": the sensor's run cleans it before this passes (15 s after the roll: CI margin)
LATE_LAG_MS = 3000  # "late": its deadline passes before the segment rolls


def _now() -> int:
    return int(time.time() * 1000)


def _discover(defs, settings, instance):
    data = tick(defs, settings, instance, "log_state_sensor")
    apply_partition_requests(instance, data.dynamic_partitions_requests)
    return data


def _health(data) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.asset_key.path[1]: e for e in data.asset_events or ()
            if isinstance(e, dg.AssetCheckEvaluation) and e.check_name == "log_health"}


def test_tombstoned_keys_are_erased_by_the_sensors_runs_before_or_after_a_missed_deadline(tmp_path, spark, monkeypatch,
                                                                                          capsys):
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        written = _now()
        for topic, lag in (("users", LAG_MS), ("late", LATE_LAG_MS)):
            # never due by dirtiness (a ratio cannot exceed 1.0): only the deadline asks for a run
            manager.admin.create_topic(topic, 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "1.0",
                                                  "max.compaction.lag.ms": str(lag), "delete.retention.ms": "3600000",
                                                  "file.delete.delay.ms": "0"})
            append_each(manager.get_log(topic, 0),
                        [ProducerRecord(b"alice", b"alice@example.com", written), ProducerRecord(b"bob", b"b1", written),
                         ProducerRecord(b"alice", None, written)], now=written)
    defs, settings = definitions_for(root)
    with dg.instance_for_test() as instance:
        # the records are in the active segments: nothing is due yet
        assert all(e.passed for e in _health(_discover(defs, settings, instance)).values())
        assert not tick(defs, settings, instance, "compaction_sensor").run_requests

        # half of users' lag passes; the next appends roll both segments (a compacted topic rolls
        # at half its max.compaction.lag.ms), so the old records are cleanable: users' deadline is
        # near, late's was missed
        time.sleep(LAG_MS / 2000 + 0.3)
        with LogManager([root]) as manager:
            for topic in ("users", "late"):
                append_each(manager.get_log(topic, 0), [ProducerRecord(b"carol", b"c1", _now())])
        health = _health(_discover(defs, settings, instance))
        near, missed = health["users"], health["late"]
        assert not near.passed and near.severity == dg.AssetCheckSeverity.WARN
        assert "max.compaction.lag.ms: erasure deadline in " in near.description, near.description
        assert 0 < near.metadata["erasure_time_left_s"].value <= LAG_MS / 2000
        assert not missed.passed and missed.severity == dg.AssetCheckSeverity.ERROR
        assert missed.description.startswith("partition 0: erasure deadline missed: max.compaction.lag.ms: missed by ")
        assert "the oldest uncleaned record, offset 0, written " in missed.description
        assert missed.metadata["erasure_time_left_s"].value < 0
        code, out, _ = run_logctl(root, monkeypatch, capsys, "erasure-report", "--topic", "late", "--key", "alice")
        assert code == 1 and "NOT ERASED" in out and "values at [0]" in out

        # the sensor asks for both, the missed deadline first; each run cleans its partition through Spark
        requests = tick(defs, settings, instance, "compaction_sensor").run_requests
        assert [r.tags["logplat/topic"] for r in requests] == ["late", "users"]
        assert "max.compaction.lag.ms overdue" in requests[0].tags["logplat/reason"]
        assert requests[1].tags["logplat/reason"].startswith("erasure deadline in ")
        for request in requests:
            topic = request.tags["logplat/topic"]
            asset = next(a for a in defs.assets if a.key == dg.AssetKey(["logs", topic]))
            result = dg.materialize([asset], instance=instance, partition_key="0", run_config=request.run_config,
                                    tags=request.tags, resources=resources_with_test_session(settings))
            assert result.success
            (event,) = result.asset_materializations_for_node(asset.op.name)
            assert event.metadata["status"].value == "compacted", (topic, event.metadata["reason"])
            if topic == "users":
                assert _now() < written + LAG_MS  # cleaned before its deadline

        # proof: no value of alice on disk, in live segments or .deleted files; only her tombstone
        for topic in ("users", "late"):
            code, out, _ = run_logctl(root, monkeypatch, capsys, "erasure-report", "--topic", topic, "--key", "alice",
                                      "--json")
            (partition,) = json.loads(out)["partitions"]
            assert code == 0 and partition["ok"] and partition["remnants"] == 0
            assert partition["key"] == {"values": [], "tombstones": [2], "in_deleted_files": []}
            assert not list((root / f"{topic}-0").glob("*.deleted"))
        assert all(e.passed and "nothing due" in e.description
                   for e in _health(_discover(defs, settings, instance)).values())
