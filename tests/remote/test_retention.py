"""Retention of the remote tier: the engine's one rule over a version's segments (pure), and
the ``retention`` / ``delete-records`` versions it commits on the real S3 server."""

from __future__ import annotations

from storage_engine.config.topic import LogConfig
from storage_engine.remote.access import remote_partition
from storage_engine.remote.names import data_name
from storage_engine.remote.retention import apply_remote_retention, delete_records_remote, plan_remote_retention
from storage_engine.remote.tiering import tier_partition
from storage_engine.remote.version import PartitionVersion, RemoteSegment
from tests.helpers.engine import append_each, open_topic, records

W = "0" * 16


def version(*segments: tuple[int, int, int, int], log_start: int = 0) -> PartitionVersion:
    """A version of (base, end, size, max timestamp) segments."""
    segs = tuple(RemoteSegment(b, e, size, ts, 0, data_name(b, W, "log"), data_name(b, W, "index"),
                               data_name(b, W, "timeindex")) for b, e, size, ts in segments)
    return PartitionVersion(1, "t", 0, 0, W, "tier", log_start, segs[-1].end_offset, None, segs)


V = version((0, 10, 100, 1000), (10, 20, 100, 2000), (20, 30, 100, 3000))


def test_time_retention_drops_the_expired_remote_segments_and_moves_the_log_start() -> None:
    plan = plan_remote_retention(V, LogConfig(retention_ms=1500), 4000)
    assert plan.deleted_bases == (0, 10) and plan.new_log_start_offset == 20
    assert {d.reason for d in plan.deletions} == {"retention.ms"}
    assert plan.next_expiry_ms == 3000 + 1500 + 1 and not plan.roll_first


def test_every_remote_segment_may_go_and_the_log_then_starts_at_the_tier_s_end() -> None:
    plan = plan_remote_retention(V, LogConfig(retention_ms=10), 10**6)
    assert plan.deleted_bases == (0, 10, 20) and plan.new_log_start_offset == 30 and plan.next_expiry_ms is None


def test_retention_bytes_counts_the_local_log_above_the_tier_s_end() -> None:
    config = LogConfig(retention_bytes=250)
    assert plan_remote_retention(V, config, 4000).deletions == ()  # 300 bytes: no whole segment fits the excess
    plan = plan_remote_retention(V, config, 4000, local_bytes_above_end=150)  # 450 bytes: two segments go
    assert plan.deleted_bases == (0, 10) and plan.new_log_start_offset == 20
    # a local log alone over the limit takes every remote segment, never more
    assert plan_remote_retention(V, config, 4000, local_bytes_above_end=10**6).deleted_bases == (0, 10, 20)


def test_a_compacted_topic_keeps_its_remote_segments_but_for_the_log_start_pass() -> None:
    config = LogConfig(retention_ms=10, cleanup_policy=("compact",))
    assert plan_remote_retention(V, config, 10**6).deletions == ()
    moved = version((0, 10, 100, 1000), (10, 20, 100, 2000), (20, 30, 100, 3000), log_start=15)
    plan = plan_remote_retention(moved, config, 10**6)  # as delete-records plans: the log start inside segment 10
    assert plan.deleted_bases == (0,) and plan.new_log_start_offset == 15


def _tiered(tmp_path, **configs):
    manager = open_topic(tmp_path / "logs", segment_bytes=300, remote_storage_enable="true", **configs)
    log = manager.get_log("t", 0)
    append_each(log, records(30))
    rp = remote_partition("t", 0, log.config)
    tier_partition(log, rp, now_ms=10**6, release_local=False)
    return manager, log, rp


def test_apply_commits_a_retention_version_that_releases_the_dropped_objects(remote_env, tmp_path) -> None:
    manager, log, rp = _tiered(tmp_path, retention_ms=1000)
    before = rp.latest()
    assert before is not None and len(before.segments) > 2
    # records are timestamped 1000 + i: at now = 1000 + 2 segments' last timestamp + 1001 two go
    cut = before.segments[1].max_timestamp + 1001
    result = apply_remote_retention(rp, log.config, cut, partition_dir=log.dir)
    after = rp.latest()
    assert result.status == "deleted" and result.remote_version == after.version == before.version + 1
    assert after.operation == "retention" and after.log_start_offset == before.segments[2].base_offset
    assert result.deleted_segments == [s.base_offset for s in before.segments[:2]]
    assert {r.name for r in after.released} == {n for s in before.segments[:2] for n in s.objects}
    assert rp.missing_objects(after) == [] and result.requests["requests_put"] == 1
    again = apply_remote_retention(rp, log.config, cut)
    assert again.status == "nothing" and rp.latest().version == after.version
    manager.close()


def test_delete_records_moves_the_remote_log_start_and_drops_the_segments_below(remote_env, tmp_path) -> None:
    manager, log, rp = _tiered(tmp_path)
    before = rp.latest()
    inside = before.segments[1].base_offset + 1
    result = delete_records_remote(rp, log.config, inside)
    after = rp.latest()
    assert after.operation == "delete-records" and after.log_start_offset == inside
    assert [s.base_offset for s in after.segments] == [s.base_offset for s in before.segments[1:]]
    assert result.new_log_start_offset == inside and result.deleted_segments == [before.segments[0].base_offset]
    assert delete_records_remote(rp, log.config, inside).status == "nothing"  # already there
    # past the tier's end: the remote tier empties, and it starts and ends where the log now starts
    beyond = delete_records_remote(rp, log.config, log.log_end_offset)
    emptied = rp.latest()
    assert beyond.status == "deleted" and emptied.segments == ()
    assert emptied.log_start_offset == emptied.end_offset == beyond.new_log_start_offset == log.log_end_offset
    log.delete_records(log.log_end_offset - 1)
    manager.close()
