"""Erasure deadlines end to end. First the issue's idle topic on an explicit clock: written once
and left idle, its superseding record sits in the active segment, which no cleaning reaches;
``log_health`` fails naming it "held by the active segment", as ``logctl erasure-report`` does,
until ``logplat.roll.idle.segments`` lets a compaction run roll it, and both then pass.

Then the sensors on a real clock, real files, real Spark and a real Dagster
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

from platform_assets.logic.health import health_outcome
from platform_assets.logic.state_cache import StateCache
from storage_engine.cleaner import LogCleaner
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from tests.helpers.cli import run_logctl
from tests.helpers.engine import append_each
from tests.helpers.platform import definitions_for, resources_with_test_session, state_tick, tick

LAG_MS = 30_000  # "users": the sensor's run cleans it before this passes (15 s after the roll: CI margin)
LATE_LAG_MS = 3000  # "late": its deadline passes before the segment rolls


IDLE_LAG_MS = 240_000  # the max.compaction.lag.ms
T0 = 1_700_000_000_000


def _idle_health(root, now_ms: int):
    """The partition's ``log_health`` as the state sensor records it (through a state cache)."""
    with LogManager([root], read_only=True) as manager:
        (state,) = StateCache(racy_ns=0).read(manager, now_ms=now_ms, ttl_ms=300_000, refresh_share=0.1)
    return health_outcome(state)


def _erasure_report(root, monkeypatch, capsys, now_ms: int) -> tuple[int, dict]:
    code, out, _ = run_logctl(root, monkeypatch, capsys, "erasure-report", "--topic", "idle", "--now-ms", str(now_ms),
                              "--json")
    (partition,) = json.loads(out)["partitions"]
    return code, partition


def test_an_idle_topics_active_segment_holds_a_superseded_record_until_a_run_rolls_it(tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        manager.admin.create_topic("idle", 1, {"cleanup.policy": "compact", "max.compaction.lag.ms": str(IDLE_LAG_MS),
                                               "delete.retention.ms": "3600000", "file.delete.delay.ms": "0"})
        append_each(manager.get_log("idle", 0), [ProducerRecord(b"alice", b"alice@example.com", T0),
                                                 ProducerRecord(b"bob", b"b1", T0), ProducerRecord(b"alice", None, T0)],
                    now=T0)
    now = T0 + 2 * IDLE_LAG_MS  # left idle past its deadline
    health = _idle_health(root, now)
    assert health.passed is False and health.severity == dg.AssetCheckSeverity.ERROR
    with LogManager([root]) as manager:  # a sweep cleans it: the cleaner cannot reach the active segment
        assert LogCleaner(manager).compact("idle", 0, now_ms=now).skipped is not None
    code, report = _erasure_report(root, monkeypatch, capsys, now)
    assert code == 1 and not report["ok"] and report["oldest"]["offset"] == 0 and report["oldest"]["superseded_by"] == 2
    health = _idle_health(root, now)
    assert not health.passed and health.severity == dg.AssetCheckSeverity.ERROR
    assert health.description.startswith("erasure deadline missed: max.compaction.lag.ms: NOT ERASED: 1 superseded "
                                         "record(s) still on disk past the bound; the oldest at offset 0, superseded "
                                         "by offset 2"), health.description
    assert "held by the active segment" in health.description and report["held_by"] in health.description
    assert health.metadata["oldest_superseded_offset"] == 0 and health.metadata["superseded_records_on_disk"] == 1
    assert health.metadata["erasure_deadline"] == dg.MetadataValue.timestamp((T0 + IDLE_LAG_MS) / 1000)

    # the topic asks for idle segments to roll: the compaction run rolls it, then cleans it
    with LogManager([root]) as manager:
        manager.admin.alter_topic("idle", {"logplat.roll.idle.segments": "true"})
        report_after = LogCleaner(manager).compact("idle", 0, now_ms=now)
    assert report_after.rolled_idle_segment == 0 and report_after.status == "compacted"
    code, report = _erasure_report(root, monkeypatch, capsys, now)
    assert code == 0 and report["ok"] and report["remnants"] == 0
    health = _idle_health(root, now)
    assert health.passed, health.description


def _now() -> int:
    return int(time.time() * 1000)


def _discover(defs, settings, instance):
    return state_tick(defs, settings, instance)


def _health(data) -> dict[str, dg.AssetCheckEvaluation]:
    return {topic: e for (topic, _), e in data.health.items()}


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
        assert "max.compaction.lag.ms: half the lag used: " in near.description, near.description
        assert _now() < near.metadata["erasure_deadline"].value * 1000 <= written + LAG_MS
        assert not missed.passed and missed.severity == dg.AssetCheckSeverity.ERROR
        assert missed.description.startswith("partition 0: erasure deadline missed: max.compaction.lag.ms: NOT ERASED: "
                                             "1 superseded record(s) still on disk past the bound; the oldest at "
                                             "offset 0, superseded by offset 2"), missed.description
        assert "the cleaner is behind" in missed.description
        assert missed.metadata["erasure_deadline"].value * 1000 < _now()
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
