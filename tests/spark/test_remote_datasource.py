"""The Spark jobs over tiered partitions on the in-process ``local[2]`` session, whose Python
workers never see this process's environment (set after their JVM started): what they need of
the remote tier travels in their splits and tasks (``spark_jobs.remote_tier``).

The data source reads a tiered partition (a ``file://`` store: a read test, no commit race) as
the same rows as the untiered copy of the same log; the compaction job cleans a tiered topic on
the real S3 server (``remote_env``) to the same records as the local cleaner on an untiered copy,
and the retention job commits its remote tier's retention and releases its local copies.
"""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest

from spark_jobs.compaction import compact_partitions
from spark_jobs.datasource import KafkaLogReader, RemoteSegmentSplit, SegmentSplit, plan_splits
from spark_jobs.datasource_options import ReadOptions
from spark_jobs.retention import retention_partitions
from storage_engine.cleaner import LogCleaner
from storage_engine.errors import LogError
from storage_engine.logdir.manager import LogManager
from storage_engine.record import decode_batch
from storage_engine.remote.access import remote_partition
from storage_engine.remote.local_state import recall
from storage_engine.remote.location import parse_location
from storage_engine.remote.partition import RemotePartition
from storage_engine.remote.reads import object_url, remote_segment_batches
from storage_engine.remote.tier_runs import tier_partitions
from storage_engine.remote.tiering import tier_partition
from tests.helpers.engine import append_each, open_topic, records

NOW = 10**12
TIERED = {"remote_storage_enable": "true", "local_retention_ms": 0}


def build(root, n: int, topic: str = "t", **configs):
    """A one-partition topic of ``n`` keyed records in small segments."""
    manager = open_topic(root, topic, segment_bytes=400, **configs)
    append_each(manager.get_log(topic, 0), records(n, keys=7))
    return manager


def rows(spark, log_dir, **options):
    reader = spark.read.format("kafka-log").option("includeHeaders", "true")
    for key, value in options.items():
        reader = reader.option(key, value)
    return [tuple(r) for r in reader.load(str(log_dir)).orderBy("offset").collect()]


def test_a_tiered_partition_reads_as_its_untiered_copy(spark, tmp_path) -> None:
    plain, tiered = build(tmp_path / "plain", 80), build(tmp_path / "tiered", 80, **TIERED)
    url = f"file://{tmp_path / 'bucket'}"
    log = tiered.get_log("t", 0)
    rp = RemotePartition(parse_location(url).open(), "t", 0)
    result = tier_partition(log, rp, NOW)
    assert result.local_release.deleted_segments, "the local copies of tiered segments were released"
    for manager in (plain, tiered):  # more records after the tiering: the local tier holds them
        append_each(manager.get_log("t", 0), records(15, start=80, keys=7))
    version = rp.latest()
    assert 0 < version.end_offset < log.log_end_offset and log.log_start_offset > 0

    splits = plan_splits(ReadOptions.parse({"path": str(tmp_path / "tiered"), "remoteStorage": url}))
    remote = [s for s in splits if isinstance(s, RemoteSegmentSplit)]
    assert [s.segment for s in remote] == list(version.segments)
    assert all(isinstance(s, SegmentSplit) and s.min_offset >= version.end_offset for s in splits[len(remote):])
    assert str(tmp_path / "tiered").encode() not in pickle.dumps(remote[0])  # no log dir travels

    assert rows(spark, tmp_path / "tiered", remoteStorage=url) == rows(spark, tmp_path / "plain")
    inside, boundary = version.segments[1].base_offset + 2, version.end_offset
    for options in ({"startingOffset": str(inside)}, {"startingOffset": str(boundary)},
                    {"endingOffset": str(boundary)}, {"startingOffset": str(inside), "endingOffset": str(boundary + 3)},
                    {"startingTimestamp": str(1_000 + inside)}, {"startingTimestamp": str(1_000 + boundary + 1)}):
        got = rows(spark, tmp_path / "tiered", remoteStorage=url, **options)
        assert got == rows(spark, tmp_path / "plain", **options), options
        assert got


def logical_records(log, rp):
    """A tiered partition's records: its remote tier's latest version, then the local log from the tier's end."""
    version = rp.latest()
    out = []
    for seg in version.segments:
        for raw in remote_segment_batches(rp, seg, version.log_start_offset):
            out.extend(r for r in decode_batch(raw) if r.offset >= version.log_start_offset)
    for raw in log.iter_batches(max(version.end_offset, log.log_start_offset)):
        out.extend(r for r in decode_batch(raw) if r.offset >= version.end_offset)
    return [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in out]


def test_the_compaction_job_cleans_a_tiered_topic_as_the_local_cleaner(spark, remote_env, tmp_path) -> None:
    plain = build(tmp_path / "plain", 120, cleanup_policy="compact")
    tiered = build(tmp_path / "tiered", 120, cleanup_policy="compact", **TIERED)
    expected = LogCleaner(plain).compact("t", 0, now_ms=NOW)
    assert expected.status == "compacted", expected.reason

    result = compact_partitions(spark, manager=tiered, now_ms=NOW, force=True)
    [report] = result.outcomes
    assert (report.status, report.engine) == ("compacted", "spark"), report.reason
    log = tiered.get_log("t", 0)
    rp = remote_partition("t", 0, log.config)
    version = rp.latest()
    assert version.operation == "compact" and report.remote_version == version.version
    assert report.requests["requests_put"] >= 1  # the task's own store counted its uploads
    assert recall(log.dir, rp.store.url).version == version.version  # remembered by the driver
    assert rp.missing_objects(version) == []
    plain_log = plain.get_log("t", 0)
    assert logical_records(log, rp) == [(r.offset, r.key, r.value, r.timestamp, r.headers) for raw in
                                        plain_log.iter_batches(plain_log.log_start_offset) for r in decode_batch(raw)]


def test_the_retention_job_retains_a_tiered_topic_on_both_tiers(spark, remote_env, tmp_path) -> None:
    """The executors (which see no remote storage settings) commit the remote tier's
    ``retention`` version and release the local copies below it, as the local engine does."""
    tiered = build(tmp_path / "tiered", 60, remote_storage_enable="true", retention_ms=1000)
    log = tiered.get_log("t", 0)
    [tier] = tier_partitions(tiered, "t", now_ms=0)  # local copies kept: not yet past local retention
    rp = remote_partition("t", 0, log.config)
    copies = [s.base_offset for s in log.segments if s.base_offset < tier.remote_end_offset]
    assert tier.uploaded_segments == copies and copies

    result = retention_partitions(spark, manager=tiered, now_ms=10**7)
    remote, local = result.outcomes
    assert (remote.status, remote.remote_version, local.status) == ("deleted", 2, "deleted"), (remote.reason,
                                                                                              local.reason)
    assert local.deleted_segments == copies
    version = rp.latest()
    assert (version.operation, version.log_start_offset, version.segments) == ("retention", tier.remote_end_offset, ())
    assert recall(log.dir, rp.store.url).version == 2  # remembered beside the local log by the executor
    with LogManager([tmp_path / "tiered"], read_only=True) as m:
        again = m.get_log("t", 0)
        assert again.log_start_offset == tier.remote_end_offset
        assert [s.base_offset for s in again.segments][0] == tier.remote_end_offset


def test_a_read_reads_the_version_it_planned_or_names_its_object_gone(spark, remote_env, tmp_path) -> None:
    """Planned on version N, a read reads N's objects after a compaction committed N+1; once
    one of them is deleted (the sweep, long after), its task fails with one line naming it."""
    tiered = build(tmp_path / "tiered", 80, cleanup_policy="compact", **TIERED)
    log = tiered.get_log("t", 0)
    rp = remote_partition("t", 0, log.config)
    tier_partition(log, rp, NOW)
    reader = KafkaLogReader(ReadOptions.parse({"path": str(tmp_path / "tiered"), "includeHeaders": "true"}))
    splits = reader.partitions()
    planned = rp.latest()
    assert isinstance(splits[0], RemoteSegmentSplit) and splits[0].version == planned.version

    def read() -> list[tuple]:
        return spark.sparkContext.parallelize(splits, len(splits)).flatMap(
            lambda split: [tuple(row.values()) for batch in reader.read(split) for row in batch.to_pylist()]).collect()

    before = read()
    assert LogCleaner(tiered).compact("t", 0, now_ms=NOW).status == "compacted"
    assert rp.latest().version == planned.version + 1 and splits[0].segment.log not in rp.latest().objects
    assert read() == before  # version N's objects, though N+1 no longer names them

    gone = object_url(rp, splits[0].segment.log)
    rp.store.delete(rp.name(splits[0].segment.log))
    with pytest.raises(Exception) as failed:
        read()
    message = str(failed.value)
    [line] = [ln for ln in message.splitlines() if gone in ln]
    assert line == (f"spark_jobs.datasource.SegmentChangedError: {gone}: gone from the remote tier (swept?) though the "
                    f"version read names it (remote version {planned.version} of t-0, which the query was planned "
                    "on); run the query again")
    assert "obstore" not in message and "NotFoundError" not in message


def test_a_plan_refuses_a_version_ending_past_the_local_log(remote_env, tmp_path) -> None:
    """As consume, verify and the checks do: a read never returns less because a (forged)
    version ends past the local log end; the plan refuses, naming both offsets."""
    tiered = build(tmp_path / "tiered", 80, **TIERED)
    log = tiered.get_log("t", 0)
    rp = remote_partition("t", 0, log.config)
    tier_partition(log, rp, NOW)
    latest = rp.latest()
    past = log.log_end_offset + 100
    forged = latest.successor(writer=latest.writer, operation="tier", committed_ms=latest.committed_ms,
                              release_horizon_ms=0, summary={}, end_offset=past,
                              segments=(*latest.segments[:-1], replace(latest.segments[-1], end_offset=past)))
    rp.commit(forged)
    with pytest.raises(LogError, match=f"ends at offset {past}, past the local log end offset {log.log_end_offset}"):
        plan_splits(ReadOptions.parse({"path": str(tmp_path / "tiered")}))
