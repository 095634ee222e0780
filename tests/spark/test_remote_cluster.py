"""Spark without a shared filesystem: the jobs over tiered topics on a REAL standalone cluster.

The worker (and so its executors and their Python workers) starts with a private temporary
directory and work dir of its own and WITHOUT the remote storage settings: the bucket's
location and credentials reach the tasks only inside their work items, and the tasks carry no
log dir (the driver tiers and remembers, the executors download, clean, upload and commit).
The driver is a separate process (a process holds one SparkContext; see ``test_cluster.py``).
Compaction of a tiered topic keeps the records the local engine keeps on an untiered copy of
the same log, and the data source reads a tiered partition as the rows of its untiered copy.
"""

from __future__ import annotations

import os
import textwrap

import pytest

from storage_engine.cleaner import LogCleaner
from storage_engine.logdir.manager import LogManager
from storage_engine.record import decode_batch
from storage_engine.remote.location import parse_location
from storage_engine.remote.partition import RemotePartition
from storage_engine.remote.tiering import tier_partition
from tests.helpers.spark_cluster import standalone_cluster
from tests.spark import test_cluster
from tests.spark.test_remote_datasource import NOW, TIERED, build, logical_records

# Compaction of the tiered log dir, then the data source over the read-only tiered topic and
# over its untiered copy; one JSON line on stdout.
DRIVER = textwrap.dedent("""
    import json, sys
    from spark_jobs.compaction import compact_partitions
    from spark_jobs.datasource import RemoteSegmentSplit, plan_splits
    from spark_jobs.datasource_options import ReadOptions
    from spark_jobs.runtime.session import build_spark_session

    master, log_dir, app_name = sys.argv[1], sys.argv[2], sys.argv[3]
    now = json.loads(sys.argv[4])[0]
    read_dir, plain_dir = log_dir + "-read", log_dir + "-plain"  # topic r, tiered and not
    spark = build_spark_session(master, app_name=app_name, conf={
        "spark.driver.memory": "1g", "spark.executor.memory": "512m", "spark.executor.cores": "1",
        "spark.cores.max": "1", "spark.default.parallelism": "2", "spark.sql.adaptive.enabled": "false",
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        "spark.executor.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    })
    try:
        result = compact_partitions(spark, [log_dir], now_ms=now, force=True)
        out = {"compaction": [o.to_dict() | {"topic": o.topic, "partition": o.partition} for o in result.outcomes]}
        splits = plan_splits(ReadOptions.parse({"path": read_dir}))
        out["remote_splits"] = sum(isinstance(s, RemoteSegmentSplit) for s in splits)
        out["splits"] = len(splits)
        def rows(path):
            df = spark.read.format("kafka-log").option("includeHeaders", "true").load(path)
            return [[r.offset, r.key.hex(), r.value.hex(), str(r.timestamp), [[h.key, h.value.hex()] for h in r.headers]]
                    for r in df.orderBy("offset").collect()]
        out["tiered_rows"], out["plain_rows"] = rows(read_dir), rows(plain_dir)
        out["executor_env"] = spark.sparkContext.parallelize([0], 1).map(
            lambda _: (__import__("os").environ.get("LOGPLAT_REMOTE_STORAGE"), __import__("tempfile").gettempdir())
        ).collect()[0]
    finally:
        spark.stop()
    print("RESULT " + json.dumps(out), flush=True)
""")


def records_of(log):
    return [(r.offset, r.key, r.value, r.timestamp, r.headers)
            for raw in log.iter_batches(log.log_start_offset) for r in decode_batch(raw)]


@pytest.mark.slow
def test_tiered_jobs_on_a_cluster_whose_executors_share_no_filesystem(s3_server, tmp_path, monkeypatch) -> None:
    test_cluster.java_or_skip()
    env = s3_server.env(f"cluster-{tmp_path.name[-20:]}")
    location = parse_location(env["LOGPLAT_REMOTE_STORAGE"], env)
    logs = tmp_path / "logs"
    tiered = build(logs, 150, cleanup_policy="compact", **TIERED)
    plain = build(tmp_path / "plain", 150, cleanup_policy="compact")
    expected = LogCleaner(plain).compact("t", 0, now_ms=NOW)
    assert expected.status == "compacted", expected.reason
    # a read-only tiered topic wholly in the bucket (an empty active segment locally), and its untiered copy
    read, read_plain = build(tmp_path / "logs-read", 90, "r", **TIERED), build(tmp_path / "logs-plain", 90, "r")
    read_log = read.get_log("r", 0)
    read_log.roll()
    tier_partition(read_log, RemotePartition(location.open(), "r", 0), NOW)
    for manager in (tiered, plain, read, read_plain):
        manager.close()

    private = tmp_path / "worker-private"
    private.mkdir()
    own_tmp = os.environ.get("TMPDIR")
    monkeypatch.setenv("TMPDIR", str(private))  # the daemons' environment: no remote settings in it
    for name in env:
        monkeypatch.delenv(name, raising=False)
    with standalone_cluster(tmp_path / "spark-cluster", cores=1, memory="1g") as cluster:
        if own_tmp is None:  # the driver's environment: its own temp dir, the remote settings
            monkeypatch.delenv("TMPDIR")
        else:
            monkeypatch.setenv("TMPDIR", own_tmp)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(test_cluster, "DRIVER", DRIVER)
        got = test_cluster.run_driver(tmp_path, cluster.master_url, logs, [NOW])

    assert got["executor_env"] == [None, str(private)], "the executors saw the remote settings or the driver's tmp"
    [report] = got["compaction"]
    assert (report["status"], report["engine"]) == ("compacted", "spark"), report["reason"]
    rp = RemotePartition(location.open(), "t", 0)
    version = rp.latest()
    assert version.operation == "compact" and report["remote_version"] == version.version
    assert rp.missing_objects(version) == []
    with LogManager([logs]) as manager, LogManager([tmp_path / "plain"]) as untiered:
        assert logical_records(manager.get_log("t", 0), rp) == records_of(untiered.get_log("t", 0))

    assert got["remote_splits"] == got["splits"] > 0, "the tiered read needed a local split"
    assert got["tiered_rows"] == got["plain_rows"] and len(got["plain_rows"]) == 90
